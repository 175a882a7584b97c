// The codecs of the tensor-core decode over packed KV rows (kv_quant_attention_mma.cuh): each lane
// dequantises the bytes of a staged packed row it needs straight into mma B fragments with half2
// arithmetic (byte permutes, a subtract and an FMA per two elements, or a codebook table read and a
// multiply). Keys (KeyFrag: affine and TurboQuant int8; RotatedKeyFrag: TurboQuant_mse of 4 or 3 bits)
// fill the B fragments of Q K^T, values (AffineValueFrag, TurboValueFrag) those of P V. Device code only.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "tern/backend/cuda/kernels/kv_quant_args.h"

namespace tern::cuda::kernels {

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

}  // namespace tern::cuda::kernels
