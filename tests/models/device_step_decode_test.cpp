// Decode under a DeviceStep (the compiled-decode path a CUDA graph captures, run here on the CPU, with
// the host's cache offsets frozen as a replay leaves them) gives the logits of the ordinary decode, and
// the caches end where its caches end, for every architecture that captures its decode: Gemma 4 (ring
// caches past their window, KV-sharing layers whose queries take the donor cache's step positions),
// Qwen3.5 (DeltaNet state updated in place) and the dense decoders.
#include <gtest/gtest.h>

#include <random>

#include "tern/models/registry.h"
#include "tern/ops/reduce.h"
#include "tests/state/cache_test_util.h"

namespace tern {
namespace {

using namespace cache_test;

const std::string kData = std::string(TERN_TEST_DATA) + "/models/";

void expect_step_decode_equals_ordinary(const std::string& name) {
  SCOPED_TRACE(name);
  auto model = load_model(kData + name);
  const int64_t B = 2, P = 37, steps = 12, V = model->vocab_size();  // past Gemma's window of 16
  std::mt19937 rng(7);
  std::vector<int32_t> prompt(static_cast<size_t>(B * P));
  for (auto& t : prompt) t = static_cast<int32_t>(rng() % V);
  CacheList ordinary = model->make_caches(), stepped = model->make_caches();
  Tensor ids = Tensor::from_vector(prompt, {B, P});
  Tensor l0 = model->forward(ids, ordinary, false);
  model->forward(ids, stepped, false);
  for (auto& c : stepped)
    if (c) c->reserve(P + steps);
  DeviceStep step;
  step.positions = Tensor::from_vector(std::vector<int32_t>(B, static_cast<int32_t>(P)), {B});
  step.lengths = Tensor::from_vector(std::vector<int32_t>(B, static_cast<int32_t>(P + 1)), {B});
  step.span = P + steps;
  for (auto& c : stepped)
    if (c) c->attach_step(&step);
  Tensor next = ops::argmax(l0.view({B, V}), -1);
  for (int64_t s = 0; s < steps; ++s) {
    Tensor tok = next.view({B, 1});
    Tensor want = model->forward(tok, ordinary, false);
    Tensor got = model->forward_device(tok, stepped, false);
    // The step's reads sum in another order than the ordinary ones (a ring's slots unordered, a span
    // past the stored keys): within 1e-4 of logits (the fixtures' tolerance against the reference: 2e-4).
    EXPECT_LT(max_abs_diff(want, got), 1e-4f) << "step " << s;
    // The host's view of the caches stays where it was, as a replayed graph leaves it: only the
    // step's device positions and lengths move between steps.
    for (int64_t b = 0; b < B; ++b) {
      step.positions.data<int32_t>()[b] += 1;
      step.lengths.data<int32_t>()[b] += 1;
    }
    next = ops::argmax(want.view({B, V}), -1);
  }
  for (auto& c : stepped)
    if (c) {
      c->advance(steps);
      c->attach_step(nullptr);
    }
  for (size_t i = 0; i < stepped.size(); ++i)
    if (stepped[i]) EXPECT_EQ(stepped[i]->offset(), ordinary[i]->offset()) << "layer " << i;
}

TEST(DeviceStepDecode, EqualsOrdinaryDecodeForEveryCapturingArchitecture) {
  for (const char* name : {"gemma4", "gemma4_moe", "qwen3_5", "qwen3_5_moe", "qwen3", "qwen3_moe", "llama"})
    expect_step_decode_equals_ordinary(name);
}

}  // namespace
}  // namespace tern
