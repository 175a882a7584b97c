// Quantized KV rows on the GPU: encode (bit-identical to the CPU codecs: every group's statistics run
// sequentially in the CPU's order with correctly rounded f32 ops) and decode. Device code only; the
// fused decode attention over these rows lives in kv_quant_attention.cuh.
#pragma once
#include <cstdint>
#include <type_traits>

#include "tern/backend/cuda/kernels/common.cuh"
#include "tern/backend/cuda/kernels/kv_quant_args.h"

namespace tern::cuda::kernels {

__device__ __forceinline__ float f16_value(const uint8_t* p) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(p[0] | (p[1] << 8))));
}
// One 16-bit store of the f16 bits (p is 2-byte aligned: code streams and rows are even-sized).
// Not two byte stores: the toolchain stored the low byte of the converted f16 register as the
// value converted to u8 (saturating) rather than as its low 8 bits.
__device__ __forceinline__ void store_f16(uint8_t* p, float x) {
  *reinterpret_cast<unsigned short*>(p) = __half_as_ushort(__float2half_rn(x));
}
__device__ __forceinline__ float f16_round(float x) { return __half2float(__float2half_rn(x)); }

// Code i of a little-endian bit stream of `bits`-wide codes.
__device__ __forceinline__ unsigned load_code(const uint8_t* codes, int i, int bits) {
  if (bits == 8) return codes[i];
  const int bit = i * bits, byte = bit >> 3, shift = bit & 7;
  unsigned v = static_cast<unsigned>(codes[byte]) >> shift;
  if (shift + bits > 8) v |= static_cast<unsigned>(codes[byte + 1]) << (8 - shift);
  return v & ((1u << bits) - 1u);
}

// Code i of a group into buf (bytes of the group's own stream, zeroed beforehand).
__device__ __forceinline__ void put_code(uint8_t* buf, int i, int bits, unsigned c) {
  if (bits == 8) {
    buf[i] = static_cast<uint8_t>(c);
    return;
  }
  const int bit = i * bits, byte = bit >> 3, shift = bit & 7;
  buf[byte] |= static_cast<uint8_t>(c << shift);
  if (shift + bits > 8) buf[byte + 1] |= static_cast<uint8_t>(c >> (8 - shift));
}

// Whether the rotation negates element e (its sign bit).
__device__ __forceinline__ bool rotation_flips(const TurboTables& t, int e) { return (t.signs[e >> 5] >> (e & 31)) & 1u; }

// One butterfly stage across lanes: x of lane l becomes x_l + x_(l^d) where bit d of l is clear, else
// x_(l^d) - x_l (the stage's correctly rounded f32 ops).
__device__ __forceinline__ float lane_butterfly(float x, int lane, int d) {
  const float p = __shfl_xor_sync(0xffffffffu, x, d);
  return (lane & d) ? __fsub_rn(p, x) : __fadd_rn(x, p);
}

// The butterfly stages h = 1, 2, .., W / 2 among a thread's W elements y[m] (m's bit h clear: the pair's
// first).
template <int W>
__device__ __forceinline__ void register_butterflies(float (&y)[W]) {
#pragma unroll
  for (int h = 1; h < W; h *= 2) {
#pragma unroll
    for (int m = 0; m < W; ++m) {
      if (m & h) continue;
      const float a = y[m], b = y[m + h];
      y[m] = __fadd_rn(a, b);
      y[m + h] = __fsub_rn(a, b);
    }
  }
}

// Each of the `rows` rows x[r * dim .. (r + 1) * dim) in shared memory <- H (signs * x) (inverse:
// signs * (H x)), H the normalised Sylvester Hadamard matrix; every thread of the block calls it. Each
// element sees the same correctly rounded f32 ops in the same order whatever `rows` is.
__device__ __forceinline__ void block_rotate(float* x, int dim, const TurboTables& t, bool inverse, int rows = 1) {
  const int n = rows * dim;
  if (!inverse) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      const int e = i % dim;
      if (rotation_flips(t, e)) x[i] = -x[i];
    }
    __syncthreads();
  }
  const int half = dim / 2;
  for (int h = 1; h < dim; h *= 2) {
    for (int p = threadIdx.x; p < n / 2; p += blockDim.x) {
      const int pr = p % half;
      const int i = (p / half) * dim + (pr / h) * 2 * h + pr % h;
      const float a = x[i], b = x[i + h];
      x[i] = __fadd_rn(a, b);
      x[i + h] = __fsub_rn(a, b);
    }
    __syncthreads();
  }
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int e = i % dim;
    float v = __fmul_rn(x[i], t.norm);
    if (inverse && rotation_flips(t, e)) v = -v;
    x[i] = v;
  }
  __syncthreads();
}

// block_rotate of one row of dim == blockDim.x in {64, 128} held a thread an element: x is element
// threadIdx.x, the result the same element of the rotated row, with the same correctly rounded f32 ops
// in the same order. The butterflies within 32 elements run on warp shuffles; the last log2(dim / 32)
// stages after one barrier, each thread reading the dim / 32 elements its result depends on from
// `scratch` (dim floats of shared memory that no thread reads after this call without a barrier).
template <int W>
__device__ __forceinline__ float rotate_element_stages(float x, float* scratch) {
  const int e = threadIdx.x, lane = e & 31;
  scratch[e] = x;
  __syncthreads();
  float y[W];
#pragma unroll
  for (int m = 0; m < W; ++m) y[m] = scratch[lane + 32 * m];
  register_butterflies(y);
  float r = y[0];  // y[e >> 5], selected without indexing the array at run time (no local memory)
#pragma unroll
  for (int m = 1; m < W; ++m) r = (e >> 5) == m ? y[m] : r;
  return r;
}
__device__ __forceinline__ float rotate_element(float x, int dim, const TurboTables& t, bool inverse, float* scratch) {
  const int e = threadIdx.x, lane = e & 31;
  const bool flip = rotation_flips(t, e);
  if (!inverse && flip) x = -x;
#pragma unroll
  for (int h = 1; h < 32; h *= 2) x = lane_butterfly(x, lane, h);
  x = dim == 128 ? rotate_element_stages<4>(x, scratch) : rotate_element_stages<2>(x, scratch);
  x = __fmul_rn(x, t.norm);
  return inverse && flip ? -x : x;
}
// Whether rotate_element takes rows of `dim` in blocks of `threads`.
__host__ __device__ constexpr bool rotate_element_fits(int dim, int threads) {
  return dim == threads && (dim == 64 || dim == 128);
}

// One group of an affine row, exactly as AffineRowCodec::encode.
__device__ inline void encode_affine_group(const float* x, int n, int bits, uint8_t* codes, uint8_t* scale_out,
                                    uint8_t* bias_out) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) {
    lo = x[i] < lo ? x[i] : lo;  // std::min / std::max argument order
    hi = hi < x[i] ? x[i] : hi;
  }
  const float qmax = static_cast<float>((1 << bits) - 1);
  const float range = __fsub_rn(hi, lo);
  const float scale = f16_round(__fdiv_rn(range < 1e-8f ? 1e-8f : range, qmax)), bias = f16_round(lo);
  const float inv = scale > 0 ? __fdiv_rn(1.0f, scale) : 0.0f;
  uint8_t buf[128] = {};
  for (int i = 0; i < n; ++i) {
    float q = rintf(__fmul_rn(__fsub_rn(x[i], bias), inv));
    q = q < 0.0f ? 0.0f : (qmax < q ? qmax : q);
    put_code(buf, i, bits, static_cast<unsigned>(q));
  }
  for (int i = 0; i < n * bits / 8; ++i) codes[i] = buf[i];
  store_f16(scale_out, scale);
  store_f16(bias_out, bias);
}

// A TurboQuant key group's f16 scale sc and zero point zp from its minimum and maximum, and the code of
// one of its elements, exactly as turboquant::encode_key computes them.
struct TurboKeyScale {
  float sc, den, zp;
};
__device__ __forceinline__ TurboKeyScale turbo_key_scale(float lo, float hi) {
  const float alo = fabsf(lo), ahi = fabsf(hi);
  const float amax = alo < ahi ? ahi : alo;
  const float a = __fdiv_rn(__fsub_rn(hi, lo), 254.0f), b = __fdiv_rn(amax, 2048.0f);
  TurboKeyScale k;
  k.sc = f16_round(a < b ? b : a);
  k.den = __fadd_rn(k.sc, 1e-8f);
  k.zp = 0.0f;
  if (k.sc > 0) k.zp = f16_round(rintf(__fdiv_rn(__fadd_rn(hi, lo), __fmul_rn(2.0f, k.den))));
  return k;
}
__device__ __forceinline__ uint8_t turbo_key_code(float x, const TurboKeyScale& k) {
  float q = 0.0f;
  if (k.sc > 0) {
    q = rintf(__fsub_rn(__fdiv_rn(x, k.den), k.zp));
    q = q < -127.0f ? -127.0f : (127.0f < q ? 127.0f : q);
  }
  return static_cast<uint8_t>(static_cast<int8_t>(q));
}

// One group of 32 of a TurboQuant key row, exactly as turboquant::encode_key.
__device__ inline void encode_turbo_key_group(const float* x, uint8_t* codes, uint8_t* scale_out, uint8_t* zero_out) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < 32; ++i) {
    lo = x[i] < lo ? x[i] : lo;
    hi = hi < x[i] ? x[i] : hi;
  }
  const TurboKeyScale k = turbo_key_scale(lo, hi);
  for (int i = 0; i < 32; ++i) codes[i] = turbo_key_code(x[i], k);
  store_f16(scale_out, k.sc);
  store_f16(zero_out, k.zp);
}

// The same group of a TurboQuant key row by one warp, lane i holding element i (xi; at(i) reads any
// element): the same bits as encode_turbo_key_group. The minimum and maximum combine contiguous ranges in
// index order, keeping the left one on ties (as the sequential scan keeps its first), so signed zeros
// come out alike; a group holding a NaN (where the scan's order matters otherwise) takes the sequential
// scan on lane 0.
template <typename At>
__device__ inline void encode_turbo_key_group_warp(float xi, At at, int lane, uint8_t* codes, uint8_t* scale_out,
                                                   uint8_t* zero_out) {
  constexpr unsigned kAll = 0xffffffffu;
  if (__any_sync(kAll, isnan(xi))) {
    if (lane == 0) {
      float x[32];
      for (int i = 0; i < 32; ++i) x[i] = at(i);
      encode_turbo_key_group(x, codes, scale_out, zero_out);
    }
    return;
  }
  float lo = xi, hi = xi;
  for (int off = 1; off < 32; off *= 2) {  // lane i (a multiple of 2 off): [i, i + off) with [i + off, i + 2 off)
    const float olo = __shfl_down_sync(kAll, lo, off), ohi = __shfl_down_sync(kAll, hi, off);
    if ((lane & (2 * off - 1)) == 0) {
      lo = olo < lo ? olo : lo;
      hi = hi < ohi ? ohi : hi;
    }
  }
  const TurboKeyScale k = turbo_key_scale(__shfl_sync(kAll, lo, 0), __shfl_sync(kAll, hi, 0));
  codes[lane] = turbo_key_code(xi, k);
  if (lane == 0) {
    store_f16(scale_out, k.sc);
    store_f16(zero_out, k.zp);
  }
}

// The number of the n sorted bounds strictly below y (a lower bound by bisection): y's codebook index.
__device__ __forceinline__ int bounds_below(const float* bounds, int n, float y) {
  int lo = 0;
  while (n > 0) {
    const int half = n / 2;
    if (bounds[lo + half] < y) {
      lo += half + 1;
      n -= half + 1;
    } else {
      n = half;
    }
  }
  return lo;
}

// One group of 32 of a rotated TurboQuant value row, exactly as turboquant::encode_rotated_value, by
// one warp, lane i taking element i (the sum of squares stays one sequential sum, on lane 0). bounds: the
// codebook's n_bounds bucket bounds in shared memory. The codes' little-endian stream is assembled as
// `bits` 32-bit words OR-reduced over the warp, then stored a byte a lane.
__device__ inline void encode_turbo_value_group_warp(const float* r, int bits, const float* bounds, int n_bounds,
                                                     int lane, uint8_t* codes, uint8_t* scale_out) {
  constexpr unsigned kAll = 0xffffffffu;
  float s = 0.0f, inv = 0.0f;
  if (lane == 0) {
    float ss = 0.0f;
    for (int i = 0; i < 32; ++i) ss = __fadd_rn(ss, __fmul_rn(r[i], r[i]));
    s = f16_round(__fsqrt_rn(__fdiv_rn(ss, 32.0f)));
    inv = __fdiv_rn(1.0f, __fadd_rn(s, 1e-8f));
  }
  s = __shfl_sync(kAll, s, 0);
  inv = __shfl_sync(kAll, inv, 0);
  const float y = __fmul_rn(r[lane], inv);
  const unsigned c = static_cast<unsigned>(bounds_below(bounds, n_bounds, y));
  const int bit = lane * bits, w0 = bit >> 5, sh = bit & 31;
  unsigned word = 0;  // this lane's byte of the stream
  for (int k = 0; k < bits; ++k) {  // the stream is `bits` words of 32 codes' bits
    unsigned part = 0;
    if (k == w0) part = c << sh;
    if (k == w0 + 1 && sh + bits > 32) part = c >> (32 - sh);
    const unsigned wk = __reduce_or_sync(kAll, part);
    if (lane >> 2 == k) word = wk >> (8 * (lane & 3));
  }
  if (lane < 4 * bits) codes[lane] = static_cast<uint8_t>(word & 0xffu);
  if (lane == 0) store_f16(scale_out, s);
}

// A group of n (32, 64 or 128) of an affine row of 4 or 8 bits by one warp: the same bits as
// encode_affine_group. Lane i holds elements [i n/32, (i + 1) n/32) of x (global memory, T), scans them
// in order and then combines the lanes' contiguous ranges in index order, keeping the left one on ties
// (as the sequential scan keeps its first), so signed zeros come out alike; a group holding a NaN takes
// the sequential scan on lane 0. Each lane packs its codes into one word and stores its bytes (two
// lanes share a byte for n = 32 at 4 bits).
template <typename T>
__device__ inline void encode_affine_group_warp(const T* x, int n, int bits, int lane, uint8_t* codes,
                                                uint8_t* scale_out, uint8_t* bias_out) {
  constexpr unsigned kAll = 0xffffffffu;
  const int per = n / 32;
  float v[4];
  bool nan = false;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    v[e] = e < per ? to_f32(x[lane * per + e]) : 0.0f;
    nan = nan || isnan(v[e]);
  }
  if (__any_sync(kAll, nan)) {
    if (lane == 0) {
      float row[128];
      for (int i = 0; i < n; ++i) row[i] = to_f32(x[i]);
      encode_affine_group(row, n, bits, codes, scale_out, bias_out);
    }
    return;
  }
  float lo = v[0], hi = v[0];
#pragma unroll
  for (int e = 1; e < 4; ++e) {
    if (e < per) {
      lo = v[e] < lo ? v[e] : lo;
      hi = hi < v[e] ? v[e] : hi;
    }
  }
  for (int off = 1; off < 32; off *= 2) {  // lane i (a multiple of 2 off): [i, i + off) with [i + off, i + 2 off)
    const float olo = __shfl_down_sync(kAll, lo, off), ohi = __shfl_down_sync(kAll, hi, off);
    if ((lane & (2 * off - 1)) == 0) {
      lo = olo < lo ? olo : lo;
      hi = hi < ohi ? ohi : hi;
    }
  }
  lo = __shfl_sync(kAll, lo, 0);
  hi = __shfl_sync(kAll, hi, 0);
  const float qmax = static_cast<float>((1 << bits) - 1);
  const float range = __fsub_rn(hi, lo);
  const float scale = f16_round(__fdiv_rn(range < 1e-8f ? 1e-8f : range, qmax)), bias = f16_round(lo);
  const float inv = scale > 0 ? __fdiv_rn(1.0f, scale) : 0.0f;
  unsigned word = 0;  // this lane's codes, element e at bits [e bits, (e + 1) bits)
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    if (e < per) {
      float q = rintf(__fmul_rn(__fsub_rn(v[e], bias), inv));
      q = q < 0.0f ? 0.0f : (qmax < q ? qmax : q);
      word |= static_cast<unsigned>(q) << (e * bits);
    }
  }
  const int lane_bits = per * bits;
  if (lane_bits >= 8) {
    const int bytes = lane_bits / 8;
    for (int k = 0; k < bytes; ++k) codes[lane * bytes + k] = static_cast<uint8_t>(word >> (8 * k));
  } else {  // 4 bits a lane: even lanes store their code and their right neighbour's
    const unsigned right = __shfl_down_sync(kAll, word, 1);
    if ((lane & 1) == 0) codes[lane / 2] = static_cast<uint8_t>(word | (right << 4));
  }
  if (lane == 0) {
    store_f16(scale_out, scale);
    store_f16(bias_out, bias);
  }
}

// Whether kv_encode_group_warp takes a codec: affine of 4 or 8 bits in groups of 32, 64 or 128, or
// TurboQuant's 8-bit keys (groups of 32); the rotated codecs need a whole row (kv_encode_block).
__host__ __device__ constexpr bool kv_encode_by_group(const KVCodecArgs& c) {
  return (c.kind == 0 && (c.bits == 4 || c.bits == 8) && (c.group == 32 || c.group == 64 || c.group == 128)) ||
         c.kind == 1;
}

// Where packed row r = (l * B + b) * H + h of job j reads and writes: x[b, h, l, :] into its row of j.rows
// (with positions: stored at row (p * B + b) * H + h, p = positions[b], or positions[b] % ring for a
// ring). False when the position falls outside the storage (nothing is written).
template <typename T>
__device__ __forceinline__ bool kv_encode_place(const KVEncodeJob& j, int64_t r, int64_t B, int64_t H, const T*& x,
                                                uint8_t*& out) {
  const int64_t h = r % H, b = (r / H) % B, l = r / (H * B);
  int64_t dst = r;
  if (j.positions) {
    int64_t p = j.positions[b];
    if (p >= 0 && j.ring > 0) p %= j.ring;
    if (p < 0 || p >= j.capacity) return false;
    dst = (p * B + b) * H + h;
  }
  x = static_cast<const T*>(j.x) + b * j.xs[0] + h * j.xs[1] + l * j.xs[2];
  out = j.rows + dst * j.c.row_bytes;
  return true;
}

// Group g of packed row r (as kv_encode_block numbers rows) of job j, by one warp reading its elements
// straight from x: the same bits as kv_encode_block.
template <typename T>
__device__ __forceinline__ void kv_encode_group_warp(const KVEncodeJob& j, int64_t r, int g, int64_t B, int64_t H,
                                                     int lane) {
  const KVCodecArgs c = j.c;
  const T* x;
  uint8_t* out;
  if (!kv_encode_place(j, r, B, H, x, out)) return;  // the whole warp returns alike
  const T* xg = x + g * c.group;
  const int groups = c.dim / c.group;
  uint8_t* first = out + c.codes_bytes;
  if (c.kind == 0) {
    encode_affine_group_warp(xg, c.group, c.bits, lane, out + g * c.group * c.bits / 8, first + 2 * g,
                             first + 2 * (groups + g));
    return;
  }
  encode_turbo_key_group_warp(to_f32(xg[lane]), [xg](int i) { return to_f32(xg[i]); }, lane, out + g * 32,
                              first + 2 * g, first + 2 * (groups + g));
}

// Whether kv_encode_rotated_row_warp takes a codec: the rotated ones (TurboQuant's values, 4- and 3-bit
// keys) of head dim 32, 64, 128 or 256.
__host__ __device__ constexpr bool kv_encode_by_row(const KVCodecArgs& c) {
  return c.kind == 2 && (c.dim == 32 || c.dim == 64 || c.dim == 128 || c.dim == 256);
}

// A rotated row of dim = 32 W (W <= 8) by one warp: the same bits as kv_encode_block. Lane l holds
// elements [W l, W l + W) of x: the forward rotation runs on them in registers and on shuffles (each
// element sees block_rotate's correctly rounded f32 ops in its order, as kv_decode_rows_kernel's inverse
// does). Group g of 32 is lanes [g L, g L + L), L = 32 / W: its sum of squares runs in element order along
// them, lane to lane (one sequential sum, as the CPU's), each lane codes its W elements (bounds: the
// codebook's n_bounds bucket bounds in shared memory), and the group's stream words are OR-reduced over
// its lanes, each lane keeping the bytes it stores.
template <typename T, int W>
__device__ inline void kv_encode_rotated_row_warp(const T* x, const KVCodecArgs& c, const TurboTables& t,
                                                  const float* bounds, int lane, uint8_t* out) {
  constexpr unsigned kAll = 0xffffffffu;
  constexpr int L = 32 / W;
  float y[W];
#pragma unroll
  for (int m = 0; m < W; ++m) {
    const float v = to_f32(x[W * lane + m]);
    y[m] = rotation_flips(t, W * lane + m) ? -v : v;
  }
  register_butterflies(y);
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {  // stage h = d W: the partner is lane ^ d
#pragma unroll
    for (int m = 0; m < W; ++m) y[m] = lane_butterfly(y[m], lane, d);
  }
#pragma unroll
  for (int m = 0; m < W; ++m) y[m] = __fmul_rn(y[m], t.norm);
  const int j = lane % L, g = lane / L, bits = c.bits;
  float ss = 0.0f;  // lane j adds its squares after lane j - 1 has added its own
#pragma unroll
  for (int k = 0; k < L; ++k) {
    if (j == k) {
#pragma unroll
      for (int m = 0; m < W; ++m) ss = __fadd_rn(ss, __fmul_rn(y[m], y[m]));
    }
    const float prev = __shfl_up_sync(kAll, ss, 1);
    if (j == k + 1) ss = prev;
  }
  ss = __shfl_sync(kAll, ss, g * L + L - 1);
  const float s = f16_round(__fsqrt_rn(__fdiv_rn(ss, 32.0f)));
  const float inv = __fdiv_rn(1.0f, __fadd_rn(s, 1e-8f));
  uint64_t word = 0;  // this lane's codes, element m at bits [m bits, (m + 1) bits)
#pragma unroll
  for (int m = 0; m < W; ++m) {
    const float v = __fmul_rn(y[m], inv);
    word |= static_cast<uint64_t>(bounds_below(bounds, t.n_bounds, v)) << (m * bits);
  }
  // The group's stream is `bits` words; this lane's bits start at j W bits. Byte i of the stream is kept
  // by lane i % L, at byte i / L of `mine`.
  const unsigned group_mask = L == 32 ? kAll : ((1u << L) - 1u) << (g * L);
  uint64_t mine = 0;
  for (int k = 0; k < bits; ++k) {
    const int off = j * W * bits - 32 * k;
    uint32_t part = 0;
    if (off >= 0 && off < 32) part = static_cast<uint32_t>(word << off);
    if (off < 0 && off > -W * bits) part = static_cast<uint32_t>(word >> -off);
    const uint32_t wk = __reduce_or_sync(group_mask, part);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int i = 4 * k + q;
      if (i % L == j) mine |= static_cast<uint64_t>((wk >> (8 * q)) & 0xffu) << (8 * (i / L));
    }
  }
  uint8_t* codes = out + g * 4 * bits;
  for (int slot = 0; slot * L < 4 * bits; ++slot) {
    const int i = slot * L + j;
    if (i < 4 * bits) codes[i] = static_cast<uint8_t>(mine >> (8 * slot));
  }
  if (j == 0) store_f16(out + c.codes_bytes + 2 * g, s);
}

// Shared memory of kv_encode_block: a row of at most 1024 floats and the codebook's bucket bounds.
struct KVEncodeSmem {
  float row[1024];
  float bounds[255];
};

// Packed row r = (l * B + b) * H + h of job j, holding x[b, h, l, :] (with positions: stored at row
// (p * B + b) * H + h, p = positions[b], or positions[b] % ring for a ring), by the whole block. t: the
// tables of the job's codec when it is a TurboQuant value's.
template <typename T>
__device__ __forceinline__ void kv_encode_block(const KVEncodeJob& j, int64_t r, int64_t B, int64_t H,
                                                const TurboTables& t, KVEncodeSmem& sm) {
  float* row = sm.row;
  float* bounds = sm.bounds;
  const KVCodecArgs c = j.c;
  const T* xp;
  uint8_t* out;
  if (!kv_encode_place(j, r, B, H, xp, out)) return;  // the whole block returns alike, before any barrier
  if (c.kind == 2) {
    for (int i = threadIdx.x; i < t.n_bounds; i += blockDim.x) bounds[i] = t.bounds[i];
  }
  if (c.kind == 2 && rotate_element_fits(c.dim, blockDim.x)) {  // rotated in registers, its barrier publishing bounds
    row[threadIdx.x] = rotate_element(to_f32(xp[threadIdx.x]), c.dim, t, false, row + 512);
    __syncthreads();
  } else {
    for (int i = threadIdx.x; i < c.dim; i += blockDim.x) row[i] = to_f32(xp[i]);
    __syncthreads();
    if (c.kind == 2) block_rotate(row, c.dim, t, false);
  }
  const int groups = c.dim / c.group;
  uint8_t* first = out + c.codes_bytes;  // f16 scales [groups], then the second f16 [groups]
  if (c.kind == 0) {  // affine: a thread a group
    for (int g = threadIdx.x; g < groups; g += blockDim.x) {
      uint8_t* codes = out + g * c.group * c.bits / 8;
      encode_affine_group(row + g * c.group, c.group, c.bits, codes, first + 2 * g, first + 2 * (groups + g));
    }
    return;
  }
  // TurboQuant (groups of 32): a warp a group
  const int lane = threadIdx.x & 31;
  for (int g = threadIdx.x >> 5; g < groups; g += blockDim.x >> 5) {
    uint8_t* codes = out + g * 32 * c.bits / 8;
    if (c.kind == 1) {
      const float* x = row + g * 32;
      encode_turbo_key_group_warp(x[lane], [x](int i) { return x[i]; }, lane, codes, first + 2 * g,
                                  first + 2 * (groups + g));
    } else {
      encode_turbo_value_group_warp(row + g * 32, c.bits, bounds, t.n_bounds, lane, codes, first + 2 * g);
    }
  }
}

// One block per packed row r = (l * B + b) * H + h of job blockIdx.y (0: j0, 1: j1; keys and values in
// one launch): kv_encode_block. t: the tables of the job whose codec is a TurboQuant value's (at most one
// of the two).
//
// A job whose codec kv_encode_by_group takes is encoded a warp a group instead: warp w of the grid's
// (gridDim.x x blockDim.x / 32) takes groups w, w + that count, ... of its rows x groups, straight from x
// (no shared memory, no barrier); one that kv_encode_by_row takes, a warp a row (rows w, w + that
// count, ...). rows: the jobs' packed rows (L B H).
template <typename T>
__global__ void kv_encode_kernel(KVEncodeJob j0, KVEncodeJob j1, int64_t B, int64_t H, int64_t rows,
                                 TurboTables t) {
  grid_dependency_wait();
  __shared__ KVEncodeSmem sm;
  const KVEncodeJob& j = blockIdx.y == 0 ? j0 : j1;
  const int warps = blockDim.x >> 5, lane = threadIdx.x & 31;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * warps + (threadIdx.x >> 5);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * warps;
  if (kv_encode_by_row(j.c)) {
    for (int i = threadIdx.x; i < t.n_bounds; i += blockDim.x) sm.bounds[i] = t.bounds[i];
    __syncthreads();
    auto rows_of = [&](auto w) {
      constexpr int W = decltype(w)::value;
      for (int64_t r = first; r < rows; r += stride) {
        const T* x;
        uint8_t* out;
        if (kv_encode_place(j, r, B, H, x, out)) kv_encode_rotated_row_warp<T, W>(x, j.c, t, sm.bounds, lane, out);
      }
    };
    switch (j.c.dim) {
      case 32: return rows_of(std::integral_constant<int, 1>{});
      case 64: return rows_of(std::integral_constant<int, 2>{});
      case 128: return rows_of(std::integral_constant<int, 4>{});
      default: return rows_of(std::integral_constant<int, 8>{});
    }
  }
  if (!kv_encode_by_group(j.c)) {
    if (blockIdx.x < rows) kv_encode_block<T>(j, blockIdx.x, B, H, t, sm);
    return;
  }
  const int groups = j.c.dim / j.c.group;
  for (int64_t u = first; u < rows * groups; u += stride) {
    kv_encode_group_warp<T>(j, u / groups, static_cast<int>(u % groups), B, H, lane);
  }
}

// Element i of a packed row, dequantised (turbo values: in the rotated domain). book: the codebook.
__device__ __forceinline__ float decode_element(const uint8_t* row, const KVCodecArgs& c, int i, const float* book) {
  const int g = i / c.group, groups = c.dim / c.group;
  const uint8_t* first = row + c.codes_bytes;
  if (c.kind == 0)
    return static_cast<float>(load_code(row, i, c.bits)) * f16_value(first + 2 * g) + f16_value(first + 2 * (groups + g));
  if (c.kind == 1)
    return (static_cast<float>(static_cast<int8_t>(row[i])) + f16_value(first + 2 * (groups + g))) * f16_value(first + 2 * g);
  return book[load_code(row, i, c.bits)] * f16_value(first + 2 * g);
}

// Packed rows r = (s * B + b) * H + h -> out [B, H, out_len >= S, dim] (last two dims contiguous; position s
// of row (b, h) at ((b H + h) out_len + s) dim); turbo values rotated back when unrotate.
//
// kv_decode_rows_kernel: a warp a row (kKVDecodeRows rows a block), dim = 32 W, lane l holding elements
// [W l, W l + W): it decodes them, runs the inverse rotation's butterflies in registers (stages below W
// inside the lane, the others by shuffles, each element seeing block_rotate's correctly rounded f32 ops
// in its order) and stores them in one vector. out aligned to W sizeof(T) bytes (the launcher checks).
constexpr int kKVDecodeRows = 8;
template <typename T, int W>
__global__ void __launch_bounds__(kKVDecodeRows * 32)
    kv_decode_rows_kernel(const uint8_t* rows, int64_t S, int64_t B, int64_t H, T* out, int64_t out_len,
                          KVCodecArgs c, TurboTables t, bool unrotate) {
  grid_dependency_wait();
  __shared__ float book[256];
  if (c.kind == 2)
    for (int i = threadIdx.x; i < (1 << c.bits); i += blockDim.x) book[i] = t.book[i];
  __syncthreads();
  const int lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kKVDecodeRows + (threadIdx.x >> 5);
  if (r >= S * B * H) return;
  const int64_t h = r % H, b = (r / H) % B, s = r / (H * B);
  const uint8_t* in = rows + r * c.row_bytes;
  float y[W];
#pragma unroll
  for (int m = 0; m < W; ++m) y[m] = decode_element(in, c, W * lane + m, book);
  if (c.kind == 2 && unrotate) {
    register_butterflies(y);
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {  // stage h = d W: the partner is lane ^ d
#pragma unroll
      for (int m = 0; m < W; ++m) y[m] = lane_butterfly(y[m], lane, d);
    }
#pragma unroll
    for (int m = 0; m < W; ++m) {
      const float v = __fmul_rn(y[m], t.norm);
      y[m] = rotation_flips(t, W * lane + m) ? -v : v;
    }
  }
  struct alignas(W * sizeof(T)) Vec {
    T v[W];
  } o;
#pragma unroll
  for (int m = 0; m < W; ++m) o.v[m] = from_f32<T>(y[m]);
  *reinterpret_cast<Vec*>(out + ((b * H + h) * out_len + s) * c.dim + W * lane) = o;
}

// kv_decode_kernel, any dim up to 1024: a block a row.
template <typename T>
__global__ void kv_decode_kernel(const uint8_t* rows, int64_t S, int64_t B, int64_t H, T* out, int64_t out_len,
                                 KVCodecArgs c, TurboTables t, bool unrotate) {
  grid_dependency_wait();
  __shared__ float row[1024];
  __shared__ float book[256];
  if (c.kind == 2)
    for (int i = threadIdx.x; i < (1 << c.bits); i += blockDim.x) book[i] = t.book[i];
  __syncthreads();
  const int64_t r = blockIdx.x, h = r % H, b = (r / H) % B, s = r / (H * B);
  const uint8_t* in = rows + r * c.row_bytes;
  for (int i = threadIdx.x; i < c.dim; i += blockDim.x) row[i] = decode_element(in, c, i, book);
  __syncthreads();
  if (c.kind == 2 && unrotate) block_rotate(row, c.dim, t, true);
  T* op = out + ((b * H + h) * out_len + s) * c.dim;
  for (int i = threadIdx.x; i < c.dim; i += blockDim.x) op[i] = from_f32<T>(row[i]);
}

}  // namespace tern::cuda::kernels
