// Chapter 13 (website): what the explorer computes from the model's outputs.
// attentions: Float32Array of shape (layers, 1, heads, L, L), row-major, as model.onnx gives it.

// One head's map, (L, L) rows = queries, as an array of Float32Array rows.
export function headMap(attentions, L, numHeads, layer, head) {
  const start = ((layer * numHeads) + head) * L * L;
  return Array.from({ length: L }, (_, i) => attentions.subarray(start + i * L, start + (i + 1) * L));
}

// Entropy of each row in nats, -sum_j a_ij ln a_ij (0 ln 0 = 0), as attention_core.attention_entropy.
export function rowEntropy(row) {
  let h = 0;
  for (const a of row) if (a > 0) h -= a * Math.log(a);
  return h;
}

// Mean row entropy of every head: (layers) x (heads) nested arrays, as chapter 13's figure.
export function headEntropies(attentions, L, numLayers, numHeads) {
  return Array.from({ length: numLayers }, (_, layer) => Array.from({ length: numHeads }, (_, head) => {
    const rows = headMap(attentions, L, numHeads, layer, head);
    return rows.reduce((sum, row) => sum + rowEntropy(row), 0) / L;
  }));
}

// The k keys a row weighs most: [{index, weight}], largest first.
export function topAttended(row, k = 3) {
  return Array.from(row, (weight, index) => ({ index, weight }))
    .sort((a, b) => b.weight - a.weight).slice(0, k);
}

// Cosine similarity of two vectors (the embeddings are unit length; normalised anyway).
export function cosine(a, b) {
  let dot = 0, na = 0, nb = 0;
  for (let i = 0; i < a.length; i++) { dot += a[i] * b[i]; na += a[i] * a[i]; nb += b[i] * b[i]; }
  return dot / Math.sqrt(na * nb);
}

// The book sentence whose embedding is nearest: {index, cosine}.
export function nearest(embedding, embeddings) {
  let best = { index: -1, cosine: -Infinity };
  embeddings.forEach((e, index) => {
    const c = cosine(embedding, e);
    if (c > best.cosine) best = { index, cosine: c };
  });
  return best;
}

// Viridis at t in [0, 1] (eight stops of matplotlib's map, linearly interpolated), as [r, g, b].
const VIRIDIS = [[68, 1, 84], [70, 50, 127], [54, 92, 141], [39, 127, 142], [31, 161, 135],
  [74, 194, 109], [159, 218, 58], [253, 231, 37]];
export function viridisRgb(t) {
  const x = Math.min(1, Math.max(0, t)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(x)), f = x - i;
  return VIRIDIS[i].map((v, k) => Math.round(v + f * (VIRIDIS[i + 1][k] - v)));
}

// 256 levels, computed once: drawing 72 maps looks colours up instead of computing them.
export const VIRIDIS_RGB = Array.from({ length: 256 }, (_, k) => viridisRgb(k / 255));
export const VIRIDIS_CSS = VIRIDIS_RGB.map(([r, g, b]) => `rgb(${r}, ${g}, ${b})`);
export const level = (t) => Math.round(255 * Math.min(1, Math.max(0, t)));
