// RouterTape: routings inside record() keep their choices; routings inside replay() take them back in
// order, with their own softmax weights at those experts; mismatches and misuse are clear errors.
#include "tern/layers/router_tape.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tern/base/error.h"
#include "tern/layers/moe.h"

namespace tern {
namespace {

Tensor logits_of(std::vector<float> v, int64_t T) {
  const auto E = static_cast<int64_t>(v.size()) / T;
  return Tensor::from_vector(v, {T, E});
}

TEST(RouterTape, ReplaysRecordedExpertsWithOwnWeights) {
  const Tensor a = logits_of({3.0f, 2.0f, 0.5f, -1.0f, 0.0f, 1.0f, 1.1f, 4.0f}, 2);
  // b prefers other experts: a replay must still route to a's choice.
  const Tensor b = logits_of({0.0f, 0.1f, 5.0f, 4.0f, 2.0f, 2.5f, 0.0f, 0.0f}, 2);
  RouterTape tape;
  RouterChoice ra;
  tape.record([&] { ra = route_top_k(a, 2, true); });
  ASSERT_EQ(tape.size(), 1u);
  RouterChoice rb;
  tape.replay([&] { rb = route_top_k(b, 2, true); });
  EXPECT_EQ(rb.experts.to_f32_vector(), ra.experts.to_f32_vector());  // {0, 1}, {3, 2}
  // b's own probabilities at a's experts, renormalised: row 0 at experts 0 and 1 of b.
  const std::vector<float> w = rb.weights.to_f32_vector();
  const float p0 = std::exp(0.0f), p1 = std::exp(0.1f);
  EXPECT_NEAR(w[0], p0 / (p0 + p1), 1e-6);
  EXPECT_NEAR(w[1], p1 / (p0 + p1), 1e-6);
  // Outside record/replay routing is its own again.
  EXPECT_EQ(route_top_k(b, 2, true).experts.to_f32_vector()[0], 2.0f);
}

TEST(RouterTape, MismatchedOrExhaustedReplayIsAnError) {
  const Tensor a = logits_of({3.0f, 2.0f, 0.5f, -1.0f}, 1);
  RouterTape tape;
  tape.record([&] { route_top_k(a, 2, true); });
  EXPECT_THROW(tape.replay([&] { route_top_k(a, 1, true); }), Error);  // k differs
  tape.rewind();
  EXPECT_THROW(tape.replay([&] {
                 route_top_k(a, 2, true);
                 route_top_k(a, 2, true);  // the tape holds one routing
               }),
               Error);
  RouterTape other;
  EXPECT_THROW(tape.record([&] { other.record([] {}); }), Error);  // one tape at a time
  EXPECT_EQ(RouterTape::active(), nullptr);  // an error leaves no tape active
}

// use(): per routing the distinct experts of its T x k choices, and their bytes at each routing's own
// expert size.
TEST(RouterTape, UseCountsTheDistinctExpertsOfEachRouting) {
  // Two tokens, k = 2 of 4 experts: the second token's first choice is the first token's second.
  const Tensor a = logits_of({3.0f, 2.0f, 0.5f, -1.0f, 0.0f, 4.0f, 1.0f, -2.0f}, 2);  // {0, 1}, {1, 2}: 3 distinct
  const Tensor b = logits_of({1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, 1);                // {0, 1} of 6: 2 distinct
  RouterTape tape;
  tape.record([&] {
    route_top_k(a, 2, true, 100);
    route_top_k(b, 2, false, 10);
  });
  const RouterTape::Use u = tape.use();
  EXPECT_EQ(u.routings, 2);
  EXPECT_EQ(u.experts, 5);
  EXPECT_EQ(u.of_experts, 10);
  EXPECT_EQ(u.fewest, 2);
  EXPECT_EQ(u.most, 3);
  EXPECT_EQ(u.bytes, 3 * 100 + 2 * 10);
  EXPECT_EQ(u.of_bytes, 4 * 100 + 6 * 10);
  EXPECT_EQ(RouterTape().use().routings, 0);
}

}  // namespace
}  // namespace tern
