"""Chapter 9 (and 12): the key/value cache of autoregressive decoding and what it costs.

A decoder generating token t needs the keys and values of tokens 0..t-1 again; they
never change, so they are kept instead of recomputed. Only the new token's key and
value are projected at each step.

Every cache of the package shares one interface, as HuggingFace's cache layers do
(``update``, ``get_seq_length``, ``reset``): :class:`Cache` (``length``, ``nbytes()``,
``reset()``), and :class:`HeadCache` for the caches of per-head keys and values that
``MultiHeadAttention(..., kv_cache=cache)`` decodes with (``append(k, v)``). Code that
reuses a cache calls ``reset()``; it never writes a cache's state by hand.

Internal, shared with the other caches (:mod:`~attention_core.nn.paged`,
:mod:`~attention_core.nn.latent_attention`) and not in ``__all__``: ``check_new_entries``
(the checks of ``append``), ``crop_length`` (the checks and bookkeeping of ``crop``) and
``is_head_cache`` (``isinstance(x, HeadCache)``, quick for the package's own caches).

Shape legend: B batch, Hkv key/value heads (h_kv), T tokens appended in one step, S
cached length (the keys a new query attends to), E head dim (d_k).
"""

from __future__ import annotations

import math
from typing import Protocol, runtime_checkable

import torch

from ._checks import (
    check_allocation,
    check_device,
    check_dtype,
    check_float_dtype,
    check_positive_int,
    check_tensor,
)

__all__ = ["Cache", "HeadCache", "KVCache", "RollingKVCache", "kv_cache_bytes", "streaming_mask"]


@runtime_checkable
class Cache(Protocol):
    """What every cache of the package offers (:class:`KVCache`, :class:`RollingKVCache`,
    :class:`~attention_core.nn.latent_attention.LatentKVCache`,
    :class:`~attention_core.nn.paged.PagedKVCache`); each documents what its ``length``
    counts. ``isinstance(x, Cache)`` checks that the names are there, not their types."""

    length: int
    """Tokens the cache has taken in; each cache says whether per sequence or in all."""

    def nbytes(self) -> int:
        """Bytes of the keys and values (or latents) held now."""
        ...

    def reset(self) -> None:
        """Forget everything: afterwards the cache is as a freshly built one."""
        ...


@runtime_checkable
class HeadCache(Cache, Protocol):
    """A :class:`Cache` of per-head keys and values for one attention layer, what
    ``MultiHeadAttention.forward(..., kv_cache=...)`` takes: ``length`` is the absolute
    position of the next token (RoPE rotates new keys from there)."""

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add ``k``, ``v (B, Hkv, T, E)``; return the keys and values the new tokens attend
        to, ``(B, Hkv, S, E)``."""
        ...


def is_head_cache(x) -> bool:
    """``isinstance(x, HeadCache)``, answered at once for a class that names
    :class:`HeadCache` among its bases (every head cache of the package): Python 3.11 checks
    a protocol with a data member attribute by attribute, about 20 us a call, and a
    decoder asks once per layer per token."""
    return HeadCache in type(x).__mro__ or isinstance(x, HeadCache)


def check_new_entries(k, v, layout: dict[str, int | None], buffer: torch.Tensor, cache: str) -> None:
    """Raise unless ``k`` and ``v`` are floating-point tensors of one shape with the axes of
    ``layout`` (name -> size; None for the new tokens' axis ``T``, which must be >= 1), on the
    cache's ``buffer``'s device and in its dtype. A head cache's layout is ``(B, Hkv, T, E)``."""
    for name, x in (("k", k), ("v", v)):
        check_tensor(name, x, min_dim=len(layout))
    fixed = {n: size for n, size in layout.items() if size is not None}
    shape = dict(zip(layout, k.shape))
    if k.dim() != len(layout) or any(shape[n] != size for n, size in fixed.items()) or v.shape != k.shape:
        raise ValueError(f"k {tuple(k.shape)} and v {tuple(v.shape)} must be ({', '.join(layout)}) "
                         f"with ({', '.join(fixed)}) = {tuple(fixed.values())}")
    if shape["T"] == 0:
        raise ValueError(f"k {tuple(k.shape)} holds no token: append T >= 1 positions")
    for name, x in (("k", k), ("v", v)):
        check_device(name, x, buffer.device, f"the cache ({cache}(..., device=...))")
        check_dtype(name, x, buffer.dtype, f"the cache ({cache}(..., dtype=...))")


def _head_layout(buffer: torch.Tensor) -> dict[str, int | None]:
    """``(B, Hkv, T, E)``: what a head cache with ``buffer (B, Hkv, slots, E)`` appends."""
    B, Hkv, _, E = buffer.shape
    return {"B": B, "Hkv": Hkv, "T": None, "E": E}


class KVCache(HeadCache):
    """Pre-allocated keys and values ``(B, Hkv, max_len, E)`` for one attention layer, a
    :class:`HeadCache`; ``length`` counts the positions cached so far.

    ``append`` writes the new entries in place (no copy of the past) and returns views
    of everything cached so far. ``dtype`` and ``device`` place the buffers (default:
    float32 on the CPU); what is appended must be on the same device.
    ``MultiHeadAttention.new_cache(batch_size, max_len)`` builds one for a layer.
    """

    def __init__(self, batch_size: int, num_kv_heads: int, head_dim: int, max_len: int,
                 dtype=torch.float32, device=None):
        for name, value in (("batch_size", batch_size), ("num_kv_heads", num_kv_heads),
                            ("head_dim", head_dim), ("max_len", max_len)):
            check_positive_int(name, value)
        check_float_dtype("dtype", dtype)
        shape = (batch_size, num_kv_heads, max_len, head_dim)
        check_allocation("KVCache(batch_size, num_kv_heads, head_dim, max_len)", 2 * math.prod(shape),
                         dtype.itemsize)  # keys and values
        self.keys = torch.zeros(shape, dtype=dtype, device=device)
        self.values = torch.zeros(shape, dtype=dtype, device=device)
        self.length = 0

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add ``k``, ``v (B, Hkv, T, E)``; return all keys and values ``(B, Hkv, S, E)``."""
        check_new_entries(k, v, _head_layout(self.keys), self.keys, "KVCache")
        T = k.size(2)
        if self.length + T > self.keys.size(2):
            raise ValueError(f"cache full: {self.length} + {T} new positions exceed "
                             f"max_len={self.keys.size(2)}")
        end = self.length + T
        self.keys[:, :, self.length:end] = k
        self.values[:, :, self.length:end] = v
        self.length = end
        return self.keys[:, :, :end], self.values[:, :, :end]  # (B, Hkv, S, E) views

    def nbytes(self) -> int:
        """Bytes of the keys and values cached so far."""
        per_position = self.keys[:, :, :1].numel() * self.keys.element_size()
        return 2 * per_position * self.length

    def reset(self) -> None:
        """Empty the cache (``length`` 0, buffers zeroed) to decode a new text with it."""
        _zero(self)

    def crop(self, length: int) -> None:
        """Keep the first ``length`` positions and forget the rest, as HuggingFace's
        ``DynamicCache.crop``: to drop rejected draft tokens (speculative decoding) or to
        time the same decoding step again. The next ``append`` overwrites what was dropped."""
        crop_length(self, length)


def crop_length(cache: Cache, length: int) -> None:
    """Set ``cache.length`` back to ``length``, checked to lie in ``[0, cache.length]``: the
    ``crop`` of the caches that hold positions in order (:class:`KVCache`,
    :class:`~attention_core.nn.latent_attention.LatentKVCache`). A :class:`RollingKVCache` that
    has wrapped is refused: the positions it would go back to are overwritten."""
    settable = not isinstance(getattr(type(cache), "length", None), property)  # PagedKVCache's is computed
    if not (settable and isinstance(getattr(cache, "length", None), int)):
        raise TypeError(f"cache must be a KVCache, RollingKVCache or LatentKVCache (a cache whose length "
                        f"can be set back), got {type(cache).__name__}")
    if isinstance(length, bool) or not isinstance(length, int) or not 0 <= length <= cache.length:
        raise ValueError(f"length must be an int in [0, {cache.length}] (the positions cached), "
                         f"got {length!r}")
    capacity = getattr(cache, "num_sinks", 0) + getattr(cache, "window", cache.length)
    if length < cache.length and cache.length > capacity:  # a RollingKVCache that has wrapped
        raise ValueError(f"cache: a RollingKVCache that has wrapped ({cache.length} positions appended, "
                         f"{capacity} slots) has overwritten the positions before the last {capacity}, so it "
                         f"cannot be cropped back to length={length}; reset() it and append again")
    cache.length = length


def _zero(cache: KVCache | RollingKVCache) -> None:
    """Zero a head cache's ``keys`` and ``values`` and its ``length``: as freshly built."""
    cache.keys.zero_()
    cache.values.zero_()
    cache.length = 0


def kv_cache_bytes(num_layers: int, num_kv_heads: int, head_dim: int, seq_len: int,
                   batch_size: int = 1, bytes_per_element: int = 2) -> int:
    """Bytes held by a KV cache, keys and values together.

    ``2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element``;
    ``bytes_per_element=2`` is float16/bfloat16. Sharing key/value heads (MQA, GQA)
    shrinks the cache by ``num_heads / num_kv_heads`` (G, the query heads per key/value
    head). In the book's symbols: ``2 n_layers h_kv d_k`` numbers per token.
    """
    for name, value in (("num_layers", num_layers), ("num_kv_heads", num_kv_heads),
                        ("head_dim", head_dim), ("seq_len", seq_len),
                        ("batch_size", batch_size), ("bytes_per_element", bytes_per_element)):
        check_positive_int(name, value)
    return 2 * num_layers * num_kv_heads * head_dim * seq_len * batch_size * bytes_per_element


class RollingKVCache(HeadCache):
    """A fixed-size cache for sliding-window decoding: the last ``window`` positions in a
    rolling buffer (Mistral, Jiang et al. 2023) plus the first ``num_sinks`` positions
    kept for good, the "attention sinks" of StreamingLLM (Xiao et al. 2023).

    Same ``append(k, v)`` as :class:`KVCache`, so ``MultiHeadAttention(x, kv_cache=cache)``
    decodes with it unchanged. Query ``p`` sees key ``j`` when ``j <= p`` and either
    ``p - j < window`` or ``j < num_sinks``. Position ``p >= num_sinks`` lives in slot
    ``num_sinks + (p - num_sinks) % window``: memory never grows past
    ``num_sinks + window`` positions, however long the text.

    A :class:`HeadCache`: ``length`` counts every position ever appended (the absolute
    position of the next token), so a RoPE model rotates each key once, at its *original* position, as
    Mistral does; StreamingLLM instead renumbers positions inside the cache.

    One token at a time (``T = 1``), ``append`` returns exactly the keys that token may
    see. For a chunk of ``T > 1`` tokens (a prompt), the earlier tokens of the chunk may
    see fewer of the old keys: pass ``attn_mask=cache.attn_mask(T)`` (built *before*
    the call) to the attention as well.
    """

    def __init__(self, batch_size: int, num_kv_heads: int, head_dim: int, window: int,
                 num_sinks: int = 0, dtype=torch.float32, device=None):
        for name, value in (("batch_size", batch_size), ("num_kv_heads", num_kv_heads),
                            ("head_dim", head_dim), ("window", window)):
            check_positive_int(name, value)
        check_positive_int("num_sinks", num_sinks, minimum=0)
        check_float_dtype("dtype", dtype)
        self.window, self.num_sinks = window, num_sinks
        shape = (batch_size, num_kv_heads, num_sinks + window, head_dim)  # sinks, then the ring
        check_allocation("RollingKVCache(batch_size, num_kv_heads, head_dim, window + num_sinks)",
                         2 * math.prod(shape), dtype.itemsize)
        self.keys = torch.zeros(shape, dtype=dtype, device=device)
        self.values = torch.zeros(shape, dtype=dtype, device=device)
        self.length = 0

    def slot(self, position: int) -> int:
        """The buffer slot of absolute ``position``."""
        if position < self.num_sinks:
            return position
        return self.num_sinks + (position - self.num_sinks) % self.window

    def cached_positions(self, first_query: int | None = None) -> list[int]:
        """Absolute positions held now that query ``first_query`` (default: the next
        position, ``length``) may still see, in increasing order."""
        p = self.length if first_query is None else first_query
        sinks = range(min(self.length, self.num_sinks))
        recent = range(max(self.num_sinks, p - self.window + 1), self.length)
        return list(sinks) + list(recent)

    def attn_mask(self, T: int) -> torch.Tensor:
        """The ``(T, S)`` mask (True = may attend) for appending ``T`` tokens now: rows are
        the new positions, columns the keys ``append`` will return."""
        check_positive_int("T", T)
        keys = torch.tensor(self.cached_positions() + list(range(self.length, self.length + T)),
                            device=self.keys.device)  # (S,) absolute key positions
        queries = torch.arange(self.length, self.length + T, device=self.keys.device)  # (T,)
        return _streaming_allowed(queries, keys, self.window, self.num_sinks)  # (T, S)

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add ``k``, ``v (B, Hkv, T, E)``; return the keys and values the new tokens may
        see, oldest first, ``(B, Hkv, S, E)`` with ``S <= num_sinks + window - 1 + T``."""
        check_new_entries(k, v, _head_layout(self.keys), self.keys, "RollingKVCache")
        T = k.size(2)
        old = torch.tensor([self.slot(p) for p in self.cached_positions()], dtype=torch.long,
                           device=self.keys.device)
        keys = torch.cat((self.keys[:, :, old], k), dim=2)  # (B, Hkv, S, E): a copy, oldest first
        values = torch.cat((self.values[:, :, old], v), dim=2)
        new = range(self.length, self.length + T)
        # Only the last `window` new positions outlive this call (and every sink).
        kept = [i for i, p in enumerate(new) if p < self.num_sinks or p >= new[-1] - self.window + 1]
        index = torch.tensor(kept, dtype=torch.long, device=self.keys.device)
        slots = torch.tensor([self.slot(new[i]) for i in kept], dtype=torch.long, device=self.keys.device)
        self.keys[:, :, slots] = k[:, :, index]
        self.values[:, :, slots] = v[:, :, index]
        self.length += T
        return keys, values

    def nbytes(self) -> int:
        """Bytes of the keys and values held now: at most ``num_sinks + window`` positions."""
        held = min(self.length, self.num_sinks) + min(max(self.length - self.num_sinks, 0), self.window)
        return 2 * self.keys[:, :, :1].numel() * self.keys.element_size() * held

    def reset(self) -> None:
        """Empty the cache (``length`` 0, buffers zeroed) to decode a new text with it."""
        _zero(self)


def streaming_mask(L: int, window: int, num_sinks: int = 0, device=None) -> torch.Tensor:
    """The ``(L, L)`` mask a :class:`RollingKVCache` decodes under: causal, the last
    ``window`` positions (``0 <= i - j < window``), and the first ``num_sinks`` positions
    for every query (``j < num_sinks``, ``j <= i``). ``device``: where to build it."""
    check_positive_int("L", L)
    check_positive_int("window", window)
    check_positive_int("num_sinks", num_sinks, minimum=0)
    positions = torch.arange(L, device=device)  # (L,): every query and key
    return _streaming_allowed(positions, positions, window, num_sinks)  # (L, L)


def _streaming_allowed(queries: torch.Tensor, keys: torch.Tensor, window: int,
                       num_sinks: int) -> torch.Tensor:
    """``(L, S)``, True where a query at absolute position ``queries[i]`` may see the key at
    ``keys[j]``: not in its future, and among the last ``window`` positions or the first
    ``num_sinks`` (StreamingLLM's rule, which :class:`RollingKVCache` and :func:`streaming_mask`
    share)."""
    behind = queries.unsqueeze(1) - keys.unsqueeze(0)  # (L, S): how far each key lies behind its query
    return (behind >= 0) & ((behind < window) | (keys.unsqueeze(0) < num_sinks))
