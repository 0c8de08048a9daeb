"""attention_core: the attention mechanisms of the book, small, tested, and readable.

Every chapter imports from here; ``attention_core.viz`` draws and
``attention_core.explorers`` wires controls to both.
"""

from .functional import eager_attention, scaled_dot_product_attention, softmax
from .kernels import ATTENTION_FUNCTIONS
from .kv_cache import KVCache, kv_cache_bytes
from .masks import causal_mask, padding_mask, sliding_window_mask
from .metrics import attention_entropy
from .multihead import (MultiHeadAttention, grouped_query_attention, merge_heads, repeat_kv,
                        split_heads)
from .positional import (alibi_bias, alibi_slopes, apply_rotary, sinusoidal_encoding,
                         sinusoidal_shift_matrix)

__version__ = "0.1.0"

__all__ = [
    "ATTENTION_FUNCTIONS",
    "KVCache",
    "MultiHeadAttention",
    "alibi_bias",
    "alibi_slopes",
    "apply_rotary",
    "attention_entropy",
    "causal_mask",
    "eager_attention",
    "grouped_query_attention",
    "kv_cache_bytes",
    "merge_heads",
    "padding_mask",
    "repeat_kv",
    "scaled_dot_product_attention",
    "sinusoidal_encoding",
    "sinusoidal_shift_matrix",
    "sliding_window_mask",
    "softmax",
    "split_heads",
]
