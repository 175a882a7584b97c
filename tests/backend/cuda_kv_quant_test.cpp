// Quantized KV rows on the GPU against the CPU: encode bits identical (affine8/4 at groups 32/64/128,
// TurboQuant keys of 8, 4 and 3 bits, values of 2/3/4/8), decode, the fused decode attention (B, S, head_dim, GQA, both
// TurboQuant reads' storage), and whole caches (prefill then decode appends; the affine ring too). Skips cleanly
// without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "tern/ops/device.h"
#include "tern/ops/elementwise.h"
#include "tern/ops/kv_quant.h"
#include "tern/state/affine_kv_cache.h"
#include "tern/state/kv_cache_options.h"
#include "tern/state/turboquant_kv_cache.h"
#include "tests/backend/cuda_test_util.h"

namespace tern {
namespace {

using namespace cuda_test;

using ops::KVRowCodec;

class CudaKVQuant : public CudaTest {};

// Every valid codec of rows of `dim` values (affine groups must divide dim).
std::vector<KVRowCodec> all_codecs(int64_t dim) {
  std::vector<KVRowCodec> c;
  for (int bits : {8, 4})
    for (int64_t g : {32, 64, 128})
      if (dim % g == 0) c.push_back({KVRowCodec::affine, bits, g, dim});
  for (int bits : {8, 4, 3}) c.push_back({KVRowCodec::turbo_key, bits, 32, dim});
  for (int bits : {2, 3, 4, 8}) c.push_back({KVRowCodec::turbo_value, bits, 32, dim});
  return c;
}

// Differing bytes of two row sets [.., row_bytes]; the first one is described (row, byte, field of
// the codec layout [codes][f16 per group][f16 per group], both values) so a failure says where.
size_t count_row_mismatches(const std::vector<uint8_t>& want, const std::vector<uint8_t>& got, const KVRowCodec& c,
                            std::string& first) {
  const int64_t rb = c.row_bytes(), groups = c.dim / c.group;
  const int64_t codes = rb - (c.rotated() ? 2 : 4) * groups;
  size_t bad = 0;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    if (want[i] == got[i]) continue;
    if (bad++ == 0) {
      const int64_t row = static_cast<int64_t>(i) / rb, byte = static_cast<int64_t>(i) % rb;
      const char* field = byte < codes ? "code" : byte < codes + 2 * groups ? "first f16 (scale)" : "second f16 (bias/zero)";
      first = "row " + std::to_string(row) + " byte " + std::to_string(byte) + " (" + field + "): cpu " +
              std::to_string(want[i]) + " gpu " + std::to_string(got[i]);
    }
  }
  return bad;
}

TEST_F(CudaKVQuant, EncodeBitsIdenticalToCpu) {
  const int64_t B = 2, H = 4, L = 33;
  // Head dims 32-256 take the rotated codecs a warp a row, 512 a block a row.
  for (int64_t D : {32, 64, 128, 256, 512}) {
    // Wide-ranged rows, a constant group, signed zeros and a tiny-range group hit the edge cases.
    Tensor x = randn({B, H, L, D}, 21 + static_cast<uint32_t>(D), 2.0f);
    float* xp = x.data<float>();
    for (int64_t i = 0; i < 32; ++i) xp[i] = 0.75f;
    for (int64_t i = 32; i < 64; ++i) xp[i] = (i % 2) ? 0.0f : -0.0f;
    for (int64_t i = D; i < D + 32; ++i) xp[i] = 1000.0f + 1e-3f * float(i - D);
    for (Dtype dt : {Dtype::f32, Dtype::bf16}) {
      Tensor xc = dt == Dtype::f32 ? x : ops::cast(x, dt);
      Tensor xg = xc.to(kGpu);
      for (const KVRowCodec& c : all_codecs(D)) {
        Tensor cpu_rows = Tensor::empty({L, B, H, c.row_bytes()}, Dtype::u8);
        Tensor gpu_rows = Tensor::empty({L, B, H, c.row_bytes()}, Dtype::u8, kGpu);
        ops::kv_encode(xc, c, cpu_rows);
        ops::kv_encode(xg, c, gpu_rows);
        const std::vector<uint8_t> want = bytes_of(cpu_rows), got = bytes_of(gpu_rows);
        ASSERT_EQ(want.size(), got.size());
        std::string first;
        const size_t bad = count_row_mismatches(want, got, c, first);
        EXPECT_EQ(bad, 0u) << "kind " << c.kind << " bits " << c.bits << " group " << c.group << " D " << D << " "
                           << dtype_name(dt) << "; first: " << first << "; decoded NMSE "
                           << nmse(ops::kv_decode(cpu_rows, c, Dtype::f32), ops::kv_decode(gpu_rows.to(Device::cpu()), c, Dtype::f32));
        // A strided (transposed-back) input, and a view of a longer buffer (a plain cache's keys), encode
        // the same bits.
        Tensor strided = xg.transpose(1, 2).contiguous().transpose(1, 2);
        Tensor rows2 = Tensor::empty({L, B, H, c.row_bytes()}, Dtype::u8, kGpu);
        ops::kv_encode(strided, c, rows2);
        const size_t bad2 = count_row_mismatches(want, bytes_of(rows2), c, first);
        EXPECT_EQ(bad2, 0u) << "strided input, kind " << c.kind << " bits " << c.bits << " group " << c.group << " D "
                            << D << " " << dtype_name(dt) << "; first: " << first;
        Tensor longer = Tensor::zeros({B, H, L + 5, D}, xg.dtype(), kGpu);
        Tensor view = longer.slice(2, 0, L);
        view.copy_from(xg);
        Tensor rows3 = Tensor::empty({L, B, H, c.row_bytes()}, Dtype::u8, kGpu);
        ops::kv_encode(view, c, rows3);
        const size_t bad3 = count_row_mismatches(want, bytes_of(rows3), c, first);
        EXPECT_EQ(bad3, 0u) << "sliced input, kind " << c.kind << " bits " << c.bits << " group " << c.group << " D "
                            << D << " " << dtype_name(dt) << "; first: " << first;
      }
    }
  }
}

// The CPU's key and value rows (kw, vw) against the GPU's (kr, vr), byte for byte, naming the pair.
void expect_pair_identical(const Tensor& kw, const Tensor& kr, const KVRowCodec& kc, const Tensor& vw, const Tensor& vr,
                           const KVRowCodec& vc) {
  std::string first;
  EXPECT_EQ(count_row_mismatches(bytes_of(kw), bytes_of(kr), kc, first), 0u)
      << "keys " << kc.kind << "/" << kc.bits << "/" << kc.group << " with values " << vc.kind << "/" << vc.bits
      << "; first: " << first;
  EXPECT_EQ(count_row_mismatches(bytes_of(vw), bytes_of(vr), vc, first), 0u)
      << "values " << vc.kind << "/" << vc.bits << "/" << vc.group << " with keys " << kc.kind << "/" << kc.bits
      << "; first: " << first;
}

// The compiled step's append: keys and values encoded straight into their positions of the storage,
// bit-identical to the CPU's encode-then-write, for every codec pairing.
TEST_F(CudaKVQuant, EncodedAtPositionsMatchCpuStorage) {
  const int64_t B = 3, H = 2, N = 5, D = 128;
  const Tensor k = ops::cast(randn({B, H, 1, D}, 33, 1.5f), Dtype::bf16),
               v = ops::cast(randn({B, H, 1, D}, 34), Dtype::bf16);
  const Tensor kg = k.to(kGpu), vg = v.to(kGpu);
  Tensor pos = Tensor::empty({B}, Dtype::i32);
  const int32_t at[B] = {2, 4, 0};
  for (int64_t b = 0; b < B; ++b) pos.data<int32_t>()[b] = at[b];
  const Tensor pg = pos.to(kGpu);
  for (const KVRowCodec& kc : all_codecs(D)) {
    if (kc.kind == KVRowCodec::turbo_value) continue;  // keys are affine or turbo_key
    for (const KVRowCodec& vc : all_codecs(D)) {
      if (vc.kind == KVRowCodec::turbo_key) continue;  // values are affine or turbo_value
      Tensor kw = Tensor::zeros({N, B, H, kc.row_bytes()}, Dtype::u8),
             vw = Tensor::zeros({N, B, H, vc.row_bytes()}, Dtype::u8);
      Tensor kr = kw.to(kGpu), vr = vw.to(kGpu);
      ops::kv_encode_positions(k, kc, kw, v, vc, vw, pos);
      ops::kv_encode_positions(kg, kc, kr, vg, vc, vr, pg);
      expect_pair_identical(kw, kr, kc, vw, vr, vc);
    }
  }
  // A device position outside [0, N) writes nothing (the device does not check; the rows stay zero).
  const KVRowCodec kc{KVRowCodec::turbo_key, 8, 32, D}, vc{KVRowCodec::turbo_value, 3, 32, D};
  Tensor kr = Tensor::zeros({N, B, H, kc.row_bytes()}, Dtype::u8).to(kGpu),
         vr = Tensor::zeros({N, B, H, vc.row_bytes()}, Dtype::u8).to(kGpu);
  for (int32_t p : {-1, static_cast<int32_t>(N)}) {
    for (int64_t b = 0; b < B; ++b) pos.data<int32_t>()[b] = p;
    ops::kv_encode_positions(kg, kc, kr, vg, vc, vr, pos.to(kGpu));
    for (const Tensor* t : {&kr, &vr}) {
      const std::vector<uint8_t> got = bytes_of(*t);
      EXPECT_EQ(std::count(got.begin(), got.end(), 0), static_cast<std::ptrdiff_t>(got.size())) << "position " << p;
    }
  }
}

// Head dims 64-256 take the warp-a-row kernel, 96 (affine only: TurboQuant rotates powers of two) the
// block-a-row one.
TEST_F(CudaKVQuant, DecodeMatchesCpu) {
  const int64_t B = 2, H = 2, S = 17;
  for (int64_t D : {64, 96, 128, 256}) {
    Tensor x = randn({B, H, S, D}, 31 + D);
    for (const KVRowCodec& c : all_codecs(D)) {
      if (D == 96 && c.kind != KVRowCodec::affine) continue;
      Tensor rows = Tensor::empty({S, B, H, c.row_bytes()}, Dtype::u8);
      ops::kv_encode(x, c, rows);
      Tensor g = rows.to(kGpu);
      for (bool unrotate : {true, false}) {
        const Tensor want = ops::kv_decode(rows, c, Dtype::f32, unrotate);
        EXPECT_LE(nmse(want, ops::kv_decode(g, c, Dtype::f32, unrotate)), 1e-12)
            << "D " << D << " kind " << c.kind << " bits " << c.bits << " unrotate " << unrotate;
        EXPECT_LE(nmse(want, ops::kv_decode(g, c, Dtype::bf16, unrotate)), 1e-4) << "D " << D << " kind " << c.kind;
      }
    }
  }
}

// Decoding into positions [0, S) of a longer buffer (the window read's temporary) leaves the rest alone.
TEST_F(CudaKVQuant, DecodeIntoALongerBufferMatchesCpu) {
  const int64_t B = 2, H = 3, S = 21, T = 5, D = 128;
  Tensor x = randn({B, H, S, D}, 7);
  for (const KVRowCodec& c : {KVRowCodec{KVRowCodec::affine, 4, 64, D}, KVRowCodec{KVRowCodec::turbo_value, 3, 32, D}}) {
    Tensor rows = Tensor::empty({S, B, H, c.row_bytes()}, Dtype::u8);
    ops::kv_encode(x, c, rows);
    Tensor fill = randn({B, H, S + T, D}, 9);
    for (Dtype dt : {Dtype::f32, Dtype::bf16}) {
      Tensor buf = ops::cast(fill, dt).to(kGpu);
      Tensor head = buf.narrow(2, 0, S);
      ops::kv_decode_into(rows.to(kGpu), c, head);
      Tensor got = ops::cast(buf.to(Device::cpu()), Dtype::f32);
      EXPECT_LE(nmse(ops::kv_decode(rows, c, Dtype::f32), got.narrow(2, 0, S).contiguous()), dt == Dtype::f32 ? 1e-12 : 1e-4)
          << "kind " << c.kind << " " << dtype_name(dt);
      const Tensor tail_want = ops::cast(ops::cast(fill, dt), Dtype::f32).narrow(2, S, T).contiguous();
      EXPECT_EQ(nmse(tail_want, got.narrow(2, S, T).contiguous()), 0.0) << "the positions past S changed";
    }
  }
  // A destination whose rows are not one after another goes through a temporary, with the same result.
  const KVRowCodec c{KVRowCodec::affine, 8, 64, D};
  Tensor rows = Tensor::empty({S, B, H, c.row_bytes()}, Dtype::u8);
  ops::kv_encode(x, c, rows);
  Tensor wide = Tensor::zeros({B, H, S, 2 * D}, Dtype::f32).to(kGpu);
  Tensor strided = wide.narrow(3, 0, D);
  ops::kv_decode_into(rows.to(kGpu), c, strided);
  EXPECT_LE(nmse(ops::kv_decode(rows, c, Dtype::f32), strided.to(Device::cpu()).contiguous()), 1e-12);
  EXPECT_EQ(nmse(Tensor::zeros({B, H, S, D}, Dtype::f32), wide.narrow(3, D, D).to(Device::cpu()).contiguous()), 0.0);
}

// t [B, H, S, D] as packed rows [S, B, H, row bytes], encoded on the CPU.
Tensor packed_rows(const Tensor& t, const KVRowCodec& c) {
  Tensor rows = Tensor::empty({t.size(2), t.size(0), t.size(1), c.row_bytes()}, Dtype::u8);
  ops::kv_encode(t, c, rows);
  return rows;
}

// A read's random inputs: S packed rows of keys and values [S, B, Hkv, ..] (encoded on the CPU) and
// bf16 queries [B, Hq, L, D] with their L unquantized keys and values [B, Hkv, L, D]; seed advances.
struct ReadInputs {
  Tensor kr, vr, q, kn, vn;
};
ReadInputs read_inputs(int64_t B, int64_t Hq, int64_t Hkv, int64_t S, int64_t L, const KVRowCodec& kc,
                       const KVRowCodec& vc, uint32_t& seed) {
  const int64_t D = kc.dim;
  ReadInputs in;
  in.kr = packed_rows(randn({B, Hkv, S, D}, ++seed), kc);
  in.vr = packed_rows(randn({B, Hkv, S, D}, ++seed), vc);
  in.q = ops::cast(randn({B, Hq, L, D}, ++seed), Dtype::bf16);
  in.kn = ops::cast(randn({B, Hkv, L, D}, ++seed), Dtype::bf16);
  in.vn = ops::cast(randn({B, Hkv, L, D}, ++seed), Dtype::bf16);
  return in;
}

TEST_F(CudaKVQuant, DecodeAttentionMatchesCpu) {
  struct Scheme { KVRowCodec::Kind kk, vk; int kbits, vbits; int64_t group; };
  const Scheme schemes[] = {{KVRowCodec::affine, KVRowCodec::affine, 8, 8, 64},
                            {KVRowCodec::affine, KVRowCodec::affine, 4, 4, 32},
                            {KVRowCodec::turbo_key, KVRowCodec::turbo_value, 8, 3, 32},
                            {KVRowCodec::turbo_key, KVRowCodec::turbo_value, 8, 4, 32},
                            {KVRowCodec::turbo_key, KVRowCodec::turbo_value, 8, 2, 32},
                            {KVRowCodec::turbo_key, KVRowCodec::turbo_value, 8, 8, 32},
                            {KVRowCodec::affine, KVRowCodec::affine, 8, 8, 32},
                            {KVRowCodec::affine, KVRowCodec::affine, 4, 4, 64}};
  uint32_t seed = 40;
  for (int64_t B : {1, 4})
    for (int64_t S : {1, 100, 4097})
      for (int64_t D : {64, 128, 256})
        for (int64_t groups : {1, 4, 16})  // 16: a full mma tile of query heads per kv head
          for (const Scheme& sc : schemes) {
            const int64_t Hkv = 2, Hq = Hkv * groups;
            const KVRowCodec kc{sc.kk, sc.kbits, sc.kk == KVRowCodec::affine ? sc.group : 32, D};
            const KVRowCodec vc{sc.vk, sc.vbits, sc.vk == KVRowCodec::affine ? sc.group : 32, D};
            const auto [kr, vr, q, kn, vn] = read_inputs(B, Hq, Hkv, S, 1, kc, vc, seed);
            const float scale = 1.0f / std::sqrt(float(D));
            for (bool with_new : {true, false}) {
              Tensor knc = with_new ? kn : Tensor(), vnc = with_new ? vn : Tensor();
              Tensor want = ops::kv_decode_attention(ops::cast(q, Dtype::f32), kr, kc, vr, vc,
                                                     with_new ? ops::cast(kn, Dtype::f32) : Tensor(),
                                                     with_new ? ops::cast(vn, Dtype::f32) : Tensor(), scale);
              Tensor got = ops::kv_decode_attention(q.to(kGpu), kr.to(kGpu), kc, vr.to(kGpu), vc,
                                                    with_new ? knc.to(kGpu) : Tensor(),
                                                    with_new ? vnc.to(kGpu) : Tensor(), scale);
              EXPECT_EQ(got.dtype(), Dtype::bf16);
              EXPECT_LE(nmse(want, got), 1e-4) << "B " << B << " S " << S << " D " << D << " G " << groups
                                               << " value kind " << vc.kind << " new " << with_new;
              // f32 queries: the same kernel at f32 output precision.
              Tensor got32 = ops::kv_decode_attention(ops::cast(q, Dtype::f32).to(kGpu), kr.to(kGpu), kc,
                                                      vr.to(kGpu), vc,
                                                      with_new ? ops::cast(kn, Dtype::f32).to(kGpu) : Tensor(),
                                                      with_new ? ops::cast(vn, Dtype::f32).to(kGpu) : Tensor(), scale);
              EXPECT_LE(nmse(want, got32), 1e-9) << "f32, B " << B << " S " << S << " D " << D;
            }
          }
}

// TurboQuant keys of 4 or 3 bits read by the fused decode attention (TERN_CUDA_KV_ROTATED_KEYS=1): the
// block rotates its query rows and the new key once and scores in the rotated domain. bf16 queries at
// head dims 64-256 take the tensor-core kernel (its key codebook table shared with the values' at equal
// bits, its own otherwise); f32 queries, head dims 32 and 512 and affine values take the CUDA-core
// kernel; forced split counts cover the merge.
TEST_F(CudaKVQuant, DecodeAttentionOverRotatedKeysMatchesCpu) {
  ScopedEnv rotated_env("TERN_CUDA_KV_ROTATED_KEYS", "1");
  struct Scheme { int kbits; KVRowCodec::Kind vk; int vbits; };
  const Scheme schemes[] = {{4, KVRowCodec::turbo_value, 4}, {3, KVRowCodec::turbo_value, 3},
                            {4, KVRowCodec::turbo_value, 2}, {3, KVRowCodec::turbo_value, 8},
                            {4, KVRowCodec::turbo_value, 3}, {3, KVRowCodec::affine, 8}};
  uint32_t seed = 4000;
  for (int64_t B : {1, 3})
    for (int64_t S : {1, 100, 4097})
      for (int64_t D : {32, 64, 128, 256, 512})
        for (int64_t groups : {1, 4, 16})
          for (const Scheme& sc : schemes) {
            if (B > 1 && groups != 4) continue;  // batch rows need no other group sizes
            const int64_t Hkv = 2, Hq = Hkv * groups;
            const KVRowCodec kc{KVRowCodec::turbo_key, sc.kbits, 32, D};
            const KVRowCodec vc{sc.vk, sc.vbits, 32, D};
            ASSERT_TRUE(ops::kv_decode_attention_supported(kc, vc, kGpu));
            const auto [kr, vr, q, kn, vn] = read_inputs(B, Hq, Hkv, S, 1, kc, vc, seed);
            const float scale = 1.0f / std::sqrt(float(D));
            for (bool with_new : {true, false}) {
              auto f32 = [&](const Tensor& t) { return with_new ? ops::cast(t, Dtype::f32) : Tensor(); };
              auto gpu = [&](const Tensor& t) { return with_new ? t.to(kGpu) : Tensor(); };
              Tensor want = ops::kv_decode_attention(ops::cast(q, Dtype::f32), kr, kc, vr, vc, f32(kn), f32(vn), scale);
              Tensor got = ops::kv_decode_attention(q.to(kGpu), kr.to(kGpu), kc, vr.to(kGpu), vc, gpu(kn), gpu(vn), scale);
              EXPECT_LE(nmse(want, got), 1e-4) << "B " << B << " S " << S << " D " << D << " G " << groups << " k"
                                               << sc.kbits << " v" << sc.vbits << " new " << with_new;
              Tensor got32 = ops::kv_decode_attention(ops::cast(q, Dtype::f32).to(kGpu), kr.to(kGpu), kc, vr.to(kGpu),
                                                      vc, gpu(f32(kn)), gpu(f32(vn)), scale);
              EXPECT_LE(nmse(want, got32), 1e-9) << "f32, B " << B << " S " << S << " D " << D << " G " << groups
                                                 << " k" << sc.kbits << " v" << sc.vbits << " new " << with_new;
            }
          }
  ScopedEnv splits_env("TERN_CUDA_KV_SPLITS", nullptr);
  const int64_t B = 2, Hkv = 2, Hq = 8, S = 4097, D = 128;
  const KVRowCodec kc{KVRowCodec::turbo_key, 4, 32, D}, vc{KVRowCodec::turbo_value, 4, 32, D};
  Tensor kr = packed_rows(randn({B, Hkv, S, D}, ++seed), kc), vr = packed_rows(randn({B, Hkv, S, D}, ++seed), vc);
  Tensor q = ops::cast(randn({B, Hq, 1, D}, ++seed), Dtype::bf16);
  Tensor want = ops::kv_decode_attention(ops::cast(q, Dtype::f32), kr, kc, vr, vc, Tensor(), Tensor(), 0.088f);
  for (const char* splits : {"1", "2", "16", "256"}) {
    splits_env.set(splits);
    Tensor got = ops::kv_decode_attention(q.to(kGpu), kr.to(kGpu), kc, vr.to(kGpu), vc, Tensor(), Tensor(), 0.088f);
    EXPECT_LE(nmse(want, got), 1e-4) << "splits " << splits;
  }
}

// The split-K decode at forced split counts (TERN_CUDA_KV_SPLITS), which the benchmarks sweep: every
// count gives the CPU result.
TEST_F(CudaKVQuant, DecodeAttentionAtForcedSplitCounts) {
  const int64_t B = 2, Hkv = 2, Hq = 8, S = 4097, D = 128;
  uint32_t seed = 900;
  ScopedEnv splits_env("TERN_CUDA_KV_SPLITS", nullptr);
  for (const char* splits : {"1", "2", "16", "64", "256"}) {
    splits_env.set(splits);
    for (int vbits : {3, 4}) {
      const bool affine = vbits == 4;
      const KVRowCodec kc{affine ? KVRowCodec::affine : KVRowCodec::turbo_key, affine ? 4 : 8, 32, D};
      const KVRowCodec vc{affine ? KVRowCodec::affine : KVRowCodec::turbo_value, vbits, 32, D};
      Tensor kr = packed_rows(randn({B, Hkv, S, D}, ++seed), kc);
      Tensor vr = packed_rows(randn({B, Hkv, S, D}, ++seed), vc);
      Tensor q = ops::cast(randn({B, Hq, 1, D}, ++seed), Dtype::bf16);
      Tensor want = ops::kv_decode_attention(ops::cast(q, Dtype::f32), kr, kc, vr, vc, Tensor(), Tensor(), 0.088f);
      Tensor got = ops::kv_decode_attention(q.to(kGpu), kr.to(kGpu), kc, vr.to(kGpu), vc, Tensor(), Tensor(), 0.088f);
      EXPECT_LE(nmse(want, got), 1e-4) << "splits " << splits << " value bits " << vbits;
    }
  }
}

// One cache on each device: prefill P positions, a 7-position window over the quantized prefix (decode
// into a temporary + sdpa), then 5 decode appends (the fused kernel); every read compared. With a
// window (the affine ring of a sliding layer) the prefill wraps the ring.
void expect_cache_parity(const KVCacheOptions& options, bool deferred, int64_t D, int64_t window = 0) {
  KVLayerInfo layer;
  layer.attention_index = 0;
  layer.attention_layers = 1;
  layer.deferred_values = deferred;
  layer.window = window;
  std::unique_ptr<KVCache> cpu = make_kv_cache(options, layer), gpu = make_kv_cache(options, layer);
  const int64_t B = 2, Hkv = 2, Hq = 8, P = 300;
  const float scale = 1.0f / std::sqrt(float(D));
  uint32_t seed = 90;
  for (int step = 0; step < 7; ++step) {
    const int64_t L = step == 0 ? P : step == 1 ? 7 : 1;
    const AppendPhase phase = step <= 1 ? AppendPhase::window : AppendPhase::decode;
    Tensor k = ops::cast(randn({B, Hkv, L, D}, ++seed), Dtype::bf16), v = ops::cast(randn({B, Hkv, L, D}, ++seed), Dtype::bf16);
    Tensor q = ops::cast(randn({B, Hq, L, D}, ++seed), Dtype::bf16);
    Tensor want = cpu->append(ops::cast(k, Dtype::f32), ops::cast(v, Dtype::f32), phase)
                      ->attend(ops::cast(q, Dtype::f32), scale);
    Tensor got = gpu->append(k.to(kGpu), v.to(kGpu), phase)->attend(q.to(kGpu), scale);
    EXPECT_EQ(got.device().is_cuda(), true);
    EXPECT_LE(nmse(want, got), 1e-4) << options.kind << " step " << step << " deferred " << deferred << " window "
                                     << window;
    EXPECT_EQ(cpu->offset(), gpu->offset());
  }
  // Compared once every start has been passed: before its switch a bf16-first cache names the dtype of
  // its appends, f32 for the CPU reference here.
  EXPECT_EQ(cpu->signature(), gpu->signature());
}

// The tiled window read (TERN_CUDA_KV_WINDOW_READ=1): L = 2-16 query positions after S packed ones read
// by the fused decode kernel, 16 / G positions a block, their own L keys under the causal mask, against
// the CPU's window read; G = 3 leaves a block's last mma row empty, 16 gives one position a block. Head
// dim 256 is not tiled and checks the fallback.
TEST_F(CudaKVQuant, TiledWindowReadMatchesCpu) {
  ScopedEnv window_env("TERN_CUDA_KV_WINDOW_READ", "1");
  ScopedEnv rotated_env("TERN_CUDA_KV_ROTATED_KEYS", "1");
  struct Scheme { KVRowCodec::Kind kk, vk; int kbits, vbits; int64_t group; };
  const Scheme schemes[] = {{KVRowCodec::affine, KVRowCodec::affine, 8, 8, 64},
                            {KVRowCodec::affine, KVRowCodec::affine, 4, 4, 32},
                            {KVRowCodec::turbo_key, KVRowCodec::turbo_value, 8, 3, 32},
                            {KVRowCodec::turbo_key, KVRowCodec::turbo_value, 8, 4, 32},
                            {KVRowCodec::turbo_key, KVRowCodec::turbo_value, 4, 4, 32}};
  uint32_t seed = 5000;
  auto check = [&](int64_t L, int64_t S, int64_t D, int64_t groups, const Scheme& sc) {
    const int64_t B = L == 3 ? 2 : 1, Hkv = 2, Hq = Hkv * groups;
    const KVRowCodec kc{sc.kk, sc.kbits, sc.kk == KVRowCodec::affine ? sc.group : 32, D};
    const KVRowCodec vc{sc.vk, sc.vbits, sc.vk == KVRowCodec::affine ? sc.group : 32, D};
    const auto [kr, vr, q, kn, vn] = read_inputs(B, Hq, Hkv, S, L, kc, vc, seed);
    const Tensor qg = q.to(kGpu), krg = kr.to(kGpu), vrg = vr.to(kGpu);
    // Head dim 256 keeps the decoded temporary (its decode instances use all 255 registers).
    const KVRowCodec device_kc = kc.rotated() ? KVRowCodec{KVRowCodec::turbo_value, kc.bits, 32, D} : kc;
    ASSERT_EQ(cuda::kv_window_tiled(qg, krg, device_kc, vrg, vc), D <= 128)
        << "L " << L << " D " << D << " G " << groups;
    const float scale = 1.0f / std::sqrt(float(D));
    auto f32 = [](const Tensor& t) { return ops::cast(t, Dtype::f32); };
    Tensor want = ops::kv_window_attention(f32(q), kr, kc, vr, vc, f32(kn), f32(vn), scale);
    Tensor got = ops::kv_window_attention(qg, krg, kc, vrg, vc, kn.to(kGpu), vn.to(kGpu), scale);
    EXPECT_LE(nmse(want, got), 1e-4) << "L " << L << " B " << B << " S " << S << " D " << D << " G " << groups
                                     << " keys " << kc.kind << "/" << kc.bits << " values " << vc.kind << "/"
                                     << vc.bits;
  };
  for (int64_t L : {2, 3, 5, 16})
    for (int64_t S : {1, 100, 1000})
      for (int64_t D : {64, 128, 256})
        for (int64_t groups : {1, 3, 4, 16})
          for (const Scheme& sc : schemes) {
            if (D == 256 && (L != 5 || S != 100 || groups != 4)) continue;  // the fallback, once per scheme
            check(L, S, D, groups, sc);
          }
  // Splits whose boundary falls among the window's own positions (splits are whole 64-key tiles: 2 splits
  // of 76 keys end the first at 64, 5 of 1,036 put one at 1,024), so a split holds some of them only.
  {
    ScopedEnv splits_env("TERN_CUDA_KV_SPLITS", nullptr);
    for (const auto& [S, splits] : {std::pair<int64_t, const char*>{60, "2"}, {1020, "5"}}) {
      splits_env.set(splits);
      for (int64_t groups : {2, 4, 8})
        for (const Scheme& sc : {schemes[1], schemes[2]}) check(16, S, 128, groups, sc);
    }
  }
  // Whole caches with the switch on: their 7-position window over the quantized prefix takes the tiled read.
  for (const char* kind : {"affine8", "turbo", "turbo:k4v4"}) {
    KVCacheOptions o;
    o.kind = kind;
    o.group = 64;
    for (int64_t D : {64, 128}) expect_cache_parity(o, false, D);
  }
}

// The tiled read of long windows (TERN_CUDA_KV_PREFIX_READ=1): L > 16 query positions after S packed ones,
// the stored rows by the prefix kernel (4 x 16 / G positions a block; G = 3 leaves each warp's last mma row
// empty, L = 17 and 70 leave a block's last warps without positions) and the window's own keys by the flash
// prefill, merged by one combine, against the CPU's window read. Forced splits put several prefix splits
// beside the window's; a soft cap takes the flash partial's other score domain.
TEST_F(CudaKVQuant, LongWindowReadMatchesCpu) {
  ScopedEnv prefix_env("TERN_CUDA_KV_PREFIX_READ", "1");
  ScopedEnv rotated_env("TERN_CUDA_KV_ROTATED_KEYS", "1");
  ScopedEnv splits_env("TERN_CUDA_KV_SPLITS", nullptr);
  struct Scheme { KVRowCodec::Kind kk, vk; int kbits, vbits; int64_t group; };
  const Scheme schemes[] = {{KVRowCodec::affine, KVRowCodec::affine, 8, 8, 64},
                            {KVRowCodec::affine, KVRowCodec::affine, 4, 4, 32},
                            {KVRowCodec::turbo_key, KVRowCodec::turbo_value, 8, 3, 32},
                            {KVRowCodec::turbo_key, KVRowCodec::turbo_value, 8, 2, 32},
                            {KVRowCodec::turbo_key, KVRowCodec::turbo_value, 4, 4, 32},
                            {KVRowCodec::turbo_key, KVRowCodec::turbo_value, 3, 8, 32}};
  uint32_t seed = 7000;
  auto check = [&](int64_t L, int64_t S, int64_t D, int64_t groups, const Scheme& sc, float softcap) {
    const int64_t B = L == 70 ? 2 : 1, Hkv = 2, Hq = Hkv * groups;
    const KVRowCodec kc{sc.kk, sc.kbits, sc.kk == KVRowCodec::affine ? sc.group : 32, D};
    const KVRowCodec vc{sc.vk, sc.vbits, sc.vk == KVRowCodec::affine ? sc.group : 32, D};
    const auto [kr, vr, q, kn, vn] = read_inputs(B, Hq, Hkv, S, L, kc, vc, seed);
    const Tensor qg = q.to(kGpu), krg = kr.to(kGpu), vrg = vr.to(kGpu);
    const KVRowCodec device_kc = kc.rotated() ? KVRowCodec{KVRowCodec::turbo_value, kc.bits, 32, D} : kc;
    ASSERT_TRUE(cuda::kv_window_tiled(qg, krg, device_kc, vrg, vc)) << "L " << L << " D " << D << " G " << groups;
    const float scale = 1.0f / std::sqrt(float(D));
    auto f32 = [](const Tensor& t) { return ops::cast(t, Dtype::f32); };
    Tensor want = ops::kv_window_attention(f32(q), kr, kc, vr, vc, f32(kn), f32(vn), scale, softcap);
    Tensor got = ops::kv_window_attention(qg, krg, kc, vrg, vc, kn.to(kGpu), vn.to(kGpu), scale, softcap);
    EXPECT_LE(nmse(want, got), 1e-4) << "L " << L << " B " << B << " S " << S << " D " << D << " G " << groups
                                     << " keys " << kc.kind << "/" << kc.bits << " values " << vc.kind << "/"
                                     << vc.bits << " softcap " << softcap << " splits "
                                     << (std::getenv("TERN_CUDA_KV_SPLITS") ? std::getenv("TERN_CUDA_KV_SPLITS") : "-");
  };
  for (int64_t L : {17, 70, 300})
    for (int64_t S : {1, 100, 1000})
      for (int64_t D : {64, 128})
        for (int64_t groups : {1, 3, 4, 16})
          for (const Scheme& sc : schemes) check(L, S, D, groups, sc, 0.0f);
  for (const char* splits : {"3", "16"}) {
    splits_env.set(splits);
    for (int64_t groups : {2, 8})
      for (const Scheme& sc : {schemes[1], schemes[2], schemes[4]}) check(70, 1000, 128, groups, sc, 0.0f);
  }
  splits_env.set(nullptr);
  for (const Scheme& sc : {schemes[0], schemes[2]}) check(40, 300, 128, 4, sc, 20.0f);
  // Off, the same window takes the decoded temporary.
  prefix_env.set("0");
  const KVRowCodec kc{KVRowCodec::affine, 8, 64, 128};
  const auto [kr, vr, q, kn, vn] = read_inputs(1, 8, 2, 100, 40, kc, kc, seed);
  EXPECT_FALSE(cuda::kv_window_tiled(q.to(kGpu), kr.to(kGpu), kc, vr.to(kGpu), kc));
}

// The storage alone: a strided bf16 store (a plain cache's view, as the bf16-first transition hands it
// over) dequantizes to exactly what the CPU storage holds, which isolates the store from the reads.
TEST_F(CudaKVQuant, StoreMatchesCpuStorage) {
  const int64_t B = 2, Hkv = 2, P = 300;
  for (int64_t D : {64, 128})
    for (int kind = 0; kind < 2; ++kind) {
      std::unique_ptr<QuantizedKVCache> cpu, gpu;
      if (kind == 0) cpu = std::make_unique<AffineKVCache>(8, 64), gpu = std::make_unique<AffineKVCache>(8, 64);
      else cpu = std::make_unique<TurboQuantKVCache>(8, 3, false), gpu = std::make_unique<TurboQuantKVCache>(8, 3, false);
      Tensor k = ops::cast(randn({B, Hkv, P, D}, 70 + kind), Dtype::bf16), v = ops::cast(randn({B, Hkv, P, D}, 80 + kind), Dtype::bf16);
      Tensor kb = Tensor::zeros({B, Hkv, P + 16, D}, Dtype::bf16, kGpu), vb = Tensor::zeros({B, Hkv, P + 16, D}, Dtype::bf16, kGpu);
      Tensor kv = kb.slice(2, 0, P), vv = vb.slice(2, 0, P);
      kv.copy_from(k.to(kGpu));
      vv.copy_from(v.to(kGpu));
      cpu->store(ops::cast(k, Dtype::f32), ops::cast(v, Dtype::f32));
      gpu->store(kv, vv);
      EXPECT_LE(nmse(cpu->dequantized_keys(), gpu->dequantized_keys()), 1e-12) << cpu->kind_name() << " keys D " << D;
      EXPECT_LE(nmse(cpu->dequantized_values(), gpu->dequantized_values()), 1e-12) << cpu->kind_name() << " values D " << D;
    }
}

TEST_F(CudaKVQuant, WholeCacheMatchesCpu) {
  for (const char* kind : {"affine8", "affine4", "turbo", "turbo:k8v4"})
    for (int64_t start : {0, 200}) {
      KVCacheOptions o;
      o.kind = kind;
      o.group = 64;
      o.start = start;
      const bool turbo = std::string(kind).rfind("turbo", 0) == 0;
      for (bool deferred : turbo ? std::vector<bool>{false, true} : std::vector<bool>{false})
        for (int64_t D : {64, 128}) expect_cache_parity(o, deferred, D);
    }
}

// TurboQuant keys of 4 or 3 bits (encoded and decoded by the value kernels; EncodeBitsIdenticalToCpu
// and DecodeMatchesCpu cover their bits): whole caches on CUDA read decode appends by the fused decode
// attention, or as windows with TERN_CUDA_KV_ROTATED_KEYS=0. Switched off, that read refuses them with one line.
TEST_F(CudaKVQuant, RotatedKeysCachesMatchCpu) {
  ScopedEnv rotated_env("TERN_CUDA_KV_ROTATED_KEYS", nullptr);
  for (const char* fused : {"0", ""}) {
    rotated_env.set(fused);
    for (const char* kind : {"turbo:k4v4", "turbo:k3v3", "turbo:k4v2"})
      for (int64_t start : {0, 200})
        for (bool deferred : {false, true})
          for (int64_t D : {64, 128}) {
            SCOPED_TRACE(std::string("fused decode read: ") + (*fused ? "off" : "on"));
            KVCacheOptions o;
            o.kind = kind;
            o.start = start;
            expect_cache_parity(o, deferred, D);
          }
  }
  rotated_env.set("0");
  const KVRowCodec kc{KVRowCodec::turbo_key, 4, 32, 64}, vc{KVRowCodec::turbo_value, 4, 32, 64};
  EXPECT_FALSE(ops::kv_decode_attention_supported(kc, vc, kGpu));
  Tensor krows = Tensor::zeros({3, 1, 2, kc.row_bytes()}, Dtype::u8, kGpu);
  Tensor vrows = Tensor::zeros({3, 1, 2, vc.row_bytes()}, Dtype::u8, kGpu);
  try {
    ops::kv_decode_attention(randn({1, 2, 1, 64}, 2).to(kGpu), krows, kc, vrows, vc, Tensor(), Tensor(), 1.0f);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kv_window_attention reads them there when TERN_CUDA_KV_ROTATED_KEYS=0"),
              std::string::npos)
        << e.what();
  }
}

// The affine ring of a sliding layer (window 64, wrapped by the 300-position prefill), before and
// after its bf16-first transition.
TEST_F(CudaKVQuant, AffineRingMatchesCpu) {
  for (const char* kind : {"affine8", "affine4"})
    for (int64_t start : {0, 200, 305}) {
      KVCacheOptions o;
      o.kind = kind;
      o.group = 64;
      o.start = start;
      for (int64_t D : {64, 128, 256}) expect_cache_parity(o, false, D, 64);
    }
}

}  // namespace
}  // namespace tern
