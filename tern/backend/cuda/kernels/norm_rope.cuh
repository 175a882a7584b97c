// RMSNorm of each head row, then the rotary embedding (rotate-half pairing), for the query and key heads
// of one attention step in one launch: one warp per head row of a token, q's rows, then k's, then (when
// the keys go straight into a cache) v's rows, copied to their slot. The normed row is held in registers
// and, for the rotation's partner dims, in shared memory. D <= 256. A row's loads (the row, its norm
// weight) are issued before the block computes its token's cos/sin, so a row costs one round trip.
#pragma once
#include "tern/backend/cuda/kernels/common.cuh"
#include "tern/backend/cuda/kernels/norm_rope_args.h"

namespace tern::cuda::kernels {

// This warp's row of its block (grid: B * L tokens, ceil(rows per token / kNormRopeWarps)): the token
// (b, l) at position p, and head h of q (which 0), k (1) or v (2; only with kv). live: a row exists.
struct NormRopeRow {
  int64_t b, l, p, h;
  int which;
  bool live;
};
template <typename P>
__device__ __forceinline__ NormRopeRow norm_rope_row(const NormRopeArgs& a, int warp) {
  NormRopeRow r;
  const int64_t t = blockIdx.x;
  r.b = t / a.L, r.l = t % a.L;
  r.p = static_cast<int64_t>(static_cast<const P*>(a.pos)[a.per_batch ? t : r.l]);
  r.h = static_cast<int64_t>(blockIdx.y) * kNormRopeWarps + warp;
  r.which = 0;
  if (r.h >= a.heads[0]) {
    r.h -= a.heads[0];
    r.which = 1;
    if (r.h >= a.heads[1]) r.h -= a.heads[1], r.which = 2;
  }
  r.live = r.h < a.heads[r.which == 0 ? 0 : 1] && (r.which < 2 || a.kv[1]);
  return r;
}

// The block's token's cos / sin (times attn_scale) for the rot / 2 <= 128 frequencies, into cs; ends with
// a barrier.
__device__ __forceinline__ void norm_rope_angles(const NormRopeArgs& a, int64_t p, float (*cs)[128]) {
  for (int64_t f = threadIdx.x; f < a.rot / 2; f += blockDim.x) {
    const float angle = static_cast<float>(p) * a.inv_freq[f];
    cs[0][f] = cosf(angle) * a.attn_scale, cs[1][f] = sinf(angle) * a.attn_scale;
  }
  __syncthreads();
}

// Where row r goes: its cache slot with kv (nullptr for a slot outside the storage), else its place in
// the contiguous output.
template <typename T>
__device__ __forceinline__ T* norm_rope_dest(const NormRopeArgs& a, const NormRopeRow& r, int64_t D) {
  if (r.which > 0 && a.kv[r.which - 1]) {
    const int64_t slot = r.p < 0 ? -1 : a.ring > 0 ? r.p % a.ring : r.p;
    if (slot < 0 || slot >= a.kv_n) return nullptr;
    const int64_t* s = a.kv_st[r.which - 1];
    return static_cast<T*>(a.kv[r.which - 1]) + r.b * s[0] + r.h * s[1] + slot * s[2];
  }
  return static_cast<T*>(a.out[r.which]) + ((r.b * a.heads[r.which] + r.h) * a.L + r.l) * D;
}

template <typename T>
__device__ __forceinline__ const T* norm_rope_src(const NormRopeArgs& a, const NormRopeRow& r) {
  const int64_t* st = a.st[r.which];
  return static_cast<const T*>(a.x[r.which]) + r.b * st[0] + r.h * st[1] + r.l * st[2];
}

// The rest of one row's norm and rotation, by one warp, once its values are loaded: lane element i is dim
// j = lane + 32 i (v[i] = 0 and wv[i] = 1 past D <= 32 NV), w says whether wv holds a norm weight, cs is
// norm_rope_angles' table and normed a row of D floats of this warp's shared memory (the rotation's
// partner dims). Writes the row to y.
template <typename T, int NV>
__device__ __forceinline__ void norm_rope_finish(float (&v)[NV], const float (&wv)[NV], bool w, int64_t D, int64_t rot,
                                                 float eps, const float (*cs)[128], float* normed, int lane, T* y) {
  const int64_t half = rot / 2;
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < NV; ++i) ss += v[i] * v[i];
  ss = warp_sum(ss);
  const float inv = inv_rms(ss, D, eps);
#pragma unroll
  for (int i = 0; i < NV; ++i) {
    const int j = lane + 32 * i;
    if (j >= D) continue;
    float n = v[i] * inv;
    if (w) n *= wv[i];
    v[i] = to_f32(from_f32<T>(n));  // rounded as ops::rms_norm stores it
    normed[j] = v[i];
  }
  __syncwarp();
#pragma unroll
  for (int i = 0; i < NV; ++i) {
    const int j = lane + 32 * i;
    if (j >= D) continue;
    float o = v[i];
    if (j < rot) {
      const int64_t f = j < half ? j : j - half;
      o = j < half ? v[i] * cs[0][f] - normed[j + half] * cs[1][f] : v[i] * cs[0][f] + normed[f] * cs[1][f];
    }
    y[j] = from_f32<T>(o);
  }
}

// The same for bf16 rows of 128 with rot / 2 a multiple of 4: lane t holds dims [4t, 4t + 4) (v, wv) and
// takes the rotation's partner dims from lane t +- rot / 8 by a shuffle; every lane of the warp calls it.
// Returns the lane's four outputs.
__device__ __forceinline__ uint2 norm_rope_finish_128(float (&v)[4], const float (&wv)[4], bool w, int rot, float eps,
                                                      const float (*cs)[128], int lane) {
  union Vec {
    uint2 u;
    __nv_bfloat16 e[4];
  };
  const int half = rot / 2, j0 = 4 * lane;
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) ss += v[i] * v[i];
  ss = warp_sum(ss);
  const float inv = inv_rms(ss, 128, eps);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float n = v[i] * inv;
    if (w) n *= wv[i];
    v[i] = to_f32(from_f32<__nv_bfloat16>(n));  // rounded as ops::rms_norm stores it
  }
  const int partner = j0 < half ? lane + half / 4 : lane - half / 4;
  const int src = j0 < rot ? partner : lane;
  Vec o;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float pv = __shfl_sync(0xffffffffu, v[i], src);
    const int j = j0 + i;
    float out = v[i];
    if (j < rot) {
      const int f = j < half ? j : j - half;
      out = j < half ? v[i] * cs[0][f] - pv * cs[1][f] : v[i] * cs[0][f] + pv * cs[1][f];
    }
    o.e[i] = from_f32<__nv_bfloat16>(out);
  }
  return o.u;
}

// A block's warps take heads of one token, q's first, then k's, then v's, and share that position's
// cos/sin, which the block computes once while its rows load.
template <typename T, typename W, typename P>
__global__ void __launch_bounds__(kNormRopeWarps * 32) norm_rope_kernel(NormRopeArgs a) {
  grid_dependency_wait();
  __shared__ float normed[kNormRopeWarps][256];
  __shared__ float cs[2][128];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const NormRopeRow r = norm_rope_row<P>(a, warp);
  const int64_t D = r.which == 2 ? a.Dv : a.D;
  const T* x = norm_rope_src<T>(a, r);
  const W* w = static_cast<const W*>(r.which < 2 ? a.w[r.which] : nullptr);
  float v[8], wv[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int j = lane + 32 * i;
    v[i] = r.live && r.which < 2 && j < D ? to_f32(x[j]) : 0.0f;
    wv[i] = r.live && j < D && w ? to_f32(w[j]) : 1.0f;
  }
  norm_rope_angles(a, r.p, cs);
  if (!r.live) return;
  T* y = norm_rope_dest<T>(a, r, D);
  if (!y) return;
  if (r.which == 2) {
    for (int64_t j = lane; j < D; j += 32) y[j] = x[j];
    return;
  }
  norm_rope_finish<T, 8>(v, wv, w != nullptr, D, a.rot, a.eps, cs, normed[warp], lane, y);
}

// The same for bf16 heads of D = 128 with rot / 2 a multiple of 4 and 8-byte aligned rows (Qwen3's):
// lane t holds dims [4t, 4t + 4) as one 8-byte load and store, and takes the rotation's partner dims
// from lane t +- rot / 8 by a shuffle.
template <typename W, typename P>
__global__ void __launch_bounds__(kNormRopeWarps * 32) norm_rope_128_kernel(NormRopeArgs a) {
  grid_dependency_wait();
  __shared__ float cs[2][128];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const NormRopeRow r = norm_rope_row<P>(a, warp);
  const int j0 = 4 * lane;
  const __nv_bfloat16* x = norm_rope_src<__nv_bfloat16>(a, r);
  const W* w = static_cast<const W*>(r.which < 2 ? a.w[r.which] : nullptr);
  union Vec {
    uint2 u;
    __nv_bfloat16 e[4];
  };
  Vec xv;
  xv.u = r.live && r.which < 2 ? *reinterpret_cast<const uint2*>(x + j0) : make_uint2(0, 0);
  float v[4], wv[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[i] = to_f32(xv.e[i]);
    wv[i] = r.live && w ? to_f32(w[j0 + i]) : 1.0f;
  }
  norm_rope_angles(a, r.p, cs);
  if (!r.live) return;  // whole warps: the shuffles below have every lane
  __nv_bfloat16* y = norm_rope_dest<__nv_bfloat16>(a, r, 128);
  if (!y) return;
  if (r.which == 2) {
    for (int64_t j = lane; j < a.Dv; j += 32) y[j] = x[j];
    return;
  }
  *reinterpret_cast<uint2*>(y + j0) = norm_rope_finish_128(v, wv, w != nullptr, static_cast<int>(a.rot), a.eps, cs, lane);
}

}  // namespace tern::cuda::kernels
