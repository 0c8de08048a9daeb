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
  return (text) => {
    if (typeof text !== "string") throw new TypeError(`text must be a string, got ${typeof text}`);
    const { ids, tokens } = tokenizer.encode(text);
    return { ids: Array.from(ids, Number), tokens: Array.from(tokens) };
  };
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

// A note shown next to a result: which characters the vocabulary does not have.
export function unknownNote(encoded) {
  const unknown = encoded.tokens.filter((t) => t === "[UNK]").length;
  if (unknown === 0) return "";
  return `${unknown} token${unknown > 1 ? "s are" : " is"} [UNK]: the vocabulary has no piece ` +
    "for some character (emoji and rare symbols), so the model sees one unknown token for each " +
    "word that contains one, the letters around it included.";
}
