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
  // vocab > kMaxCandidates: without top-k every row draws on the device, through the nucleus op
  // (asserted inside: no copies); top-p after a top-k wider than the candidates copies the row.
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

namespace tern {
namespace {

// The sampler as a graph head, run through the CPU ops: prepare, head, finish give Sampler's answer on
// the same rows (token, logprob, top logprobs, stream position) for every head-capable case, and a
// row the host rejects falls back to Sampler's error with the stream rewound.
TEST(DeviceSampler, HeadMatchesSampler) {
  const int64_t vocab = 3000;
  int cases = 0;
  for (const testing::DeviceSamplerCase& c : testing::device_sampler_cases(vocab)) {
    if (!DeviceSampler::head_supported(c.params)) continue;
    ++cases;
    for (int seed = 0; seed < 20; ++seed) {
      SamplingParams p = c.params;
      p.seed = 500u + static_cast<uint64_t>(seed);
      Sampler host(p);
      DeviceSampler device(p, true);
      for (int step = 0; step < 3; ++step) {
        const std::vector<float> row = device_sampler_row(vocab, static_cast<uint32_t>(seed * 5 + step), step == 1);
        Tensor t = Tensor::from_vector(row, {vocab});
        device.prepare(Device::cpu());
        Tensor packed = device.head(t);
        const std::string where = c.name + " seed " + std::to_string(seed) + " step " + std::to_string(step);
        testing::expect_same_result(host.sample(t), device.finish(packed, t), where);
        EXPECT_EQ(host.rng().position(), device.rng().position()) << where;
      }
    }
  }
  EXPECT_GE(cases, 5);
  SamplingParams p;
  p.temperature = 1.0f;
  DeviceSampler d(p, true);
  std::vector<float> row = device_sampler_row(vocab, 9, true);
  row[17] = NAN;
  Tensor bad = Tensor::from_vector(row, {vocab});
  d.prepare(Device::cpu());
  Tensor packed = d.head(bad);
  EXPECT_THROW(d.finish(packed, bad), Error);
  EXPECT_EQ(d.rng().position(), 0u);
}

}  // namespace
}  // namespace tern
