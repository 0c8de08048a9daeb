"""The models of attention_core.models.tiny_transformer and the loop of attention_core.models.training."""

import ast
from functools import partial
from pathlib import Path

import pytest
import torch
from torch.testing import assert_close

from attention_core import ATTENTION_FUNCTIONS, padding_mask, sliding_window_mask
from attention_core.models.tiny_transformer import POSITIONAL, TinyTransformer
from attention_core.models.toy_tasks import copy_back_batch, token_accuracy
from attention_core.models.training import train_model
from attention_core.nn.block import TransformerBlock
from attention_core.nn.multihead import MultiHeadAttention


def test_block_equals_a_hand_composed_pre_norm_block():
    """x + attn(LN1(x)), then + mlp(LN2(x)), written out with the block's own layers."""
    torch.manual_seed(0)
    block = TransformerBlock(16, 4, ff_dim=24).eval()
    for norm in (block.norm1, block.norm2):  # non-trivial affine parameters
        torch.nn.init.normal_(norm.weight)
        torch.nn.init.normal_(norm.bias)
    x = torch.randn(3, 7, 16)
    with torch.no_grad():
        out, weights = block(x)
        h = torch.nn.functional.layer_norm(x, (16,), block.norm1.weight, block.norm1.bias)
        attended, expected_weights = block.attn(h)
        x1 = x + attended
        h2 = torch.nn.functional.layer_norm(x1, (16,), block.norm2.weight, block.norm2.bias)
        up = h2 @ block.mlp[0].weight.T + block.mlp[0].bias  # (B, T, ff_dim)
        expected = x1 + torch.nn.functional.gelu(up) @ block.mlp[3].weight.T + block.mlp[3].bias
    assert out.shape == (3, 7, 16) and weights.shape == (3, 4, 7, 7)
    assert_close(out, expected)
    assert_close(weights, expected_weights)
    assert block.mlp[0].out_features == 24
    assert TinyTransformer(10, 8, embed_dim=16).blocks[0].mlp[0].out_features == 64  # 4D


def test_block_is_causal_takes_no_information_from_the_future():
    torch.manual_seed(1)
    block = TransformerBlock(16, 2, 64, num_kv_heads=1).eval()
    x = torch.randn(2, 9, 16)
    y = x.clone()
    y[:, 5:] = torch.randn(2, 4, 16)  # change tokens 5..8
    with torch.no_grad():
        out_x, w = block(x, is_causal=True)
        out_y, _ = block(y, is_causal=True)
        out_full, _ = block(y)
    assert_close(out_x[:, :5], out_y[:, :5], rtol=0, atol=0)
    assert not torch.allclose(out_x[:, 5:], out_y[:, 5:])
    assert (w.triu(1) == 0).all()
    assert not torch.allclose(out_full[:, :5], out_y[:, :5])  # without it, the past sees the change


def test_block_passes_attn_mask_to_attention():
    torch.manual_seed(2)
    block = TransformerBlock(8, 2, 32).eval()
    x = torch.randn(1, 5, 8)
    keep = torch.tensor([True, True, True, False, False])  # keys 3 and 4 are padding
    with torch.no_grad():
        _, w = block(x, attn_mask=keep)
    assert (w[..., 3:] == 0).all()


@pytest.mark.parametrize("positional", list(POSITIONAL))
@pytest.mark.parametrize("is_causal", [False, True])
def test_every_positional_scheme_builds_runs_and_trains(positional, is_causal):
    torch.manual_seed(0)
    model = TinyTransformer(10, max_len=8, embed_dim=16, num_heads=2, num_layers=2, num_outputs=1,
                            positional=positional, is_causal=is_causal)
    assert model.is_causal is is_causal and model.positional == positional
    x = torch.randint(1, 10, (3, 8))
    logits, weights = model(x)
    assert logits.shape == (3, 8, 1, 10) and len(weights) == 2
    assert all(w.shape == (3, 2, 8, 8) for w in weights)
    assert ((weights[0].triu(1) == 0).all()) == is_causal
    batch = lambda g: (x, x.unsqueeze(-1))  # copy each token
    _, losses = train_model(model, batch, steps=3, progress=False)
    assert len(losses) == 3 and all(torch.isfinite(torch.tensor(losses)))


def test_positional_schemes_put_order_in_where_they_say():
    """Only the input schemes have a position module, only RoPE rotates, only ALiBi biases."""
    for name in POSITIONAL:
        model = TinyTransformer(10, max_len=8, embed_dim=16, num_heads=2, positional=name)
        assert (model.position is not None) == (name in ("learned", "sinusoidal"))
        assert model.blocks[0].attn.rope == (name == "rope")
        assert (model.score_bias(8, torch.zeros(1)) is not None) == (name == "alibi")
    # without any position signal and without a mask, permuting the tokens permutes the outputs
    torch.manual_seed(3)
    model = TinyTransformer(10, max_len=8, embed_dim=16, num_heads=2, positional="none").eval()
    x = torch.randint(1, 10, (1, 8))
    perm = torch.randperm(8)
    with torch.no_grad():
        assert_close(model(x[:, perm])[0], model(x)[0][:, perm])


def test_unknown_positional_scheme_names_the_argument_and_the_choices():
    with pytest.raises(ValueError, match=r"positional must be one of \['learned', 'sinusoidal', 'rope', "
                                         r"'alibi', 'none'\], got 'relative'"):
        TinyTransformer(10, 8, positional="relative")


def test_maths_modules_import_no_models_training_or_tasks():
    """Models use attention, not the other way round (issue #21)."""
    maths = sorted((Path(__file__).resolve().parent.parent / "attention_core" / "nn").glob("*.py"))
    assert len(maths) > 10
    forbidden = {"models", "book", "training", "toy_tasks", "seq2seq", "tiny_transformer"}
    for path in maths:
        name = path.stem
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                module = (node.module or "").split(".")[-1]
                imported |= {module} | {alias.name for alias in node.names if not node.module}
            elif isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[-1] for alias in node.names}
        assert not imported & forbidden, f"{name}.py imports {sorted(imported & forbidden)}"


def test_block_parameters_are_those_of_its_parts():
    block = TransformerBlock(16, 4, 64, num_kv_heads=2)
    assert isinstance(block.attn, MultiHeadAttention) and block.attn.num_kv_heads == 2
    assert [n for n, _ in block.named_children()] == ["norm1", "attn", "norm2", "mlp", "dropout"]


def test_post_norm_tiny_transformer_is_a_stack_of_post_norm_blocks():
    torch.manual_seed(0)
    model = TinyTransformer(vocab_size=8, max_len=6, embed_dim=16, num_layers=2, norm_first=False).eval()
    assert all(not block.norm_first for block in model.blocks)
    assert isinstance(model.norm, torch.nn.Identity)  # its stream leaves each block normalised
    x = torch.randint(0, 8, (3, 6))
    h = model.embed(x)
    for block in model.blocks:
        h, _ = block(h)
    with torch.no_grad():
        torch.testing.assert_close(model(x)[0], model.head(h).view(3, 6, 2, 8))


# --- the attention kernel, by name -------------------------------------------------------


def twin_models(attention, **kwargs):
    """An eager TinyTransformer and one attending with ``attention``, with the same weights."""
    torch.manual_seed(0)
    config = {"embed_dim": 32, "num_heads": 4, "num_layers": 2, "num_kv_heads": 2, **kwargs}
    eager = TinyTransformer(12, 10, **config).eval()
    other = TinyTransformer(12, 10, **config, attention=attention).eval()
    other.load_state_dict(eager.state_dict())
    assert all(block.attn.attention is attention for block in other.blocks)
    return eager, other


def run_blocks(model, x, **kwargs):
    """``model(x)``'s logits, with ``kwargs`` (a mask) passed to every block."""
    h = model.embed(x)
    for block in model.blocks:
        h, _ = block(h, **kwargs)
    return model.head(model.norm(h)).view(*x.shape, model.num_outputs, model.vocab_size)


@pytest.mark.parametrize("positional", ["learned", "rope", "alibi"])
@pytest.mark.parametrize("norm_first", [True, False])
def test_a_flash_model_equals_the_eager_one(positional, norm_first):
    eager, flash = twin_models("flash", positional=positional, is_causal=True, norm_first=norm_first)
    x = torch.randint(0, 12, (3, 10))
    with torch.no_grad():
        logits, weights = flash(x)
        assert_close(logits, eager(x)[0], rtol=1e-5, atol=1e-5)
    assert weights == [None, None]  # the tiled kernel forms no weights


def test_a_flash_model_equals_the_eager_one_with_a_padding_mask():
    eager, flash = twin_models("flash")
    x = torch.randint(0, 12, (3, 10))
    keep = padding_mask([10, 6, 1], 10).unsqueeze(1)  # (B, 1, 1, S): padding keys hidden
    with torch.no_grad():
        assert_close(run_blocks(flash, x, attn_mask=keep), run_blocks(eager, x, attn_mask=keep),
                     rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("window", [1, 3])
def test_a_sliding_window_model_equals_eager_under_the_band(window):
    banded = partial(ATTENTION_FUNCTIONS["sliding_window"], window=window)
    eager, sliding = twin_models(banded, is_causal=True)
    x = torch.randint(0, 12, (3, 10))
    with torch.no_grad():
        expected = run_blocks(eager, x, attn_mask=sliding_window_mask(10, window, causal=True))
        assert_close(sliding(x)[0], expected, rtol=1e-5, atol=1e-5)


def test_attention_is_keyword_only_and_checked():
    with pytest.raises(ValueError, match="attention must be one of"):
        TinyTransformer(12, 10, attention="fastest")
    with pytest.raises(ValueError, match="attention must be one of"):
        TransformerBlock(16, 4, 32, attention="fastest")
    with pytest.raises(TypeError):
        TransformerBlock(16, 4, 32, 0.0, True, "gelu", None, "flash")


def test_token_accuracy_in_chunks_equals_one_pass():
    """token_accuracy feeds 100 sequences at a time; the fraction must be the one a single
    pass over the whole batch gives (250 sequences: two full chunks and a ragged one)."""
    torch.manual_seed(0)
    model = TinyTransformer(16, 24, embed_dim=32, num_heads=2, num_outputs=1, positional="rope",
                            is_causal=True).eval()
    x, y = copy_back_batch(250, 24, 16, 2, torch.Generator().manual_seed(1))
    with torch.no_grad():
        one_pass = (model(x)[0].argmax(-1) == y).float().mean().item()
    assert 0.0 < one_pass < 1.0  # an untrained model: some tokens right, some wrong
    assert token_accuracy(model, x, y) == pytest.approx(one_pass, abs=1e-12)


def test_token_accuracy_from_position_counts_only_later_positions():
    """from_position=2 scores positions 2 .. T-1 (chapter 10 skips copy-back's filler
    targets), while the model still reads the whole sequence."""
    torch.manual_seed(0)
    model = TinyTransformer(16, 24, embed_dim=32, num_heads=2, num_outputs=1, positional="rope",
                            is_causal=True).eval()
    x, y = copy_back_batch(250, 24, 16, 2, torch.Generator().manual_seed(1))
    with torch.no_grad():
        later = (model(x)[0].argmax(-1)[:, 2:] == y[:, 2:]).float().mean().item()
        hits = model(x)[0].argmax(-1) == y
    assert token_accuracy(model, x, y, from_position=2) == pytest.approx(later, abs=1e-12)
    # all positions = the two filler positions and the 22 later ones, weighted by count
    first = hits[:, :2].float().mean().item()
    assert token_accuracy(model, x, y) == pytest.approx((2 * first + 22 * later) / 24, abs=1e-6)
