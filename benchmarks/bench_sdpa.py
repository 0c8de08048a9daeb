"""scaled_dot_product_attention against PyTorch's math path (which also returns the
weights), as a ratio of median times measured in the same run."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from _timing import machine, median_seconds
from attention_core import scaled_dot_product_attention


def run(B=4, H=8, L=1024, D=64) -> dict:
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, L, D) for _ in range(3))
    with torch.no_grad():
        ours = median_seconds(lambda: scaled_dot_product_attention(q, k, v), repeats=15)
        math_path = median_seconds(lambda: torch.ops.aten._scaled_dot_product_attention_math(q, k, v),
                                   repeats=15)
        fused = median_seconds(lambda: F.scaled_dot_product_attention(q, k, v), repeats=15)
    return {"shape": [B, H, L, D], "ours_s": ours, "math_s": math_path, "fused_s": fused,
            "ratio_vs_math": ours / math_path, "ratio_vs_fused": ours / fused,
            "target_vs_math": 0.9, "machine": machine()}


if __name__ == "__main__":
    r = run()
    print(f"sdpa forward, B,H,L,D={r['shape']}, float32 ({r['machine']})")
    print(f"  attention_core          {r['ours_s'] * 1e3:8.1f} ms")
    print(f"  aten math path          {r['math_s'] * 1e3:8.1f} ms")
    print(f"  F.scaled_dot_product    {r['fused_s'] * 1e3:8.1f} ms (fused, no weights)")
    print(f"  ratio vs math path:  {r['ratio_vs_math']:.2f}  (target <= {r['target_vs_math']})")
    print(f"  ratio vs fused:      {r['ratio_vs_fused']:.2f}  (for information)")
