// The compiled-decode side of the quantized KV storage on the GPU: the fused decode attention with
// per-row lengths (and as a ring) against the CPU reference (empty, partial, full and clamped rows), a
// QuantizedKVCache decoding through a DeviceStep against one decoding ordinarily, on the device, and an
// affine ring doing the same across its wrap.
// Skips cleanly without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tern/ops/device.h"
#include "tern/ops/elementwise.h"
#include "tern/ops/kv_quant.h"
#include "tern/state/affine_kv_cache.h"
#include "tern/state/affine_ring_kv_cache.h"
#include "tern/state/turboquant_kv_cache.h"
#include "tests/backend/cuda_test_util.h"

namespace tern {
namespace {

using namespace cuda_test;

using ops::KVRowCodec;

class CudaKVQuantStep : public CudaTest {};

// A compiled step's read with its store folded in (ops::kv_decode_attention_store): on the GPU the
// tensor-core read's combine launch encodes the step's key and value beside its merge (TurboQuant k8 with
// 2-4 and 8-bit values, affine); its output and storage are bit-identical to the encode launch first
// (TERN_CUDA_KV_STORE=launch), and the storage to the CPU's, for head dims 64-256, 1-16 query heads a kv
// head, new positions past the read's span, inside it and in the storage's last slot, and forced split
// counts.
TEST_F(CudaKVQuantStep, ReadWithTheStepsStoreEqualsEncodeThenRead) {
  ScopedEnv store_env("TERN_CUDA_KV_STORE", nullptr), splits_env("TERN_CUDA_KV_SPLITS", nullptr);
  const int64_t B = 3, N = 300, S = 260;
  const std::vector<int32_t> lens = {260, 5, 299};  // past the span, inside it (its row does not read it), the last slot
  struct Case {
    int64_t d, hq, hkv;
    int vbits;
    bool affine;
  };
  uint32_t seed = 70;
  for (const Case& c : {Case{128, 32, 8, 3, false}, Case{64, 16, 8, 2, false}, Case{256, 16, 1, 4, false},
                        Case{128, 8, 8, 8, false}, Case{128, 32, 8, 4, true}}) {
    const KVRowCodec kc = c.affine ? KVRowCodec{KVRowCodec::affine, 4, 64, c.d} : KVRowCodec{KVRowCodec::turbo_key, 8, 32, c.d};
    const KVRowCodec vc =
        c.affine ? KVRowCodec{KVRowCodec::affine, 4, 64, c.d} : KVRowCodec{KVRowCodec::turbo_value, c.vbits, 32, c.d};
    Tensor keys = Tensor::empty({N, B, c.hkv, kc.row_bytes()}, Dtype::u8);
    Tensor values = Tensor::empty({N, B, c.hkv, vc.row_bytes()}, Dtype::u8);
    ops::kv_encode(randn({B, c.hkv, N, c.d}, ++seed), kc, keys);
    ops::kv_encode(randn({B, c.hkv, N, c.d}, ++seed), vc, values);
    const Tensor q = ops::cast(randn({B, c.hq, 1, c.d}, ++seed), Dtype::bf16).to(kGpu);
    const Tensor kn = ops::cast(randn({B, c.hkv, 1, c.d}, ++seed), Dtype::bf16);
    const Tensor vn = ops::cast(randn({B, c.hkv, 1, c.d}, ++seed), Dtype::bf16);
    const Tensor len = Tensor::from_vector(lens, {B});
    // The CPU's storage after the step's encode.
    Tensor keys_cpu = keys.clone(), values_cpu = values.clone();
    ops::kv_encode_positions(kn, kc, keys_cpu, vn, vc, values_cpu, len);
    for (const char* splits : {"", "1", "7"}) {
      SCOPED_TRACE("d " + std::to_string(c.d) + " hq " + std::to_string(c.hq) + " v" + std::to_string(c.vbits) +
                   (c.affine ? " affine" : "") + " splits " + splits);
      splits_env.set(splits);
      std::vector<uint8_t> out[2], kb[2], vb[2];
      for (int in_combine = 0; in_combine < 2; ++in_combine) {
        store_env.set(in_combine ? nullptr : "launch");
        Tensor kg = keys.to(kGpu), vg = values.to(kGpu);
        const Tensor got = ops::kv_decode_attention_store(q, kg.narrow(0, 0, S), kc, vg.narrow(0, 0, S), vc,
                                                          kn.to(kGpu), vn.to(kGpu), 0.088f, 0.0f, len.to(kGpu), kg, vg);
        out[in_combine] = bytes_of(got);
        kb[in_combine] = bytes_of(kg);
        vb[in_combine] = bytes_of(vg);
      }
      EXPECT_EQ(out[1], out[0]) << "the output, stored by the combine against the encode launch";
      EXPECT_EQ(kb[1], bytes_of(keys_cpu)) << "keys against the CPU";
      EXPECT_EQ(vb[1], bytes_of(values_cpu)) << "values against the CPU";
      EXPECT_EQ(kb[0], bytes_of(keys_cpu)) << "keys of the encode launch against the CPU";
      EXPECT_EQ(vb[0], bytes_of(values_cpu)) << "values of the encode launch against the CPU";
    }
  }
}

TEST_F(CudaKVQuantStep, DecodeAttentionWithLengthsMatchesCpu) {
  ScopedEnv rotated_env("TERN_CUDA_KV_ROTATED_KEYS", "1");  // the fused read of TurboQuant keys of 4 bits
  struct Scheme { KVRowCodec::Kind kk, vk; int kbits, vbits; int64_t group; };
  const Scheme schemes[] = {{KVRowCodec::affine, KVRowCodec::affine, 8, 8, 64},
                            {KVRowCodec::turbo_key, KVRowCodec::turbo_value, 8, 3, 32},
                            {KVRowCodec::turbo_key, KVRowCodec::turbo_value, 4, 4, 32}};
  uint32_t seed = 140;
  for (int64_t S : {1, 100, 700})
    for (int64_t D : {64, 128})
      for (const Scheme& sc : schemes) {
        // rows: none stored, a third, all, past the span (clamped to S), negative (clamped to 0)
        const int64_t B = 5, Hkv = 2, Hq = 8;
        const std::vector<int32_t> len = {0, static_cast<int32_t>(S / 3), static_cast<int32_t>(S),
                                          static_cast<int32_t>(S + 5), -1};
        const KVRowCodec kc{sc.kk, sc.kbits, sc.kk == KVRowCodec::affine ? sc.group : 32, D};
        const KVRowCodec vc{sc.vk, sc.vbits, sc.vk == KVRowCodec::affine ? sc.group : 32, D};
        Tensor kr = Tensor::empty({S, B, Hkv, kc.row_bytes()}, Dtype::u8);
        Tensor vr = Tensor::empty({S, B, Hkv, vc.row_bytes()}, Dtype::u8);
        ops::kv_encode(randn({B, Hkv, S, D}, ++seed), kc, kr);
        ops::kv_encode(randn({B, Hkv, S, D}, ++seed), vc, vr);
        Tensor q = randn({B, Hq, 1, D}, ++seed), kn = randn({B, Hkv, 1, D}, ++seed), vn = randn({B, Hkv, 1, D}, ++seed);
        Tensor lengths = Tensor::from_vector(len, {B});
        const float scale = 1.0f / std::sqrt(float(D));
        Tensor want = ops::kv_decode_attention(q, kr, kc, vr, vc, kn, vn, scale, 0.0f, lengths);
        Tensor got = ops::kv_decode_attention(q.to(kGpu), kr.to(kGpu), kc, vr.to(kGpu), vc, kn.to(kGpu), vn.to(kGpu),
                                              scale, 0.0f, lengths.to(kGpu));
        EXPECT_LE(nmse(want, got), 1e-9) << "S " << S << " D " << D << " key kind " << kc.kind;
        // As a ring of S slots (an affine ring's step): rows 2 and 3 also skip slots 0 and 5.
        auto bf16 = [&](const Tensor& t) { return ops::cast(t, Dtype::bf16).to(kGpu); };
        auto widened = [&](const Tensor& t) { return ops::cast(ops::cast(t, Dtype::bf16), Dtype::f32); };
        Tensor ring_want = ops::kv_decode_attention(q, kr, kc, vr, vc, kn, vn, scale, 0.0f, lengths, S);
        Tensor ring_got = ops::kv_decode_attention(q.to(kGpu), kr.to(kGpu), kc, vr.to(kGpu), vc, kn.to(kGpu),
                                                   vn.to(kGpu), scale, 0.0f, lengths.to(kGpu), S);
        EXPECT_LE(nmse(ring_want, ring_got), 1e-9) << "ring, S " << S << " D " << D << " key kind " << kc.kind;
        Tensor ring_want16 = ops::kv_decode_attention(widened(q), kr, kc, vr, vc, widened(kn), widened(vn), scale, 0.0f,
                                                      lengths, S);
        Tensor ring_got16 = ops::kv_decode_attention(bf16(q), kr.to(kGpu), kc, vr.to(kGpu), vc, bf16(kn), bf16(vn),
                                                     scale, 0.0f, lengths.to(kGpu), S);
        EXPECT_LE(nmse(ring_want16, ring_got16), 1e-4) << "ring bf16, S " << S << " D " << D << " key kind " << kc.kind;
        // Row 2 reads everything: the same as no lengths at all.
        Tensor all = ops::kv_decode_attention(q.to(kGpu), kr.to(kGpu), kc, vr.to(kGpu), vc, kn.to(kGpu), vn.to(kGpu),
                                              scale);
        EXPECT_LE(nmse(all.narrow(0, 2, 1), got.narrow(0, 2, 1)), 1e-9) << "S " << S << " D " << D;
        // bf16 queries take the tensor-core kernel (f16 tiles in shared memory): the same rows, masked alike.
        Tensor want16 = ops::kv_decode_attention(ops::cast(ops::cast(q, Dtype::bf16), Dtype::f32), kr, kc, vr, vc,
                                                 ops::cast(ops::cast(kn, Dtype::bf16), Dtype::f32),
                                                 ops::cast(ops::cast(vn, Dtype::bf16), Dtype::f32), scale, 0.0f, lengths);
        Tensor got16 = ops::kv_decode_attention(bf16(q), kr.to(kGpu), kc, vr.to(kGpu), vc, bf16(kn), bf16(vn), scale,
                                                0.0f, lengths.to(kGpu));
        EXPECT_LE(nmse(want16, got16), 1e-4) << "bf16, S " << S << " D " << D << " key kind " << kc.kind;
      }
}

// Two caches on the device from one prefill: one decodes ordinarily, the other through a DeviceStep
// whose positions and lengths live on the device, over a span past the stored prefix.
void expect_step_parity(std::unique_ptr<QuantizedKVCache> plain, std::unique_ptr<QuantizedKVCache> stepped,
                        int64_t D, uint32_t seed) {
  const int64_t B = 2, Hkv = 2, Hq = 8, P = 70, steps = 5;
  Tensor k0 = randn({B, Hkv, P, D}, ++seed).to(kGpu), v0 = randn({B, Hkv, P, D}, ++seed).to(kGpu);
  plain->append(k0, v0, AppendPhase::window);
  stepped->append(k0, v0, AppendPhase::window);
  ASSERT_TRUE(stepped->supports_device_step());
  stepped->reserve(P + 64);
  DeviceStep step;
  step.span = P + 64;
  const float scale = 1.0f / std::sqrt(float(D));
  for (int64_t s = 0; s < steps; ++s) {
    step.positions = Tensor::from_vector(std::vector<int32_t>(B, static_cast<int32_t>(P + s)), {B}).to(kGpu);
    step.lengths = Tensor::from_vector(std::vector<int32_t>(B, static_cast<int32_t>(P + s + 1)), {B}).to(kGpu);
    stepped->attach_step(&step);
    Tensor q = randn({B, Hq, 1, D}, ++seed).to(kGpu), k = randn({B, Hkv, 1, D}, ++seed).to(kGpu),
           v = randn({B, Hkv, 1, D}, ++seed).to(kGpu);
    Tensor want = plain->append(k, v, AppendPhase::decode)->attend(q, scale);
    Tensor got = stepped->append(k, v, AppendPhase::decode)->attend(q, scale);
    EXPECT_LE(nmse(want, got), 1e-9) << stepped->signature() << " D " << D << " step " << s;
    EXPECT_EQ(stepped->offset(), P + s);
    stepped->advance(1);
    stepped->attach_step(nullptr);
  }
  ASSERT_EQ(stepped->offset(), plain->offset());
  EXPECT_LE(nmse(plain->dequantized_keys(), stepped->dequantized_keys()), 1e-12) << stepped->signature();
  EXPECT_LE(nmse(plain->dequantized_values(), stepped->dequantized_values()), 1e-12) << stepped->signature();
}

TEST_F(CudaKVQuantStep, CacheDecodeThroughDeviceStepMatchesOrdinaryDecode) {
  for (int64_t D : {64, 128}) {
    expect_step_parity(std::make_unique<AffineKVCache>(8, 64), std::make_unique<AffineKVCache>(8, 64), D, 10);
    expect_step_parity(std::make_unique<AffineKVCache>(4, 32), std::make_unique<AffineKVCache>(4, 32), D, 20);
    expect_step_parity(std::make_unique<TurboQuantKVCache>(8, 4, true), std::make_unique<TurboQuantKVCache>(8, 4, true),
                       D, 30);
    expect_step_parity(std::make_unique<TurboQuantKVCache>(8, 3, false),
                       std::make_unique<TurboQuantKVCache>(8, 3, false), D, 40);
  }
  // TurboQuant keys of 4 or 3 bits take compiled steps once the fused read takes them.
  ScopedEnv rotated_env("TERN_CUDA_KV_ROTATED_KEYS", "1");
  for (int64_t D : {64, 128}) {
    expect_step_parity(std::make_unique<TurboQuantKVCache>(4, 4, false),
                       std::make_unique<TurboQuantKVCache>(4, 4, false), D, 50);
    expect_step_parity(std::make_unique<TurboQuantKVCache>(3, 3, true), std::make_unique<TurboQuantKVCache>(3, 3, true),
                       D, 60);
  }
}

// An affine ring (a sliding layer's storage) decoding through a DeviceStep on the GPU against the same
// ring decoding ordinarily on the CPU, from one prefill, through the wrap: f32 activations (the CUDA-core
// read) and bf16 ones (the tensor-core read, against the GPU's ordinary decode).
TEST_F(CudaKVQuantStep, AffineRingDecodeThroughDeviceStepMatchesOrdinaryDecode) {
  ScopedEnv ring_env("TERN_CUDA_KV_RING_STEPS", "1");
  const int64_t B = 2, Hkv = 2, Hq = 8, W = 48, steps = 2 * W;
  uint32_t seed = 700;
  for (int64_t D : {64, 128})
    for (int bits : {8, 4})
      for (int64_t prefill : {int64_t(5), W + 3})
        for (bool half : {false, true}) {
          SCOPED_TRACE("D " + std::to_string(D) + " bits " + std::to_string(bits) + " prefill " +
                       std::to_string(prefill) + (half ? " bf16" : " f32"));
          const Dtype dt = half ? Dtype::bf16 : Dtype::f32;
          AffineRingKVCache ref(W, bits, 32), stepped(W, bits, 32);
          const Device ref_device = half ? kGpu : Device::cpu();
          Tensor k0 = ops::cast(randn({B, Hkv, prefill, D}, ++seed), dt), v0 = ops::cast(randn({B, Hkv, prefill, D}, ++seed), dt);
          ref.append(k0.to(ref_device), v0.to(ref_device), AppendPhase::window);
          stepped.append(k0.to(kGpu), v0.to(kGpu), AppendPhase::window);
          ASSERT_TRUE(stepped.supports_device_step());
          stepped.reserve(prefill + steps);
          DeviceStep step;
          step.span = prefill + steps;
          for (int64_t s = 0; s < steps; ++s) {
            const int32_t p = static_cast<int32_t>(prefill + s);
            step.positions = Tensor::from_vector(std::vector<int32_t>(B, p), {B}).to(kGpu);
            step.lengths = Tensor::from_vector(std::vector<int32_t>(B, p + 1), {B}).to(kGpu);
            stepped.attach_step(&step);
            Tensor q = ops::cast(randn({B, Hq, 1, D}, ++seed), dt), k = ops::cast(randn({B, Hkv, 1, D}, ++seed), dt),
                   v = ops::cast(randn({B, Hkv, 1, D}, ++seed), dt);
            Tensor want = ref.append(k.to(ref_device), v.to(ref_device), AppendPhase::decode)->attend(q.to(ref_device), 0.125f);
            Tensor got = stepped.append(k.to(kGpu), v.to(kGpu), AppendPhase::decode)->attend(q.to(kGpu), 0.125f);
            EXPECT_LE(nmse(want, got), half ? 1e-5 : 1e-9) << "step " << s;
            stepped.advance(1);
            stepped.attach_step(nullptr);
          }
          ASSERT_EQ(stepped.offset(), ref.offset());
          EXPECT_LE(nmse(ref.temporal_keys(), stepped.temporal_keys()), 1e-12);
          EXPECT_LE(nmse(ref.temporal_values(), stepped.temporal_values()), 1e-12);
        }
}

}  // namespace
}  // namespace tern
