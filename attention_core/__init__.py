"""attention_core: the attention mechanisms of the book, small, tested, and readable.

Three layers, one folder each, imported one way: :mod:`attention_core.nn` is the maths
(PyTorch only), whose public names are re-exported here (``ac.MultiHeadAttention``);
:mod:`attention_core.models` builds models, tasks, training and the chapters' experiments on
it; :mod:`attention_core.book` draws figures, runs explorers and checks exercises. Importing
this package loads torch and numpy only.
"""

from .nn.attention_functions import ATTENTION_FUNCTIONS
from .nn.block import TransformerBlock, TransformerDecoderBlock
from .nn.delta_rule import delta_rule_attention
from .nn.functional import eager_attention, scaled_dot_product_attention, softmax
from .nn.heads import grouped_query_attention, merge_heads, repeat_kv, split_heads
from .nn.kv_cache import KVCache, RollingKVCache, kv_cache_bytes
from .nn.kv_memory import KVLayout, kv_memory_bytes
from .nn.latent_attention import LatentKVCache, MultiHeadLatentAttention
from .nn.masks import causal_mask, padding_mask, sliding_window_mask
from .nn.metrics import attention_entropy
from .nn.multihead import MultiHeadAttention
from .nn.paged import PagedKVCache, paged_attention
from .nn.positional import (
    alibi_bias,
    alibi_slopes,
    apply_rotary,
    sinusoidal_encoding,
    sinusoidal_shift_matrix,
)

__version__ = "0.1.0"

__all__ = [
    "ATTENTION_FUNCTIONS",
    "KVCache",
    "KVLayout",
    "LatentKVCache",
    "MultiHeadAttention",
    "MultiHeadLatentAttention",
    "PagedKVCache",
    "RollingKVCache",
    "TransformerBlock",
    "TransformerDecoderBlock",
    "alibi_bias",
    "alibi_slopes",
    "apply_rotary",
    "attention_entropy",
    "causal_mask",
    "delta_rule_attention",
    "eager_attention",
    "grouped_query_attention",
    "kv_cache_bytes",
    "kv_memory_bytes",
    "merge_heads",
    "padding_mask",
    "paged_attention",
    "repeat_kv",
    "scaled_dot_product_attention",
    "sinusoidal_encoding",
    "sinusoidal_shift_matrix",
    "sliding_window_mask",
    "softmax",
    "split_heads",
]
