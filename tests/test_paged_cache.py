"""A paged KV cache (vLLM): sequences of different lengths share one pool of blocks;
attention over the paged cache equals attention over each sequence's contiguous keys
and values; freed blocks are reused; the memory accounting of slot_usage is exact."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from attention_core import PagedKVCache, paged_attention, repeat_kv
from attention_core.models.serving import request_lengths, slot_usage

Hkv, H, E, BLOCK = 2, 4, 8, 4


def random_kv(T, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(Hkv, T, E, generator=g, dtype=torch.float64),
            torch.randn(Hkv, T, E, generator=g, dtype=torch.float64))


def filled(lengths, chunks=3):
    """A pool holding one sequence per length, appended in interleaved chunks (so their
    blocks are mixed in the pool), and each sequence's contiguous keys and values."""
    cache = PagedKVCache(num_blocks=32, block_size=BLOCK, num_kv_heads=Hkv, head_dim=E, dtype=torch.float64)
    seqs = [cache.add_sequence() for _ in lengths]
    contiguous = [random_kv(n, seed) for seed, n in enumerate(lengths)]
    for c in range(chunks):
        for seq, n, (k, v) in zip(seqs, lengths, contiguous):
            lo, hi = c * n // chunks, (c + 1) * n // chunks
            if hi > lo:
                cache.append(seq, k[:, lo:hi], v[:, lo:hi])
    return cache, seqs, contiguous


@pytest.mark.parametrize("is_causal,L", [(False, 1), (True, 1), (True, 3)])
def test_paged_attention_equals_contiguous_attention(is_causal, L):
    lengths = [5, 13, 1 + 2 * BLOCK, 9]
    cache, seqs, contiguous = filled(lengths)
    q = torch.randn(len(lengths), H, L, E, dtype=torch.float64)
    out, w = paged_attention(q, cache, seqs, is_causal=is_causal)
    for b, (n, (k, v)) in enumerate(zip(lengths, contiguous)):
        if n < L:
            continue
        k, v = repeat_kv(k.unsqueeze(0), H // Hkv)[0], repeat_kv(v.unsqueeze(0), H // Hkv)[0]
        mask = torch.ones(L, n, dtype=torch.bool).tril(n - L) if is_causal else None
        assert_close(out[b], F.scaled_dot_product_attention(q[b], k, v, attn_mask=mask))
        assert (w[b, ..., n:] == 0).all()  # padding of the last block and of shorter tables


def test_blocks_are_shared_and_reused():
    cache, seqs, _ = filled([5, 13, 9])
    tables = cache.block_tables
    assert [len(tables[s]) for s in seqs] == [2, 4, 3]  # ceil(n / 4)
    used = sorted(b for s in seqs for b in tables[s])
    assert used == list(range(9))  # one pool, no block twice
    assert tables[seqs[0]] != sorted(tables[seqs[0]]) or tables[seqs[1]] != list(range(4))  # interleaved
    assert cache.used_slots() == 27 and cache.reserved_slots() == 36
    freed = set(tables[seqs[1]])
    cache.free(seqs[1])
    new = cache.add_sequence()
    k, v = random_kv(10, seed=7)
    cache.append(new, k, v)
    assert set(cache.block_tables[new]) <= freed | set(range(9, 32))
    keys, values, _ = cache.gather([new])
    assert_close(keys[0, :, :10], k)
    assert_close(values[0, :, :10], v)


def test_length_and_nbytes_count_the_tokens_held():
    cache, seqs, _ = filled([5, 13, 9])
    per_token = 2 * Hkv * E * 8  # keys and values, float64
    assert cache.length == cache.used_slots() == 27
    assert cache.nbytes() == 27 * per_token
    cache.free(seqs[1])
    assert cache.length == 14 and cache.nbytes() == 14 * per_token


def test_reset_ends_every_sequence_and_a_refilled_cache_equals_a_fresh_one():
    lengths = [5, 13, 9]
    used, _, _ = filled([7, 2, 11, 3])  # other sequences first
    used.reset()
    assert used.length == 0 and used.nbytes() == 0 and used.block_tables == {} and used.lengths == {}
    assert used.reserved_slots() == 0 and len(used.free_blocks) == 32
    fresh = PagedKVCache(num_blocks=32, block_size=BLOCK, num_kv_heads=Hkv, head_dim=E, dtype=torch.float64)
    for cache in (used, fresh):  # the same appends into both
        seqs = [cache.add_sequence() for _ in lengths]
        for seq, n in zip(seqs, lengths):
            cache.append(seq, *random_kv(n, seed=n))
    assert used.block_tables == fresh.block_tables and seqs == [0, 1, 2]  # ids start again at 0
    q = torch.randn(3, H, 1, E, dtype=torch.float64)
    for a, b in zip(paged_attention(q, used, seqs), paged_attention(q, fresh, seqs)):
        assert torch.equal(a, b)


def test_slot_usage_by_hand():
    usage = slot_usage([1, 4, 5, 16], max_len=16, block_size=4)
    assert usage["used"] == 26
    assert usage["reserved_contiguous"] == 64
    assert usage["reserved_paged"] == 4 + 4 + 8 + 16
    assert usage["waste_paged"] == pytest.approx(1 - 26 / 32)
    assert usage["waste_contiguous"] == pytest.approx(1 - 26 / 64)


def test_paging_wastes_less_than_one_block_per_sequence():
    lengths = request_lengths(500, max_len=2048, seed=0)
    assert lengths.min() >= 1 and lengths.max() <= 2048
    assert torch.equal(lengths, request_lengths(500, max_len=2048, seed=0))  # seeded
    usage = slot_usage(lengths.tolist(), max_len=2048, block_size=16)
    assert usage["reserved_paged"] - usage["used"] < 16 * len(lengths)
    assert usage["waste_paged"] < usage["waste_contiguous"]


def test_errors_name_the_argument():
    cache = PagedKVCache(num_blocks=2, block_size=4, num_kv_heads=Hkv, head_dim=E)
    seq = cache.add_sequence()
    with pytest.raises(ValueError, match="out of blocks: seq 0 needs 3 more, the pool has 2 free"):
        cache.append(seq, torch.zeros(Hkv, 9, E), torch.zeros(Hkv, 9, E))
    with pytest.raises(ValueError, match=r"must be \(Hkv, T, E\) with \(Hkv, E\) = \(2, 8\)"):
        cache.append(seq, torch.zeros(3, 1, E), torch.zeros(3, 1, E))
    with pytest.raises(ValueError, match="seq 5 is not a live sequence"):
        cache.append(5, torch.zeros(Hkv, 1, E), torch.zeros(Hkv, 1, E))
    with pytest.raises(ValueError, match="block_size must be >= 1, got 0"):
        PagedKVCache(2, 0, Hkv, E)
    with pytest.raises(ValueError, match=r"lengths must be non-empty and lie in \[1, max_len=8\]"):
        slot_usage([3, 9], max_len=8, block_size=4)
    with pytest.raises(ValueError, match=r"query must be \(B=1, H, L, E=8\)"):
        paged_attention(torch.zeros(2, H, 1, E), cache, [seq])


def test_runs_on_the_meta_device():
    cache = PagedKVCache(8, 4, Hkv, E, device="meta")
    seqs = [cache.add_sequence(), cache.add_sequence()]
    cache.append(seqs[0], torch.empty(Hkv, 6, E, device="meta"), torch.empty(Hkv, 6, E, device="meta"))
    cache.append(seqs[1], torch.empty(Hkv, 3, E, device="meta"), torch.empty(Hkv, 3, E, device="meta"))
    out, w = paged_attention(torch.empty(2, H, 1, E, device="meta"), cache, seqs)
    assert out.device.type == "meta" and out.shape == (2, H, 1, E) and w.shape == (2, H, 1, 8)
    assert math.ceil(6 / 4) + math.ceil(3 / 4) == len(cache.block_tables[0]) + len(cache.block_tables[1])
