// Flash-attention prefill on tensor cores (mma.sync m16n8k16, bf16/f16 in, f32 accumulate), FA2
// style: a block owns 64 MT query rows of one head (4 warps x MT m-tiles of 16 rows), walks the visible key tiles with
// an online softmax kept in registers, and reads K/V of the query head's kv group (GQA). Masks:
// causal with q_offset, sliding window, per-batch kv_len; optional logit softcap. HD is the q/k head dim
// and HDV the value dims one launch produces (HD itself, or a 256-wide slice of wider values: Gemma 4's
// 512-dim heads take two launches, each recomputing the scores).
#pragma once
#include <type_traits>

#include "tern/backend/cuda/kernels/common.cuh"
#include "tern/backend/cuda/kernels/mma.cuh"

namespace tern::cuda::kernels {

struct FlashArgs {
  const void* q;
  const void* k;
  const void* v;
  void* out;  // rows of HDV elements at a stride of os: [B, Hq, Lq] rows
  int64_t os;
  // Not null (HDV == Dv): the rows' unnormalised (acc, max, sum) partial [B Hq Lq][HDV + 2] instead of
  // out, as a split of the combine kernels (store_partial's layout: the max in the natural-log domain).
  float* partial;
  int64_t Hq, Hkv, Lq, Lk;
  int64_t qs[3], ks[3], vs[3];
  float scale, softcap;
  bool causal;
  int64_t q_offset, window;
  const int32_t* kv_len;
};

constexpr int kFlashWarps = 4;
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3,
                                                  const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(smem_addr(p)));
}

// S = Q K^T of one warp on tensor cores for its MT m-tiles of 16 query rows and BN key rows at sk (rows
// of HD + 8 elements in shared memory): qfrag(kk, mt, q) fills q with the A fragment of m-tile mt at
// k-step kk (from registers or shared memory), and every K fragment feeds MT products. s[mt][i] holds
// the mma accumulators of keys [8 i, 8 i + 8).
template <typename T, int HD, int BN, int MT, typename QFrag>
__device__ __forceinline__ void warp_qk_tiles(const QFrag& qfrag, const T* sk, float (&s)[MT][BN / 8][4]) {
  constexpr int kStride = HD + 8;
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int i = 0; i < BN / 8; ++i) s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.0f;
  }
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) {
    uint32_t qa[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) qfrag(kk, mt, qa[mt]);
#pragma unroll
    for (int nn = 0; nn < BN / 16; ++nn) {
      const int mi = lane >> 3, r = lane & 7;
      uint32_t b0, b1, b2, b3;
      ldmatrix_x4(b0, b1, b2, b3, sk + (nn * 16 + r + 8 * (mi >> 1)) * kStride + kk * 16 + 8 * (mi & 1));
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma16816<T>(s[mt][2 * nn], qa[mt], b0, b1);
        mma16816<T>(s[mt][2 * nn + 1], qa[mt], b2, b3);
      }
    }
  }
}

// Q's A fragment at k-step kk of the 16 rows from row0 of sq (rows of HD + 8).
template <typename T, int HD>
__device__ __forceinline__ void q_frag(const T* sq, int row0, int kk, uint32_t (&q)[4]) {
  const int lane = threadIdx.x & 31;
  ldmatrix_x4(q[0], q[1], q[2], q[3], sq + (row0 + (lane & 15)) * (HD + 8) + kk * 16 + (lane >> 4) * 8);
}

// warp_qk_tiles for one m-tile of 16 rows at sq, its fragments read from shared memory.
template <typename T, int HD, int BN>
__device__ __forceinline__ void warp_qk(const T* sq, const T* sk, float (&s)[BN / 8][4]) {
  warp_qk_tiles<T, HD, BN, 1>([&](int kk, int, uint32_t(&q)[4]) { q_frag<T, HD>(sq, 0, kk, q); }, sk,
                              reinterpret_cast<float(&)[1][BN / 8][4]>(s));
}

template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

// Copies `rows` rows of HD elements (row stride `stride`) into smem rows of HD + 8 with cp.async, 16
// bytes a thread, zero past `valid`; the caller commits and waits.
template <typename T, int HD>
__device__ __forceinline__ void load_tile_async(T* smem, const T* g, int64_t stride, int rows, int valid) {
  constexpr int kPerRow = HD / 8;
  for (int idx = threadIdx.x; idx < rows * kPerRow; idx += blockDim.x) {
    const int r = idx / kPerRow, c = (idx % kPerRow) * 8;
    const bool in = r < valid;
    const T* src = in ? g + r * stride + c : g;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem + r * (HD + 8) + c)),
                 "l"(src), "r"(in ? 16 : 0));
  }
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Query rows of one prefill block whose warps each own MT m-tiles of 16 rows.
template <int MT>
constexpr int flash_rows() {
  return kFlashWarps * 16 * MT;
}

// Grid: (Hq, query blocks, B). Under a causal mask the query blocks run last-first, so the blocks with
// the most keys start in the first wave and the short ones fill the tail; the heads of one kv group are
// neighbours in the launch order and share its K/V tiles in L2. Each warp owns MT m-tiles of 16 query
// rows: every K/V fragment it reads from shared memory feeds MT tensor-core products.
template <typename T, int HD, int BN, int HDV = HD, int MT = 1>
__global__ void __launch_bounds__(kFlashWarps * 32) attention_flash_kernel(FlashArgs a) {
  grid_dependency_wait();
  extern __shared__ __align__(16) unsigned char flash_smem[];
  constexpr int kM = flash_rows<MT>();
  constexpr int kStride = HD + 8, kVStride = HDV + 8;
  constexpr int kStage = BN * (kStride + kVStride);
  constexpr bool kQRegs = HD <= 128 && MT == 1;  // otherwise Q is read from shared memory (registers run out)
  // Q, then two stages of (K, V): the next tile streams in while this one is computed.
  T* sq = reinterpret_cast<T*>(flash_smem);
  T* const kv_base = sq + kM * kStride;  // stage s: K at kv_base + kStage * s, V after it

  const int64_t b = blockIdx.z, h = blockIdx.x;
  const int64_t hk = h / (a.Hq / a.Hkv);
  const int64_t mb = a.causal ? gridDim.y - 1 - blockIdx.y : blockIdx.y;
  const int64_t m0 = mb * kM;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;

  const T* qg = static_cast<const T*>(a.q) + b * a.qs[0] + h * a.qs[1] + m0 * a.qs[2];
  const T* kg = static_cast<const T*>(a.k) + b * a.ks[0] + hk * a.ks[1];
  const T* vg = static_cast<const T*>(a.v) + b * a.vs[0] + hk * a.vs[1];

  // Keys any row of this block may see: [lo_min, hi_max).
  int64_t lk = a.Lk;
  if (a.kv_len) lk = min(lk, static_cast<int64_t>(a.kv_len[b]));
  const int64_t last_row = min(m0 + kM, a.Lq) - 1;
  const int64_t hi_max = a.causal ? min(lk, last_row + a.q_offset + 1) : lk;
  const int64_t lo_min = a.window > 0 ? max(int64_t(0), m0 + a.q_offset - a.window + 1) : 0;

  load_tile_async<T, HD>(sq, qg, a.qs[2], kM, static_cast<int>(min(static_cast<int64_t>(kM), a.Lq - m0)));
  cp_async_commit();  // group: Q

  // This thread's rows (g and g + 8 of each of the warp's m-tiles) and their visible ranges.
  const int64_t w0 = m0 + warp * 16 * MT;
  int64_t row_i[MT][2], row_lo[MT][2], row_hi[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_i[mt][r] = w0 + mt * 16 + g + 8 * r;
      row_hi[mt][r] = a.causal ? min(lk, row_i[mt][r] + a.q_offset + 1) : lk;
      row_lo[mt][r] = a.window > 0 ? max(int64_t(0), row_i[mt][r] + a.q_offset - a.window + 1) : 0;
    }
  }
  // The keys every row of this warp sees: a tile inside [full_lo, full_hi) needs no mask.
  const int64_t full_hi = a.causal ? min(lk, w0 + a.q_offset + 1) : lk;
  const int64_t full_lo = a.window > 0 ? max(int64_t(0), w0 + 16 * MT - 1 + a.q_offset - a.window + 1) : 0;
  // Scores enter the softmax in base 2 as s * mult; a softcap (or a scale that is not positive, which
  // would turn the row max around) is applied to the scores first.
  const bool pre = a.softcap > 0.0f || !(a.scale > 0.0f);
  const float mult = pre ? 1.0f : a.scale * kLog2e;

  float o[MT][HDV / 8][4];
  float row_m[MT][2], row_l[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int i = 0; i < HDV / 8; ++i) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.0f;
    row_m[mt][0] = row_m[mt][1] = -INFINITY;
    row_l[mt][0] = row_l[mt][1] = 0.0f;
  }

  const int64_t first = (lo_min / BN) * BN;
  auto issue = [&](int64_t n0, int stage) {
    const int valid = static_cast<int>(max(int64_t(0), min(static_cast<int64_t>(BN), a.Lk - n0)));
    T* sk_dst = kv_base + stage * kStage;
    load_tile_async<T, HD>(sk_dst, kg + n0 * a.ks[2], a.ks[2], BN, valid);
    load_tile_async<T, HDV>(sk_dst + BN * kStride, vg + n0 * a.vs[2], a.vs[2], BN, valid);
  };
  if (first < hi_max) issue(first, 0);
  cp_async_commit();  // group: the first tile
  uint32_t qa[kQRegs ? HD / 16 : 1][4];
  if constexpr (kQRegs) {
    cp_async_wait<1>();  // Q has landed
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) q_frag<T, HD>(sq + warp * 16 * kStride, 0, kk, qa[kk]);
  }
  int stage = 0;
  for (int64_t n0 = first; n0 < hi_max; n0 += BN, stage ^= 1) {
    if (n0 + BN < hi_max) issue(n0 + BN, stage ^ 1);
    cp_async_commit();
    cp_async_wait<1>();  // everything but the tile just issued has landed
    __syncthreads();
    const T* sk = kv_base + stage * kStage;
    const T* sv = sk + BN * kStride;

    // S = Q K^T for the warp's rows and BN keys.
    float s[MT][BN / 8][4];
    if constexpr (kQRegs) {
      warp_qk_tiles<T, HD, BN, MT>(
          [&](int kk, int, uint32_t(&q)[4]) {
#pragma unroll
            for (int e = 0; e < 4; ++e) q[e] = qa[kk][e];
          },
          sk, s);
    } else {
      warp_qk_tiles<T, HD, BN, MT>(
          [&](int kk, int mt, uint32_t(&q)[4]) { q_frag<T, HD>(sq + warp * MT * 16 * kStride, mt * 16, kk, q); }, sk,
          s);
    }

    // Softcap, mask (only tiles that cross a row's visible range), online softmax in base 2.
    const bool masked = n0 < full_lo || n0 + BN > full_hi;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      if (pre) {
#pragma unroll
        for (int i = 0; i < BN / 8; ++i) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const float x = s[mt][i][e];
            s[mt][i][e] = a.softcap > 0.0f ? a.softcap * tanhf(x * a.scale / a.softcap) * kLog2e : x * a.scale * kLog2e;
          }
        }
      }
      if (masked) {
        const int64_t j0 = n0 + 2 * t;
#pragma unroll
        for (int i = 0; i < BN / 8; ++i) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int r = e >> 1;
            const int64_t j = j0 + i * 8 + (e & 1);
            if (j < row_lo[mt][r] || j >= row_hi[mt][r]) s[mt][i][e] = -INFINITY;
          }
        }
      }
      float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int i = 0; i < BN / 8; ++i) {
        tile_max[0] = fmaxf(tile_max[0], fmaxf(s[mt][i][0], s[mt][i][1]));
        tile_max[1] = fmaxf(tile_max[1], fmaxf(s[mt][i][2], s[mt][i][3]));
      }
      float corr[2], m_scaled[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
        tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
        const float m_new = fmaxf(row_m[mt][r], tile_max[r]);
        corr[r] = m_new == -INFINITY ? 1.0f : fast_exp2((row_m[mt][r] - m_new) * mult);
        m_scaled[r] = m_new == -INFINITY ? 0.0f : m_new * mult;  // a row with nothing visible yet gives p = 0
        row_m[mt][r] = m_new;
      }
      float tile_sum[2] = {0.0f, 0.0f};
#pragma unroll
      for (int i = 0; i < BN / 8; ++i) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = e >> 1;
          const float p = fast_exp2(fmaf(s[mt][i][e], mult, -m_scaled[r]));
          s[mt][i][e] = p;
          tile_sum[r] += p;
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) row_l[mt][r] = row_l[mt][r] * corr[r] + tile_sum[r];
      // Once the rows' maxima settle, most tiles change none of the warp's: it skips the rescale then.
      if (__any_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f)) {
#pragma unroll
        for (int i = 0; i < HDV / 8; ++i) {
          o[mt][i][0] *= corr[0];
          o[mt][i][1] *= corr[0];
          o[mt][i][2] *= corr[1];
          o[mt][i][3] *= corr[1];
        }
      }
    }

    // O += P V: P's accumulators become A fragments directly.
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t pa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        pa[mt][0] = pack2<T>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        pa[mt][1] = pack2<T>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        pa[mt][2] = pack2<T>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        pa[mt][3] = pack2<T>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dd = 0; dd < HDV / 16; ++dd) {
        const int mi = lane >> 3, r = lane & 7;
        uint32_t b0, b1, b2, b3;
        ldmatrix_x4_trans(b0, b1, b2, b3, sv + (kk * 16 + r + 8 * (mi & 1)) * kVStride + dd * 16 + 8 * (mi >> 1));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma16816<T>(o[mt][2 * dd], pa[mt], b0, b1);
          mma16816<T>(o[mt][2 * dd + 1], pa[mt], b2, b3);
        }
      }
    }
    __syncthreads();  // this stage is refilled two tiles from now
  }
  cp_async_wait<0>();

  // Row sums across the 4 threads of each row group, then normalise and store (or store the partial).
  T* og = static_cast<T*>(a.out) + ((b * a.Hq + h) * a.Lq) * a.os;
  // A partial's max in the natural-log domain: the scores entered exp2 as s * mult.
  const float to_ln = pre ? 0.6931471805599453f : a.scale;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float l = row_l[mt][r];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      if (row_i[mt][r] >= a.Lq) continue;
      if (a.partial) {
        float* prow = a.partial + ((b * a.Hq + h) * a.Lq + row_i[mt][r]) * (HDV + 2);
#pragma unroll
        for (int i = 0; i < HDV / 8; ++i) {
          const int d = i * 8 + 2 * t;
          prow[d] = o[mt][i][2 * r];
          prow[d + 1] = o[mt][i][2 * r + 1];
        }
        if (t == 0) {
          prow[HDV] = row_m[mt][r] == -INFINITY ? -INFINITY : row_m[mt][r] * to_ln;
          prow[HDV + 1] = l;
        }
        continue;
      }
      T* orow = og + row_i[mt][r] * a.os;
#pragma unroll
      for (int i = 0; i < HDV / 8; ++i) {
        const int d = i * 8 + 2 * t;
        orow[d] = from_f32<T>(o[mt][i][2 * r] * inv);
        orow[d + 1] = from_f32<T>(o[mt][i][2 * r + 1] * inv);
      }
    }
  }
}

}  // namespace tern::cuda::kernels
