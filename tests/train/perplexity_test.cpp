// Teacher-forced scoring (tern/train/perplexity.h): the chunk `tern score --chunk auto` takes for a
// budget of logit bytes, and a score in those chunks equal to one forward's.
#include "tern/train/perplexity.h"

#include <gtest/gtest.h>

#include "tern/models/registry.h"

namespace tern {
namespace {

TEST(Score, AutoChunkKeepsTheLogitsWithinTheBudget) {
  const int64_t row = 151936 * 4;                                   // a Qwen3 vocabulary's f32 logits row
  EXPECT_EQ(score_chunk_within(100, 151936, int64_t{1} << 30), 0);  // fits: one forward
  EXPECT_EQ(score_chunk_within(1766, 151936, int64_t{1} << 30), 0);
  EXPECT_EQ(score_chunk_within(1767, 151936, int64_t{1} << 30), 1766);  // 1,766 rows are 1,073,275,904 bytes
  EXPECT_EQ(score_chunk_within(300000, 151936, 10 * row), 10);
  EXPECT_EQ(score_chunk_within(5, 151936, row - 1), 1);  // a budget under one row still makes progress
  EXPECT_EQ(score_chunk_within(1, 151936, 1), 0);
  EXPECT_THROW(score_chunk_within(5, 0, 1), Error);
  EXPECT_THROW(score_chunk_within(5, 10, 0), Error);
}

TEST(Score, ChunksOfABudgetScoreAsOneForward) {
  auto model = load_model(std::string(TERN_TEST_DATA) + "/models/qwen3");
  std::vector<int32_t> ids;
  for (int i = 0; i < 40; ++i) ids.push_back((i * 37 + 11) % static_cast<int>(model->vocab_size()));
  const int64_t chunk = score_chunk_within(40, model->vocab_size(), 7 * model->vocab_size() * 4);
  ASSERT_EQ(chunk, 7);
  const ScoreResult whole = score_tokens(*model, ids, 0, false);
  const ScoreResult chunked = score_tokens(*model, ids, chunk, false);
  EXPECT_EQ(chunked.n_tokens, 40);
  EXPECT_NEAR(chunked.nll, whole.nll, 1e-5 * std::max(1.0, whole.nll));
  EXPECT_GT(whole.nll, 0.0);
}

}  // namespace
}  // namespace tern
