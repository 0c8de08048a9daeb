"""Chapter 12: a paged KV cache (Kwon et al. 2023, vLLM): keys and values live in
fixed-size blocks of one shared pool, and each sequence keeps a block table, the list of
its blocks in order, like the page table of virtual memory.

Pre-allocating ``max_len`` positions per sequence reserves memory for tokens that may
never come; a paged cache takes one block at a time, so a sequence wastes at most
``block_size - 1`` slots, in its last block, and freed blocks go straight back to the
pool for any other sequence.

Shape legend: B sequences, H query heads, Hkv key/value heads, L query length, S key
length (the longest sequence), E head dim, T tokens appended in one call;
``num_blocks`` blocks in the pool, ``block_size`` positions per block.
"""

from __future__ import annotations

import math

import torch

from ._checks import (
    check_allocation,
    check_device,
    check_float_dtype,
    check_is_causal,
    check_positive_int,
    check_tensor,
)
from .heads import grouped_query_attention
from .kv_cache import Cache, check_new_entries

__all__ = ["PagedKVCache", "paged_attention"]


class PagedKVCache(Cache):
    """One pool ``keys``, ``values (num_blocks, Hkv, block_size, E)`` shared by many
    sequences; ``block_tables[seq]`` lists a sequence's blocks, ``lengths[seq]`` its
    length. A sequence's position ``p`` lives in block ``block_tables[seq][p // block_size]``
    at offset ``p % block_size``.

    A :class:`~attention_core.nn.kv_cache.Cache` over all its sequences: ``length`` is the
    number of tokens held, summed over the live sequences (:meth:`used_slots`), ``nbytes()``
    the bytes of their keys and values, and ``reset()`` ends every sequence. (The pool
    itself is allocated whole when the cache is built; :meth:`reserved_slots` counts the
    positions of the blocks handed out.) Its ``append`` takes a sequence id first, so it
    does not fit where a :class:`~attention_core.nn.kv_cache.HeadCache` goes (a type checker
    says so; ``isinstance`` compares names only): attend with :func:`paged_attention`.
    """

    def __init__(self, num_blocks: int, block_size: int, num_kv_heads: int, head_dim: int,
                 dtype=torch.float32, device=None):
        for name, value in (("num_blocks", num_blocks), ("block_size", block_size),
                            ("num_kv_heads", num_kv_heads), ("head_dim", head_dim)):
            check_positive_int(name, value)
        check_float_dtype("dtype", dtype)
        self.block_size = block_size
        shape = (num_blocks, num_kv_heads, block_size, head_dim)
        check_allocation("PagedKVCache(num_blocks, block_size, num_kv_heads, head_dim)", 2 * math.prod(shape),
                         dtype.itemsize)
        self.keys = torch.zeros(shape, dtype=dtype, device=device)
        self.values = torch.zeros(shape, dtype=dtype, device=device)
        self._empty_tables()

    def _empty_tables(self) -> None:
        """No sequence, every block free."""
        self.free_blocks = list(range(self.keys.size(0) - 1, -1, -1))  # pop() hands out 0, 1, 2, ...
        self.block_tables: dict[int, list[int]] = {}
        self.lengths: dict[int, int] = {}
        self._next_id = 0

    @property
    def length(self) -> int:
        """Tokens held, summed over the live sequences (the same as :meth:`used_slots`)."""
        return self.used_slots()

    def nbytes(self) -> int:
        """Bytes of the keys and values of the tokens held (``length`` positions)."""
        per_position = self.keys[0, :, 0].numel() * self.keys.element_size()  # (Hkv, E)
        return 2 * per_position * self.length

    def reset(self) -> None:
        """End every sequence and zero the pool: as freshly built (ids start again at 0)."""
        self.keys.zero_()
        self.values.zero_()
        self._empty_tables()

    def add_sequence(self) -> int:
        """Start an empty sequence; return its id. It holds no block until it has a token."""
        seq = self._next_id
        self._next_id += 1
        self.block_tables[seq], self.lengths[seq] = [], 0
        return seq

    def _table(self, seq: int) -> list[int]:
        if seq not in self.block_tables:
            raise ValueError(f"seq {seq!r} is not a live sequence; live: {sorted(self.block_tables)}")
        return self.block_tables[seq]

    def append(self, seq: int, k: torch.Tensor, v: torch.Tensor) -> None:
        """Add ``k``, ``v (Hkv, T, E)`` at the end of sequence ``seq``, taking blocks from
        the pool as it grows (``ValueError`` when the pool runs dry)."""
        table = self._table(seq)
        layout = {"Hkv": self.keys.size(1), "T": None, "E": self.keys.size(3)}
        check_new_entries(k, v, layout, self.keys, "PagedKVCache")
        start, T = self.lengths[seq], k.size(1)
        needed = math.ceil((start + T) / self.block_size) - len(table)
        if needed > len(self.free_blocks):
            raise ValueError(f"out of blocks: seq {seq} needs {needed} more, the pool has "
                             f"{len(self.free_blocks)} free")
        table.extend(self.free_blocks.pop() for _ in range(needed))
        positions = torch.arange(start, start + T)  # (T,)
        blocks = torch.tensor(table, dtype=torch.long)[positions // self.block_size]  # (T,)
        offsets = positions % self.block_size  # (T,)
        index = (blocks.to(self.keys.device), slice(None), offsets.to(self.keys.device))
        self.keys[index] = k.transpose(0, 1)  # (Hkv, T, E) -> (T, Hkv, E): one row per new position
        self.values[index] = v.transpose(0, 1)
        self.lengths[seq] = start + T

    def free(self, seq: int) -> None:
        """End sequence ``seq``: its blocks go back to the pool."""
        self.free_blocks.extend(reversed(self._table(seq)))
        del self.block_tables[seq], self.lengths[seq]

    def block_table(self, seqs) -> tuple[torch.Tensor, torch.Tensor]:
        """``(table (B, max_blocks), lengths (B,))`` for the sequences ``seqs``, on the
        pool's device; short tables are padded with block 0 (masked out by length)."""
        tables = [self._table(s) for s in seqs]
        width = max(1, max(len(t) for t in tables))
        padded = [t + [0] * (width - len(t)) for t in tables]
        device = self.keys.device
        return (torch.tensor(padded, dtype=torch.long, device=device),
                torch.tensor([self.lengths[s] for s in seqs], device=device))

    def gather(self, seqs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Keys and values of ``seqs`` read through their block tables:
        ``(keys, values (B, Hkv, S, E), lengths (B,))``, S = max_blocks * block_size."""
        table, lengths = self.block_table(seqs)  # (B, max_blocks)
        B, N = table.shape
        Hkv, E = self.keys.size(1), self.keys.size(3)

        def read(pool):
            blocks = pool[table]  # (B, max_blocks, Hkv, block_size, E)
            return blocks.transpose(1, 2).reshape(B, Hkv, N * self.block_size, E)  # (B, Hkv, S, E)

        return read(self.keys), read(self.values), lengths

    def used_slots(self) -> int:
        """Positions holding a token, over all live sequences."""
        return sum(self.lengths.values())

    def reserved_slots(self) -> int:
        """Positions in blocks handed out, over all live sequences."""
        return self.block_size * sum(len(t) for t in self.block_tables.values())


def _check_paged_inputs(query, cache, seqs) -> list[int]:
    """Raise unless ``cache`` is a :class:`PagedKVCache`, ``seqs`` a non-empty list of its
    live sequences, and ``query (B, H, L, E)`` one row per sequence, on the pool's device;
    return ``seqs`` as a list."""
    if not isinstance(cache, PagedKVCache):
        raise TypeError(f"cache must be a PagedKVCache, got {type(cache).__name__}")
    if isinstance(seqs, (str, bytes)) or not hasattr(seqs, "__iter__"):
        raise TypeError(f"seqs must be a list of sequence ids (cache.add_sequence()), got {seqs!r}")
    seqs = list(seqs)
    if not seqs:
        raise ValueError("seqs must name at least one sequence, got none")
    for seq in seqs:
        cache._table(seq)  # a ValueError naming an id that is not live
    check_tensor("query", query, min_dim=4)
    E = cache.keys.size(-1)
    if query.dim() != 4 or query.size(0) != len(seqs) or query.size(-1) != E or query.size(2) == 0:
        raise ValueError(f"query must be (B={len(seqs)}, H, L, E={E}) with L >= 1, got {tuple(query.shape)}")
    check_device("query", query, cache.keys.device, "the pool (PagedKVCache(..., device=...))")
    return seqs


def paged_attention(query: torch.Tensor, cache: PagedKVCache, seqs, is_causal: bool = False
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of ``query (B, H, L, E)``, the last L positions of each of the B
    sequences ``seqs``, over their keys and values in the paged ``cache``.

    One batched call for sequences of different lengths: each reads its blocks through
    its block table; key ``j`` counts for sequence ``b`` when ``j < lengths[b]`` (and,
    with ``is_causal``, ``j <= lengths[b] - L + i`` for query ``i``). Returns
    ``(output (B, H, L, E), weights (B, H, L, S))``, S the longest sequence padded to blocks.
    """
    seqs = _check_paged_inputs(query, cache, seqs)
    check_is_causal(is_causal)
    keys, values, lengths = cache.gather(seqs)  # (B, Hkv, S, E), (B,)
    L, S = query.size(2), keys.size(2)
    j = torch.arange(S, device=keys.device).view(1, 1, S)  # (1, 1, S)
    visible = j < lengths.view(-1, 1, 1)  # (B, 1, S): this sequence's tokens, not padding
    if is_causal:
        i = torch.arange(L, device=keys.device).view(1, L, 1)  # (1, L, 1)
        visible = visible & (j <= lengths.view(-1, 1, 1) - L + i)  # (B, L, S)
    return grouped_query_attention(query, keys.to(query.dtype), values.to(query.dtype),
                                   attn_mask=visible.unsqueeze(1))  # mask (B, 1, L or 1, S)
