// Fused decode attention over packed KV rows on tensor cores: a block owns one key split of one kv head
// of one batch row; its 16 mma rows are that kv head's query heads (<= 16). Each warp walks its own
// 16-key tiles of the split: cp.async stages the packed K/V rows kKVStages - 1 tiles ahead in the
// warp's shared memory, and every lane dequantises the bytes it needs straight into mma B fragments
// (half2 arithmetic: byte permutes, a subtract and an FMA per two elements, or a table read and a
// multiply for TurboQuant values) -- no f16 tile, no ldmatrix. Two permutations keep a lane's bytes
// contiguous:
//  - Q K^T sums over head dims, so its k index may visit them in any order Q and K share: lane t of a
//    key holds dims [t HD/4, (t + 1) HD/4) (KC::kdim gives the order), one or two scale groups;
//  - P V's output columns may be permuted if the merge puts them back: column c of n-tile j is dim
//    c HD/8 + j, so lane g holds dims [g HD/8, (g + 1) HD/8) of its four keys (one group).
// The codecs are compile-time (KC, VC below). The partial (acc, max, sum) goes to
// kv_attention_combine_kernel, which merges the splits and rotates TurboQuant values back once per row.
#pragma once
#include "tern/backend/cuda/kernels/attention_decode.cuh"
#include "tern/backend/cuda/kernels/kv_quant.cuh"
#include "tern/backend/cuda/kernels/kv_quant_attention.cuh"

namespace tern::cuda::kernels {

constexpr int kKVWarpKeys = 16;                         // keys per warp tile (one mma k-step of P V)
constexpr int kKVTileKeys = kFlashWarps * kKVWarpKeys;  // the split granularity
constexpr int kKVStages = 3;                            // staged tiles per warp: two in flight

// A staged packed row's stride: its bytes rounded up to an odd multiple of 16, so the 16-byte reads of
// eight lanes over two rows fall in distinct banks.
__host__ __device__ constexpr int kv_stage_stride(int row_bytes) {
  const int s = (row_bytes + 15) / 16;
  return 16 * (s % 2 == 0 ? s + 1 : s);
}

// The staging area of a block (its warps' buffers; the merge reuses it, so at least its scratch).
template <int HD>
__host__ __device__ constexpr int kv_mma_stage_area(int k_stage, int v_stage) {
  const int staged = kFlashWarps * kKVStages * kKVWarpKeys * (k_stage + v_stage);
  const int merge = kFlashWarps * 16 * (HD + 2) * 4;
  return staged > merge ? staged : merge;
}

// Words of the key codec's own table: none when it has none or reads the value codec's (the same
// codebook: rotated keys and values of equal bits).
template <typename KC, typename VC>
constexpr int kv_key_table_words() {
  return KC::kBookBits != 0 && KC::kBookBits == VC::kBookBits ? 0 : KC::kTableWords;
}

// Bytes of dynamic shared memory: the query fragments, the staging area, the value and key codecs'
// tables (VC::kTableWords, kv_key_table_words) and the step's unquantized K and V (f32).
template <int HD, typename KC, typename VC>
constexpr size_t kv_mma_smem_bytes(int k_stage, int v_stage) {
  return HD / 16 * 32 * 16 + kv_mma_stage_area<HD>(k_stage, v_stage) +
         (VC::kTableWords + kv_key_table_words<KC, VC>() + 2 * HD) * sizeof(float);
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

// (1024 + n, 1024 + n') for the nibbles of q at bits [0, 4) and [16, 20).
__device__ __forceinline__ __half2 nibbles_1024(uint32_t q) { return h2(and_or(q, 0x000F000Fu, 0x64006400u)); }

// N words of shared memory at p (aligned to their size: 16-byte reads when N is a multiple of 4).
template <int N>
__device__ __forceinline__ void load_words(const uint8_t* p, uint32_t (&w)[N]) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 4) {
      const uint4 x = reinterpret_cast<const uint4*>(p)[i / 4];
      w[i] = x.x, w[i + 1] = x.y, w[i + 2] = x.z, w[i + 3] = x.w;
    }
  } else if constexpr (N % 2 == 0) {
#pragma unroll
    for (int i = 0; i < N; i += 2) {
      const uint2 x = reinterpret_cast<const uint2*>(p)[i / 2];
      w[i] = x.x, w[i + 1] = x.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) w[i] = reinterpret_cast<const uint32_t*>(p)[i];
  }
}

// The NB bits of a packed row starting at bit `bit`, realigned to bit 0 of c. When NB is a multiple of
// 32 the lanes' bit offsets are too (bit = lane group x NB) and the words are read directly; otherwise
// one more word is read (it stays inside the row: the f16 fields follow the codes).
template <int NB>
__device__ __forceinline__ void lane_bits(const uint8_t* row, int bit, uint32_t (&c)[(NB + 31) / 32]) {
  constexpr int W = (NB + 31) / 32;
  if constexpr (NB % 32 == 0) {
    load_words<W>(row + bit / 8, c);
  } else {
    const uint32_t* p = reinterpret_cast<const uint32_t*>(row) + (bit >> 5);
    const int sh = bit & 31;
    uint32_t w[W + 1];
#pragma unroll
    for (int i = 0; i <= W; ++i) w[i] = p[i];
#pragma unroll
    for (int i = 0; i < W; ++i) c[i] = __funnelshift_r(w[i], w[i + 1], sh);
  }
}

// Bits [pos, pos + N) of the little-endian stream c (pos compile-time after unrolling).
template <int N, int W>
__device__ __forceinline__ uint32_t bits_at(const uint32_t (&c)[W], int pos) {
  const int w = pos >> 5, sh = pos & 31;
  const uint32_t x = sh + N <= 32 || w + 1 >= W ? c[w] >> sh : __funnelshift_r(c[w], c[w + 1], sh);
  return x & ((1u << N) - 1u);
}

// The same field already shifted left by OUT (the byte offset of a table entry of 2^OUT bytes): one
// shift and one mask instead of two shifts and a mask.
template <int N, int OUT, int W>
__device__ __forceinline__ uint32_t field_shifted(const uint32_t (&c)[W], int pos) {
  const int w = pos >> 5, sh = pos & 31;
  uint32_t x;
  if (sh + N <= 32 || w + 1 >= W) {
    x = sh >= OUT ? c[w] >> (sh - OUT) : c[w] << (OUT - sh);
  } else {
    x = __funnelshift_r(c[w], c[w + 1], sh) << OUT;
  }
  return x & (((1u << N) - 1u) << OUT);
}

// Keys (the B fragments of Q K^T). decode<HD>(row, t, shift, table, b): b[kk] = {elements kdim(t, kk,
// 0..1), kdim(t, kk, 2..3)} of one packed key row as f16 pairs, for every k-step kk; shift is log2 of
// the group; table is the codec's shared-memory table (prepare_table), if it has one. BITS 8 or 4;
// TURBO: TurboQuant's int8 keys, (code + zp) * sc, else affine code * scale + bias.
template <int BITS, bool TURBO>
struct KeyFrag {
  static constexpr bool kRotated = false;
  static constexpr int kBookBits = 0, kTableWords = 0;
  __device__ __forceinline__ static void prepare_table(uint32_t*, const TurboTables&) {}
  template <int HD>
  __device__ __forceinline__ static int kdim(int t, int kk, int e) {
    const int base = t * (HD / 4);
    if constexpr (BITS == 8) return base + 4 * kk + e;            // one word per k-step
    return base + 8 * (kk >> 1) + 2 * (kk & 1) + (e >> 1) + 4 * (e & 1);  // nibbles (0, 4), (1, 5) | (2, 6), (3, 7)
  }
  // Scale a and offset z of group gi, both as half2.
  template <int HD>
  __device__ __forceinline__ static void group(const uint8_t* row, int gi, int shift, __half2& a, __half2& z) {
    const uint8_t* first = row + HD * BITS / 8;
    const int groups = HD >> shift;
    if constexpr (TURBO) {  // zp * sc rounded once to f16, as the f32 product would be
      a = __half2half2(f16_at(first + 2 * gi)), z = __hmul2(__half2half2(f16_at(first + 2 * (groups + gi))), a);
    } else {
      a = __half2half2(f16_at(first + 2 * gi)), z = __half2half2(f16_at(first + 2 * (groups + gi)));
    }
  }
  template <int HD>
  __device__ __forceinline__ static void decode(const uint8_t* row, int t, int shift, const uint32_t*,
                                                uint32_t (&b)[HD / 16][2]) {
    constexpr int kWords = HD / 4 * BITS / 32;  // the lane's codes
    const int base = t * (HD / 4);
    // Dims [base, base + HD/8) and [base + HD/8, base + HD/4): one group unless HD is 256 (groups >= 32).
    __half2 a[2], z[2];
    group<HD>(row, base >> shift, shift, a[0], z[0]);
    if constexpr (HD == 256) {
      group<HD>(row, (base + HD / 8) >> shift, shift, a[1], z[1]);
    } else {
      a[1] = a[0], z[1] = z[0];
    }
    uint32_t w[kWords];
    load_words<kWords>(row + t * kWords * 4, w);
    const __half2 off = __float2half2_rn(TURBO ? 1152.0f : 1024.0f);
    auto value = [&](__half2 x, int kk) {
      const int h = kk >= HD / 32;
      return u32(__hfma2(__hsub2(x, off), a[h], z[h]));
    };
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      if constexpr (BITS == 8) {
        const uint32_t x = TURBO ? w[i] ^ 0x80808080u : w[i];  // signed codes: 1024 + 128 + code
        b[i][0] = value(bytes_1024(x, 0x4140), i), b[i][1] = value(bytes_1024(x, 0x4342), i);
      } else {
        const int kk = 2 * i;
        b[kk][0] = value(nibbles_1024(w[i]), kk), b[kk][1] = value(nibbles_1024(w[i] >> 4), kk);
        b[kk + 1][0] = value(nibbles_1024(w[i] >> 8), kk), b[kk + 1][1] = value(nibbles_1024(w[i] >> 12), kk);
      }
    }
  }
};

// Values (the B fragments of P V). decode2<HD>(ra, rb, g, shift, table, v): v[j] = (A[g HD/8 + j],
// B[g HD/8 + j]), the f16 pair of the keys of packed rows ra and rb in n-tile j.
template <int BITS>
struct AffineValueFrag {
  static constexpr int kBookBits = 0, kTableWords = 0;
  template <int HD>
  __device__ __forceinline__ static void decode2(const uint8_t* ra, const uint8_t* rb, int g, int shift,
                                                 const uint32_t*, uint32_t (&v)[HD / 8]) {
    constexpr int VD = HD / 8, kWords = VD * BITS / 32;
    const int gi = (g * VD) >> shift, groups = HD >> shift;
    const uint8_t *fa = ra + HD * BITS / 8, *fb = rb + HD * BITS / 8;
    const __half2 a = __halves2half2(f16_at(fa + 2 * gi), f16_at(fb + 2 * gi));
    const __half2 z = __halves2half2(f16_at(fa + 2 * (groups + gi)), f16_at(fb + 2 * (groups + gi)));
    const __half2 k1024 = __float2half2_rn(1024.0f);
    auto value = [&](__half2 x) { return u32(__hfma2(__hsub2(x, k1024), a, z)); };
    uint32_t wa[kWords], wb[kWords];
    load_words<kWords>(ra + g * kWords * 4, wa);
    load_words<kWords>(rb + g * kWords * 4, wb);
#pragma unroll
    for (int m = 0; m < kWords; ++m) {
      if constexpr (BITS == 8) {
        const uint32_t lo = prmt(wa[m], wb[m], 0x5140), hi = prmt(wa[m], wb[m], 0x7362);  // A0 B0 A1 B1 | A2 B2 A3 B3
        v[4 * m] = value(bytes_1024(lo, 0x4140)), v[4 * m + 1] = value(bytes_1024(lo, 0x4342));
        v[4 * m + 2] = value(bytes_1024(hi, 0x4140)), v[4 * m + 3] = value(bytes_1024(hi, 0x4342));
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) {  // nibbles (i, i + 4) of each row, paired across the rows
          const uint32_t x = u32(nibbles_1024(wa[m] >> (4 * i))), y = u32(nibbles_1024(wb[m] >> (4 * i)));
          v[8 * m + i] = value(h2(prmt(x, y, 0x5410))), v[8 * m + i + 4] = value(h2(prmt(x, y, 0x7632)));
        }
      }
    }
  }
  __device__ __forceinline__ static void prepare_table(uint32_t*, const TurboTables&) {}
};

// A codebook of 2^BITS entries (BITS <= 4) as a table of half2 pairs (book[c0], book[c1]) indexed by
// a pair of adjacent codes, stored kCopies times side by side so that lane l reads copy l % kCopies:
// the 32 lanes' random indices then fall in distinct banks (two lanes per bank at most for 4-bit codes).
template <int BITS>
struct PairTable {
  static_assert(BITS >= 2 && BITS <= 4, "pair tables for codes of 2-4 bits");
  static constexpr int kCopies = BITS <= 3 ? 32 : 16;
  static constexpr int kTableWords = (1 << (2 * BITS)) * kCopies;
  static constexpr int kEntryShift = kCopies == 32 ? 7 : 6;  // bytes from one pair's copies to the next pair's
  // The pair of codes at bits [pos, pos + 2 BITS) of the lane's stream c, as (book[c0], book[c1]).
  template <int W>
  __device__ __forceinline__ static uint32_t pair(const uint32_t* table, const uint32_t (&c)[W], int pos) {
    const uint32_t mine = (threadIdx.x & (kCopies - 1)) * 4;  // this lane's copy
    const uint32_t offset = field_shifted<2 * BITS, kEntryShift>(c, pos);
    return *reinterpret_cast<const uint32_t*>(reinterpret_cast<const uint8_t*>(table) + (offset | mine));
  }
  __device__ __forceinline__ static void prepare(uint32_t* table, const float* book) {
    for (int i = threadIdx.x; i < kTableWords; i += blockDim.x) {
      const int p = i / kCopies;
      table[i] = u32(__floats2half2_rn(book[p & ((1 << BITS) - 1)], book[p >> BITS]));
    }
  }
};

// TurboQuant_mse keys of 4 or 3 bits: value rows (codebook indices and an f16 RMS per group of 32)
// in the rotated domain, which the kernel meets by rotating the query rows and the new key once. Lane
// t holds dims [t HD/4, (t + 1) HD/4) in order, as 8-bit keys do; each pair of adjacent codes is one
// read of the key codebook's pair table.
template <int BITS>
struct RotatedKeyFrag {
  static constexpr bool kRotated = true;
  static constexpr int kBookBits = BITS, kTableWords = PairTable<BITS>::kTableWords;
  __device__ __forceinline__ static void prepare_table(uint32_t* table, const TurboTables& t) {
    PairTable<BITS>::prepare(table, t.key_book);
  }
  template <int HD>
  __device__ __forceinline__ static int kdim(int t, int kk, int e) { return t * (HD / 4) + 4 * kk + e; }
  template <int HD>
  __device__ __forceinline__ static void decode(const uint8_t* row, int t, int, const uint32_t* table,
                                                uint32_t (&b)[HD / 16][2]) {
    constexpr int NB = HD / 4 * BITS;  // the lane's code bits
    const int base = t * (HD / 4);
    // The lane's dims span one group of 32, or two at head dim 256 (pairs past HD / 16 in the second).
    const uint8_t* scales = row + HD * BITS / 8;
    const __half2 s0 = __half2half2(f16_at(scales + 2 * (base >> 5)));
    const __half2 s1 = HD == 256 ? __half2half2(f16_at(scales + 2 * ((base >> 5) + 1))) : s0;
    uint32_t c[(NB + 31) / 32];
    lane_bits<NB>(row, t * NB, c);
#pragma unroll
    for (int p = 0; p < HD / 8; ++p)  // dims base + 2p, base + 2p + 1: half p % 2 of k-step p / 2
      b[p / 2][p % 2] = u32(__hmul2(h2(PairTable<BITS>::pair(table, c, 2 * BITS * p)), p < HD / 16 ? s0 : s1));
  }
};

// Words of a TurboQuant value table: a PairTable's, or the f16 codebook's of 8-bit codes.
template <int BITS>
constexpr int turbo_value_table_words() {
  if constexpr (BITS <= 4) return PairTable<BITS>::kTableWords;
  else return 128;
}

// TurboQuant values: codebook indices with an f16 RMS scale per group, attended in the rotated domain.
// For BITS <= 4 a pair of adjacent codes is one read of a PairTable; 8-bit codes look up an f16
// codebook one by one.
template <int BITS>
struct TurboValueFrag {
  static constexpr int kBookBits = BITS;
  static constexpr int kTableWords = turbo_value_table_words<BITS>();
  template <int HD>
  __device__ __forceinline__ static void decode2(const uint8_t* ra, const uint8_t* rb, int g, int shift,
                                                 const uint32_t* table, uint32_t (&v)[HD / 8]) {
    constexpr int VD = HD / 8, NB = VD * BITS;
    const int gi = (g * VD) >> shift;
    const __half2 s = __halves2half2(f16_at(ra + HD * BITS / 8 + 2 * gi), f16_at(rb + HD * BITS / 8 + 2 * gi));
    uint32_t ca[(NB + 31) / 32], cb[(NB + 31) / 32];
    lane_bits<NB>(ra, g * NB, ca);
    lane_bits<NB>(rb, g * NB, cb);
    if constexpr (BITS == 8) {
      const uint16_t* book = reinterpret_cast<const uint16_t*>(table);
#pragma unroll
      for (int j = 0; j < VD; ++j) {
        const uint32_t x = book[bits_at<8>(ca, 8 * j)], y = book[bits_at<8>(cb, 8 * j)];
        v[j] = u32(__hmul2(h2(x | (y << 16)), s));
      }
    } else {
#pragma unroll
      for (int p = 0; p < VD / 2; ++p) {  // dims 2p, 2p + 1 of each row, paired across the rows
        const uint32_t x = PairTable<BITS>::pair(table, ca, 2 * BITS * p);
        const uint32_t y = PairTable<BITS>::pair(table, cb, 2 * BITS * p);
        v[2 * p] = u32(__hmul2(h2(prmt(x, y, 0x5410)), s)), v[2 * p + 1] = u32(__hmul2(h2(prmt(x, y, 0x7632)), s));
      }
    }
  }
  // table (kTableWords of shared memory): the pair table's copies, or the f16 codebook for 8-bit codes.
  __device__ __forceinline__ static void prepare_table(uint32_t* table, const TurboTables& t) {
    if constexpr (BITS <= 4) {
      PairTable<BITS>::prepare(table, t.book);
    } else {
      uint16_t* book = reinterpret_cast<uint16_t*>(table);
      for (int i = threadIdx.x; i < 256; i += blockDim.x) book[i] = __half_as_ushort(__float2half_rn(t.book[i]));
    }
  }
};

// One warp copies the first n rows of a 16-row tile (row r at src + r * src_step bytes) into dst (rows
// of `stage` bytes), GRAN bytes per cp.async: lanes 2 r and 2 r + 1 copy the first and second half of
// row r's per_row pieces. Every lane runs the same trip count (the first half's; the second half's lane
// skips its last piece when per_row is odd), so the loop has no divergent exit.
template <int GRAN>
__device__ __forceinline__ void warp_stage_rows(uint8_t* dst, const uint8_t* src, int64_t src_step, int stage, int n,
                                                int per_row, int lane) {
  const int r = lane >> 1, half = (per_row + 1) >> 1, c0 = (lane & 1) * half;
  const int count = r < n ? per_row - c0 : 0;  // pieces of this lane's part, or none past the n rows
  uint32_t d = smem_addr(dst + r * stage + c0 * GRAN);
  const uint8_t* g = src + r * src_step + c0 * GRAN;
#pragma unroll 4
  for (int i = 0; i < half; ++i, d += GRAN, g += GRAN) {
    if (i >= count) continue;
    if constexpr (GRAN == 16) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(g));
    } else {
      asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(d), "l"(g), "n"(GRAN));
    }
  }
}

__device__ __forceinline__ void warp_stage_any(int gran, uint8_t* dst, const uint8_t* src, int64_t src_step, int stage,
                                               int n, int row_bytes, int lane) {
  static_assert(kKVWarpKeys == 16, "two lanes per staged row");
  if (gran == 16) warp_stage_rows<16>(dst, src, src_step, stage, n, row_bytes / 16, lane);
  else if (gran == 8) warp_stage_rows<8>(dst, src, src_step, stage, n, row_bytes / 8, lane);
  else warp_stage_rows<4>(dst, src, src_step, stage, n, row_bytes / 4, lane);
}

// x with its half `hi` (0 low, 1 high) replaced by the f16 of `value`.
__device__ __forceinline__ uint32_t with_half(uint32_t x, int hi, float value) {
  const uint32_t h = __half_as_ushort(__float2half_rn(value));
  return hi ? (x & 0xFFFFu) | (h << 16) : (x & 0xFFFF0000u) | h;
}

// a.chunk is a multiple of kKVTileKeys; k_stage / v_stage the staged row strides (kv_stage_stride);
// k_gran / v_gran the cp.async widths (4, 8 or 16) that divide the packed row sizes and the rows'
// alignment; k_shift / v_shift log2 of the groups. Three blocks per SM (168 registers) below head dim
// 256, whose accumulators alone take 128.
template <typename T, int HD, typename KC, typename VC>
__global__ void __launch_bounds__(kFlashWarps * 32, HD == 256 ? 1 : 3)
    kv_decode_attention_mma_kernel(KVAttnArgs a, TurboTables t, int k_stage, int v_stage, int k_gran, int v_gran,
                                   int k_shift, int v_shift) {
  grid_dependency_wait();
  extern __shared__ __align__(16) unsigned char kv_mma_smem[];
  constexpr int BN = kKVWarpKeys, VD = HD / 8;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
  uint4* sqf = reinterpret_cast<uint4*>(kv_mma_smem);  // [HD / 16][32]: each lane's query A fragments
  uint8_t* stage_all = reinterpret_cast<uint8_t*>(sqf + HD / 16 * 32);
  const int stage_bytes = BN * (k_stage + v_stage);
  uint8_t* raw = stage_all + warp * kKVStages * stage_bytes;  // this warp's staging buffers
  uint32_t* table = reinterpret_cast<uint32_t*>(stage_all + kv_mma_stage_area<HD>(k_stage, v_stage));
  constexpr int kKeyTableWords = kv_key_table_words<KC, VC>();
  uint32_t* key_table = kKeyTableWords > 0 ? table + VC::kTableWords : table;  // or the value codec's
  float* new_k = reinterpret_cast<float*>(table + VC::kTableWords + kKeyTableWords);
  float* new_v = new_k + HD;

  const int64_t split = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int64_t G = a.Hq / a.Hkv;
  const bool has_new = a.k_new != nullptr;
  // Key indices fit 32 bits (the caller checks S); only addresses are 64-bit.
  const int S = static_cast<int>(a.S);
  const int n_keys = S + (has_new ? 1 : 0);
  const int j0 = static_cast<int>(split * a.chunk), j1 = j0 + a.chunk < n_keys ? static_cast<int>(j0 + a.chunk) : n_keys;
  int len = S;  // stored keys this batch row reads (a compiled decode step's row length)
  int skip = -1;  // a ring's slot this row does not read
  if (a.lengths) {
    const int n = a.lengths[b];
    len = n < 0 ? 0 : (n < S ? n : S);
    if (a.ring > 0 && n >= 0 && n % a.ring < len) skip = static_cast<int>(n % a.ring);  // never the new key
  }
  const int hi = len < j1 ? len : j1;  // stored rows this split reads: [j0, hi)
  const int64_t slot = b * a.Hkv + hk, pos_stride = a.B * a.Hkv;
  const int64_t k_step = pos_stride * a.kc.row_bytes, v_step = pos_stride * a.vc.row_bytes;  // bytes per key
  const uint8_t* k_base = a.k_rows + slot * a.kc.row_bytes;
  const uint8_t* v_base = a.v_rows + slot * a.vc.row_bytes;

  auto stage = [&](int n0, int buf) {
    uint8_t* dst = raw + buf * stage_bytes;
    const int n = hi - n0 < BN ? hi - n0 : BN;  // rows past hi are never decoded
    warp_stage_any(k_gran, dst, k_base + n0 * k_step, k_step, k_stage, n, a.kc.row_bytes, lane);
    warp_stage_any(v_gran, dst + BN * k_stage, v_base + n0 * v_step, v_step, v_stage, n, a.vc.row_bytes, lane);
  };
  // Query fragments in KC's dim order: lane l holds rows l / 4 and l / 4 + 8 (zero past G); q_at(r, d)
  // is element d of query row r.
  auto query_fragments = [&](auto&& q_at) {
    for (int idx = threadIdx.x; idx < HD / 16 * 32; idx += blockDim.x) {
      const int kk = idx >> 5, qg = (idx & 31) >> 2, qt = idx & 3;
      float x[2][4];
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        const int r = qg + 8 * rr;
#pragma unroll
        for (int e = 0; e < 4; ++e) x[rr][e] = r < G ? q_at(r, KC::template kdim<HD>(qt, kk, e)) : 0.0f;
      }
      sqf[idx] = make_uint4(pack2<__half>(x[0][0], x[0][1]), pack2<__half>(x[1][0], x[1][1]),
                            pack2<__half>(x[0][2], x[0][3]), pack2<__half>(x[1][2], x[1][3]));
    }
  };
  auto q_global = [&](int r, int d) {
    return to_f32(static_cast<const T*>(a.q)[b * a.qs[0] + (hk * G + r) * a.qs[1] + d]);
  };
  if constexpr (KC::kRotated) {
    // Rotated keys: the G query rows are rotated in the staging area (16 HD floats fit in the merge's
    // scratch) before any tile is staged there.
    float* q_rot = reinterpret_cast<float*>(stage_all);
    for (int i = threadIdx.x; i < G * HD; i += blockDim.x) q_rot[i] = q_global(i / HD, i % HD);
    __syncthreads();
    block_rotate(q_rot, HD, t, false, static_cast<int>(G));
    query_fragments([&](int r, int d) { return q_rot[r * HD + d]; });
    __syncthreads();
  }

  const int first = j0 + warp * BN, step = kFlashWarps * BN;
#pragma unroll
  for (int i = 0; i < kKVStages - 1; ++i) {
    if (first + i * step < j1) stage(first + i * step, i);
    cp_async_commit();
  }
  if constexpr (!KC::kRotated) query_fragments(q_global);
  VC::prepare_table(table, t);
  if constexpr (kKeyTableWords > 0) KC::prepare_table(key_table, t);
  const bool owns_new = has_new && j0 <= S && S < j1;  // uniform across the block
  if (owns_new) {
    const T* kp = static_cast<const T*>(a.k_new) + b * a.kns[0] + hk * a.kns[1];
    const T* vp = static_cast<const T*>(a.v_new) + b * a.vns[0] + hk * a.vns[1];
    for (int i = threadIdx.x; i < HD; i += blockDim.x) {
      new_k[i] = to_f32(kp[i]);
      new_v[i] = to_f32(vp[i]);
    }
    __syncthreads();
    if constexpr (KC::kRotated) block_rotate(new_k, HD, t, false);
    if (a.vc.kind == 2) block_rotate(new_v, HD, t, false);  // the read attends in the rotated domain
  }
  __syncthreads();

  float o[HD / 8][4];
#pragma unroll
  for (int i = 0; i < HD / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float row_m[2] = {-INFINITY, -INFINITY}, row_l[2] = {0.0f, 0.0f};
  auto masked = [&](int, int j) { return j >= j1 || j == skip || (j >= len && !(owns_new && j == S)); };
  // A key past hi is the step's unquantized position (S, when this block owns it) or zeros: its staged
  // row was never written.
  auto fix_key = [&](uint32_t(&kb)[HD / 16][2], int j) {
    const bool fresh = owns_new && j == S;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        kb[kk][h] = fresh ? pack2<__half>(new_k[KC::template kdim<HD>(tq, kk, 2 * h)],
                                          new_k[KC::template kdim<HD>(tq, kk, 2 * h + 1)])
                          : 0u;
      }
    }
  };
  auto fix_value = [&](uint32_t(&v)[VD], int j, int half) {
    if (j < hi) return;
    const bool fresh = owns_new && j == S;
#pragma unroll
    for (int i = 0; i < VD; ++i) v[i] = with_half(v[i], half, fresh ? new_v[g * VD + i] : 0.0f);
  };

  int buf = 0;
  for (int n0 = first; n0 < j1; n0 += step) {
    const int ahead = n0 + (kKVStages - 1) * step;
    if (ahead < j1) stage(ahead, buf == 0 ? kKVStages - 1 : buf - 1);
    cp_async_commit();
    cp_async_wait<kKVStages - 1>();
    __syncwarp();
    const uint8_t* ck = raw + buf * stage_bytes;
    const uint8_t* cv = ck + BN * k_stage;
    const bool full = n0 + BN <= hi && (skip < n0 || skip >= n0 + BN);  // uniform across the warp

    // Both n-tiles' keys decoded first, so that their two chains of HD / 16 dependent mma interleave
    // and each query fragment is read once per tile.
    float s[BN / 8][4];
    uint32_t kb[BN / 8][HD / 16][2];
#pragma unroll
    for (int nn = 0; nn < BN / 8; ++nn) {
      s[nn][0] = s[nn][1] = s[nn][2] = s[nn][3] = 0.0f;
      const int r = nn * 8 + g;  // the key this lane feeds to n-tile nn
      KC::template decode<HD>(ck + r * k_stage, tq, k_shift, key_table, kb[nn]);
      if (!full && n0 + r >= hi) fix_key(kb[nn], n0 + r);
    }
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      const uint4 q4 = sqf[kk * 32 + lane];
      const uint32_t qa[4] = {q4.x, q4.y, q4.z, q4.w};
#pragma unroll
      for (int nn = 0; nn < BN / 8; ++nn) mma16816<__half>(s[nn], qa, kb[nn][kk][0], kb[nn][kk][1]);
    }
    if (full) {  // nothing in the tile is hidden
      decode_softmax<HD, BN>(s, n0, a.scale, a.softcap, o, row_m, row_l, [](int, int) { return false; });
    } else {
      decode_softmax<HD, BN>(s, n0, a.scale, a.softcap, o, row_m, row_l, masked);
    }
    const uint32_t pa[4] = {pack2<__half>(s[0][0], s[0][1]), pack2<__half>(s[0][2], s[0][3]),
                            pack2<__half>(s[1][0], s[1][1]), pack2<__half>(s[1][2], s[1][3])};
    uint32_t v0[VD], v1[VD];  // keys 2 tq, 2 tq + 1 and 2 tq + 8, 2 tq + 9
    VC::template decode2<HD>(cv + 2 * tq * v_stage, cv + (2 * tq + 1) * v_stage, g, v_shift, table, v0);
    VC::template decode2<HD>(cv + (2 * tq + 8) * v_stage, cv + (2 * tq + 9) * v_stage, g, v_shift, table, v1);
    if (!full) {
      fix_value(v0, n0 + 2 * tq, 0), fix_value(v0, n0 + 2 * tq + 1, 1);
      fix_value(v1, n0 + 2 * tq + 8, 0), fix_value(v1, n0 + 2 * tq + 9, 1);
    }
#pragma unroll
    for (int j = 0; j < VD; ++j) mma16816<__half>(o[j], pa, v0[j], v1[j]);
    __syncwarp();  // two tiles on, this buffer is staged again
    buf = buf + 1 == kKVStages ? 0 : buf + 1;
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with its buffers: the merge reuses them

  float* scratch = reinterpret_cast<float*>(stage_all);
  decode_merge<HD>(
      scratch, static_cast<int>(G), o, row_m, row_l,
      [&](int r, int d, float acc, float M, float L) {
        store_partial<HD>(a.partial + (split * a.B * a.Hq + b * a.Hq + hk * G + r) * (HD + 2), d, acc, M, L);
      },
      [](int c) { return (c & 7) * VD + (c >> 3); });  // column c of n-tile j is dim c HD/8 + j
}

}  // namespace tern::cuda::kernels
