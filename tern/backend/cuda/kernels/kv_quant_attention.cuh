// Fused decode attention over packed KV rows (flash-decoding): a block owns one key split, one kv head
// (up to GC of its query heads) and one batch row; each warp walks every 4th key of the split, lanes
// dequantise EPL consecutive elements of the key and value rows in registers and keep their own online
// softmax; the warps merge in shared memory into an (acc, max, sum) partial that the combine kernel
// merges across splits, normalises and (turbo values) rotates back once per output row. Rotated keys
// (TurboQuant_mse, 4 or 3 bits) are met by rotating the block's query rows and the new key once.
#pragma once
#include <math_constants.h>

#include "tern/backend/cuda/kernels/kv_quant.cuh"

namespace tern::cuda::kernels {

constexpr int kKVAttnWarps = 4;

// Query heads per block for EPL elements per lane (keeps q and acc at <= 32 registers each).
template <int EPL>
constexpr int kv_attn_heads() { return EPL <= 4 ? 8 : 32 / EPL; }

template <typename T, int EPL>
__global__ void __launch_bounds__(kKVAttnWarps * 32) kv_decode_attention_kernel(KVAttnArgs a, TurboTables t) {
  grid_dependency_wait();
  constexpr int GC = kv_attn_heads<EPL>();
  constexpr int D = 32 * EPL;
  __shared__ float book[256], key_book[16];
  __shared__ float new_k[D], new_v[D];
  __shared__ float wm[kKVAttnWarps][GC], wl[kKVAttnWarps][GC];
  __shared__ float wacc[kKVAttnWarps][GC][D];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t split = blockIdx.x, hk = blockIdx.y / a.n_head_chunks, b = blockIdx.z;
  const int64_t G = a.Hq / a.Hkv, g0 = (blockIdx.y % a.n_head_chunks) * GC;
  const int ng = static_cast<int>(G - g0 < GC ? G - g0 : GC);
  const bool has_new = a.k_new != nullptr;
  const int64_t n_keys = a.S + (has_new ? 1 : 0);
  const int64_t j0 = split * a.chunk, j1 = j0 + a.chunk < n_keys ? j0 + a.chunk : n_keys;
  const int e0 = lane * EPL;
  const bool rotated_keys = a.kc.kind == 2;  // scores in the rotated domain

  if (a.vc.kind == 2)
    for (int i = threadIdx.x; i < (1 << a.vc.bits); i += blockDim.x) book[i] = t.book[i];
  if (rotated_keys)
    for (int i = threadIdx.x; i < (1 << a.kc.bits); i += blockDim.x) key_book[i] = t.key_book[i];
  const bool owns_new = has_new && j1 == n_keys;  // uniform across the block
  if (owns_new) {
    const T* kp = static_cast<const T*>(a.k_new) + b * a.kns[0] + hk * a.kns[1];
    const T* vp = static_cast<const T*>(a.v_new) + b * a.vns[0] + hk * a.vns[1];
    for (int i = threadIdx.x; i < D; i += blockDim.x) {
      new_k[i] = to_f32(kp[i]);
      new_v[i] = to_f32(vp[i]);
    }
    __syncthreads();
    if (rotated_keys) block_rotate(new_k, D, t, false);
    if (a.vc.kind == 2) block_rotate(new_v, D, t, false);  // the read attends in the rotated domain
  }
  __syncthreads();

  // Query row gi is head g0 + gi of the group (rows past ng repeat the first). Rotated keys: the rows
  // are rotated in wacc's space, which the warps' merge only fills after every lane has its query.
  auto q_row = [&](int gi) {
    const int64_t h = hk * G + g0 + (gi < ng ? gi : 0);
    return static_cast<const T*>(a.q) + b * a.qs[0] + h * a.qs[1];
  };
  float* q_rot = &wacc[0][0][0];
  if (rotated_keys) {
    for (int i = threadIdx.x; i < GC * D; i += blockDim.x) q_rot[i] = to_f32(q_row(i / D)[i % D]);
    __syncthreads();
    block_rotate(q_rot, D, t, false, GC);
  }
  float q[GC][EPL];
#pragma unroll
  for (int gi = 0; gi < GC; ++gi) {
    const T* qp = q_row(gi);
#pragma unroll
    for (int e = 0; e < EPL; ++e) q[gi][e] = rotated_keys ? q_rot[gi * D + e0 + e] : to_f32(qp[e0 + e]);
  }
  if (rotated_keys) __syncthreads();
  float m[GC], l[GC], acc[GC][EPL];
#pragma unroll
  for (int gi = 0; gi < GC; ++gi) {
    m[gi] = -CUDART_INF_F;
    l[gi] = 0.0f;
#pragma unroll
    for (int e = 0; e < EPL; ++e) acc[gi][e] = 0.0f;
  }

  const int64_t pos_stride = a.B * a.Hkv;
  int64_t len = a.S;  // stored keys this batch row reads (a compiled decode step's row length)
  int64_t skip = -1;  // a ring's slot this row does not read
  if (a.lengths) {
    const int64_t n = a.lengths[b];
    len = n < 0 ? 0 : (n < a.S ? n : a.S);
    if (a.ring > 0 && n >= 0 && n % a.ring < len) skip = n % a.ring;  // a stored slot only, never the new key
  }
  for (int64_t j = j0 + warp; j < j1; j += kKVAttnWarps) {
    if (j >= len && j < a.S) {
      // past this row's stored keys: jump to this warp's first index >= S (the new key, if it is ours)
      j += ((a.S - j + kKVAttnWarps - 1) / kKVAttnWarps - 1) * kKVAttnWarps;
      continue;
    }
    if (j == skip) continue;
    float kx[EPL], vx[EPL];
    if (j < a.S) {
      const int64_t row = j * pos_stride + b * a.Hkv + hk;
      const uint8_t* kr = a.k_rows + row * a.kc.row_bytes;
      const uint8_t* vr = a.v_rows + row * a.vc.row_bytes;
#pragma unroll
      for (int e = 0; e < EPL; ++e) {
        kx[e] = decode_element(kr, a.kc, e0 + e, key_book);
        vx[e] = decode_element(vr, a.vc, e0 + e, book);
      }
    } else {
#pragma unroll
      for (int e = 0; e < EPL; ++e) {
        kx[e] = new_k[e0 + e];
        vx[e] = new_v[e0 + e];
      }
    }
#pragma unroll
    for (int gi = 0; gi < GC; ++gi) {
      float dot = 0.0f;
#pragma unroll
      for (int e = 0; e < EPL; ++e) dot += q[gi][e] * kx[e];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
      float s = dot * a.scale;
      if (a.softcap > 0.0f) s = a.softcap * tanhf(s / a.softcap);
      const float m_new = fmaxf(m[gi], s);
      const float corr = expf(m[gi] - m_new), p = expf(s - m_new);
      l[gi] = l[gi] * corr + p;
#pragma unroll
      for (int e = 0; e < EPL; ++e) acc[gi][e] = acc[gi][e] * corr + p * vx[e];
      m[gi] = m_new;
    }
  }

#pragma unroll
  for (int gi = 0; gi < GC; ++gi) {
    if (lane == 0) {
      wm[warp][gi] = m[gi];
      wl[warp][gi] = l[gi];
    }
#pragma unroll
    for (int e = 0; e < EPL; ++e) wacc[warp][gi][e0 + e] = acc[gi][e];
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < ng * D; idx += blockDim.x) {
    const int gi = idx / D, d = idx % D;
    float mx = -CUDART_INF_F;
    for (int w = 0; w < kKVAttnWarps; ++w) mx = fmaxf(mx, wm[w][gi]);
    float sum = 0.0f, out = 0.0f;
    for (int w = 0; w < kKVAttnWarps; ++w) {
      const float wgt = wm[w][gi] == -CUDART_INF_F ? 0.0f : expf(wm[w][gi] - mx);
      sum += wl[w][gi] * wgt;
      out += wacc[w][gi][d] * wgt;
    }
    const int64_t r = b * a.Hq + hk * G + g0 + gi;
    float* pp = a.partial + (split * a.B * a.Hq + r) * (D + 2);
    pp[d] = out;
    if (d == 0) {
      pp[D] = mx;
      pp[D + 1] = sum;
    }
  }
}

// Shared memory of kv_combine_row.
struct KVCombineSmem {
  float o[512];
  float wgt[kKVMaxSplits], sums[kKVMaxSplits];
};

// kv_combine_row for a block of a thread an element (rotate_element_fits(D, blockDim.x)) and at most
// 32 N splits: every load (each split's max and sum, by every warp, and the thread's element of each
// split) is issued at once, the max, weights and sum are warp reductions, and turbo values rotate
// back in registers: no barrier but rotate_element's.
template <typename T, int N>
__device__ __forceinline__ void kv_combine_row_regs(const float* partial, int n_splits, int64_t rows, int64_t r,
                                                    int D, bool rotate_back, const TurboTables& t, T* out,
                                                    KVCombineSmem& sm) {
  const int d = threadIdx.x, lane = d & 31;
  const int64_t stride = rows * (D + 2);
  const float* base = partial + r * (D + 2);
  float v[32 * N], m[N], l[N];
#pragma unroll
  for (int s = 0; s < 32 * N; ++s) v[s] = s < n_splits ? base[s * stride + d] : 0.0f;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int s = lane + 32 * i;
    m[i] = s < n_splits ? base[s * stride + D] : -CUDART_INF_F;
    l[i] = s < n_splits ? base[s * stride + D + 1] : 0.0f;
  }
  float mx = m[0];
#pragma unroll
  for (int i = 1; i < N; ++i) mx = fmaxf(mx, m[i]);
  mx = warp_max(mx);
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    m[i] = m[i] == -CUDART_INF_F ? 0.0f : expf(m[i] - mx);  // the split's weight
    sum += l[i] * m[i];
  }
  sum = warp_sum(sum);
  float acc = 0.0f;
#pragma unroll
  for (int s = 0; s < 32 * N; ++s) acc += v[s] * __shfl_sync(0xffffffffu, m[s / 32], s % 32);
  float o = sum > 0.0f ? acc / sum : 0.0f;
  if (rotate_back) o = rotate_element(o, D, t, true, sm.o);
  out[r * D + d] = from_f32<T>(o);
}

// Output row r = b * Hq + h, by the whole block: merges the splits' partials, normalises, rotates turbo
// values back (rotate_back) and writes out [B * Hq, D] contiguous. Each split's max and weight are read
// and computed once for the block (n_splits <= kKVMaxSplits, kv_quant_args.h), then every thread sums its
// element's splits in split order with their loads in flight together. A block of a thread an element
// over at most 64 splits takes kv_combine_row_regs instead (no barrier but the rotation's).
template <typename T>
__device__ __forceinline__ void kv_combine_row(const float* partial, int n_splits, int64_t rows, int64_t r, int D,
                                               bool rotate_back, const TurboTables& t, T* out, KVCombineSmem& sm) {
  if (rotate_element_fits(D, blockDim.x) && n_splits <= 64) {  // uniform across the block
    if (n_splits <= 32) {
      kv_combine_row_regs<T, 1>(partial, n_splits, rows, r, D, rotate_back, t, out, sm);
    } else {
      kv_combine_row_regs<T, 2>(partial, n_splits, rows, r, D, rotate_back, t, out, sm);
    }
    return;
  }
  float* o = sm.o;
  float* wgt = sm.wgt;
  float* sums = sm.sums;
  float mx = -CUDART_INF_F;
  for (int s = threadIdx.x; s < n_splits; s += blockDim.x) {
    const float* pp = partial + (s * rows + r) * (D + 2);
    wgt[s] = pp[D];
    sums[s] = pp[D + 1];
    mx = fmaxf(mx, wgt[s]);
  }
  mx = block_max(mx);  // its barriers also publish wgt and sums
  for (int s = threadIdx.x; s < n_splits; s += blockDim.x) wgt[s] = wgt[s] == -CUDART_INF_F ? 0.0f : expf(wgt[s] - mx);
  __syncthreads();
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float sum = 0.0f, acc = 0.0f;
#pragma unroll 16
    for (int s = 0; s < n_splits; ++s) {
      sum += sums[s] * wgt[s];
      acc += partial[(s * rows + r) * (D + 2) + d] * wgt[s];
    }
    o[d] = sum > 0.0f ? acc / sum : 0.0f;
  }
  __syncthreads();
  if (rotate_back) block_rotate(o, D, t, true);
  for (int d = threadIdx.x; d < D; d += blockDim.x) out[r * D + d] = from_f32<T>(o[d]);
}

// One block per output row: kv_combine_row.
template <typename T>
__global__ void kv_attention_combine_kernel(const float* partial, int n_splits, int64_t rows, int D, bool rotate_back,
                                            TurboTables t, T* out) {
  grid_dependency_wait();
  __shared__ KVCombineSmem sm;
  kv_combine_row<T>(partial, n_splits, rows, blockIdx.x, D, rotate_back, t, out, sm);
}

// The combine of a compiled decode step that also stores the step's new keys and values: blocks
// [0, rows) combine output rows as kv_attention_combine_kernel does; the 2 eB eH blocks after them encode
// packed row i of job i / (eB eH) (0: keys, 1: values) as kv_encode_kernel does, beside the combine
// instead of in a launch of their own before the read (the read takes the new rows unquantised). T: the
// output's and the new rows' dtype.
template <typename T>
__global__ void kv_attention_combine_store_kernel(const float* partial, int n_splits, int64_t rows, int D,
                                                  bool rotate_back, TurboTables t, T* out, KVEncodeJob e0,
                                                  KVEncodeJob e1, int64_t eB, int64_t eH) {
  grid_dependency_wait();
  __shared__ union {
    KVCombineSmem combine;
    KVEncodeSmem encode;
  } sm;
  const int64_t r = blockIdx.x;
  if (r < rows) {
    kv_combine_row<T>(partial, n_splits, rows, r, D, rotate_back, t, out, sm.combine);
    return;
  }
  const int64_t i = r - rows, per_job = eB * eH;
  kv_encode_block<T>(i < per_job ? e0 : e1, i % per_job, eB, eH, t, sm.encode);
}

}  // namespace tern::cuda::kernels
