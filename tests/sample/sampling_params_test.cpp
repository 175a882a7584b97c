// validate(SamplingParams): defaults pass, each bad field throws a message naming it.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "tern/base/error.h"
#include "tern/sample/sampler.h"
#include "tern/sample/sampling_params.h"

namespace tern {
namespace {

void expect_rejected(const std::function<void(SamplingParams&)>& edit, const std::string& needle, int64_t vocab = 10) {
  SamplingParams p;
  edit(p);
  try {
    validate(p, vocab);
    ADD_FAILURE() << "accepted; expected an error mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(SamplingParams, DefaultsAndEdgesAreValid) {
  SamplingParams p;
  EXPECT_NO_THROW(validate(p, 10));
  p.temperature = 0.0f;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.top_k = 100;  // larger than vocab is fine: keeps everything
  p.logit_bias = {{0, -INFINITY}, {9, 5.0f}};
  p.presence_penalty = -2.0f;
  p.top_logprobs = 20;
  EXPECT_NO_THROW(validate(p, 10));
}

TEST(SamplingParams, RejectsBadFields) {
  expect_rejected([](SamplingParams&) {}, "vocab", 0);
  expect_rejected([](SamplingParams& p) { p.temperature = -0.1f; }, "temperature");
  expect_rejected([](SamplingParams& p) { p.temperature = NAN; }, "temperature");
  expect_rejected([](SamplingParams& p) { p.temperature = INFINITY; }, "temperature");
  expect_rejected([](SamplingParams& p) { p.top_k = -1; }, "top_k");
  expect_rejected([](SamplingParams& p) { p.top_p = 0.0f; }, "top_p");
  expect_rejected([](SamplingParams& p) { p.top_p = 1.5f; }, "top_p");
  expect_rejected([](SamplingParams& p) { p.top_p = NAN; }, "top_p");
  expect_rejected([](SamplingParams& p) { p.min_p = -0.1f; }, "min_p");
  expect_rejected([](SamplingParams& p) { p.min_p = 1.1f; }, "min_p");
  expect_rejected([](SamplingParams& p) { p.repetition_penalty = 0.0f; }, "repetition_penalty");
  expect_rejected([](SamplingParams& p) { p.repetition_penalty = -1.0f; }, "repetition_penalty");
  expect_rejected([](SamplingParams& p) { p.presence_penalty = NAN; }, "presence_penalty");
  expect_rejected([](SamplingParams& p) { p.frequency_penalty = INFINITY; }, "frequency_penalty");
  expect_rejected([](SamplingParams& p) { p.logit_bias[10] = 1.0f; }, "logit_bias");
  expect_rejected([](SamplingParams& p) { p.logit_bias[-1] = 1.0f; }, "logit_bias");
  expect_rejected([](SamplingParams& p) { p.logit_bias[3] = NAN; }, "logit_bias");
  expect_rejected([](SamplingParams& p) { p.logit_bias[3] = INFINITY; }, "logit_bias");
  expect_rejected([](SamplingParams& p) { p.top_logprobs = -1; }, "top_logprobs");
}

TEST(SamplingParams, SamplerChecksAtConstructionAndPerVocab) {
  SamplingParams bad;
  bad.top_p = 2.0f;
  EXPECT_THROW(Sampler{bad}, Error);
  SamplingParams p;
  p.logit_bias[5] = 1.0f;
  Sampler s(p);  // id 5 is fine until a vocab of 4 shows up
  std::vector<float> logits(4, 0.0f);
  EXPECT_THROW(s.sample(logits.data(), 4), Error);
  std::vector<float> wide(8, 0.0f);
  EXPECT_NO_THROW(s.sample(wide.data(), 8));
}

}  // namespace
}  // namespace tern
