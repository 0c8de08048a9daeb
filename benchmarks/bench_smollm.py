"""Chapter 14's model, SmolLM2-135M-Instruct (Q4_1 GGUF dequantised to float32), on the CPU:
the load time and peak memory of ``load_smollm2``; greedy ``generate`` in tokens per second
with the package's KV cache, against transformers' ``LlamaForCausalLM.generate`` loaded from
the same file with its default attention (sdpa), and against itself without the cache; a
prefill of 512 tokens, both models; and the weight-streaming bound: each new token reads
every weight once, so tokens/s cannot exceed (copy bandwidth) / (bytes of weights).

Both models run in the same process, on one thread, in interleaved rounds (ours, theirs,
ours, ...), best of ``ROUNDS``, so the ratios compare like with like. Goals: ours with the
cache >= 1.0x transformers, the prefill no slower, and >= 0.7x the bound (stretch). The
1-minute load average is recorded before and after.
"""

from __future__ import annotations

import os
import time
from functools import partial

import torch

from _timing import machine, peak_memory_bytes, steady_allocator
from attention_core.models.measure import one_thread
from attention_core.models.smollm import chat_prompt, default_gguf_path, generate, load_smollm2

NEW_TOKENS, PREFILL, ROUNDS = 32, 512, 4
GOALS = {"cached_over_transformers_target": 1.0, "prefill_ours_over_transformers_max": 1.0,
         "ours_over_bound_stretch": 0.7}


def load() -> tuple[dict, object, object]:
    loaded = {}

    def run():
        loaded["pair"] = load_smollm2()

    start = time.perf_counter()
    peak = peak_memory_bytes(run)
    seconds = time.perf_counter() - start
    return {"load_s": seconds, "load_peak_mib": peak / 2**20}, *loaded["pair"]


def transformers_model():
    os.environ["HF_HUB_OFFLINE"] = "1"  # the one file, never the hub
    from transformers import LlamaForCausalLM

    path = default_gguf_path()
    start = time.perf_counter()
    model = LlamaForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                             dtype=torch.float32).eval()  # its default attention
    return model, time.perf_counter() - start


def interleaved_best(fns: dict, rounds: int = ROUNDS) -> dict[str, float]:
    """Seconds of each function of ``fns`` (name -> no-argument callable), the best of
    ``rounds`` rounds that call them in turn: a slow spell of the machine hits both."""
    for fn in fns.values():
        fn()  # warm-up
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def copy_bandwidth(mib: int = 512) -> float:
    """Bytes a second one thread copies between two buffers of ``mib`` MiB (best of 5),
    counting each byte once: the rate at which a step can stream its weights."""
    src = torch.ones(mib * 2**18)  # float32
    dst = torch.empty_like(src)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - start)
    return src.nbytes / best


def prefill_ours(model, input_ids: torch.Tensor) -> torch.Tensor:
    """What ``generate`` does first: the prompt into a fresh cache, the last position's logits."""
    hidden, _ = model.hidden_states(input_ids, model.new_cache(1, input_ids.size(1)), output_attentions=False)
    return model.lm_head(hidden[:, -1])  # (1, V)


def run() -> dict:
    steady_allocator()
    load_before = os.getloadavg()[0]
    with one_thread(), torch.no_grad():
        result, model, tokenizer = load()
        theirs, result["transformers_load_s"] = transformers_model()
        prompt = chat_prompt(tokenizer, [{"role": "user", "content": "Explain attention in two sentences."}])
        hf_generate = partial(theirs.generate, prompt, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                              do_sample=False, pad_token_id=2)
        decode = interleaved_best({"ours_cached": partial(generate, model, prompt, NEW_TOKENS),
                                   "transformers_cached": hf_generate})
        no_cache = partial(generate, model, prompt, NEW_TOKENS, use_cache=False)
        decode["ours_no_cache"] = interleaved_best({"ours_no_cache": no_cache}, 1)["ours_no_cache"]
        speed = {name: NEW_TOKENS / seconds for name, seconds in decode.items()}
        long = torch.randint(3, model.config.vocab_size, (1, PREFILL),
                             generator=torch.Generator().manual_seed(0))  # (1, 512) random ids
        prefill = interleaved_best({"ours_s": partial(prefill_ours, model, long),
                                    "transformers_s": partial(theirs, long, logits_to_keep=1)})
        prefill["ours_with_attentions_s"] = interleaved_best({"w": partial(model, long)}, 1)["w"]
        weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())  # tied: counted once
        bandwidth = copy_bandwidth()
    bound = bandwidth / weight_bytes  # tokens/s if a token cost only streaming its weights
    return {**result, "prompt_tokens": prompt.size(1), "new_tokens": NEW_TOKENS, "tokens_per_s": speed,
            "transformers_attention": theirs.config._attn_implementation,
            "cached_over_transformers": speed["ours_cached"] / speed["transformers_cached"],
            "cached_over_no_cache": speed["ours_cached"] / speed["ours_no_cache"],
            f"prefill_{PREFILL}": prefill,
            "prefill_ours_over_transformers": prefill["ours_s"] / prefill["transformers_s"],
            "weight_mib": weight_bytes / 2**20, "copy_gb_per_s": bandwidth / 1e9,
            "bound_tokens_per_s": bound, "ours_over_bound": speed["ours_cached"] / bound,
            "targets": GOALS, "load_average_1min": {"before": load_before, "after": os.getloadavg()[0]},
            "rounds": ROUNDS, "machine": machine() + " (run on 1)"}


if __name__ == "__main__":
    r = run()
    s = r["tokens_per_s"]
    print(f"chapter 14, SmolLM2-135M ({r['machine']})")
    print(f"  load {r['load_s']:.1f} s (peak +{r['load_peak_mib']:.0f} MiB); "
          f"transformers {r['transformers_load_s']:.1f} s")
    print(f"  generate {r['new_tokens']} tokens: ours {s['ours_cached']:.1f} tok/s with the cache, "
          f"{s['ours_no_cache']:.1f} without; transformers ({r['transformers_attention']}) "
          f"{s['transformers_cached']:.1f} (ratio {r['cached_over_transformers']:.2f}, goal >= 1.0)")
    p = r[f"prefill_{PREFILL}"]
    print(f"  prefill {PREFILL} tokens: ours {p['ours_s']:.2f} s, transformers {p['transformers_s']:.2f} s")
    print(f"  bound {r['bound_tokens_per_s']:.1f} tok/s ({r['weight_mib']:.0f} MiB of weights at "
          f"{r['copy_gb_per_s']:.1f} GB/s): ours at {r['ours_over_bound']:.2f} of it")
