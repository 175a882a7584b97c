// DeviceSampler on CUDA rows against Sampler on the host copy: tokens, logprobs (1e-5), top_logprobs
// and Rng positions over 200 seeds x two steps for every parameter set, on vocab 151936 and 512;
// the fast path where it must hold. Skips cleanly without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tern/base/error.h"
#include "tern/ops/device.h"
#include "tern/sample/device_sampler.h"
#include "tests/sample/device_sampler_cases.h"

namespace tern {
namespace {

const Device kGpu = Device::cuda(0);

class CudaDeviceSampler : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_status();
    cuda_init();
  }
};

TEST_F(CudaDeviceSampler, MatchesSamplerOnQwenVocabRows) {
  const int64_t copies = testing::run_device_sampler_cases(151936, 200, kGpu, false);
  RecordProperty("full_row_copies", static_cast<int>(copies));
}

TEST_F(CudaDeviceSampler, MatchesSamplerOnSmallVocabRows) {
  // 512 <= kMaxCandidates: the candidates are the whole row, so nothing falls back.
  EXPECT_EQ(testing::run_device_sampler_cases(512, 200, kGpu, false), 0);
}

TEST_F(CudaDeviceSampler, RejectsWhatSamplerRejects) {
  SamplingParams p;
  p.top_p = 0.9f;
  for (float bad : {NAN, INFINITY}) {
    for (float temperature : {0.0f, 1.0f}) {
      std::vector<float> row = testing::device_sampler_row(151936, 1, true);
      row[4321] = bad;
      SamplingParams q = p;
      q.temperature = temperature;
      DeviceSampler d(q);
      EXPECT_THROW(d.sample(Tensor::from_vector(row, {151936}).to(kGpu)), Error) << bad << " t " << temperature;
      EXPECT_EQ(d.rng().position(), 0u);
    }
  }
  DeviceSampler d(p);
  EXPECT_THROW(d.sample(Tensor::from_vector(std::vector<float>(4096, -INFINITY), {4096}).to(kGpu)), Error);
  std::vector<int32_t> history = {5, 151936};
  SamplingParams pen = p;
  pen.presence_penalty = 1.0f;
  DeviceSampler dp(pen);
  EXPECT_THROW(dp.sample(Tensor::from_vector(testing::device_sampler_row(151936, 2, false), {151936}).to(kGpu),
                         history),
               Error);
}

TEST_F(CudaDeviceSampler, StridedAndRowShapedLogits) {
  SamplingParams p;
  p.top_k = 30;
  p.top_logprobs = 3;
  p.seed = 9;
  Sampler host(p);
  DeviceSampler device(p);
  std::vector<float> rows = testing::device_sampler_row(2 * 5000, 3, true);
  Tensor both = Tensor::from_vector(rows, {2, 5000});
  for (int r = 0; r < 2; ++r) {
    Tensor row = both.narrow(0, r, 1);  // [1, vocab] view into a larger tensor
    testing::expect_same_result(host.sample(row), device.sample(both.to(kGpu).narrow(0, r, 1)), "row");
  }
  Tensor strided = Tensor::from_vector(rows, {5000, 2}).select(1, 1);  // [vocab] at stride 2
  testing::expect_same_result(host.sample(strided), device.sample(Tensor::from_vector(rows, {5000, 2}).to(kGpu).select(1, 1)),
                              "strided");
  EXPECT_EQ(host.rng().position(), device.rng().position());
  EXPECT_EQ(device.full_row_copies(), 0);
}

}  // namespace
}  // namespace tern
