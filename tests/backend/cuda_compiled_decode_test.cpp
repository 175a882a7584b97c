// Compiled decode (DESIGN.md §2) on the GPU: a replayed graph is bit-identical to the same step run
// eagerly through the device buffers, across span buckets and batch rows; both agree with the
// ordinary decode path (which reads a different span, so within bf16 rounding, not bitwise); and the
// steady state makes no cudaMalloc; Qwen3, Qwen3-MoE, Gemma 4 (rings, shared layers) and Qwen3.5
// (DeltaNet). Skips cleanly without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "tern/backend/cuda/runtime/allocator.h"
#include "tern/engine/compiled_decode.h"
#include "tern/engine/generator.h"
#include "tern/models/registry.h"
#include "tern/ops/device.h"
#include "tern/ops/reduce.h"
#include "tern/sample/device_sampler.h"
#include "tern/state/kv_cache_options.h"
#include "tests/backend/cuda_test_util.h"

namespace tern {
namespace {

std::string data_dir(const std::string& name) {
  const char* env = std::getenv("TERN_TEST_DATA");
  return std::string(env && *env ? env : TERN_TEST_DATA) + "/models/" + name;
}

Tensor random_ids(int64_t rows, int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(static_cast<size_t>(rows * n));
  for (auto& x : v) x = static_cast<int32_t>(rng() % vocab);
  return Tensor::from_vector(v, {rows, n});
}

std::vector<int32_t> host_argmax(const Tensor& logits, int64_t rows, int64_t vocab) {
  Tensor a = ops::argmax(logits.to(Device::cpu()).view({rows, vocab}), -1);
  return std::vector<int32_t>(a.data<int32_t>(), a.data<int32_t>() + rows);
}

double nmse(const Tensor& ref, const Tensor& got) {
  std::vector<float> a = ref.to(Device::cpu()).to_f32_vector(), b = got.to(Device::cpu()).to_f32_vector();
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(a[i]) * a[i];
  }
  return num / std::max(den, 1e-30);
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  Tensor x = a.to(Device::cpu()).contiguous(), y = b.to(Device::cpu()).contiguous();
  return x.nbytes() == y.nbytes() && std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

// Decodes `steps` greedy tokens after a 250-token prompt (crossing the first span bucket, 256) through an
// eager and a captured CompiledDecoder and (with plain_nmse > 0) the ordinary path, for batch 1 and 3,
// with the caches of `kv`.
void check_replay_against_eager(const Model& m, int64_t steps, double plain_nmse, const KVCacheOptions& kv = {}) {
  ASSERT_TRUE(m.can_capture_decode());
  const int64_t V = m.vocab_size();
  for (int64_t B : {1, 3}) {
    // A 250-token prompt and 20 steps cross the first span bucket (256).
    Tensor prompt = random_ids(B, 250, V, 11 + static_cast<uint32_t>(B));
    const int64_t max_positions = 250 + steps + 1;
    CacheList eager_caches = m.make_caches(kv), graph_caches = m.make_caches(kv), plain_caches = m.make_caches(kv);
    Tensor l0 = m.forward(prompt, eager_caches, false);
    m.forward(prompt, graph_caches, false);
    m.forward(prompt, plain_caches, false);
    ASSERT_TRUE(CompiledDecoder::supported(m, graph_caches));
    CompiledDecoder eager(m, eager_caches, max_positions, false), graph(m, graph_caches, max_positions, true);
    std::vector<int32_t> ids = host_argmax(l0, B, V);
    eager.set_ids(ids);
    graph.set_ids(ids);
    for (int64_t s = 0; s < steps; ++s) {
      Tensor plain_logits = m.forward(Tensor::from_vector(ids, {B, 1}), plain_caches, false);
      eager.step();
      graph.step();
      ASSERT_TRUE(bitwise_equal(eager.logits(), graph.logits())) << "B " << B << " step " << s;
      EXPECT_EQ(eager.greedy_ids(), graph.greedy_ids());
      EXPECT_EQ(eager.greedy_logprobs(), graph.greedy_logprobs());
      if (plain_nmse > 0) EXPECT_LT(nmse(plain_logits.view({B, V}), graph.logits()), plain_nmse) << "B " << B << " step " << s;
      // log p(argmax) from the device against the host's log_softmax of the same logits.
      Tensor lsm = ops::log_softmax(graph.logits().to(Device::cpu()), -1);
      std::vector<int32_t> next = graph.greedy_ids();
      std::vector<float> lp = graph.greedy_logprobs();
      for (int64_t b = 0; b < B; ++b) EXPECT_NEAR(lp[b], lsm.data<float>()[b * V + next[b]], 1e-4);
      ids = next;  // both decoders already hold these as their next input
    }
    EXPECT_EQ(graph.offset(), 250 + steps);
    EXPECT_GE(graph.graphs(), 2u) << "the steps crossed a span bucket";
  }
}

class CompiledDecode : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_status();
    cuda_init();
    model_ = load_model(data_dir("qwen3"), LoadOptions{Device::cuda(0), Dtype::bf16});
  }
  std::unique_ptr<Model> model_;
};

TEST_F(CompiledDecode, ReplayIsBitIdenticalToTheEagerStepAcrossBuckets) { check_replay_against_eager(*model_, 20, 1e-4); }

TEST_F(CompiledDecode, MixtureOfExpertsDecodeIsCapturedToo) {
  std::unique_ptr<Model> moe = load_model(data_dir("qwen3_moe"), LoadOptions{Device::cuda(0), Dtype::bf16});
  // Its ordinary path differs in bf16 rounding (a different attention span), which can flip a router
  // choice: only the replay-vs-eager identity is asserted.
  check_replay_against_eager(*moe, 12, 0.0);
}

// Gemma 4: ring caches wrapped by the prompt (window 16), 512-dim full layers and KV-sharing layers
// whose queries take the donor's device positions. Its ordinary path reads the rings in time order
// (another summation order): within bf16 rounding.
TEST_F(CompiledDecode, GemmaRingsAndSharedLayersAreCapturedToo) {
  std::unique_ptr<Model> gemma = load_model(data_dir("gemma4"), LoadOptions{Device::cuda(0), Dtype::bf16});
  check_replay_against_eager(*gemma, 12, 1e-4);
  std::unique_ptr<Model> moe = load_model(data_dir("gemma4_moe"), LoadOptions{Device::cuda(0), Dtype::bf16});
  check_replay_against_eager(*moe, 12, 0.0);
}

// Quantized storage: affine rings on Gemma 4's sliding layers (each step encodes its row into slot
// p % window and reads every other slot), the quantized full layers beside them, and TurboQuant
// keys of 4 bits with their fused read switched on (TERN_CUDA_KV_RING_STEPS and TERN_CUDA_KV_ROTATED_KEYS);
// each after its bf16-first transition at the prompt.
TEST_F(CompiledDecode, QuantizedCachesAndAffineRingsAreCapturedToo) {
  // The switches of these paths (on by default), set for this test and put back after it.
  cuda_test::ScopedEnv ring("TERN_CUDA_KV_RING_STEPS", "1"), rotated("TERN_CUDA_KV_ROTATED_KEYS", "1");
  std::unique_ptr<Model> gemma = load_model(data_dir("gemma4"), LoadOptions{Device::cuda(0), Dtype::bf16});
  for (const char* kind : {"affine8", "affine4"}) {
    SCOPED_TRACE(kind);
    KVCacheOptions kv;
    kv.kind = kind;
    kv.group = 32;
    // 24 steps: the rings (window 16) wrap under the graph. Against the ordinary forward too, whose ring
    // read (decoded in temporal order) a wrong slot in the step's read would leave far behind.
    check_replay_against_eager(*gemma, 24, 1e-3, kv);
  }
  KVCacheOptions kv;
  kv.kind = "turbo:k4v4";
  check_replay_against_eager(*model_, 12, 0.0, kv);
}

// Qwen3.5: DeltaNet layers whose conv history and state update in place, beside full layers.
TEST_F(CompiledDecode, HybridDeltaNetDecodeIsCapturedToo) {
  std::unique_ptr<Model> hybrid = load_model(data_dir("qwen3_5"), LoadOptions{Device::cuda(0), Dtype::bf16});
  check_replay_against_eager(*hybrid, 12, 1e-4);
  std::unique_ptr<Model> moe = load_model(data_dir("qwen3_5_moe"), LoadOptions{Device::cuda(0), Dtype::bf16});
  check_replay_against_eager(*moe, 12, 0.0);
}

// Once a CompiledDecoder is gone its caches go on under the ordinary forward (as `tern bench` runs its
// recorded expert step): the next step's logits match those of caches that never had a decoder.
TEST_F(CompiledDecode, TheOrdinaryForwardContinuesAfterTheDecoder) {
  const Model& m = *model_;
  const int64_t B = 2, V = m.vocab_size(), steps = 8;
  Tensor prompt = random_ids(B, 40, V, 9);
  CacheList graph_caches = m.make_caches(), plain_caches = m.make_caches();
  std::vector<int32_t> ids = host_argmax(m.forward(prompt, graph_caches, false), B, V);
  m.forward(prompt, plain_caches, false);
  {
    CompiledDecoder dec(m, graph_caches, 40 + steps + 1);
    dec.set_ids(ids);
    for (int64_t s = 0; s < steps; ++s) {
      m.forward(Tensor::from_vector(ids, {B, 1}), plain_caches, false);
      dec.step();
      ids = dec.greedy_ids();
    }
  }
  Tensor after = m.forward(Tensor::from_vector(ids, {B, 1}), graph_caches, false);
  Tensor plain = m.forward(Tensor::from_vector(ids, {B, 1}), plain_caches, false);
  EXPECT_LT(nmse(plain, after), 1e-4);
  EXPECT_EQ(graph_caches[0]->offset(), 40 + steps + 1);
}

TEST_F(CompiledDecode, NoCudaMallocOnceEveryBucketIsCaptured) {
  const Model& m = *model_;
  CacheList caches = m.make_caches();
  Tensor l0 = m.forward(random_ids(1, 40, m.vocab_size(), 5), caches, false);
  CompiledDecoder dec(m, caches, 200);
  dec.set_ids(host_argmax(l0, 1, m.vocab_size()));
  for (int i = 0; i < 3; ++i) dec.step();  // eager warm-up, then the one bucket's capture
  const size_t before = cuda::allocator_stats().cuda_mallocs;
  for (int i = 0; i < 50; ++i) {
    dec.step();
    (void)dec.greedy_ids();
  }
  EXPECT_EQ(cuda::allocator_stats().cuda_mallocs, before);
  EXPECT_EQ(dec.graphs(), 1u);
}

// A loop that queues step i + 1 before it reads step i (as generate and bench do) reads the same ids
// and log-probabilities as one that reads each step before the next; only the last two steps can be read.
TEST_F(CompiledDecode, StepsQueuedAheadOfTheirReadsGiveTheSameIds) {
  const Model& m = *model_;
  const int64_t B = 3, V = m.vocab_size(), steps = 24;
  Tensor prompt = random_ids(B, 240, V, 17);
  CacheList in_order_caches = m.make_caches(), ahead_caches = m.make_caches();
  Tensor l0 = m.forward(prompt, in_order_caches, false);
  m.forward(prompt, ahead_caches, false);
  CompiledDecoder in_order(m, in_order_caches, 240 + steps + 1), ahead(m, ahead_caches, 240 + steps + 1);
  in_order.set_ids(host_argmax(l0, B, V));
  ahead.set_ids(host_argmax(l0, B, V));
  for (int64_t s = 0; s < steps; ++s) {
    in_order.step();
    const std::vector<int32_t> want = in_order.greedy_ids();
    const std::vector<float> want_lp = in_order.greedy_logprobs();
    const CompiledDecoder::Greedy got = ahead.greedy_step(s, s + 1 < steps);  // step s + 1 queued before the read
    EXPECT_EQ(ahead.steps(), s + 1 < steps ? s + 2 : s + 1);
    EXPECT_EQ(got.ids, want) << "step " << s;
    EXPECT_EQ(got.logprobs, want_lp) << "step " << s;
    EXPECT_EQ(ahead.greedy_ids(s), want) << "step " << s;  // still readable: one of the last two
    if (s >= 2) EXPECT_THROW(ahead.greedy_ids(s - 2), Error);  // its slot has been reused
  }
  EXPECT_THROW(ahead.greedy_step(steps + 3, false), Error);  // not the next step
  EXPECT_THROW(ahead.greedy_ids(steps), Error);  // not run
  EXPECT_EQ(ahead.graphs(), 2u) << "the steps crossed a span bucket";
}

// The sampler as the graph's head: each captured step's packed values give the host sampler's answer on
// the same logits (token, logprob, top logprobs, stream position) for temperature alone, Qwen3's
// settings and top-p alone, across a span bucket; the sampled token is the next step's input.
TEST_F(CompiledDecode, SamplerHeadGivesTheHostSamplersTokens) {
  const Model& m = *model_;
  const int64_t V = m.vocab_size();
  struct Case {
    const char* name;
    float temperature;
    int32_t top_k;
    float top_p;
    int32_t top_logprobs;
  };
  for (const Case& c : {Case{"temperature", 0.9f, 0, 1.0f, 0}, Case{"qwen3", 0.6f, 20, 0.95f, 2},
                        Case{"top_p", 1.0f, 0, 0.8f, 0}}) {
    SamplingParams p;
    p.temperature = c.temperature, p.top_k = c.top_k, p.top_p = c.top_p, p.top_logprobs = c.top_logprobs;
    p.seed = 77;
    ASSERT_TRUE(DeviceSampler::head_supported(p));
    CacheList caches = m.make_caches();
    Tensor l0 = m.forward(random_ids(1, 250, V, 21), caches, false);
    CompiledDecoder dec(m, caches, 280);
    DeviceSampler device(p);
    Sampler host(p);
    dec.set_head([&](const Tensor& l) { return device.head(l.reshape({V})); });
    Sampler::Result first = host.sample(l0.view({1, V}));
    // The device sampler's stream follows the host's: its first token came from the host's copy.
    (void)device.sample(l0.view({1, V}));
    std::vector<int32_t> ids = {first.token};
    dec.set_ids(ids);
    for (int s = 0; s < 20; ++s) {
      device.prepare(Device::cuda(0));
      dec.step();
      Sampler::Result got = device.finish(dec.head_out(), dec.logits().reshape({V}));
      Sampler::Result want = host.sample(dec.logits().to(Device::cpu()).view({1, V}));
      ASSERT_EQ(got.token, want.token) << c.name << " step " << s;
      EXPECT_NEAR(got.logprob, want.logprob, 1e-5) << c.name << " step " << s;
      ASSERT_EQ(got.top_logprobs.size(), want.top_logprobs.size());
      for (size_t i = 0; i < want.top_logprobs.size(); ++i) {
        EXPECT_EQ(got.top_logprobs[i].first, want.top_logprobs[i].first);
        EXPECT_NEAR(got.top_logprobs[i].second, want.top_logprobs[i].second, 1e-5);
      }
      EXPECT_EQ(device.rng().position(), host.rng().position()) << c.name << " step " << s;
      ids = {got.token};
      dec.set_ids(ids);
    }
    EXPECT_GE(dec.graphs(), 2u) << "the steps crossed a span bucket";
    EXPECT_THROW(dec.greedy_ids(), Error);  // a step with a head makes no greedy choice
  }
}

TEST_F(CompiledDecode, GenerateGivesTheSameGreedyTokensWithAndWithoutGraphs) {
  const Model& m = *model_;
  Tensor p = random_ids(1, 30, m.vocab_size(), 9);
  std::vector<int32_t> prompt(p.data<int32_t>(), p.data<int32_t>() + 30);
  GenerateOptions opt;
  opt.max_tokens = 24;
  opt.sampling.temperature = 0.0f;
  GenerateResult with = generate(m, prompt, opt);
  opt.compiled_decode = false;
  GenerateResult without = generate(m, prompt, opt);
  // bf16 rounding differs between the paths (different attention spans): compare up to the first step
  // whose logprob gap says the choice was close.
  ASSERT_EQ(with.ids.size(), without.ids.size());
  for (size_t i = 0; i < with.ids.size(); ++i) {
    if (with.ids[i] != without.ids[i]) {
      ADD_FAILURE() << "token " << i << " differs: " << with.ids[i] << " vs " << without.ids[i]
                    << " (logprobs " << with.logprobs[i] << ", " << without.logprobs[i] << ")";
      break;
    }
    EXPECT_NEAR(with.logprobs[i], without.logprobs[i], 0.05) << i;
  }
}

}  // namespace
}  // namespace tern
