// Chapter 13 (website): the chapter's model, all-MiniLM-L6-v2 exported from attention_core
// (attention_core/book/web_model.py), run in the reader's browser by onnxruntime-web.
//
// Nothing heavy loads with the page: this module builds the button and asks the server
// how large the model and the runtime are. The click loads the runtime (single-threaded
// WebAssembly: no cross-origin isolation needed), the tokenizer and the model from the
// site itself, then every sentence runs locally. window.attentionLab holds the state the
// page shows (tests and benchmarks/bench_web_model.py read it).
import { makeTokenizer, problemWith, unknownNote, MAX_WORDS } from "./tokenize.js";
import { headMap, headEntropies, topAttended, nearest, VIRIDIS_RGB, VIRIDIS_CSS, level } from "./analysis.js";
import { CSS } from "./style.js";

const STATIC = new URL("../", import.meta.url);  // the site's _static/
const FILES = {
  runtime: "onnxruntime-web/ort.wasm.bundle.min.js",
  wasm: "onnxruntime-web/ort-wasm-simd-threaded.wasm",
  model: "minilm/model.onnx",
  tokenizer: "minilm/tokenizer.json",
  meta: "minilm/meta.json",
};
const url = (name) => new URL(FILES[name], STATIC).href;
const FIRST_SENTENCE = "The trophy did not fit in the suitcase because it was too big.";

const state = {
  status: "idle", message: "", runs: 0,
  tokens: [], ids: [], L: 0, attentions: null, embedding: null, entropies: null, nearest: null,
  layer: 0, head: 0, numLayers: 6, numHeads: 12, meta: null,
  timings: { clickToFirstMap: null, lastSentence: null },
};
window.attentionLab = state;

// ------------------------------------------------------------------ small DOM helpers
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
// Tokens are shown in the model's order, left to right like the heatmap's axes, whatever the
// script of the text: each token is isolated from its neighbours (dir="ltr" on its element,
// an isolate in SVG, one fillText call a label on a canvas), so the bidi algorithm never runs
// a right-to-left word's pieces together and reverses them; inside a token, Arabic or Hebrew
// letters still read right to left, and a continuation piece keeps its "##" in front
// ("##ر", never "ر##").
const TOKEN_DIRECTION = "ltr";
const svgEl = (tag, attrs = {}) => {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  return node;
};
const fmt = (x, digits = 2) => x.toFixed(digits);

// The model's precision and its measured cost, from meta.json (written when the site was built).
// The bound is meta.tolerance, the measured maximum rounded up, never below what was measured.
function describe(meta) {
  return `Model: ${meta.precision}. Measured with ONNX Runtime in Python when the site was built, over ` +
    `the book's ${meta.sentences.length} sentences, its attention weights differ from the book's ` +
    `float32 model by at most ${meta.tolerance}.`;
}
const mb = (bytes) => `${(bytes / 1e6).toFixed(bytes < 1e7 ? 1 : 0)} MB`;

// ------------------------------------------------------------------ the page's parts
function buildUi(root) {
  const ui = {};
  ui.message = root.querySelector(".lab-message") || el("p", { class: "lab-message" });
  ui.message.setAttribute("role", "status");
  ui.message.setAttribute("aria-live", "polite");
  ui.start = el("button", { type: "button", class: "lab-start", text: "Run the model in your browser" });
  ui.sentence = el("input", { id: "lab-text", type: "text", list: "lab-sentences", autocomplete: "off",
    spellcheck: "false", "aria-describedby": "lab-text-help" });
  ui.suggestions = el("datalist", { id: "lab-sentences" });
  ui.compute = el("button", { type: "submit", class: "lab-compute", text: "Compute" });
  ui.form = el("form", { class: "lab-form" },
    el("label", { for: "lab-text", text: `Your sentence (up to ${MAX_WORDS} words)` }),
    el("div", { class: "lab-row" }, ui.sentence, ui.compute), ui.suggestions,
    el("p", { id: "lab-text-help", class: "lab-help",
      text: "Type, or pick one of the book's forty sentences from the list; Enter computes." }));
  ui.note = el("p", { class: "lab-note" });
  ui.tokens = el("p", { class: "lab-tokens" });
  ui.layer = el("select", { id: "lab-layer" });
  ui.head = el("select", { id: "lab-head" });
  for (let i = 0; i < state.numLayers; i++) ui.layer.append(el("option", { value: String(i), text: String(i + 1) }));
  for (let i = 0; i < state.numHeads; i++) ui.head.append(el("option", { value: String(i), text: String(i + 1) }));
  ui.controls = el("div", { class: "lab-controls" },
    el("label", { for: "lab-layer", text: "Layer " }), ui.layer,
    el("label", { for: "lab-head", text: "Head " }), ui.head);
  ui.summary = el("p", { class: "lab-summary" });
  ui.heatmap = el("canvas", { class: "lab-heatmap", role: "img" });
  ui.lines = svgEl("svg", { class: "lab-lines", role: "group" });
  ui.views = el("div", { class: "lab-views" },
    el("figure", {}, ui.heatmap, el("figcaption", { text: "Rows: queries; columns: keys; colour: weight from 0 (dark) to 1 (yellow)." })),
    el("figure", {}, ui.lines, el("figcaption", { text: "Each query (left) to the keys (right) it attends to; the darker the line, the larger the weight. Choose a token on the left to see only its lines." })));
  ui.textList = el("ol", { class: "lab-text-list" });
  ui.textAlt = el("details", { class: "lab-text-alt" },
    el("summary", { text: "This head as text: each token's three most attended tokens" }), ui.textList);
  ui.grid = el("div", { class: "lab-grid", role: "group", "aria-label": "All 72 heads: columns are layers, rows are heads" });
  ui.nearest = el("p", { class: "lab-nearest" });
  ui.result = el("div", { class: "lab-result", hidden: true },
    ui.note, ui.tokens, ui.controls, ui.summary, ui.views, ui.textAlt,
    el("p", { class: "lab-grid-title", text: "All 72 heads (columns: layers 1 to 6; rows: heads 1 to 12), each scaled to its own largest weight; the number is the head's mean row entropy in nats. Choose one to show it above." }),
    ui.grid, ui.nearest);
  ui.body = el("div", { class: "lab-body", hidden: true }, ui.form, ui.result);
  root.append(ui.start, ui.body);
  return ui;
}

function say(ui, text, kind = "info") {
  state.message = text;
  ui.message.textContent = text;
  ui.message.dataset.kind = kind;
  ui.message.hidden = !text;
}

// ------------------------------------------------------------------ drawing
function themeColors(root) {
  const style = getComputedStyle(root);
  return { text: style.color, accent: style.getPropertyValue("--lab-accent").trim() || "#1f6fb2" };
}

// The width of one view: side by side in a column of 700 px or more, stacked below that.
function figureWidth(ui) {
  const side = ui.views.clientWidth >= 700;
  ui.views.classList.toggle("lab-side", side);
  return Math.max(200, side ? Math.floor(ui.views.clientWidth / 2) - 16 : ui.views.clientWidth);
}

function drawHeatmap(ui, root) {
  const { L, tokens } = state;
  const rows = headMap(state.attentions, L, state.numHeads, state.layer, state.head);
  const width = figureWidth(ui);
  const ctx = ui.heatmap.getContext("2d");
  const font = 11;
  ctx.font = `${font}px sans-serif`;
  const label = Math.min(90, Math.ceil(Math.max(...tokens.map((t) => ctx.measureText(t).width))) + 6);
  const cell = Math.max(2, Math.min(26, Math.floor((width - label) / L)));
  const size = label + cell * L;
  const dpr = window.devicePixelRatio || 1;
  ui.heatmap.width = Math.round(size * dpr);
  ui.heatmap.height = Math.round(size * dpr);
  ui.heatmap.style.width = `${size}px`;
  ui.heatmap.style.height = `${size}px`;
  ctx.scale(dpr, dpr);
  ctx.font = `${font}px sans-serif`;
  ctx.direction = TOKEN_DIRECTION;  // each label is drawn alone: no token reorders another
  ctx.fillStyle = themeColors(root).text;
  const every = Math.max(1, Math.ceil(font / cell));  // label every token if they fit
  ctx.textBaseline = "middle";
  ctx.textAlign = "right";
  for (let i = 0; i < L; i += every) ctx.fillText(tokens[i], label - 4, label + (i + 0.5) * cell, label - 4);
  ctx.save();
  ctx.rotate(-Math.PI / 2);
  ctx.textAlign = "left";
  for (let j = 0; j < L; j += every) ctx.fillText(tokens[j], -label + 4, label + (j + 0.5) * cell, label - 4);
  ctx.restore();
  rows.forEach((row, i) => row.forEach((w, j) => {
    ctx.fillStyle = VIRIDIS_CSS[level(w)];
    ctx.fillRect(label + j * cell, label + i * cell, cell, cell);
  }));
  ui.heatmap.setAttribute("aria-label", `Heatmap of layer ${state.layer + 1}, head ${state.head + 1} ` +
    "(the text version below lists each token's three most attended tokens)");
}

function drawLines(ui, root, focus = null) {
  const { L, tokens } = state;
  const rows = headMap(state.attentions, L, state.numHeads, state.layer, state.head);
  const colors = themeColors(root);
  const width = Math.min(420, figureWidth(ui));
  const rowH = 20, column = Math.floor(width * 0.36), top = 10;
  const height = top * 2 + rowH * L;
  ui.lines.replaceChildren();
  ui.lines.setAttribute("viewBox", `0 0 ${width} ${height}`);
  ui.lines.setAttribute("width", String(width));
  ui.lines.setAttribute("height", String(height));
  ui.lines.setAttribute("aria-label", `Layer ${state.layer + 1}, head ${state.head + 1} as lines from each query to its keys`);
  const y = (i) => top + rowH * (i + 0.5);
  const linesGroup = svgEl("g", { stroke: colors.accent, "stroke-width": "2", "aria-hidden": "true" });
  rows.forEach((row, i) => {
    if (focus !== null && focus !== i) return;
    row.forEach((w, j) => {
      if (w < 0.02) return;
      linesGroup.append(svgEl("line", { x1: column + 4, y1: y(i), x2: width - column - 4, y2: y(j), "stroke-opacity": fmt(w, 3) }));
    });
  });
  ui.lines.append(linesGroup);
  tokens.forEach((token, i) => {
    const query = svgEl("text", { x: column, y: y(i), "text-anchor": "end", "dominant-baseline": "middle",
      direction: TOKEN_DIRECTION, "unicode-bidi": "isolate",
      fill: colors.text, tabindex: "0", role: "button", class: focus === i ? "lab-focus" : "",
      "aria-pressed": String(focus === i), "aria-label": `query ${token}: show only its lines` });
    query.textContent = token;
    const choose = () => drawLines(ui, root, focus === i ? null : i);
    query.addEventListener("click", choose);
    query.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") { event.preventDefault(); choose(); refocus(ui, i); }
    });
    const key = svgEl("text", { x: width - column, y: y(i), "dominant-baseline": "middle", fill: colors.text, "aria-hidden": "true",
      direction: TOKEN_DIRECTION, "unicode-bidi": "isolate" });
    key.textContent = token;
    ui.lines.append(query, key);
  });
}

function refocus(ui, i) {
  const target = ui.lines.querySelectorAll("text[role=button]")[i];
  if (target) target.focus();
}

function drawTextAlternative(ui) {
  const rows = headMap(state.attentions, state.L, state.numHeads, state.layer, state.head);
  const token = (i) => el("bdi", { dir: TOKEN_DIRECTION, text: state.tokens[i] });
  ui.textList.replaceChildren(...rows.map((row, i) => el("li", {}, token(i), " → ",
    ...topAttended(row, 3).flatMap(({ index, weight }, k) => [k ? ", " : "", token(index), ` ${fmt(weight)}`]))));
}

function drawThumb(canvas, rows) {
  const L = rows.length;
  canvas.width = L;
  canvas.height = L;
  const ctx = canvas.getContext("2d");
  const image = ctx.createImageData(L, L);
  let max = 0;
  for (const row of rows) for (const w of row) max = Math.max(max, w);
  rows.forEach((row, i) => row.forEach((w, j) => {
    const [r, g, b] = VIRIDIS_RGB[level(w / (max || 1))];
    const at = 4 * (i * L + j);
    image.data[at] = r; image.data[at + 1] = g; image.data[at + 2] = b; image.data[at + 3] = 255;
  }));
  ctx.putImageData(image, 0, 0);
}

function buildGrid(ui, root) {
  ui.gridButtons = [];
  for (let head = 0; head < state.numHeads; head++) {
    for (let layer = 0; layer < state.numLayers; layer++) {
      const button = el("button", { type: "button", class: "lab-thumb", tabindex: "-1" },
        el("canvas", { "aria-hidden": "true" }), el("span", { class: "lab-entropy" }));
      button.addEventListener("click", () => choose(ui, root, layer, head));
      button.addEventListener("keydown", (event) => {
        const moves = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };
        if (!(event.key in moves)) return;
        event.preventDefault();
        const [dl, dh] = moves[event.key];
        const l = Math.min(state.numLayers - 1, Math.max(0, layer + dl));
        const h = Math.min(state.numHeads - 1, Math.max(0, head + dh));
        choose(ui, root, l, h);
        ui.gridButtons[h * state.numLayers + l].focus();
      });
      ui.gridButtons.push(button);
      ui.grid.append(button);
    }
  }
}

function drawGrid(ui) {
  ui.gridButtons.forEach((button, k) => {
    const head = Math.floor(k / state.numLayers), layer = k % state.numLayers;
    drawThumb(button.querySelector("canvas"), headMap(state.attentions, state.L, state.numHeads, layer, head));
    const h = state.entropies[layer][head];
    button.querySelector(".lab-entropy").textContent = fmt(h);
    const chosen = layer === state.layer && head === state.head;
    button.setAttribute("aria-pressed", String(chosen));
    button.tabIndex = chosen ? 0 : -1;
    button.setAttribute("aria-label", `layer ${layer + 1}, head ${head + 1}: mean entropy ${fmt(h)} nats`);
  });
}

function drawHead(ui, root) {
  const h = state.entropies[state.layer][state.head];
  ui.layer.value = String(state.layer);
  ui.head.value = String(state.head);
  ui.summary.textContent = `Layer ${state.layer + 1}, head ${state.head + 1}: mean row entropy ${fmt(h)} nats ` +
    `(0 = every query on one token; ln ${state.L} = ${fmt(Math.log(state.L))} = spread evenly).`;
  drawHeatmap(ui, root);
  drawLines(ui, root);
  drawTextAlternative(ui);
}

function choose(ui, root, layer, head) {
  state.layer = layer;
  state.head = head;
  drawHead(ui, root);
  drawGrid(ui);
}

function drawAll(ui, root) {
  ui.tokens.replaceChildren(el("span", { class: "lab-label", text: `${state.L} tokens: ` }),
    ...state.tokens.flatMap((t) => [el("code", { class: t === "[UNK]" ? "lab-token lab-unk" : "lab-token", dir: TOKEN_DIRECTION, text: t }), " "]));
  drawHead(ui, root);
  drawGrid(ui);
  const best = state.nearest;
  ui.nearest.textContent = `Nearest of the book's ${state.meta.sentences.length} sentences by sentence embedding ` +
    `(cosine ${fmt(best.cosine)}): “${state.meta.sentences[best.index]}”`;
}

// ------------------------------------------------------------------ loading and running
async function fetchBytes(address, onProgress) {
  const response = await fetch(address);
  if (!response.ok) throw new Error(`${address} answered HTTP ${response.status}`);
  if (!response.body) return new Uint8Array(await response.arrayBuffer());
  const reader = response.body.getReader();
  const chunks = [];
  let received = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    received += value.length;
    onProgress(received);
  }
  const bytes = new Uint8Array(received);
  let at = 0;
  for (const chunk of chunks) { bytes.set(chunk, at); at += chunk.length; }
  return bytes;
}

async function fetchJson(name) {
  const response = await fetch(url(name));
  if (!response.ok) throw new Error(`${url(name)} answered HTTP ${response.status}`);
  return response.json();
}

async function load(ui) {
  const phases = state.timings.phases = {};
  const mark = (name, since) => { phases[name] = performance.now() - since; return performance.now(); };
  let t = performance.now();
  const [ort, tokenizerJson, meta] = await Promise.all([import(url("runtime")), fetchJson("tokenizer"), fetchJson("meta")]);
  t = mark("runtimeTokenizerMeta", t);
  ort.env.wasm.numThreads = 1;  // no SharedArrayBuffer, so no cross-origin-isolation headers
  ort.env.wasm.proxy = false;
  ort.env.wasm.wasmPaths = { wasm: url("wasm") };
  ort.env.logLevel = "error";
  const bytes = await fetchBytes(url("model"), (n) => say(ui, `Downloading the model: ${mb(n)}…`));
  t = mark("modelDownload", t);
  say(ui, "Starting the runtime…");
  // Constant folding would turn every int8 weight into float32 when the session starts: four
  // times the memory (a phone's), and most of the start-up time; the other fusions stay.
  const session = await ort.InferenceSession.create(bytes, { executionProviders: ["wasm"],
    graphOptimizationLevel: "all", extra: { optimization: { disable_specified_optimizers: "ConstantFolding" } } });
  t = mark("session", t);
  state.meta = meta;
  state.numLayers = meta.num_layers;
  state.numHeads = meta.num_heads;
  return { ort, session, encode: await makeTokenizer(tokenizerJson) };
}

async function runModel(lab, ids) {
  const L = ids.length;
  const feeds = {
    input_ids: new lab.ort.Tensor("int64", BigInt64Array.from(ids, (i) => BigInt(i)), [1, L]),
    attention_mask: new lab.ort.Tensor("int64", new BigInt64Array(L).fill(1n), [1, L]),
  };
  const out = await lab.session.run(feeds);
  return { attentions: out.attentions.data, embedding: out.embedding.data };
}

function makeRunner(ui, root, lab) {
  let queue = Promise.resolve(), latest = 0;
  return (text) => {
    const ticket = ++latest;
    queue = queue.then(async () => {
      if (ticket !== latest) return;  // a newer sentence is waiting: skip this one
      const start = performance.now();
      const encoded = lab.encode(text);
      const problem = problemWith(text, encoded);
      if (problem) {
        say(ui, problem.text, "warning");
        state.problem = problem.kind;
        ui.result.hidden = true;
        return;
      }
      const ran = performance.now();
      const { attentions, embedding } = await runModel(lab, encoded.ids);
      const drawn = performance.now();
      Object.assign(state, { problem: null, tokens: encoded.tokens, ids: encoded.ids, L: encoded.ids.length,
        attentions, embedding, text });
      state.entropies = headEntropies(attentions, state.L, state.numLayers, state.numHeads);
      state.nearest = nearest(embedding, state.meta.sentence_embeddings);
      ui.result.hidden = false;
      drawAll(ui, root);
      ui.note.textContent = unknownNote(encoded, text, lab.encode);
      ui.note.hidden = !ui.note.textContent;
      say(ui, `Computed in your browser. ${describe(state.meta)}`);
      Object.assign(state.timings, { model: drawn - ran, draw: performance.now() - drawn });
      state.runs += 1;
      state.timings.lastSentence = performance.now() - start;
      root.dataset.runs = String(state.runs);
    }).catch((error) => {
      state.problem = "error";
      say(ui, `The model could not run on this sentence: ${error.message}`, "warning");
      ui.result.hidden = true;
    });
    return queue;
  };
}

async function start(ui, root) {
  const clicked = performance.now();
  ui.start.disabled = true;
  state.status = "loading";
  root.dataset.state = "loading";
  say(ui, "Loading the runtime and the model…");
  let lab;
  try {
    lab = await load(ui);
  } catch (error) {
    state.status = "error";
    root.dataset.state = "error";
    ui.start.disabled = false;
    say(ui, `The model could not be loaded (${error.message}). The precomputed explorer above still works.`, "warning");
    return;
  }
  ui.start.hidden = true;
  ui.suggestions.replaceChildren(...state.meta.sentences.map((s) => el("option", { value: s })));
  buildGrid(ui, root);
  ui.body.hidden = false;
  const run = makeRunner(ui, root, lab);
  ui.form.addEventListener("submit", (event) => { event.preventDefault(); run(ui.sentence.value); });
  ui.sentence.addEventListener("change", () => run(ui.sentence.value));
  ui.layer.addEventListener("change", () => choose(ui, root, Number(ui.layer.value), state.head));
  ui.head.addEventListener("change", () => choose(ui, root, state.layer, Number(ui.head.value)));
  const redraw = () => { if (!ui.result.hidden && state.attentions) drawHead(ui, root); };
  new MutationObserver(redraw).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
  let width = root.clientWidth;
  new ResizeObserver(() => { if (root.clientWidth !== width) { width = root.clientWidth; redraw(); } }).observe(root);
  state.run = run;
  ui.sentence.value = FIRST_SENTENCE;
  await run(FIRST_SENTENCE);
  state.timings.clickToFirstMap = performance.now() - clicked;
  state.status = "ready";
  root.dataset.state = "ready";
}

// The button says how much it will download: the server's sizes, asked after the page has loaded.
async function labelSize(ui) {
  try {
    const sizes = await Promise.all(["model", "wasm"].map(async (name) => {
      const response = await fetch(url(name), { method: "HEAD" });
      return Number(response.headers.get("Content-Length")) || 0;
    }));
    const total = sizes.reduce((a, b) => a + b, 0);
    if (sizes.every((s) => s > 0)) ui.start.textContent = `Run the model in your browser (${mb(total)})`;
  } catch {
    // no size known: the button keeps its plain label
  }
}

function wasmWorks() {
  try {
    return typeof WebAssembly === "object" && WebAssembly.validate(Uint8Array.of(0, 97, 115, 109, 1, 0, 0, 0));
  } catch {
    return false;
  }
}

function main() {
  const root = document.getElementById("attention-lab");
  if (!root) return;
  document.head.append(el("style", { id: "attention-lab-style", text: CSS }));
  const ui = buildUi(root);
  if (!wasmWorks()) {
    state.status = "no-wasm";
    root.dataset.state = "no-wasm";
    ui.start.disabled = true;
    say(ui, "This browser cannot run WebAssembly (or has it turned off), so the model cannot run here. " +
      "The precomputed explorer above works without it.", "warning");
    return;
  }
  say(ui, "");
  root.dataset.state = "idle";
  ui.start.addEventListener("click", () => start(ui, root));
  const later = window.requestIdleCallback || ((f) => setTimeout(f, 200));
  if (document.readyState === "complete") later(() => labelSize(ui));
  else window.addEventListener("load", () => later(() => labelSize(ui)));
}

main();
