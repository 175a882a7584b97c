// DeviceSampler on CPU tensors: delegated to Sampler, and (device_path_on_cpu) the device algorithm
// through the CPU op backends, identical to Sampler over many seeds and every parameter set; the
// fast-path promises; the host's errors.
#include "tern/sample/device_sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tern/base/error.h"
#include "tests/sample/device_sampler_cases.h"

namespace tern {
namespace {

using testing::device_sampler_row;
using testing::expect_same_result;
using testing::run_device_sampler_cases;

TEST(DeviceSampler, CpuRowsDelegateToSampler) {
  for (const auto& c : testing::device_sampler_cases(300)) {
    SamplingParams p = c.params;
    p.seed = 7;
    Sampler host(p);
    DeviceSampler device(p);
    for (int step = 0; step < 5; ++step) {
      Tensor t = Tensor::from_vector(device_sampler_row(300, step, step % 2 == 1), {300});
      std::vector<int32_t> history = testing::device_sampler_history(300, step);
      expect_same_result(host.sample(t, history), device.sample(t, history), c.name);
      EXPECT_EQ(host.rng().position(), device.rng().position()) << c.name;
    }
    EXPECT_EQ(device.device_calls(), 0);
  }
}

TEST(DeviceSampler, DevicePathMatchesSamplerWhenCandidatesAreTheWholeRow) {
  // vocab <= kMaxCandidates: the candidates are every token, so nothing may fall back.
  EXPECT_EQ(run_device_sampler_cases(512, 200, Device::cpu(), true), 0);
}

TEST(DeviceSampler, DevicePathMatchesSamplerOnLongerRows) {
  // vocab > kMaxCandidates: top-p and min-p decide from the best candidates and the row mass (some
  // flat rows fall back), temperature alone draws on the device (asserted inside: no copies).
  EXPECT_GT(run_device_sampler_cases(4096, 60, Device::cpu(), true), 0);
}

TEST(DeviceSampler, RejectsWhatSamplerRejects) {
  SamplingParams p;
  p.top_p = 0.9f;
  p.repetition_penalty = 1.2f;
  for (float bad : {NAN, INFINITY}) {
    std::vector<float> row = device_sampler_row(2000, 1, true);
    row[1234] = bad;
    DeviceSampler d(p, true);
    EXPECT_THROW(d.sample(Tensor::from_vector(row, {2000})), Error) << bad;
    EXPECT_EQ(d.rng().position(), 0u);  // no word consumed by a failed call
    SamplingParams g = p;
    g.temperature = 0.0f;
    DeviceSampler dg(g, true);
    EXPECT_THROW(dg.sample(Tensor::from_vector(row, {2000})), Error) << bad;
  }
  std::vector<float> banned(2000, -INFINITY);
  DeviceSampler d(p, true);
  EXPECT_THROW(d.sample(Tensor::from_vector(banned, {2000})), Error);
  std::vector<int32_t> history = {5, 2000};
  EXPECT_THROW(d.sample(Tensor::from_vector(device_sampler_row(2000, 2, false), {2000}), history), Error);
  SamplingParams biased = p;
  biased.logit_bias = {{2000, 1.0f}};
  DeviceSampler db(biased, true);
  EXPECT_THROW(db.sample(Tensor::from_vector(device_sampler_row(2000, 3, false), {2000})), Error);
  EXPECT_THROW(d.sample(Tensor::from_vector(std::vector<float>(4, 0.0f), {2, 2})), Error);
  EXPECT_THROW(d.sample(Tensor()), Error);
  // Temperature overflowing a logit to +inf is rejected like on the host.
  SamplingParams hot;
  hot.temperature = 1e-38f;
  hot.top_k = 5;
  DeviceSampler dh(hot, true);
  EXPECT_THROW(dh.sample(Tensor::from_vector(device_sampler_row(2000, 4, true), {2000})), Error);
}

}  // namespace
}  // namespace tern
