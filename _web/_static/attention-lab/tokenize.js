// Chapter 13 (website): the model's WordPiece tokenizer in the browser.
// @huggingface/tokenizers reads the same tokenizer.json as Python's `tokenizers`;
// tests/test_web_model_browser.py checks that both give the same ids. The library is
// imported when the reader asks for the model, not with the page.

export const MAX_TOKENS = 128;   // the model's position table
export const MAX_WORDS = 64;

// tokenizer.json (parsed) -> (a promise of) encode(text) -> {ids, tokens}: [CLS] ... [SEP],
// never padded nor truncated (the page says when a sentence is too long instead of cutting it).
export async function makeTokenizer(tokenizerJson) {
  const { Tokenizer } = await import("../tokenizers/tokenizers.min.js");
  const spec = { ...tokenizerJson, padding: null, truncation: null };
  const tokenizer = new Tokenizer(spec, {});
  const encode = (text) => {
    if (typeof text !== "string") throw new TypeError(`text must be a string, got ${typeof text}`);
    const { ids, tokens } = tokenizer.encode(text);
    return { ids: Array.from(ids, Number), tokens: Array.from(tokens) };
  };
  // WordPiece gives a word longer than this one [UNK] without looking at its letters.
  encode.maxWordChars = (tokenizerJson.model && tokenizerJson.model.max_input_chars_per_word) || 100;
  return encode;
}

const SPECIAL = new Set(["[CLS]", "[SEP]", "[PAD]", "[MASK]"]);
const WORD_PIECE = /[\p{L}\p{N}]/u;

// What the page says about a sentence before running the model, or null when it can run.
// `encoded`: {ids, tokens} of makeTokenizer; returns {kind, text} or null.
export function problemWith(text, encoded) {
  const words = text.trim().split(/\s+/u).filter(Boolean);
  if (words.length === 0) return { kind: "empty", text: "Type a sentence first (or pick one of the book's)." };
  if (words.length > MAX_WORDS) {
    return { kind: "too-long", text: `That is ${words.length} words; the explorer takes up to ${MAX_WORDS}.` };
  }
  if (encoded.tokens.length > MAX_TOKENS) {
    return { kind: "too-long", text: `That makes ${encoded.tokens.length} tokens; the model reads at most ` +
      `${MAX_TOKENS} ([CLS] and [SEP] included). Shorten the sentence.` };
  }
  const content = encoded.tokens.filter((t) => !SPECIAL.has(t));
  if (content.length > 0 && content.every((t) => t !== "[UNK]" && !WORD_PIECE.test(t))) {
    return { kind: "punctuation", text: "Only punctuation: give the model at least one word." };
  }
  return null;
}

// The words WordPiece sees, as BERT's normalizer and pre-tokenizer make them: lower case,
// accents stripped, split at white space, every punctuation mark and CJK ideograph a word.
const PUNCTUATION = /[\p{P}!-/:-@[-`{-~]/u;
const CJK = /[\u{4E00}-\u{9FFF}\u{3400}-\u{4DBF}\u{20000}-\u{2A6DF}\u{2A700}-\u{2CEAF}\u{F900}-\u{FAFF}\u{2F800}-\u{2FA1F}]/u;
export function bertWords(text) {
  const normal = text.normalize("NFD").replace(/\p{Mn}/gu, "").toLowerCase();
  const words = [];
  for (const chunk of normal.split(/\s+/u)) {
    let word = "";
    for (const ch of chunk) {
      if (PUNCTUATION.test(ch) || CJK.test(ch)) {
        if (word) words.push(word);
        words.push(ch);
        word = "";
      } else word += ch;
    }
    if (word) words.push(word);
  }
  return words;
}

// A note shown next to a result: why some tokens are [UNK], from their real causes. A word
// longer than the tokenizer's limit (encode.maxWordChars, 100 characters for this model)
// becomes one [UNK] whatever its letters; in a shorter word, a character the vocabulary has
// no piece for (an emoji, a rare symbol) makes the whole word one [UNK].
export function unknownNote(encoded, text = "", encode = null) {
  const unknown = encoded.tokens.filter((t) => t === "[UNK]").length;
  if (unknown === 0) return "";
  const limit = (encode && encode.maxWordChars) || 100;
  const words = bertWords(text);
  const long = words.filter((w) => [...w].length > limit);
  const missing = new Set();
  if (encode) {
    for (const word of words) {
      if ([...word].length > limit || !encode(word).tokens.includes("[UNK]")) continue;
      for (const ch of word) if (encode(ch).tokens.includes("[UNK]")) missing.add(ch);
    }
  }
  const why = [];
  if (long.length > 0) {
    const lengths = long.map((w) => [...w].length.toLocaleString("en")).join(", ");
    why.push(`${long.length === 1 ? "one word is" : `${long.length} words are`} longer than ${limit} ` +
      `characters (${lengths}), the tokenizer's limit for a word: it does not cut such a word into ` +
      "pieces but gives the model a single [UNK] for it");
  }
  if (missing.size > 0) {
    const shown = [...missing].slice(0, 6).map((ch) => `“${ch}”`).join(", ") + (missing.size > 6 ? "…" : "");
    why.push(`the vocabulary has no piece for ${shown}, so each word that contains ` +
      `${missing.size === 1 ? "it" : "one of them"} becomes one [UNK], the letters around it included`);
  }
  if (why.length === 0) {
    why.push("the vocabulary has no piece for a character in them, so each such word becomes one [UNK]");
  }
  return `${unknown} token${unknown > 1 ? "s are" : " is"} [UNK]: ${why.join("; ")}.`;
}
