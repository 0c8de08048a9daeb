"""Chapter 11's Triton FlashAttention kernel (attention_core.nn.triton_flash) against
PyTorch's flash backend of ``scaled_dot_product_attention`` (FlashAttention-2's kernel) and
against the backend PyTorch picks by itself, on one CUDA GPU: forward and
forward + backward TFLOP/s for L = 1k to 16k, head widths 64 and 128, causal and not,
float16 and bfloat16, both measured in the same run.

CUDA only: Triton's interpreter (the CPU) says nothing about speed, so without a GPU of
compute capability 8.0+ the record says that it did not run, and why. The goal (issue 32):
at least 0.7x PyTorch's forward throughput on an A100 or H100 at L >= 4k.
`benchmarks/gpu_check.sh` runs it, with the CUDA tests, on a machine with such a GPU.

`benchmarks/gpu_check.sh` runs it, with the CUDA tests, on a machine with such a GPU.

FLOPs counted as FlashAttention-2 does: forward 4 B H L^2 E (two matmuls), halved when
causal; backward 2.5x the forward (five matmuls), so forward + backward is 3.5x.
"""

from __future__ import annotations

import importlib
import importlib.util

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from _timing import machine
from attention_core import triton_mode

LENGTHS = (1024, 2048, 4096, 8192, 16384)
TOKENS = 16384  # B * L kept constant, as in FlashAttention-2's benchmarks: same input memory at every L
HEADS = 16


def not_run(reason: str) -> dict:
    """The record of a benchmark that could not run here."""
    return {"ran": False, "reason": reason, "machine": machine()}


def forward_flops(B: int, H: int, L: int, E: int, is_causal: bool) -> float:
    return 4 * B * H * L * L * E / (2 if is_causal else 1)


def _time_ms(fn) -> float:
    from triton.testing import do_bench  # triton is optional: imported on the CUDA path only
    return do_bench(fn, warmup=25, rep=100)


def _case(tf, L: int, E: int, dtype: torch.dtype, is_causal: bool) -> dict:
    """Forward and forward + backward of both kernels on ``(TOKENS // L, HEADS, L, E)``."""
    B = max(1, TOKENS // L)
    q, k, v = (torch.randn(B, HEADS, L, E, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3))
    grad = torch.randn(B, HEADS, L, E, device="cuda", dtype=dtype)

    def torch_flash(q, k, v):
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)

    def torch_default(q, k, v):  # the backend PyTorch picks itself (another library's on some GPUs)
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)

    kernels = {"triton": lambda q, k, v: tf.triton_attention(q, k, v, is_causal=is_causal)[0],
               "torch_flash": torch_flash, "torch_default": torch_default}
    flops = forward_flops(B, HEADS, L, E, is_causal)
    row = {"L": L, "E": E, "dtype": str(dtype).removeprefix("torch."), "causal": is_causal, "B": B}
    for name, fn in kernels.items():
        with torch.no_grad():
            forward = _time_ms(lambda fn=fn: fn(q, k, v))
        both = _time_ms(lambda fn=fn: torch.autograd.grad(fn(q, k, v), (q, k, v), grad))
        row[f"{name}_forward_tflops"] = flops / forward / 1e9
        row[f"{name}_fwd_bwd_tflops"] = 3.5 * flops / both / 1e9
    row["forward_ratio"] = row["triton_forward_tflops"] / row["torch_flash_forward_tflops"]
    row["fwd_bwd_ratio"] = row["triton_fwd_bwd_tflops"] / row["torch_flash_fwd_bwd_tflops"]
    row["forward_ratio_vs_default"] = row["triton_forward_tflops"] / row["torch_default_forward_tflops"]
    row["fwd_bwd_ratio_vs_default"] = row["triton_fwd_bwd_tflops"] / row["torch_default_fwd_bwd_tflops"]
    return row


def run() -> dict:
    mode = triton_mode()  # the package's one rule
    if mode != "compiled":
        return not_run(f"Triton runs {mode or 'not at all'} here: it needs to be installed (the gpu "
                       "extra) and compile for a CUDA GPU of capability 8.0+; the interpreter cannot "
                       "time the kernel")
    tf = importlib.import_module("attention_core.nn.triton_flash")
    torch.manual_seed(0)
    rows = []
    for dtype in (torch.float16, torch.bfloat16):
        for E in (64, 128):
            for is_causal in (False, True):
                for L in LENGTHS:
                    rows.append(_case(tf, L, E, dtype, is_causal))
                    print(_row_line(rows[-1]), flush=True)  # a run stopped early keeps what it measured
    long = [r["forward_ratio"] for r in rows if r["L"] >= 4096]
    return {"ran": True, "gpu": torch.cuda.get_device_name(), "triton": tf.triton.__version__,
            "heads": HEADS, "tokens_per_batch": TOKENS, "rows": rows,
            "min_forward_ratio_at_L_ge_4k": min(long),
            "targets": {"min_forward_ratio_at_L_ge_4k": 0.7}, "machine": machine()}


HEADER = (f"{'dtype':>9} {'E':>4} {'causal':>6} {'L':>6} {'fwd TF/s':>9} {'torch':>7} {'ratio':>6} "
          f"{'f+b TF/s':>9} {'torch':>7} {'ratio':>6}")


def _row_line(r: dict) -> str:
    return (f"{r['dtype']:>9} {r['E']:>4} {r['causal']!s:>6} {r['L']:>6} "
            f"{r['triton_forward_tflops']:>9.1f} {r['torch_flash_forward_tflops']:>7.1f} "
            f"{r['forward_ratio']:>6.2f} {r['triton_fwd_bwd_tflops']:>9.1f} "
            f"{r['torch_flash_fwd_bwd_tflops']:>7.1f} {r['fwd_bwd_ratio']:>6.2f}")


if __name__ == "__main__":
    print(HEADER, flush=True)
    result = run()
    if not result["ran"]:
        print(f"did not run: {result['reason']}")
    else:
        target = result["targets"]["min_forward_ratio_at_L_ge_4k"]
        print(f"{result['gpu']}, triton {result['triton']}: smallest forward ratio at L >= 4k "
              f"{result['min_forward_ratio_at_L_ge_4k']:.2f} (target {target})")
