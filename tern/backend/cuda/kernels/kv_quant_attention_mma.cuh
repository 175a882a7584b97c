// Fused decode attention over packed KV rows on tensor cores: a block owns one key split of one kv head
// of one batch row, its 16 mma rows are that kv head's query heads (<= 16). Each warp walks its own
// 16-key tiles of the split with a private pipeline: cp.async stages the next tile's packed key and
// value rows in shared memory while the current one is dequantised there to f16 and read by the
// flash-decoding step of attention_decode.cuh. The codecs are compile-time (KC, VC below) and dequantise
// in half2 arithmetic: a byte permute, a subtract and an FMA per two elements (a table read and a
// multiply for TurboQuant values). The partial (acc, max, sum) goes to
// kv_attention_combine_kernel, which merges the splits and rotates TurboQuant values back once per row.
#pragma once
#include "tern/backend/cuda/kernels/attention_decode.cuh"
#include "tern/backend/cuda/kernels/kv_quant.cuh"
#include "tern/backend/cuda/kernels/kv_quant_attention.cuh"

namespace tern::cuda::kernels {

constexpr int kKVWarpKeys = 16;                         // keys per warp tile (one mma k-step of P V)
constexpr int kKVTileKeys = kFlashWarps * kKVWarpKeys;  // the split granularity

// Codes of elements [8 c, 8 c + 8) of a packed row in shared memory (4-byte aligned), BITS each,
// little-endian: code i in bits [i * BITS, i * BITS + BITS) of the result.
template <int BITS>
__device__ __forceinline__ uint64_t load_codes8(const uint8_t* row, int c) {
  const uint32_t* p = reinterpret_cast<const uint32_t*>(row);
  if constexpr (BITS == 8) {
    return static_cast<uint64_t>(p[2 * c]) | (static_cast<uint64_t>(p[2 * c + 1]) << 32);
  } else if constexpr (BITS == 4) {
    return p[c];
  } else if constexpr (BITS == 2) {
    return reinterpret_cast<const uint16_t*>(row)[c];
  } else {
    const int bit = 8 * BITS * c, word = bit >> 5, shift = bit & 31;
    const uint64_t w = static_cast<uint64_t>(p[word]) | (static_cast<uint64_t>(p[word + 1]) << 32);
    return w >> shift;  // word + 1 stays inside the row: the f16 fields follow the codes
  }
}

__device__ __forceinline__ __half f16_at(const uint8_t* p) { return *reinterpret_cast<const __half*>(p); }

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}
__device__ __forceinline__ uint32_t and_or(uint32_t a, uint32_t mask, uint32_t bits) {  // (a & mask) | bits
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(r) : "r"(a), "r"(mask), "r"(bits));
  return r;
}
__device__ __forceinline__ __half2 h2(uint32_t x) { return *reinterpret_cast<__half2*>(&x); }
__device__ __forceinline__ uint32_t u32(__half2 x) { return *reinterpret_cast<uint32_t*>(&x); }

// 1024 + c for the two bytes c of q that selector sel places in the low byte of each half (f16 1024 has
// a zero mantissa, so the byte becomes its low 8 bits): codes to f16 without a conversion instruction.
__device__ __forceinline__ __half2 bytes_1024(uint32_t q, uint32_t sel) { return h2(prmt(q, 0x64646464u, sel)); }

// Eight unsigned BITS-wide codes (BITS 8 or 4, natural order) as four half2 of 1024 + code.
template <int BITS>
__device__ __forceinline__ void codes_1024(uint64_t w, __half2 (&h)[4]) {
  if constexpr (BITS == 8) {
    const uint32_t lo = static_cast<uint32_t>(w), hi = static_cast<uint32_t>(w >> 32);
    h[0] = bytes_1024(lo, 0x4140), h[1] = bytes_1024(lo, 0x4342);
    h[2] = bytes_1024(hi, 0x4140), h[3] = bytes_1024(hi, 0x4342);
  } else {  // nibbles n0..n7: (n_i, n_i+4) by mask, then paired in order by byte permutes
    const uint32_t q = static_cast<uint32_t>(w);
    const uint32_t a = and_or(q, 0x000F000Fu, 0x64006400u), b = and_or(q >> 4, 0x000F000Fu, 0x64006400u);
    const uint32_t c = and_or(q >> 8, 0x000F000Fu, 0x64006400u), d = and_or(q >> 12, 0x000F000Fu, 0x64006400u);
    h[0] = h2(prmt(a, b, 0x5410)), h[1] = h2(prmt(c, d, 0x5410));
    h[2] = h2(prmt(a, b, 0x7632)), h[3] = h2(prmt(c, d, 0x7632));
  }
}

// The codecs (as decode_element, compile-time, in half2 arithmetic: the f16 tile is what the tensor
// cores read, so each element is rounded once, as the f32 path's final conversion would): decode8(row,
// c, group_shift, table) -> elements [8 c, 8 c + 8) of a row of DIM values as four half2; group_shift
// is log2 of the affine group; table the TurboQuant value table (prepare_table).
template <int BITS>
struct AffineDecode {
  template <int DIM>
  __device__ __forceinline__ static uint4 decode8(const uint8_t* row, int c, int group_shift, const uint32_t*) {
    const int g = (8 * c) >> group_shift, groups = DIM >> group_shift;
    const uint8_t* first = row + DIM * BITS / 8;
    const __half2 a = __half2half2(f16_at(first + 2 * g)), z = __half2half2(f16_at(first + 2 * (groups + g)));
    __half2 h[4];
    codes_1024<BITS>(load_codes8<BITS>(row, c), h);
    const __half2 k1024 = __float2half2_rn(1024.0f);
    return make_uint4(u32(__hfma2(__hsub2(h[0], k1024), a, z)), u32(__hfma2(__hsub2(h[1], k1024), a, z)),
                      u32(__hfma2(__hsub2(h[2], k1024), a, z)), u32(__hfma2(__hsub2(h[3], k1024), a, z)));
  }
  __device__ __forceinline__ static void prepare_table(uint32_t*, const TurboTables&) {}
};

struct TurboKeyDecode {  // int8 codes, f16 scale sc and zero point zp per group of 32: (code + zp) * sc
  template <int DIM>
  __device__ __forceinline__ static uint4 decode8(const uint8_t* row, int c, int, const uint32_t*) {
    const int g = c >> 2;
    const uint8_t* first = row + DIM;
    const float sc = __half2float(f16_at(first + 2 * g)), zp = __half2float(f16_at(first + 2 * (DIM / 32 + g)));
    const __half2 a = __float2half2_rn(sc), z = __float2half2_rn(zp * sc);
    __half2 h[4];
    codes_1024<8>(load_codes8<8>(row, c) ^ 0x8080808080808080ull, h);  // 1024 + 128 + code
    const __half2 k1152 = __float2half2_rn(1152.0f);
    return make_uint4(u32(__hfma2(__hsub2(h[0], k1152), a, z)), u32(__hfma2(__hsub2(h[1], k1152), a, z)),
                      u32(__hfma2(__hsub2(h[2], k1152), a, z)), u32(__hfma2(__hsub2(h[3], k1152), a, z)));
  }
  __device__ __forceinline__ static void prepare_table(uint32_t*, const TurboTables&) {}
};

// Codebook indices with an f16 RMS scale per group of 32, attended in the rotated domain. For BITS <= 4
// a pair of adjacent codes is one index into a table of half2 (book[c0], book[c1]) (the two codes sit
// side by side in the bit stream); 8-bit codes look up an f16 table one by one.
template <int BITS>
struct TurboValueDecode {
  template <int DIM>
  __device__ __forceinline__ static uint4 decode8(const uint8_t* row, int c, int, const uint32_t* table) {
    const __half2 a = __half2half2(f16_at(row + DIM * BITS / 8 + 2 * (c >> 2)));
    const uint64_t w = load_codes8<BITS>(row, c);
    uint32_t out[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (BITS <= 4) {
        const uint32_t pair = static_cast<uint32_t>(w >> (2 * BITS * i)) & ((1u << (2 * BITS)) - 1u);
        out[i] = u32(__hmul2(h2(table[pair]), a));
      } else {
        const uint16_t* book = reinterpret_cast<const uint16_t*>(table);
        const uint32_t lo = book[static_cast<uint32_t>(w >> (16 * i)) & 0xFFu];
        const uint32_t hi = book[static_cast<uint32_t>(w >> (16 * i + 8)) & 0xFFu];
        out[i] = u32(__hmul2(h2(lo | (hi << 16)), a));
      }
    }
    return make_uint4(out[0], out[1], out[2], out[3]);
  }
  // table (256 words of shared memory): the pair table, or the f16 codebook for 8-bit codes.
  __device__ __forceinline__ static void prepare_table(uint32_t* table, const TurboTables& t) {
    if constexpr (BITS <= 4) {
      for (int i = threadIdx.x; i < (1 << (2 * BITS)); i += blockDim.x)
        table[i] = u32(__floats2half2_rn(t.book[i & ((1 << BITS) - 1)], t.book[i >> BITS]));
    } else {
      uint16_t* book = reinterpret_cast<uint16_t*>(table);
      for (int i = threadIdx.x; i < 256; i += blockDim.x) book[i] = __half_as_ushort(__float2half_rn(t.book[i]));
    }
  }
};

// Bytes of dynamic shared memory for head dim HD and staged rows of k_stage / v_stage bytes (multiples
// of 16): the query tile, each warp's f16 K and V tiles and its two staging buffers, the codebook and
// the step's unquantized position.
template <int HD>
constexpr size_t kv_mma_smem_bytes(int k_stage, int v_stage) {
  return (16 + 2 * kKVTileKeys) * (HD + 8) * sizeof(__half) + 2 * kKVTileKeys * (k_stage + v_stage) +
         (256 + 2 * HD) * sizeof(float);
}

// Which pieces of a staged tile a lane copies: the flat piece indices lane, lane + 32, ... of rows of
// per_row pieces, walked as (row, piece) without a division in the copy loop.
struct StagePlan {
  int per_row, r0, c0, step_r, step_c;
};
__device__ __forceinline__ StagePlan stage_plan(int row_bytes, int gran, int lane) {
  StagePlan p;
  p.per_row = row_bytes / gran;
  p.r0 = lane / p.per_row, p.c0 = lane % p.per_row;
  p.step_r = 32 / p.per_row, p.step_c = 32 % p.per_row;
  return p;
}

// One warp copies the first n rows of a tile (row r at src + r * src_step bytes) into dst (rows of
// `stage` bytes), GRAN bytes per cp.async.
template <int GRAN>
__device__ __forceinline__ void warp_stage_rows(uint8_t* dst, const uint8_t* src, int64_t src_step, int stage, int n,
                                                const StagePlan& p) {
  for (int r = p.r0, c = p.c0; r < n;) {
    const uint32_t d = smem_addr(dst + r * stage + c * GRAN);
    const uint8_t* g = src + r * src_step + c * GRAN;
    if constexpr (GRAN == 16) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(g));
    } else {
      asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(d), "l"(g), "n"(GRAN));
    }
    r += p.step_r, c += p.step_c;
    if (c >= p.per_row) c -= p.per_row, ++r;
  }
}

__device__ __forceinline__ void warp_stage_any(int gran, uint8_t* dst, const uint8_t* src, int64_t src_step, int stage,
                                               int n, const StagePlan& p) {
  if (gran == 16) warp_stage_rows<16>(dst, src, src_step, stage, n, p);
  else if (gran == 8) warp_stage_rows<8>(dst, src, src_step, stage, n, p);
  else warp_stage_rows<4>(dst, src, src_step, stage, n, p);
}

// One warp dequantises a staged 16-key tile into f16 rows of HD + 8: row r is key n0 + r -- a stored
// row when below hi, the step's unquantized position (f32 in fresh) when it is index S and has_new,
// zeros otherwise.
template <int HD, typename Codec>
__device__ __forceinline__ void warp_dequant(__half* dst, const uint8_t* staged, int stage, int group_shift,
                                             const uint32_t* table, int n0, int hi, int S, bool has_new,
                                             const float* fresh, int lane) {
  constexpr int kChunks = HD / 8;
#pragma unroll 4
  for (int idx = lane; idx < kKVWarpKeys * kChunks; idx += 32) {
    const int r = idx / kChunks, c = idx % kChunks;
    const int j = n0 + r;
    uint4 packed = make_uint4(0, 0, 0, 0);
    if (j < hi) {
      packed = Codec::template decode8<HD>(staged + r * stage, c, group_shift, table);
    } else if (has_new && j == S) {
      const float* x = fresh + 8 * c;
      packed = make_uint4(pack2<__half>(x[0], x[1]), pack2<__half>(x[2], x[3]), pack2<__half>(x[4], x[5]),
                          pack2<__half>(x[6], x[7]));
    }
    *reinterpret_cast<uint4*>(dst + r * (HD + 8) + 8 * c) = packed;
  }
}

// a.chunk is a multiple of kKVTileKeys; k_stage / v_stage the staged row sizes; k_gran / v_gran the
// cp.async widths (4, 8 or 16) that divide the packed row sizes and the rows' alignment; k_shift /
// v_shift log2 of the affine groups.
template <typename T, int HD, typename KC, typename VC>
__global__ void __launch_bounds__(kFlashWarps * 32) kv_decode_attention_mma_kernel(KVAttnArgs a, TurboTables t,
                                                                                  int k_stage, int v_stage, int k_gran,
                                                                                  int v_gran, int k_shift, int v_shift) {
  extern __shared__ __align__(16) unsigned char kv_mma_smem[];
  constexpr int kStride = HD + 8, BN = kKVWarpKeys;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __half* sq = reinterpret_cast<__half*>(kv_mma_smem);
  __half* sk = sq + 16 * kStride + warp * 2 * BN * kStride;  // this warp's K tile, then its V tile
  __half* sv = sk + BN * kStride;
  uint8_t* raw_all = reinterpret_cast<uint8_t*>(sq + (16 + 2 * kKVTileKeys) * kStride);
  const int stage_bytes = BN * (k_stage + v_stage);
  uint8_t* raw = raw_all + warp * 2 * stage_bytes;  // this warp's two staging buffers
  uint32_t* table = reinterpret_cast<uint32_t*>(raw_all + kFlashWarps * 2 * stage_bytes);  // 256 words
  float* new_k = reinterpret_cast<float*>(table + 256);
  float* new_v = new_k + HD;

  const int64_t split = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int64_t G = a.Hq / a.Hkv;
  const bool has_new = a.k_new != nullptr;
  // Key indices fit 32 bits (the caller checks S); only addresses are 64-bit.
  const int S = static_cast<int>(a.S);
  const int n_keys = S + (has_new ? 1 : 0);
  const int j0 = static_cast<int>(split * a.chunk), j1 = j0 + a.chunk < n_keys ? static_cast<int>(j0 + a.chunk) : n_keys;
  int len = S;  // stored keys this batch row reads (a compiled decode step's row length)
  if (a.lengths) {
    const int n = a.lengths[b];
    len = n < 0 ? 0 : (n < S ? n : S);
  }
  const int hi = len < j1 ? len : j1;  // stored rows this split dequantises: [j0, hi)
  const int64_t slot = b * a.Hkv + hk, pos_stride = a.B * a.Hkv;
  const int64_t k_step = pos_stride * a.kc.row_bytes, v_step = pos_stride * a.vc.row_bytes;  // bytes per key
  const uint8_t* k_base = a.k_rows + slot * a.kc.row_bytes;
  const uint8_t* v_base = a.v_rows + slot * a.vc.row_bytes;
  const StagePlan k_plan = stage_plan(a.kc.row_bytes, k_gran, lane), v_plan = stage_plan(a.vc.row_bytes, v_gran, lane);

  auto stage = [&](int n0, int buf) {
    uint8_t* dst = raw + buf * stage_bytes;
    const int n = hi - n0 < BN ? hi - n0 : BN;  // rows past hi are never read
    warp_stage_any(k_gran, dst, k_base + n0 * k_step, k_step, k_stage, n, k_plan);
    warp_stage_any(v_gran, dst + BN * k_stage, v_base + n0 * v_step, v_step, v_stage, n, v_plan);
  };
  const int first = j0 + warp * BN, step = kFlashWarps * BN;
  if (first < j1) stage(first, 0);
  cp_async_commit();

  for (int idx = threadIdx.x; idx < 16 * HD; idx += blockDim.x) {
    const int r = idx / HD, d = idx % HD;
    float x = 0.0f;
    if (r < G) x = to_f32(static_cast<const T*>(a.q)[b * a.qs[0] + (hk * G + r) * a.qs[1] + d]);
    sq[r * kStride + d] = __float2half_rn(x);
  }
  VC::prepare_table(table, t);
  const bool owns_new = has_new && j0 <= S && S < j1;  // uniform across the block
  if (owns_new) {
    const T* kp = static_cast<const T*>(a.k_new) + b * a.kns[0] + hk * a.kns[1];
    const T* vp = static_cast<const T*>(a.v_new) + b * a.vns[0] + hk * a.vns[1];
    for (int i = threadIdx.x; i < HD; i += blockDim.x) {
      new_k[i] = to_f32(kp[i]);
      new_v[i] = to_f32(vp[i]);
    }
    __syncthreads();
    if (a.vc.kind == 2) block_rotate(new_v, HD, t, false);  // the read attends in the rotated domain
  }
  __syncthreads();

  float o[HD / 8][4];
#pragma unroll
  for (int i = 0; i < HD / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float row_m[2] = {-INFINITY, -INFINITY}, row_l[2] = {0.0f, 0.0f};
  int buf = 0;
  for (int n0 = first; n0 < j1; n0 += step, buf ^= 1) {
    if (n0 + step < j1) stage(n0 + step, buf ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncwarp();
    const uint8_t* cur = raw + buf * stage_bytes;
    warp_dequant<HD, KC>(sk, cur, k_stage, k_shift, table, n0, hi, S, owns_new, new_k, lane);
    warp_dequant<HD, VC>(sv, cur + BN * k_stage, v_stage, v_shift, table, n0, hi, S, owns_new, new_v, lane);
    __syncwarp();
    decode_tile<__half, HD, BN>(sq, sk, sv, n0, a.scale, a.softcap, o, row_m, row_l, [&](int, int64_t j) {
      return j >= j1 || (j >= len && !(owns_new && j == S));
    });
    __syncwarp();  // the next tile's dequantisation overwrites sk / sv
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with its tiles: the merge reuses them

  float* scratch = reinterpret_cast<float*>(sq + 16 * kStride);  // the K/V tiles: >= 4 * 16 * (HD + 2) floats
  decode_merge<HD>(scratch, static_cast<int>(G), o, row_m, row_l, [&](int r, int d, float acc, float M, float L) {
    store_partial<HD>(a.partial + (split * a.B * a.Hq + b * a.Hq + hk * G + r) * (HD + 2), d, acc, M, L);
  });
}

}  // namespace tern::cuda::kernels
