"""attention_core.models.circuits (chapter 15), against independent references: transformers'
LlamaForCausalLM on a tiny random config (its hidden states through its own norm and LM head
for the logit lens; a head's output computed by hand from its q/k/v projections, HF's RoPE and
torch's scaled_dot_product_attention for direct logit attribution; the D x D and vocab x vocab
matrices built explicitly from HF's weights for the composition and copying scores);
identities for patching (zero-patching an output is ablate_heads; patching in a run's own
activations changes nothing; a layer's keys reach no earlier layer); hand-worked matrices and
the closed form E[score^2] = 1/D for the composition scores. Then one sanity check on the real
SmolLM2: its top induction head writes the copied token's logit more than the median head."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from attention_core.book.explorers.chapters import lens_explorer
from attention_core.models import circuits as cc
from attention_core.models import llm_probes
from attention_core.models.measure import one_thread
from attention_core.models.smollm import SmolLM, ablate_heads

llama = pytest.importorskip("transformers.models.llama.modeling_llama", reason="transformers (a test-only "
                            "reference) is not installed")

V, T, L, H, HKV, E = 101, 11, 3, 6, 2, 8  # vocabulary, tokens, layers, heads, kv heads, head dim
G = H // HKV


@pytest.fixture(scope="module", autouse=True)
def steady_threads():
    with one_thread():
        yield


@pytest.fixture(scope="module")
def tiny():
    """A tiny random LlamaForCausalLM (tied embeddings, GQA 6/2, RoPE base 1e5), random norm gains
    (so that folding them in is tested), and its copy."""
    torch.manual_seed(0)
    config = llama.LlamaConfig(vocab_size=V, hidden_size=H * E, intermediate_size=72, num_hidden_layers=L,
                               num_attention_heads=H, num_key_value_heads=HKV, max_position_embeddings=64,
                               rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True,
                               attn_implementation="eager")
    theirs = llama.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in theirs.named_parameters():
            if "norm" in name:
                p.copy_(torch.rand_like(p) + 0.5)
    return theirs, SmolLM.from_llama(theirs).eval()


def ids(B=2, T=T, seed=1):
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


def final_stream(theirs, x):
    """HF's residual stream entering its final norm (its last hidden state is after the norm)."""
    seen = []
    handle = theirs.model.norm.register_forward_pre_hook(lambda module, args: seen.append(args[0]))
    try:
        with torch.no_grad():
            out = theirs(x, output_hidden_states=True)
    finally:
        handle.remove()
    return out, seen[0]


# --- logit lens and direct logit attribution ---------------------------------------------------

def test_logit_lens_equals_transformers_hidden_states_through_its_norm_and_head(tiny):
    theirs, ours = tiny
    x = ids()
    lens = cc.logit_lens(ours, x)
    out, final = final_stream(theirs, x)
    assert lens.shape == (L + 1, 2, T, V)
    with torch.no_grad():
        for i in range(L):  # hidden_states[i]: after the embedding (0) and after block i
            assert_close(lens[i], theirs.lm_head(theirs.model.norm(out.hidden_states[i])), atol=1e-5, rtol=0)
        assert_close(lens[L], theirs.lm_head(theirs.model.norm(final)), atol=1e-5, rtol=0)
    assert_close(lens[L], out.logits, atol=1e-5, rtol=0)
    assert_close(lens[L], ours(x)[0], atol=1e-5, rtol=0)



class _CharTokens:
    """A stand-in tokenizer: one token a character (ids below V)."""

    def encode(self, text):
        return type("Encoding", (), {"ids": [ord(ch) % V for ch in text]})()

    def decode(self, ids):
        return "".join(chr(97 + i % 26) for i in ids)


def test_lens_explorer_shows_transformers_lens_at_each_layer(tiny):
    theirs, ours = tiny
    prompt = "attention!"
    explorer = lens_explorer(ours, _CharTokens(), [prompt, "heads"])
    assert list(explorer.controls) == ["prompt", "layer"] and explorer.values["layer"] == L
    x = torch.tensor([[ord(ch) % V for ch in prompt]])
    out, _ = final_stream(theirs, x)
    with torch.no_grad():
        lens = [theirs.lm_head(theirs.model.norm(h)) for h in out.hidden_states[:L]] + [out.logits]
    probs = torch.stack(lens)[:, 0].softmax(-1)  # (L + 1, T, V)
    guess = out.logits[0].argmax(-1)  # (T,): the model's final guess
    for layer in range(L + 1):
        frame = explorer.compute(layer=layer, prompt=prompt)
        assert_close(frame["p_final"][:, layer], probs[layer, range(len(prompt)), guess], atol=1e-5, rtol=0)
        assert frame["hits"] == (probs[layer].argmax(-1) == guess).tolist()
        assert f"{sum(frame['hits'])} of {len(prompt)} positions" in frame["title"]
    assert all(explorer.compute(layer=L, prompt=prompt)["hits"])


def test_direct_logit_attribution_parts_sum_to_the_logit(tiny):
    theirs, ours = tiny
    x, target = ids(), ids(seed=7)
    parts = cc.direct_logit_attribution(ours, x, target)
    assert set(parts) == {"embed", "attn", "mlp"}
    assert parts["embed"].shape == (2, T) and parts["mlp"].shape == (L, 2, T)
    assert parts["attn"].shape == (L, H, 2, T)
    total = parts["embed"] + parts["attn"].sum((0, 1)) + parts["mlp"].sum(0)
    with torch.no_grad():
        logits = theirs(x).logits.gather(-1, target[..., None])[..., 0]  # (B, T)
    assert_close(total, logits, atol=1e-4, rtol=0)
    assert parts["attn"].abs().amax((2, 3)).min() > 1e-3  # every head has a part of its own


def test_a_heads_part_is_its_output_computed_by_hand(tiny):
    """Head 4 of layer 1 (key/value head 1) from HF's weights: its queries, keys and values from
    HF's projections and RoPE, attention by torch, its E columns of o_proj, then the target's row
    of the LM head through the final norm with 1/rms frozen. Its output equals head_activations'."""
    theirs, ours = tiny
    n, a, x, target = 1, 4, ids(), ids(seed=7)
    out, final = final_stream(theirs, x)
    layer = theirs.model.layers[n]
    with torch.no_grad():
        h = layer.input_layernorm(out.hidden_states[n])  # (B, T, D)
        q = layer.self_attn.q_proj(h).view(2, T, H, E).transpose(1, 2)  # (B, H, T, E)
        k = layer.self_attn.k_proj(h).view(2, T, HKV, E).transpose(1, 2)  # (B, Hkv, T, E)
        v = layer.self_attn.v_proj(h).view(2, T, HKV, E).transpose(1, 2)
        cos, sin = theirs.model.rotary_emb(h, torch.arange(T)[None])
        q, k = llama.apply_rotary_pos_emb(q, k, cos, sin)
        z = F.scaled_dot_product_attention(q[:, a], k[:, a // G], v[:, a // G], is_causal=True)  # (B, T, E)
        written = z @ layer.self_attn.o_proj.weight[:, a * E:(a + 1) * E].T  # (B, T, D)
        inverse_rms = torch.rsqrt(final.pow(2).mean(-1, keepdim=True) + 1e-5)
        u = theirs.lm_head.weight[target] * theirs.model.norm.weight * inverse_rms  # (B, T, D)
        embedded = theirs.model.embed_tokens(x)
    parts = cc.direct_logit_attribution(ours, x, target)
    assert_close(parts["attn"][n, a], (u * written).sum(-1), atol=1e-5, rtol=0)
    assert_close(parts["embed"], (u * embedded).sum(-1), atol=1e-5, rtol=0)
    assert_close(cc.head_activations(ours, x, "output")[n, :, a], z, atol=1e-5, rtol=0)


# --- patching ------------------------------------------------------------------------------------

def test_zero_patching_outputs_equals_ablate_heads(tiny):
    _, ours = tiny
    x, heads = ids(), [(1, 4), (2, 0), (2, 5)]
    mask = llm_probes.head_mask_without(heads, L, H)
    with torch.no_grad(), ablate_heads(ours, mask):
        ablated, _ = ours(x)
    patched = cc.patch_heads(ours, x, heads, "output", "zero")
    assert_close(patched, ablated, atol=1e-6, rtol=0)
    assert not torch.allclose(patched, ours(x)[0], atol=1e-3)
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in ours.modules())  # hooks removed


@pytest.mark.parametrize("site", cc.SITES)
def test_patching_in_a_runs_own_activations_changes_nothing(tiny, site):
    _, ours = tiny
    x = ids()
    own = cc.head_activations(ours, x, site)
    assert own.shape == (L, 2, HKV if site in ("key", "value") else H, T, E)
    every_head = [(n, a) for n in range(L) for a in range(H)]
    assert_close(cc.patch_heads(ours, x, every_head, site, own), ours(x)[0], atol=1e-6, rtol=0)
    corrupted = cc.head_activations(ours, ids(seed=2), site)
    assert not torch.allclose(cc.patch_heads(ours, x, [(1, 4)], site, corrupted), ours(x)[0], atol=1e-4)


def test_patching_keys_changes_only_the_layers_from_the_patched_one_on(tiny):
    """Keys of layer 1 from another text: the stream after the embedding and after block 0 is
    unchanged, after blocks 1 and 2 it changes. Query heads 0, 1, 2 share key head 0: patching the
    key of any of them is the same patch; head 3 reads key head 1, another patch."""
    _, ours = tiny
    x = ids()
    corrupted = cc.head_activations(ours, ids(seed=2), "key")
    clean = cc.logit_lens(ours, x)
    with cc.patching(ours, [(1, 0)], "key", corrupted):
        patched = cc.logit_lens(ours, x)
    assert torch.equal(patched[:2], clean[:2])
    assert (patched[2:] - clean[2:]).abs().amax((1, 2, 3)).min() > 1e-3
    group = [cc.patch_heads(ours, x, [(1, a)], "key", corrupted) for a in range(4)]
    assert torch.equal(group[0], group[1]) and torch.equal(group[0], group[2])
    assert_close(group[0], patched[-1], atol=1e-5, rtol=0)
    assert not torch.allclose(group[3], group[0], atol=1e-4)


def test_patching_a_layers_queries_keys_and_values_equals_patching_its_outputs(tiny):
    """A head's output is attention over its query, keys and values: take all three from another
    text, for every head of layer 1, and the layer's head outputs are the other text's."""
    _, ours = tiny
    x, other = ids(), ids(seed=3)
    layer = [(1, a) for a in range(H)]
    sources = {site: cc.head_activations(ours, other, site) for site in cc.SITES}
    query, key, value = (cc.patching(ours, layer, site, sources[site]) for site in ("query", "key", "value"))
    with query, key, value:
        three = ours(x)[0]
    assert_close(three, cc.patch_heads(ours, x, layer, "output", sources["output"]), atol=1e-5, rtol=0)


def test_mean_patching_uses_the_mean_over_batch_and_positions(tiny):
    _, ours = tiny
    x = ids(B=3)
    for site in ("output", "value"):
        mean = cc.head_activations(ours, x, site).mean((1, 3), keepdim=True)  # (num_layers, 1, heads, 1, E)
        assert_close(cc.patch_heads(ours, x, [(2, 3)], site, "mean"),
                     cc.patch_heads(ours, x, [(2, 3)], site, mean), atol=1e-6, rtol=0)
    assert not torch.allclose(cc.patch_heads(ours, x, [(2, 3)], "output", "mean"),
                              cc.patch_heads(ours, x, [(2, 3)], "output", "zero"), atol=1e-4)


# --- composition ---------------------------------------------------------------------------------

def test_last_position_patching_equals_one_patch_heads_call_a_head(tiny):
    """Each entry equals patch_heads with a source that is the clean run's own head outputs with
    the last position taken from the source run; the unpatched heads of a layer are untouched."""
    _, ours = tiny
    x, other = ids(B=2, seed=3), ids(B=2, seed=4)
    targets = torch.tensor([[5, 7, 9], [1, 2, 3]])
    got = cc.last_position_patching(ours, x, other, targets)  # (L, H, 2, 3)
    clean, source = cc.head_activations(ours, x), cc.head_activations(ours, other)  # (L, 2, H, T, E)
    mixed = clean.clone()
    mixed[..., -1:, :] = source[..., -1:, :]
    for n in range(L):
        for a in range(H):
            logits = cc.patch_heads(ours, x, [(n, a)], "output", mixed)[:, -1]  # (2, V)
            assert_close(got[n, a], logits.gather(1, targets), atol=1e-4, rtol=1e-4)
    with torch.no_grad():
        plain = ours(x, output_attentions=False)[0][:, -1].gather(1, targets)
    moved = (got - plain).abs().amax((2, 3))  # (L, H)
    assert moved.min() > 1e-4, "some head's patch changed nothing: the patch did not reach it"


def test_composition_score_of_hand_worked_matrices():
    first, last = torch.diag(torch.tensor([1.0, 1, 0, 0])), torch.diag(torch.tensor([0.0, 0, 1, 1]))
    assert cc.composition_score(first, last).item() == 0.0  # orthogonal subspaces: nothing read
    assert cc.composition_score(first, first).item() == pytest.approx(2 ** -0.5)  # |P|_F = sqrt(rank)
    assert cc.composition_score(torch.eye(9), torch.eye(9)).item() == pytest.approx(1 / 3)  # 1/sqrt(D)
    rank_one = torch.outer(torch.tensor([1.0, 2.0, 0.0]), torch.tensor([0.0, 3.0, 1.0]))
    assert cc.composition_score(rank_one, rank_one.T).item() == pytest.approx(1.0)  # aligned rank one
    assert cc.composition_score(torch.zeros(3, 3), torch.eye(3)).item() == 0.0
    batch = cc.composition_score(torch.stack([first, first]), torch.stack([last, first]))
    assert_close(batch, torch.tensor([0.0, 2 ** -0.5]))


def hf_heads(theirs, n):
    """Layer n's per-head matrices from HF's weights, float64: (W_Q, W_K, W_V) times the gain of
    the norm the layer reads through ((H, E, D), keys and values repeated over their group), W_O's
    columns (H, D, E)."""
    layer = theirs.model.layers[n]
    g = layer.input_layernorm.weight.double()
    attn = layer.self_attn
    q = (attn.q_proj.weight.double() * g).view(H, E, -1)
    k, v = ((w.double() * g).view(HKV, E, -1).repeat_interleave(G, 0) for w in (attn.k_proj.weight,
                                                                                 attn.v_proj.weight))
    o = attn.o_proj.weight.double().view(-1, H, E).permute(1, 0, 2)
    return q, k, v, o


@pytest.mark.parametrize("kind", cc.COMPOSITIONS)
def test_composition_scores_equal_the_explicit_matrices(tiny, kind):
    theirs, ours = tiny
    scores = cc.composition_scores(ours, kind)
    assert scores.shape == (L, H, L, H)
    expected = torch.zeros(L, H, L, H, dtype=torch.float64)
    matrices = [hf_heads(theirs, n) for n in range(L)]
    with torch.no_grad():
        for n in range(L):
            q, k, v, o = matrices[n]
            reader = {"q": k.transpose(1, 2) @ q, "k": q.transpose(1, 2) @ k, "v": o @ v}[kind]  # (H, D, D)
            for m in range(n):
                _, _, v_m, o_m = matrices[m]
                writer = o_m @ v_m  # (H, D, D): W_OV
                expected[n, :, m] = cc.composition_score(reader[:, None], writer[None])
    assert_close(scores.double(), expected, atol=1e-5, rtol=0)
    assert (scores[1:, :, 0] > 0).all() and (scores[0] == 0).all()


def test_random_composition_scores_follow_the_closed_form():
    """E[score^2] = 1/D exactly, whatever the head dim; the scores sit near 1/sqrt(D)."""
    for D, E_, n in ((576, 64, 64), (16, 2, 4000), (16, 16, 2000)):
        scores = cc.random_composition_scores(D, E_, n, torch.Generator().manual_seed(0))
        assert scores.shape == (n,) and ((scores > 0) & (scores < 1)).all()
        assert scores.pow(2).mean().item() == pytest.approx(1 / D, rel=0.05)
    assert scores.mean().item() == pytest.approx(D ** -0.5, rel=0.05)  # E = D: concentrated
    assert cc.random_composition_scores(576, 64, 64, torch.Generator().manual_seed(0)).mean().item() \
        == pytest.approx(576 ** -0.5, rel=0.03)


# --- copying ---------------------------------------------------------------------------------------

def test_copying_score_of_hand_worked_matrices():
    assert cc.copying_score(torch.eye(5)).item() == pytest.approx(1.0)  # every token raises its own logit
    assert cc.copying_score(-torch.eye(5)).item() == pytest.approx(-1.0)  # every token lowers its own
    rotation = torch.tensor([[0.0, -1.0], [1.0, 0.0]])  # eigenvalues +i and -i
    assert cc.copying_score(rotation).item() == pytest.approx(0.0, abs=1e-7)
    assert cc.copying_score(torch.diag(torch.tensor([1.0, -1.0, 2.0]))).item() == pytest.approx(0.5)
    assert cc.copying_score(torch.zeros(3, 3)).item() == 0.0


def test_ov_copying_scores_equal_the_explicit_vocab_circuit(tiny):
    """From HF's weights: (W_U - mean) diag(g_final) W_O W_V diag(g) N(W_E)^T, a vocab x vocab matrix
    (101 x 101), its eigenvalues by torch; whole vocabulary and a subset."""
    theirs, ours = tiny
    subset = torch.arange(0, V, 3)
    with torch.no_grad():
        embed = theirs.model.embed_tokens.weight.double()
        normed = embed * torch.rsqrt(embed.pow(2).mean(-1, keepdim=True) + 1e-5)
        rows = theirs.lm_head.weight.double()
        unembed = (rows - rows.mean(0)) * theirs.model.norm.weight.double()  # centred: no prediction changes
        expected, restricted = torch.zeros(L, H, dtype=torch.float64), torch.zeros(L, H, dtype=torch.float64)
        for n in range(L):
            _, _, v, o = hf_heads(theirs, n)
            circuit = unembed @ o @ v @ normed.T  # (H, V, V)
            expected[n] = cc.copying_score(circuit)
            restricted[n] = cc.copying_score(circuit[:, subset][:, :, subset])
    assert_close(cc.ov_copying_scores(ours).double(), expected, atol=1e-5, rtol=0)
    assert_close(cc.ov_copying_scores(ours, subset).double(), restricted, atol=1e-5, rtol=0)



def test_random_ov_copying_scores_are_random_heads_explicit_vocab_circuits(tiny):
    """The same draws as explicit vocab x vocab circuits through HF's embedding and head."""
    theirs, ours = tiny
    scores = cc.random_ov_copying_scores(ours, 4, torch.Generator().manual_seed(3))
    value, output = torch.randn((2, 4, H * E, E), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        embed = theirs.model.embed_tokens.weight.double()
        normed = embed * torch.rsqrt(embed.pow(2).mean(-1, keepdim=True) + 1e-5)
        rows = theirs.lm_head.weight.double()
        unembed = (rows - rows.mean(0)) * theirs.model.norm.weight.double()  # centred: no prediction changes
        circuit = unembed @ output.double() @ value.double().transpose(1, 2) @ normed.T  # (4, V, V)
    assert scores.shape == (4,)
    assert_close(scores.double(), cc.copying_score(circuit), atol=1e-5, rtol=0)

# --- bad inputs ----------------------------------------------------------------------------------

def test_bad_inputs_name_the_argument(tiny):
    _, ours = tiny
    x = ids()
    calls = [
        (lambda: cc.logit_lens("model", x), TypeError, "model"),
        (lambda: cc.logit_lens(ours, torch.tensor([[1, V]])), ValueError, "input_ids"),
        (lambda: cc.logit_lens(ours, x.float()), TypeError, "input_ids"),
        (lambda: cc.direct_logit_attribution(ours, x, x[:, :3]), ValueError, "target_ids"),
        (lambda: cc.direct_logit_attribution(ours, x, x + V), ValueError, "target_ids"),
        (lambda: cc.head_activations(ours, x, "keys"), ValueError, "site"),
        (lambda: cc.patch_heads(ours, x, [(3, 0)], "output"), ValueError, "heads"),
        (lambda: cc.patch_heads(ours, x, [(0, H)], "output"), ValueError, "heads"),
        (lambda: cc.patch_heads(ours, x, [], "output"), ValueError, "heads"),
        (lambda: cc.patch_heads(ours, x, [1, 2], "output"), TypeError, "heads"),
        (lambda: cc.patch_heads(ours, x, [(0, True)], "output"), TypeError, "heads"),
        (lambda: cc.patch_heads(ours, x, [(0, 1)], "attention"), ValueError, "site"),
        (lambda: cc.patch_heads(ours, x, [(0, 1)], "output", "noise"), ValueError, "source"),
        (lambda: cc.patch_heads(ours, x, [(0, 1)], "key", torch.zeros(L, 2, H, T, E)), ValueError, "source"),
        (lambda: cc.patch_heads(ours, x, [(0, 1)], "output", torch.zeros(L, 2, H, T + 1, E)), ValueError,
         "source"),
        (lambda: cc.patch_heads(ours, x, [(0, 1)], "output", torch.zeros(L, 2, H, T, E, dtype=torch.long)),
         TypeError, "source"),
        (lambda: cc.composition_scores(ours, "qk"), ValueError, "kind"),
        (lambda: cc.last_position_patching(ours, x, x[:, :3], x[:, :1]), ValueError, "source_ids"),
        (lambda: cc.last_position_patching(ours, x, x, x[:1, :1]), ValueError, "target_ids"),
        (lambda: cc.last_position_patching(ours, x, x, x[:, :1] + V), ValueError, "target_ids"),
        (lambda: cc.last_position_patching(ours, x[:, :1], x[:, :1], x[:, :1]), ValueError, "input_ids"),
        (lambda: cc.composition_scores(None, "q"), TypeError, "model"),
        (lambda: cc.composition_score(torch.eye(3), torch.eye(4)), ValueError, "writer"),
        (lambda: cc.composition_score(torch.ones(3), torch.eye(3)), ValueError, "reader"),
        (lambda: cc.composition_score(torch.eye(3).double(), torch.eye(3)), TypeError, "reader"),
        (lambda: cc.random_composition_scores(4, 8, 10, torch.Generator()), ValueError, "head_dim"),
        (lambda: cc.random_composition_scores(8, 4, 0, torch.Generator()), ValueError, "num_samples"),
        (lambda: cc.random_composition_scores(8, 4, 10, 0), TypeError, "generator"),
        (lambda: cc.copying_score(torch.ones(2, 3)), ValueError, "circuit"),
        (lambda: cc.ov_copying_scores(ours, torch.tensor([1, 1])), ValueError, "token_ids"),
        (lambda: cc.ov_copying_scores(ours, torch.tensor([[1, 2]])), TypeError, "token_ids"),
        (lambda: cc.ov_copying_scores(ours, torch.tensor([V])), ValueError, "token_ids"),
        (lambda: cc.random_ov_copying_scores(ours, 0, torch.Generator()), ValueError, "num_samples"),
        (lambda: cc.random_ov_copying_scores(ours, 3, 0), TypeError, "generator"),
        (lambda: cc.random_ov_copying_scores(None, 3, torch.Generator()), TypeError, "model"),
    ]
    for call, error, name in calls:
        with pytest.raises(error, match=name):
            call()
    two = torch.zeros(L, 2, H, T, E)
    with pytest.raises(ValueError, match="source"), cc.patching(ours, [(0, 1)], "output", two):
        ours(ids(B=3))  # a source of another batch size, found when the hook runs
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in ours.modules())


# --- the real SmolLM2 ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def smol(smollm2):
    return smollm2


def test_smollm2_induction_heads_direct_and_total_effects(smol):
    """On repeated random tokens (chance induction score about 0.03): the parts sum to the real
    model's logit of the next token; the heads' summed direct part on that token grows in the
    repeat, where it can be copied; some induction head (score > 0.3) writes it directly, well
    above the median head ((23, 2) here). The top induction head, (18, 6) (layer 19, head 7
    counted from 1), does not: its direct part is below zero, yet resample-ablating it (its output
    on other random tokens) lowers the copied token's logit by about 1: its effect runs through
    later layers."""
    model, _ = smol
    period, generator = 20, torch.Generator().manual_seed(0)
    x = llm_probes.repeated_random_tokens(1, period, model.config.vocab_size, generator, low=1000)
    other = llm_probes.repeated_random_tokens(1, period, model.config.vocab_size, generator, low=1000)
    target = torch.roll(x, -1, dims=1)  # position i scores token i + 1: in the repeat, a copy
    with torch.no_grad():
        logits, attentions = model(x)
    scores = llm_probes.induction_scores(attentions, period)
    parts = cc.direct_logit_attribution(model, x, target)
    logit = logits.gather(-1, target[..., None])[..., 0]  # (B, T)
    total = parts["embed"] + parts["attn"].sum((0, 1)) + parts["mlp"].sum(0)
    assert_close(total, logit, atol=1e-3, rtol=0)
    first = parts["attn"][..., 1:period - 1].mean((-1, -2))  # (num_layers, H): unpredictable tokens
    repeat = parts["attn"][..., period:-1].mean((-1, -2))  # (num_layers, H): copies
    assert repeat.sum() > first.sum() + 0.5
    assert repeat[scores > 0.3].max() > repeat.median() + 0.5
    top = llm_probes.top_heads(scores, 1)[0]
    resampled = cc.head_activations(model, other, "output")  # the head's output on other tokens
    patched = cc.patch_heads(model, x, [top], "output", resampled).gather(-1, target[..., None])[..., 0]
    drop = (logit - patched)[:, period:-1].mean()
    assert top == (18, 6) and drop > 0.5 and repeat[top] < 0
