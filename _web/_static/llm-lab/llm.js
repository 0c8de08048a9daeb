// Chapter 14 (website): the chapter's SmolLM2-135M-Instruct, exported from attention_core
// (attention_core/book/web_llm.py) with its KV cache, generating in the reader's browser
// with onnxruntime-web (single-threaded WebAssembly), offline.
//
// Nothing heavy loads with the page: this module builds a button that states the download
// and asks the server for the files' sizes (HEAD requests). The click loads the runtime,
// the tokenizer and the model from the site itself. window.llmLab holds the state the page
// shows (tests and benchmarks/bench_web_llm.py read it). Reader text only ever reaches the
// page as textContent.
//
// The logit lens: each step's graph also returns the residual stream of its new positions
// after the embedding and after each block (31 vectors of 576 a token, kept here). Clicking a
// token runs the second, small graph (lens.onnx: the final norm and the tied embedding, the
// model's own head) on that token's 31 vectors: each block's top guesses for the next token.
import { headRow, sinkScores, inductionScores, repeatedRandom, argmax } from "./analysis.js";
import { decodeWeights } from "./blocks.js";

const STATIC = new URL("../", import.meta.url);  // the site's _static/
const FILES = {
  runtime: "onnxruntime-web/ort.wasm.bundle.min.js",
  wasm: "onnxruntime-web/ort-wasm-simd-threaded.wasm",
  model: "smollm2/model.onnx",
  lens: "smollm2/lens.onnx",
  blocks: "smollm2/blocks-q4_1.bin",
  embedding: "smollm2/embedding-q8_0.bin",
  tokenizer: "smollm2/tokenizer.json",
  meta: "smollm2/meta.json",
};
const url = (name) => new URL(FILES[name], STATIC).href;
const MAX_PROMPT_TOKENS = 256;  // the prompt with its chat template
const MAX_NEW_TOKENS = 200;
const FIRST_PROMPT = "What is attention in a transformer?";

const state = {
  status: "idle", message: "", meta: null, numLayers: 30, numHeads: 9,
  ids: [], tokens: [], promptLength: 0, rows: [], streams: [], generated: [], selected: -1, layer: 0,
  head: 0, downloadBytes: 0, weightBytes: 0, lens: null, lensBytes: 0,
  timings: { clickToReady: null, clickToFirstToken: null, firstToken: null, tokensPerSecond: null,
    modelShare: null, phases: {}, lensMs: [] },
  runs: 0, stopRequested: false,
};
window.llmLab = state;

// ------------------------------------------------------------------ DOM helpers
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "text") node.textContent = value;
    else if (key in node && typeof value !== "string") node[key] = value;
    else node.setAttribute(key, value);
  }
  node.append(...children);
  return node;
}
// The page's state, also on the root element (data-state) for tests to wait on.
function setStatus(status) {
  state.status = status;
  const root = document.getElementById("llm-lab");
  if (root) root.dataset.state = status;
}
const mb = (bytes) => `${(bytes / 1e6).toFixed(0)} MB`;

function say(ui, text, kind = "info") {
  state.message = text;
  ui.message.textContent = text;
  ui.message.dataset.kind = kind;
  ui.message.hidden = !text;
}

const CSS = `
#llm-lab { --llm-accent: var(--pst-color-primary, #1f6fb2); margin: 1em 0 1.5em; }
#llm-lab button { font: inherit; padding: 0.4em 0.85em; border-radius: 0.3em; cursor: pointer;
  border: 1px solid var(--llm-accent); background: var(--llm-accent); color: #fff; }
#llm-lab button.llm-secondary { background: transparent; color: var(--pst-color-text-base, inherit); }
#llm-lab button:disabled { opacity: 0.55; cursor: not-allowed; }
#llm-lab button:focus-visible, #llm-lab textarea:focus-visible, #llm-lab select:focus-visible,
#llm-lab .llm-token:focus-visible { outline: 3px solid var(--pst-color-accent, #d97706); outline-offset: 2px; }
#llm-lab .llm-message[data-kind="warning"] { border-left: 4px solid var(--pst-color-warning, #b45309);
  padding: 0.3em 0.7em; background: var(--pst-color-surface, #f3f4f6); }
#llm-lab textarea { width: 100%; box-sizing: border-box; font: inherit; padding: 0.4em;
  color: var(--pst-color-text-base, inherit); background: var(--pst-color-background, #fff);
  border: 1px solid var(--pst-color-border, #aaa); border-radius: 0.3em; }
#llm-lab label { font-weight: 600; }
#llm-lab .llm-row { display: flex; flex-wrap: wrap; gap: 0.5em; align-items: center; margin: 0.4em 0; }
#llm-lab select { font: inherit; color: var(--pst-color-text-base, inherit);
  background: var(--pst-color-background, #fff); border: 1px solid var(--pst-color-border, #aaa); }
#llm-lab .llm-text { line-height: 2; border: 1px solid var(--pst-color-border, #ccc); border-radius: 0.3em;
  padding: 0.4em; max-height: 22em; overflow-y: auto; word-break: break-word; }
#llm-lab .llm-token { white-space: pre-wrap; cursor: pointer; border-radius: 2px; padding: 0 1px;
  background: rgba(31, 111, 178, var(--w, 0)); }
#llm-lab .llm-token.llm-prompt { opacity: 0.8; }
#llm-lab .llm-token.llm-new { font-weight: 600; }
#llm-lab .llm-token[aria-pressed="true"] { outline: 2px solid var(--pst-color-accent, #d97706); }
html[data-theme="dark"] #llm-lab .llm-token { background: rgba(253, 231, 37, calc(var(--w, 0) * 0.8)); }
#llm-lab .llm-grids { display: flex; flex-wrap: wrap; gap: 1.5em; }
#llm-lab figure { margin: 0; max-width: 100%; overflow-x: auto; }
#llm-lab figcaption { font-size: 0.85em; max-width: 34em; }
#llm-lab canvas { display: block; cursor: pointer; }
#llm-lab .llm-help { font-size: 0.85em; opacity: 0.9; margin: 0.2em 0; }
#llm-lab .llm-lens { margin: 0.6em 0 1em; }
#llm-lab .llm-lens-box { max-height: 27em; overflow: auto; border: 1px solid var(--pst-color-border, #ccc);
  border-radius: 0.3em; }
#llm-lab .llm-lens table { border-collapse: collapse; width: 100%; font-size: 0.85em; margin: 0; }
#llm-lab .llm-lens th, #llm-lab .llm-lens td { padding: 0.1em 0.45em; text-align: left; vertical-align: top;
  border-bottom: 1px solid var(--pst-color-border, #e5e7eb); }
#llm-lab .llm-lens thead th { position: sticky; top: 0; z-index: 1; background: var(--pst-color-background, #fff); }
#llm-lab .llm-lens th[scope="row"] { font-weight: 400; white-space: nowrap; }
#llm-lab .llm-lens .llm-lens-token { font-family: var(--pst-font-family-monospace, monospace);
  white-space: pre-wrap; word-break: break-all; }
#llm-lab .llm-lens .llm-lens-p { white-space: nowrap; text-align: right; font-variant-numeric: tabular-nums;
  background: linear-gradient(to right, rgba(31, 111, 178, 0.3) var(--p, 0%), transparent 0); }
#llm-lab .llm-lens .llm-lens-rest { color: var(--pst-color-text-muted, #555); }
#llm-lab .llm-lens tr.llm-lens-final .llm-lens-top { font-weight: 700; background: rgba(217, 119, 6, 0.2); }
`;

// viridis, 0..1 -> css
const VIRIDIS = [[68, 1, 84], [72, 40, 120], [62, 74, 137], [49, 104, 142], [38, 130, 142],
  [31, 158, 137], [53, 183, 121], [109, 205, 89], [180, 222, 44], [253, 231, 37]];
function viridis(x) {
  const t = Math.max(0, Math.min(1, x)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(t)), f = t - i;
  const c = VIRIDIS[i].map((v, k) => Math.round(v + f * (VIRIDIS[i + 1][k] - v)));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

// ------------------------------------------------------------------ the page's parts
function buildUi(root) {
  const ui = { root };
  ui.message = root.querySelector(".llm-message") || el("p", { class: "llm-message" });
  ui.message.setAttribute("role", "status");
  ui.message.setAttribute("aria-live", "polite");
  ui.start = el("button", { type: "button", class: "llm-start", text: "Download SmolLM2 and run it in your browser" });
  ui.cost = el("p", { class: "llm-help llm-cost", text: "Nothing is downloaded until you click." });
  ui.prompt = el("textarea", { id: "llm-prompt", rows: 2, maxlength: 5000, spellcheck: "false" });
  ui.prompt.value = FIRST_PROMPT;
  ui.maxNew = el("select", { id: "llm-max-new" });
  for (const n of [20, 48, 100, MAX_NEW_TOKENS]) ui.maxNew.append(el("option", { value: String(n), text: String(n) }));
  ui.maxNew.value = "20";
  ui.generate = el("button", { type: "submit", class: "llm-generate", text: "Generate" });
  ui.stop = el("button", { type: "button", class: "llm-stop llm-secondary", text: "Stop", disabled: true });
  ui.random = el("button", { type: "button", class: "llm-random llm-secondary",
    text: "Repeated random tokens (induction heads)" });
  ui.form = el("form", { class: "llm-form" },
    el("label", { for: "llm-prompt", text: "Your prompt (the chat template is added, as chat_prompt does)" }),
    ui.prompt,
    el("div", { class: "llm-row" }, ui.generate, ui.stop,
      el("label", { for: "llm-max-new", text: "New tokens at most" }), ui.maxNew, ui.random));
  ui.layer = el("select", { id: "llm-layer" });
  ui.head = el("select", { id: "llm-head" });
  ui.controls = el("div", { class: "llm-row" },
    el("label", { for: "llm-layer", text: "Layer" }), ui.layer,
    el("label", { for: "llm-head", text: "Head" }), ui.head);
  ui.text = el("div", { class: "llm-text", role: "group", "aria-label": "The context, token by token" });
  ui.focus = el("p", { class: "llm-help llm-focus" });
  ui.lensNote = el("figcaption", { class: "llm-help" });
  ui.lensTable = el("table", {});
  ui.lens = el("figure", { class: "llm-lens", hidden: true }, ui.lensNote,
    el("div", { class: "llm-lens-box", tabindex: "0", role: "region", "aria-label": "Logit lens" }, ui.lensTable));
  ui.sinks = el("canvas", { class: "llm-sinks", role: "img" });
  ui.induction = el("canvas", { class: "llm-induction", role: "img" });
  ui.inductionNote = el("figcaption", {});
  ui.grids = el("div", { class: "llm-grids" },
    el("figure", {}, ui.sinks, el("figcaption", { text: "Each head's weight on the first token (the " +
      "attention sink), for the chosen token; columns: layers 1 to 30, rows: heads 1 to 9; " +
      "dark 0, yellow 1. Click a cell to choose that head." })),
    el("figure", {}, ui.induction, ui.inductionNote));
  ui.result = el("div", { class: "llm-result", hidden: true },
    el("p", { class: "llm-help", text: "Click any token (or use the arrow keys on it: left and right move " +
      "along the text, up and down change the head, Page Up and Page Down the layer) to colour the " +
      "context by where it attended, and to see the logit lens of that token below the text." }),
    ui.controls, ui.text, ui.focus, ui.lens, ui.grids);
  ui.precision = el("p", { class: "llm-help llm-precision" });
  ui.body = el("div", { class: "llm-body", hidden: true }, ui.precision, ui.form, ui.result);
  root.append(ui.start, ui.cost, ui.body);
  return ui;
}

function fillHeadControls(ui) {
  ui.layer.replaceChildren();
  ui.head.replaceChildren();
  for (let i = 0; i < state.numLayers; i++) ui.layer.append(el("option", { value: String(i), text: String(i + 1) }));
  for (let i = 0; i < state.numHeads; i++) ui.head.append(el("option", { value: String(i), text: String(i + 1) }));
}

async function sizes() {
  const names = ["model", "lens", "blocks", "embedding", "tokenizer", "runtime", "wasm"];  // what the click loads
  const found = await Promise.all(names.map(async (name) => {
    try {
      const response = await fetch(url(name), { method: "HEAD" });
      const n = Number(response.headers.get("content-length"));
      return response.ok && n > 0 ? n : null;
    } catch { return null; }
  }));
  return found.every((n) => n !== null) ? found.reduce((a, b) => a + b, 0) : null;
}

// ------------------------------------------------------------------ loading
async function fetchBytes(address, onProgress) {
  const response = await fetch(address);
  if (!response.ok) throw new Error(`${address} answered HTTP ${response.status}`);
  const total = Number(response.headers.get("content-length")) || 0;
  if (!response.body || !total) return new Uint8Array(await response.arrayBuffer());
  const bytes = new Uint8Array(total);
  const reader = response.body.getReader();
  let at = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    bytes.set(value, at);
    at += value.length;
    onProgress(at);
  }
  return at === total ? bytes : bytes.subarray(0, at);
}

async function fetchJson(name) {
  const response = await fetch(url(name));
  if (!response.ok) throw new Error(`${url(name)} answered HTTP ${response.status}`);
  return response.json();
}

async function load(ui) {
  const phases = state.timings.phases;
  let t = performance.now();
  const [ort, tokenizerJson, meta, lib] = await Promise.all([import(url("runtime")), fetchJson("tokenizer"),
    fetchJson("meta"), import("../tokenizers/tokenizers.min.js")]);
  phases.runtimeTokenizerMeta = performance.now() - t;
  ort.env.wasm.numThreads = 1;  // no SharedArrayBuffer, so no cross-origin-isolation headers
  ort.env.wasm.proxy = false;
  ort.env.wasm.wasmPaths = { wasm: url("wasm") };
  ort.env.logLevel = "error";
  t = performance.now();
  const names = ["model", "lens", "blocks", "embedding"], parts = names.map(() => 0);
  const download = names.reduce((n, name) => n + meta.bytes[FILES[name].split("/").pop()], 0);
  const progress = () => say(ui, `Downloading the model: ${mb(parts.reduce((a, b) => a + b, 0))} of ${mb(download)}…`);
  const [model, lensGraph, blocks, embedding] = await Promise.all(names.map((name, i) =>
    fetchBytes(url(name), (n) => { parts[i] = n; progress(); })));
  phases.modelDownload = performance.now() - t;
  say(ui, `Decoding the weights to float32 (${mb(meta.weights.bytes)})…`);
  await new Promise((resolve) => setTimeout(resolve, 0));  // let the message paint
  t = performance.now();
  // The file keeps the GGUF's 4- and 8-bit blocks (the download); decoded here once, they
  // are the float32 external data of model.onnx, so every step runs plain float32 MatMuls.
  // (Decoding them in the graph at every step, as the first version did, ran about seven times
  // slower: benchmarks/bench_web_llm.py, both versions one after the other on the same machine.)
  let weights = decodeWeights(meta.weights, { [FILES.blocks.split("/").pop()]: blocks,
    [FILES.embedding.split("/").pop()]: embedding });
  phases.decode = performance.now() - t;
  say(ui, "Starting the runtime…");
  t = performance.now();
  // No prepacking: ONNX Runtime would keep a second, packed copy of every matrix (measured in
  // headless Chromium: 0.2 GB more memory while generating, a slower start, no faster steps;
  // only the prompt reads faster with it). benchmarks/bench_web_llm.py measures this page.
  const session = await ort.InferenceSession.create(model, { executionProviders: ["wasm"],
    graphOptimizationLevel: "all", extra: { session: { disable_prepacking: "1" } },
    externalData: [{ path: meta.weights.file, data: weights }] });
  phases.session = performance.now() - t;
  t = performance.now();
  // The logit lens' graph reads the embedding from the same bytes (meta.json's "lens" says
  // where); ONNX Runtime copies those 113 MB into its memory, the price of the lens.
  const lens = await ort.InferenceSession.create(lensGraph, { executionProviders: ["wasm"],
    graphOptimizationLevel: "all", extra: { session: { disable_prepacking: "1" } },
    externalData: [{ path: meta.lens.file, data: weights }] });
  weights = null;  // the runtime holds its own copies
  phases.lensSession = performance.now() - t;
  const tokenizer = new lib.Tokenizer({ ...tokenizerJson, padding: null, truncation: null }, {});
  state.meta = meta;
  state.numLayers = meta.num_layers;
  state.numHeads = meta.num_heads;
  return { ort, session, lens, tokenizer };
}

// ------------------------------------------------------------------ the model
function chatText(prompt, meta) {
  return `<|im_start|>system\n${meta.system_prompt}<|im_end|>\n<|im_start|>user\n${prompt}<|im_end|>\n` +
    "<|im_start|>assistant\n";
}

function encode(lab, text) {
  const { ids } = lab.tokenizer.encode(text);
  return Array.from(ids, Number);
}

function tokenText(lab, id) {
  return lab.tokenizer.decode([id], { skip_special_tokens: false });
}

// Feed `ids` after the cache; returns the last position's logits and each new token's row.
async function step(lab, ids) {
  const { ort } = lab;
  const layers = state.numLayers, H = state.numHeads, T = ids.length;
  const feeds = {
    input_ids: new ort.Tensor("int64", BigInt64Array.from(ids, (i) => BigInt(i)), [1, T]),
    past_keys: lab.keys, past_values: lab.values,
  };
  const out = await lab.session.run(feeds);
  if (lab.keys.dispose && lab.keys.dims[3] > 0) { lab.keys.dispose(); lab.values.dispose(); }
  lab.keys = out.present_keys;
  lab.values = out.present_values;
  const S = out.attentions.dims[3], att = out.attentions.data;  // (layers, H, T, S)
  const rows = [];
  for (let t = 0; t < T; t++) {
    const keys = S - T + t + 1;  // token t saw keys 0..S-T+t
    const row = new Float32Array(layers * H * keys);
    for (let h = 0; h < layers * H; h++) row.set(att.subarray((h * T + t) * S, (h * T + t) * S + keys), h * keys);
    rows.push(row);
  }
  // each new token's residual streams, (layers + 1) * D: after the embedding, after each block
  const D = out.streams.dims[2], L1 = out.streams.dims[0], flat = out.streams.data;  // (layers + 1, T, D)
  const streams = [];
  for (let t = 0; t < T; t++) {
    const mine = new Float32Array(L1 * D);
    for (let l = 0; l < L1; l++) mine.set(flat.subarray((l * T + t) * D, (l * T + t + 1) * D), l * D);
    streams.push(mine);
  }
  const logits = out.logits.data;
  out.attentions.dispose?.();
  out.streams.dispose?.();
  return { logits, rows, streams };
}

function resetCache(lab) {
  const dims = [state.numLayers, 1, state.meta.num_kv_heads, 0, state.meta.head_dim];
  lab.keys = new lab.ort.Tensor("float32", new Float32Array(0), dims);
  lab.values = new lab.ort.Tensor("float32", new Float32Array(0), dims);
}

// ------------------------------------------------------------------ drawing
function appendToken(ui, lab, index, kind) {
  const span = el("span", { class: `llm-token llm-${kind}`, tabindex: "-1", role: "button",
    "aria-pressed": "false", text: state.tokens[index] });
  span.dataset.index = String(index);
  ui.text.append(span);
}

function select(ui, index) {
  if (index < 0 || index >= state.rows.length || !state.rows[index]) return;
  state.selected = index;
  const spans = ui.text.children;
  for (const span of spans) { span.setAttribute("aria-pressed", "false"); span.tabIndex = -1; }
  spans[index].setAttribute("aria-pressed", "true");
  spans[index].tabIndex = 0;
  drawFocus(ui);
}

function drawFocus(ui) {
  const i = state.selected;
  if (i < 0) return;
  const row = state.rows[i], S = i + 1;
  const weights = headRow(row, S, state.numHeads, state.layer, state.head);
  const spans = ui.text.children;
  let top = 0;
  for (let k = 0; k < spans.length; k++) {
    const w = k < S ? weights[k] : 0;
    spans[k].style.setProperty("--w", w.toFixed(3));
    if (k < S && weights[k] > weights[top]) top = k;
  }
  ui.focus.textContent = `Token ${i + 1} (“${state.tokens[i]}”), layer ${state.layer + 1}, head ` +
    `${state.head + 1}: its largest weight, ${weights[top].toFixed(3)}, is on token ${top + 1} ` +
    `(“${state.tokens[top]}”); ${weights[0].toFixed(3)} on the first token.`;
  drawGrid(ui.sinks, sinkScores(row, S, state.numLayers, state.numHeads));
  ui.sinks.setAttribute("aria-label", `Attention on the first token by each of the 270 heads, for token ${i + 1}`);
}

function drawGrid(canvas, values) {
  const layers = state.numLayers, H = state.numHeads, cell = 14, dpr = window.devicePixelRatio || 1;
  canvas.width = layers * cell * dpr;
  canvas.height = H * cell * dpr;
  canvas.style.width = `${layers * cell}px`;
  canvas.style.height = `${H * cell}px`;
  const ctx = canvas.getContext("2d");
  ctx.scale(dpr, dpr);
  for (let l = 0; l < layers; l++) {
    for (let h = 0; h < H; h++) {
      ctx.fillStyle = viridis(values[l * H + h]);
      ctx.fillRect(l * cell, h * cell, cell - 1, cell - 1);
    }
  }
  ctx.strokeStyle = "#d97706";
  ctx.lineWidth = 2;
  ctx.strokeRect(state.layer * cell + 1, state.head * cell + 1, cell - 3, cell - 3);
}

function drawInduction(ui) {
  const { scores, count } = inductionScores(state.ids, state.rows, state.numLayers, state.numHeads);
  state.induction = { scores: Array.from(scores), count };
  if (count === 0) {
    ui.induction.hidden = true;
    ui.inductionNote.textContent = "No token of this context repeats an earlier one (apart from its " +
      "neighbour), so there is no induction score to show: try the repeated random tokens.";
    return;
  }
  ui.induction.hidden = false;
  let best = 0;
  for (let h = 1; h < scores.length; h++) if (scores[h] > scores[best]) best = h;
  drawGrid(ui.induction, scores);
  ui.induction.setAttribute("aria-label", "Induction score of each of the 270 heads");
  ui.inductionNote.textContent = `Induction score of each head: the weight a token puts on the token ` +
    `that followed its earlier copy, averaged over the ${count} repeated tokens. Highest: layer ` +
    `${Math.floor(best / state.numHeads) + 1}, head ${(best % state.numHeads) + 1} (` +
    `${scores[best].toFixed(2)}). Same layout and colours as the sink grid.`;
}

function gridClick(ui, canvas) {
  canvas.addEventListener("click", (event) => {
    const box = canvas.getBoundingClientRect(), cell = box.width / state.numLayers;
    state.layer = Math.min(state.numLayers - 1, Math.floor((event.clientX - box.left) / cell));
    state.head = Math.min(state.numHeads - 1, Math.floor((event.clientY - box.top) / cell));
    ui.layer.value = String(state.layer);
    ui.head.value = String(state.head);
    redraw(ui);
  });
}

function redraw(ui) {
  drawFocus(ui);
  if (state.induction && state.induction.count > 0) drawGrid(ui.induction, state.induction.scores);
}

// ------------------------------------------------------------------ the logit lens
// A token's text with its spaces and line breaks made visible.
function visible(text) {
  return text.replace(/ /g, "\u2423").replace(/\n/g, "\u21b5").replace(/\t/g, "\u2192") || "\u2205";
}

let lensWanted = null;  // {index, clickTime}: the latest token asked for, not yet shown
let lensBusy = false;

// A click (or an arrow key) asks for token `index`'s lens. While the model generates, the
// lens waits for the answer's end; a newer click replaces an older one not yet shown.
function requestLens(ui, lab, index, clickTime) {
  if (!state.streams[index]) return;
  lensWanted = { index, clickTime, waited: state.status === "generating" };
  if (state.status === "generating") {
    ui.lens.hidden = false;
    ui.lensNote.textContent = `The logit lens of token ${index + 1} will show when the answer is complete.`;
    return;
  }
  if (!lensBusy) drainLens(ui, lab);
}

async function drainLens(ui, lab) {
  lensBusy = true;
  try {
    while (lensWanted && state.status !== "generating") {
      const wanted = lensWanted;
      lensWanted = null;
      await computeLens(ui, lab, wanted);
    }
  } catch (error) {
    ui.lensNote.textContent = problemText(error);
  } finally {
    lensBusy = false;
  }
}

// Runs lens.onnx on the token's 31 streams: each layer's top guesses; shows them, and keeps
// the time from the click to the table on screen (state.timings.lensMs).
async function computeLens(ui, lab, { index, clickTime, waited }) {
  const start = waited ? performance.now() : clickTime;
  const L1 = state.numLayers + 1, D = state.streams[index].length / L1, run = state.runs;
  const out = await lab.lens.run({ streams: new lab.ort.Tensor("float32", state.streams[index], [L1, D]) });
  if (run !== state.runs) return;  // a new text started meanwhile
  const K = out.top_ids.dims[1], ids = out.top_ids.data, probs = out.top_probs.data;
  const layers = [];
  for (let l = 0; l < L1; l++) {
    layers.push({ ids: Array.from(ids.subarray(l * K, (l + 1) * K), Number),
      probs: Array.from(probs.subarray(l * K, (l + 1) * K)) });
  }
  state.lens = { index, layers };
  drawLens(ui, lab);
  await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));  // painted
  const ms = performance.now() - start;
  state.lens.ms = ms;
  if (!waited) state.timings.lensMs.push(ms);
  ui.lensNote.lastChild.textContent = ` Computed in ${(ms / 1000).toFixed(2)} s.`;
}

const percent = (p) => `${(100 * p).toFixed(p >= 0.095 ? 0 : 1)}%`;

function drawLens(ui, lab) {
  const { index, layers } = state.lens, last = layers[layers.length - 1].ids[0], SHOWN = 3;
  const head = el("tr", {}, el("th", { scope: "col", text: "after" }), el("th", { scope: "col", text: "top guess" }),
    el("th", { scope: "col", text: "p" }), el("th", { scope: "col", text: "next guesses" }));
  const body = layers.map(({ ids, probs }, l) => {
    const rest = el("td", { class: "llm-lens-rest" });
    for (let k = 1; k < Math.min(SHOWN, ids.length); k++) {
      if (k > 1) rest.append(" ");
      rest.append(el("span", { class: "llm-lens-token", text: visible(tokenText(lab, ids[k])) }),
        ` ${percent(probs[k])}`);
    }
    const p = el("td", { class: "llm-lens-p", text: percent(probs[0]) });
    p.style.setProperty("--p", `${(100 * probs[0]).toFixed(1)}%`);
    return el("tr", { class: ids[0] === last ? "llm-lens-final" : "" },
      el("th", { scope: "row", text: l === 0 ? "embedding" : `block ${l}` }),
      el("td", { class: "llm-lens-token llm-lens-top", text: visible(tokenText(lab, ids[0])) }), p, rest);
  });
  ui.lensTable.replaceChildren(el("thead", {}, head), el("tbody", {}, ...body));
  ui.lensNote.replaceChildren(
    `Logit lens of token ${index + 1} (“${visible(state.tokens[index])}”): what the model would guess ` +
    "next if it ended after each block. Each row sends the residual stream there through the final norm " +
    "and the output layer. p is the probability of the top guess. Shaded: the top guess is already " +
    "the model's own, the last row's. ␣ is a space, ↵ a line break.", el("span", {}));
  ui.lens.hidden = false;
}

// ------------------------------------------------------------------ generating
function startContext(ui, lab, ids) {
  state.ids = ids.slice();
  state.promptLength = ids.length;
  state.tokens = ids.map((id) => tokenText(lab, id));
  state.rows = [];
  state.streams = [];
  state.generated = [];
  state.lens = null;
  lensWanted = null;
  ui.lens.hidden = true;
  state.selected = -1;
  state.induction = null;
  ui.text.replaceChildren();
  ids.forEach((_, i) => appendToken(ui, lab, i, "prompt"));
  ui.result.hidden = false;
}

// A new task, so that the page paints and handles clicks between two steps. Not
// setTimeout(0): a chain of those waits at least 4 ms each after the fifth (HTML's timer
// nesting clamp).
function nextTask() {
  if (globalThis.scheduler && typeof scheduler.yield === "function") return scheduler.yield();
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => resolve();
    channel.port2.postMessage(null);
  });
}

async function run(ui, lab, ids, maxNew) {
  setStatus("generating");
  state.stopRequested = false;
  state.runs++;
  ui.generate.disabled = ui.random.disabled = true;
  ui.stop.disabled = maxNew === 0;
  const start = performance.now();
  try {
    resetCache(lab);
    startContext(ui, lab, ids);
    let { logits, rows, streams } = await step(lab, ids);
    state.rows.push(...rows);
    state.streams.push(...streams);
    state.timings.prefill = performance.now() - start;
    select(ui, ids.length - 1);
    const decodeStart = performance.now();
    let modelTime = 0;  // of the decoding time, the part inside the model's steps
    state.timings.stepMs = [];  // each new token's time, the page's drawing included
    let stepEnd = decodeStart;
    for (let n = 0; n < maxNew && !state.stopRequested; n++) {
      const next = argmax(logits);
      state.generated.push(next);
      state.ids.push(next);
      state.tokens.push(tokenText(lab, next));
      appendToken(ui, lab, state.ids.length - 1, "new");
      if (n === 0) {
        state.timings.firstToken = performance.now() - start;
        if (state.timings.clickToFirstToken === null) {
          state.timings.clickToFirstToken = performance.now() - state.timings.click;
        }
      }
      if (next === state.meta.im_end_id || next === state.meta.eos_token_id) break;
      const stepStart = performance.now();
      ({ logits, rows, streams } = await step(lab, [next]));
      modelTime += performance.now() - stepStart;
      state.rows.push(...rows);
      state.streams.push(...streams);
      select(ui, state.ids.length - 1);
      say(ui, `Generating: ${state.generated.length} tokens…`);
      await nextTask();  // let the page paint and the Stop button work
      state.timings.stepMs.push(performance.now() - stepEnd);
      stepEnd = performance.now();
    }
    const seconds = (performance.now() - decodeStart) / 1000;
    const steps = state.rows.length - ids.length;
    state.timings.tokensPerSecond = steps > 0 ? steps / seconds : null;
    state.timings.modelShare = steps > 0 ? modelTime / 1000 / seconds : null;
    drawInduction(ui);
    select(ui, state.rows.length - 1);
    say(ui, maxNew === 0 ? "Read the sequence in one pass." :
      `${state.stopRequested ? "Stopped after" : "Generated"} ${state.generated.length} tokens` +
      (steps > 0 ? `, ${state.timings.tokensPerSecond.toFixed(1)} tokens a second on this device.` : "."));
    setStatus("done");
  } catch (error) {
    setStatus("error");
    say(ui, problemText(error), "warning");
  } finally {
    ui.generate.disabled = ui.random.disabled = false;
    ui.stop.disabled = true;
  }
  if (lensWanted && !lensBusy && state.status === "done") drainLens(ui, lab);
}

function problemText(error) {
  const text = String(error && error.message || error);
  if (/memory|allocation|Array buffer|RangeError/i.test(text)) {
    const need = state.weightBytes ? ` (its weights alone take ${mb(state.weightBytes)})` : "";
    return `The browser ran out of memory for the model${need}. Close other ` +
      "tabs or use a computer with more memory; the pre-rendered explorer above still works.";
  }
  return `The model could not run: ${text}`;
}

function checkPrompt(lab, prompt) {
  if (!prompt.trim()) return { problem: "Type a prompt first." };
  const ids = encode(lab, chatText(prompt, state.meta));
  if (ids.length > MAX_PROMPT_TOKENS) {
    return { problem: `That prompt makes ${ids.length} tokens with the chat template; this page reads at most ` +
      `${MAX_PROMPT_TOKENS} (each token's attention over the whole context is kept). Shorten it.` };
  }
  return { ids };
}

// ------------------------------------------------------------------ wiring
function wire(ui, lab) {
  ui.form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (state.status === "generating") return;
    const { ids, problem } = checkPrompt(lab, ui.prompt.value);
    if (problem) { say(ui, problem, "warning"); return; }
    run(ui, lab, ids, Number(ui.maxNew.value));
  });
  ui.stop.addEventListener("click", () => { state.stopRequested = true; });
  ui.random.addEventListener("click", () => {
    if (state.status === "generating") return;
    run(ui, lab, [state.meta.bos_token_id].concat(repeatedRandom(40, 14 + state.runs)), 0);
  });
  ui.text.addEventListener("click", (event) => {
    const span = event.target.closest(".llm-token");
    if (!span) return;
    const clicked = event.timeStamp > 0 && event.timeStamp <= performance.now() ? event.timeStamp : performance.now();
    select(ui, Number(span.dataset.index));
    span.focus();
    requestLens(ui, lab, Number(span.dataset.index), clicked);
  });
  ui.text.addEventListener("keydown", (event) => {
    const moves = { ArrowLeft: [-1, 0, 0], ArrowRight: [1, 0, 0], ArrowUp: [0, -1, 0], ArrowDown: [0, 1, 0],
      PageUp: [0, 0, -1], PageDown: [0, 0, 1] };
    const move = moves[event.key];
    if (!move || state.selected < 0) return;
    event.preventDefault();
    state.head = (state.head + move[1] + state.numHeads) % state.numHeads;
    state.layer = (state.layer + move[2] + state.numLayers) % state.numLayers;
    ui.layer.value = String(state.layer);
    ui.head.value = String(state.head);
    const next = Math.max(0, Math.min(state.rows.length - 1, state.selected + move[0]));
    const moved = next !== state.selected;
    select(ui, next);
    ui.text.children[next].focus();
    redraw(ui);
    if (moved) requestLens(ui, lab, next, performance.now());
  });
  for (const [control, key] of [[ui.layer, "layer"], [ui.head, "head"]]) {
    control.addEventListener("change", () => { state[key] = Number(control.value); redraw(ui); });
  }
  gridClick(ui, ui.sinks);
  gridClick(ui, ui.induction);
}

function describe(meta) {
  return `Model: SmolLM2-135M-Instruct as the book's package builds it, ${meta.precision}. Measured ` +
    `with ONNX Runtime in Python when the site was built: the top-1 next token equals the float32 ` +
    `package's at ${(100 * meta.top1_agreement).toFixed(1)} % of ${meta.prose_positions} positions of ` +
    `this book's prose; greedy answers equal on ${meta.greedy_equal} of ${meta.greedy_prompts} prompts ` +
    `(${meta.greedy_tokens} tokens); attention weights differ by at most ` +
    `${meta.max_abs_diff_attention.toExponential(1)} (the tests hold ${meta.tolerance}). The logit ` +
    `lens ranks first the token that the package's logit_lens ranks first, at every layer, at ` +
    `${(100 * meta.lens_top1_agreement).toFixed(1)} % of ${meta.lens_positions} positions of the same prose.`;
}

function webAssemblyWorks() {
  try {
    return typeof WebAssembly === "object" && WebAssembly.validate(Uint8Array.of(0, 97, 115, 109, 1, 0, 0, 0));
  } catch { return false; }
}

async function main() {
  const root = document.getElementById("llm-lab");
  if (!root) return;
  document.head.append(el("style", { text: CSS }));
  const ui = buildUi(root);
  if (!webAssemblyWorks()) {
    ui.start.disabled = true;
    setStatus("unavailable");
    say(ui, "This browser cannot run WebAssembly (or has it turned off), so the model cannot run here. " +
      "The pre-rendered explorer above works without it.", "warning");
    return;
  }
  say(ui, "");
  // the files' sizes (HEAD requests) and meta.json (a few kB: the decoded weights' size)
  Promise.all([sizes(), fetchJson("meta").catch(() => null)]).then(([total, meta]) => {
    if (meta && meta.weights) state.weightBytes = meta.weights.bytes;
    if (meta && meta.lens) state.lensBytes = meta.lens.tensors.reduce((n, t) => n + t.length, 0);
    if (total) {
      state.downloadBytes = total;
      ui.start.textContent = `Download SmolLM2 (${mb(total)}) and run it in your browser`;
      const memory = state.weightBytes ? `; its weights, decoded to float32 after the download, then take ` +
        `${mb(state.weightBytes)} of memory, and the tab needs more while it loads them` : "";
      const lensMemory = state.lensBytes ? ` The logit lens keeps a second float32 copy of the embedding ` +
        `(${mb(state.lensBytes)}) and ${(4 * (meta.num_layers + 1) * meta.embed_dim / 1e3).toFixed(0)} kB for ` +
        "each token of the text." : "";
      ui.cost.textContent = `Nothing is downloaded until you click: then ${mb(total)} once (the browser may ` +
        `keep it)${memory}.${lensMemory} A computer is best, a phone may run out of memory. ` +
        "Everything runs on your device: nothing you type leaves it.";
    }
  });
  ui.start.addEventListener("click", async () => {
    ui.start.disabled = true;
    setStatus("loading");
    state.timings.click = performance.now();
    say(ui, "Loading the runtime and the tokenizer…");
    let lab;
    try {
      lab = await load(ui);
    } catch (error) {
      setStatus("error");
      ui.start.disabled = false;
      say(ui, problemText(error), "warning");
      return;
    }
    state.timings.clickToReady = performance.now() - state.timings.click;
    fillHeadControls(ui);
    ui.precision.textContent = describe(state.meta);
    ui.start.hidden = ui.cost.hidden = true;
    ui.body.hidden = false;
    wire(ui, lab);
    state.lab = { encode: (text) => encode(lab, text), chatText: (p) => chatText(p, state.meta) };
    setStatus("ready");
    const { ids } = checkPrompt(lab, ui.prompt.value);
    await run(ui, lab, ids, Number(ui.maxNew.value));
  });
  setStatus("idle");
}

main();
