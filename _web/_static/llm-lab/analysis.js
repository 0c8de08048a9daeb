// Chapter 14 (website): what the page reads off SmolLM2's attention rows. Pure functions,
// no DOM: tests/test_web_llm_browser.py calls them in the page.
//
// A row is one token's attention over the context: a Float32Array (layers * heads * S),
// [layer][head][key], S = the token's position + 1 (keys 0..position).

// The weights of (layer, head) in `row` of a token that saw S keys.
export function headRow(row, S, numHeads, layer, head) {
  const at = (layer * numHeads + head) * S;
  return row.subarray(at, at + S);
}

// Each head's weight on the first token (the "attention sink"): Float32Array(layers * heads).
export function sinkScores(row, S, numLayers, numHeads) {
  const out = new Float32Array(numLayers * numHeads);
  for (let i = 0; i < out.length; i++) out[i] = row[i * S];
  return out;
}

// Induction score of every head (Olsson et al., 2022): at each position i whose token
// appeared before, at j < i - 1 (the latest such j), the weight on j + 1, the token that
// followed it then; averaged over such positions. `ids`: the context's ids; `rows[i]`:
// token i's row (or null when not computed). Returns {scores: Float32Array(layers * heads),
// count} (count 0: no repeat, scores all 0).
export function inductionScores(ids, rows, numLayers, numHeads) {
  const scores = new Float32Array(numLayers * numHeads);
  const last = new Map();
  let count = 0;
  for (let i = 0; i < ids.length; i++) {
    const j = last.get(ids[i]);
    if (j !== undefined && j < i - 1 && rows[i]) {
      const S = i + 1;
      for (let h = 0; h < scores.length; h++) scores[h] += rows[i][h * S + j + 1];
      count++;
    }
    last.set(ids[i], i);
  }
  if (count > 0) for (let h = 0; h < scores.length; h++) scores[h] /= count;
  return { scores, count };
}

// The largest |sum of a row - 1| over every head of every row given (rows sum to one).
export function worstRowSum(rows, numLayers, numHeads) {
  let worst = 0;
  rows.forEach((row, i) => {
    if (!row) return;
    const S = row.length / (numLayers * numHeads);
    for (let h = 0; h < numLayers * numHeads; h++) {
      let sum = 0;
      for (let k = 0; k < S; k++) sum += row[h * S + k];
      worst = Math.max(worst, Math.abs(sum - 1));
    }
  });
  return worst;
}

// `count` token ids drawn from [low, high) by a small seeded generator (mulberry32), then
// the same ids again: the repeated-random-tokens test of induction heads.
export function repeatedRandom(count, seed = 14, low = 1000, high = 40000) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const half = Array.from({ length: count }, () => low + Math.floor(next() * (high - low)));
  return half.concat(half);
}

// The greedy choice: the index of the largest logit.
export function argmax(values) {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
  return best;
}
