// Chapter 14 (website): the GGUF's quantised blocks, as the site ships them, turned into the
// float32 weights the model's graph reads, once, after the download (the layout is
// meta.json's "weights", written by attention_core/book/web_llm.py, whose decode_weights
// does the same in numpy). Every weight comes out as the float32 that gguf's own
// dequantisation gives: d * q is exact in float32 (11 bits times 4 or 8 bits), and d * q + m
// is exact in double, so Math.fround rounds it once, as numpy's float32 sum does.
//
// Q4_1 (ggml's block_q4_1, 20 bytes for 32 weights): float16 scale d, float16 offset m,
// 16 bytes; weight j in the low nibble of byte j, weight j + 16 in its high nibble; w = d q + m.
// Q8_0 (ggml's block_q8_0, 34 bytes for 32 weights): float16 scale d, 32 int8 q; w = d q.

let HALF = null;  // float16 bits -> value, 65,536 entries

function halfTable() {
  if (HALF) return HALF;
  HALF = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = h & 0x8000 ? -1 : 1, exponent = (h >> 10) & 31, fraction = h & 1023;
    HALF[h] = exponent === 0 ? sign * fraction * 2 ** -24
      : exponent === 31 ? (fraction ? NaN : sign * Infinity)
        : sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
  }
  return HALF;
}

const BLOCK = 32;
const BYTES = { q4_1: 20, q8_0: 34 };

// One tensor: `src` the shipped bytes (rows * cols / 32 blocks, row after row) into `dst`
// (rows * cols float32), row-major (rows, cols), or (cols, rows) when `transposed`.
export function decodeTensor(type, src, rows, cols, dst, transposed = false) {
  const size = BYTES[type];
  if (!size) throw new Error(`unknown block type ${type}`);
  if (cols % BLOCK) throw new Error(`columns must be a multiple of ${BLOCK}, got ${cols}`);
  if (src.length !== rows * cols / BLOCK * size) {
    throw new Error(`a ${type} tensor (${rows}, ${cols}) takes ${rows * cols / BLOCK * size} bytes, got ${src.length}`);
  }
  if (dst.length !== rows * cols) throw new Error(`the output holds ${dst.length} weights, not ${rows * cols}`);
  const half = halfTable(), q4 = type === "q4_1", blocksPerRow = cols / BLOCK;
  const block = new Float32Array(BLOCK);
  // one block of row r, columns c0..c0 + 31, into `block`
  const decodeBlock = (r, c0) => {
    const at = (r * blocksPerRow + c0 / BLOCK) * size;
    const d = half[src[at] | (src[at + 1] << 8)];
    if (q4) {
      const m = half[src[at + 2] | (src[at + 3] << 8)];
      for (let j = 0; j < 16; j++) {
        const byte = src[at + 4 + j];
        block[j] = Math.fround(d * (byte & 15) + m);
        block[j + 16] = Math.fround(d * (byte >> 4) + m);
      }
    } else {
      for (let j = 0; j < BLOCK; j++) {
        const q = src[at + 2 + j];
        block[j] = d * (q > 127 ? q - 256 : q);
      }
    }
  };
  if (!transposed) {
    for (let r = 0; r < rows; r++) {
      for (let c0 = 0; c0 < cols; c0 += BLOCK) {
        decodeBlock(r, c0);
        dst.set(block, r * cols + c0);
      }
    }
    return;
  }
  // transposed: a tile of TILE rows by 32 columns at a time, so that the writes run along
  // the output's rows (column c of the weight is row c of the output)
  const TILE = 32, tile = new Float32Array(TILE * BLOCK);  // tile[i * 32 + j]: row r0 + i, column c0 + j
  for (let r0 = 0; r0 < rows; r0 += TILE) {
    const n = Math.min(TILE, rows - r0);
    for (let c0 = 0; c0 < cols; c0 += BLOCK) {
      for (let i = 0; i < n; i++) {
        decodeBlock(r0 + i, c0);
        tile.set(block, i * BLOCK);
      }
      for (let j = 0; j < BLOCK; j++) {
        const o = (c0 + j) * rows + r0;
        for (let i = 0; i < n; i++) dst[o + i] = tile[i * BLOCK + j];
      }
    }
  }
}

// All the weights of meta.json's `manifest` ({bytes, tensors: [{file, type, offset, length,
// rows, cols, transposed, f32_offset}]}) from `files` ({name: Uint8Array}): the bytes of
// the float32 file the graph names as its external data.
export function decodeWeights(manifest, files) {
  const out = new Float32Array(manifest.bytes / 4);
  for (const t of manifest.tensors) {
    const file = files[t.file];
    if (!file) throw new Error(`missing ${t.file}`);
    const start = t.f32_offset / 4;
    decodeTensor(t.type, file.subarray(t.offset, t.offset + t.length), t.rows, t.cols,
      out.subarray(start, start + t.rows * t.cols), t.transposed);
  }
  return new Uint8Array(out.buffer);
}
