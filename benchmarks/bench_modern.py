"""Chapter 12's inference-time claims, as ratios from the same run: the chunked delta
rule against the token-by-token recurrence (T=2048), and one MLA decoding step over a
4096-token latent cache, absorbed against naive, with the cache bytes of MLA against
an MHA cache of the same heads."""

from __future__ import annotations

from functools import partial

import torch

from _timing import machine, median_seconds
from attention_core import KVCache, MultiHeadLatentAttention, delta_rule_attention


def delta_rule(B=1, H=4, T=2048, D=64, chunk=64) -> dict:
    g = torch.Generator().manual_seed(0)
    q, v = torch.randn(B, H, T, D, generator=g), torch.randn(B, H, T, D, generator=g)
    k = torch.nn.functional.normalize(torch.randn(B, H, T, D, generator=g), dim=-1)
    beta = torch.rand(B, H, T, generator=g)
    with torch.no_grad():
        seconds = {"recurrent": median_seconds(partial(delta_rule_attention, q, k, v, beta), repeats=3),
                   "chunked": median_seconds(partial(delta_rule_attention, q, k, v, beta,
                                                     chunk_size=chunk), repeats=3)}
    return {"shape": [B, H, T, D], "chunk": chunk, "seconds": seconds,
            "speedup": seconds["recurrent"] / seconds["chunked"]}


def mla_decode(D=1024, H=16, latent=256, rope=32, S=4096) -> dict:
    torch.manual_seed(0)
    mla = MultiHeadLatentAttention(D, H, latent, rope_dim=rope).eval()
    cache = mla.new_cache(1, S + 1)
    with torch.no_grad():
        mla(torch.randn(1, S, D), is_causal=True, kv_cache=cache, absorb=True)  # the prompt
        x = torch.randn(1, 1, D)

        def step(absorb):
            cache.crop(S)  # rewind: decode the same next token again and again
            return mla(x, kv_cache=cache, absorb=absorb)

        seconds = {"naive": median_seconds(partial(step, False), repeats=5),
                   "absorbed": median_seconds(partial(step, True), repeats=5)}
    mha_cache = KVCache(1, H, D // H, S)
    mha_cache.append(torch.zeros(1, H, S, D // H), torch.zeros(1, H, S, D // H))  # S tokens held
    return {"config": {"embed_dim": D, "num_heads": H, "kv_latent_dim": latent, "rope_dim": rope,
                       "cached_tokens": S},
            "seconds": seconds, "speedup_absorbed": seconds["naive"] / seconds["absorbed"],
            "cache_bytes": {"mla": S * cache.nbytes_per_token, "mha": mha_cache.nbytes()},
            "cache_ratio_mha_over_mla": mha_cache.nbytes() / (S * cache.nbytes_per_token)}


def run() -> dict:
    delta, mla = delta_rule(), mla_decode()
    return {"delta_rule": delta, "mla_decode": mla,
            "delta_chunked_speedup": delta["speedup"], "mla_absorbed_speedup": mla["speedup_absorbed"],
            "mla_cache_saving": mla["cache_ratio_mha_over_mla"],
            "targets": {"delta_chunked_speedup": 3.0, "mla_absorbed_speedup": 1.5, "mla_cache_saving": 7.0},
            "machine": machine()}


if __name__ == "__main__":
    r = run()
    print(f"chapter 12 ({r['machine']})")
    print(f"  delta rule, T=2048: chunked {r['delta_chunked_speedup']:.1f}x faster than recurrent "
          f"(target >= 3)")
    print(f"  MLA decode step over 4096 cached tokens: absorbed {r['mla_absorbed_speedup']:.1f}x faster "
          f"than naive (target >= 1.5)")
    print(f"  MLA cache {r['mla_cache_saving']:.1f}x smaller than MHA's (target >= 7)")
