"""Chapter 14's model, SmolLM2-135M-Instruct (Q4_1 GGUF dequantised to float32), on the CPU:
the load time and peak memory of ``load_smollm2``; greedy ``generate`` in tokens per second
with the package's KV cache, against transformers' ``LlamaForCausalLM.generate`` loaded
from the same file (eager attention) and against itself without the cache; and a prefill
of 512 tokens, both models. Both run in the same process, on one thread, one after the
other, so the ratios compare like with like (goal: ours with the cache >= 0.8x transformers).
"""

from __future__ import annotations

import os
import time
from functools import partial

import torch

from _timing import machine, median_seconds, peak_memory_bytes, steady_allocator
from attention_core.models.measure import one_thread
from attention_core.models.smollm import chat_prompt, default_gguf_path, generate, load_smollm2

NEW_TOKENS, PREFILL = 32, 512
GOALS = {"cached_over_transformers_target": 0.8}


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
                                             attn_implementation="eager", dtype=torch.float32).eval()
    return model, time.perf_counter() - start


def tokens_per_second(fn) -> float:
    return NEW_TOKENS / median_seconds(fn, repeats=3)


def prefill_ours(model, input_ids: torch.Tensor) -> torch.Tensor:
    """What ``generate`` does first: the prompt into a fresh cache, the last position's logits."""
    hidden, _ = model.hidden_states(input_ids, model.new_cache(1, input_ids.size(1)), output_attentions=False)
    return model.lm_head(hidden[:, -1])  # (1, V)


def run() -> dict:
    steady_allocator()
    with one_thread(), torch.no_grad():
        result, model, tokenizer = load()
        theirs, result["transformers_load_s"] = transformers_model()
        prompt = chat_prompt(tokenizer, [{"role": "user", "content": "Explain attention in two sentences."}])
        hf_generate = partial(theirs.generate, prompt, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                              do_sample=False, pad_token_id=2)
        speed = {"ours_cached": tokens_per_second(partial(generate, model, prompt, NEW_TOKENS)),
                 "transformers_cached": tokens_per_second(hf_generate),
                 "ours_no_cache": tokens_per_second(partial(generate, model, prompt, NEW_TOKENS,
                                                            use_cache=False))}
        long = torch.randint(3, model.config.vocab_size, (1, PREFILL),
                             generator=torch.Generator().manual_seed(0))  # (1, 512) random ids
        prefill = {"ours_s": median_seconds(partial(prefill_ours, model, long), repeats=3),
                   "transformers_s": median_seconds(partial(theirs, long, logits_to_keep=1), repeats=3)}
        prefill["ours_with_attentions_s"] = median_seconds(partial(model, long), repeats=1)
    return {**result, "prompt_tokens": prompt.size(1), "new_tokens": NEW_TOKENS, "tokens_per_s": speed,
            "cached_over_transformers": speed["ours_cached"] / speed["transformers_cached"],
            "cached_over_no_cache": speed["ours_cached"] / speed["ours_no_cache"],
            f"prefill_{PREFILL}": prefill, "targets": GOALS, "machine": machine() + " (run on 1)"}


if __name__ == "__main__":
    r = run()
    s = r["tokens_per_s"]
    print(f"chapter 14, SmolLM2-135M ({r['machine']})")
    print(f"  load {r['load_s']:.1f} s (peak +{r['load_peak_mib']:.0f} MiB); "
          f"transformers {r['transformers_load_s']:.1f} s")
    print(f"  generate {r['new_tokens']} tokens: ours {s['ours_cached']:.1f} tok/s with the cache, "
          f"{s['ours_no_cache']:.1f} without; transformers {s['transformers_cached']:.1f} "
          f"(ratio {r['cached_over_transformers']:.2f}, goal >= 0.8)")
    p = r[f"prefill_{PREFILL}"]
    print(f"  prefill {PREFILL} tokens: ours {p['ours_s']:.2f} s, transformers {p['transformers_s']:.2f} s")
