// Every fixture loaded in bf16 on the CPU (LoadOptions{cpu, bf16}: bf16 weights, activations and KV
// caches) tracks the f32 CPU path: full-forward logits, and teacher-forced decode one token at a time
// (sliding layers' rings wrapping every 16 positions). The CUDA path runs in bf16 too, so this is its
// dtype handling checked where it can run: a mixed-dtype op throws, a wrong cast or a misplaced ring
// slot moves the logits far past bf16 rounding (NMSE 3e-5 .. 1.2e-3 on the dense fixtures, growing with
// length on qwen3_5's recurrence; a real defect is ~1e-2 or more). On the MoE fixtures bf16 rounding
// alone would flip near-tied router choices and move a token's logits wholesale (measured up to
// 1.7e-2), so the bf16 passes replay the f32 passes' expert choices (RouterTape) and meet the same bound.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "tern/layers/router_tape.h"
#include "tern/models/registry.h"

namespace tern {
namespace {

constexpr double kNmse = 3e-3;

std::string data_dir(const std::string& name) { return std::string(TERN_TEST_DATA) + "/models/" + name; }

Tensor ids_tensor(const std::vector<int32_t>& ids) { return Tensor::from_vector(ids, {1, static_cast<int64_t>(ids.size())}); }

double nmse(const std::vector<float>& want, const std::vector<float>& got) {
  EXPECT_EQ(want.size(), got.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    num += (double{want[i]} - got[i]) * (double{want[i]} - got[i]);
    den += double{want[i]} * want[i];
  }
  return num / den;
}

class Bf16Cpu : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string dir = data_dir(GetParam());
    f32_ = load_model(dir);
    bf16_ = load_model(dir, LoadOptions{Device::cpu(), Dtype::bf16});
    std::ifstream f(dir + "/reference.json");
    meta_ = nlohmann::json::parse(f);
  }
  std::unique_ptr<Model> f32_, bf16_;
  nlohmann::json meta_;
};

TEST_P(Bf16Cpu, FullForwardTracksF32) {
  for (size_t p = 0; p < meta_["prompts"].size(); ++p) {
    std::vector<int32_t> ids = meta_["prompts"][p].get<std::vector<int32_t>>();
    CacheList a = f32_->make_caches(), b = bf16_->make_caches();
    RouterTape tape;
    Tensor want, got;
    tape.record([&] { want = f32_->forward(ids_tensor(ids), a, true); });
    tape.replay([&] { got = bf16_->forward(ids_tensor(ids), b, true); });
    EXPECT_EQ(got.dtype(), Dtype::f32);
    EXPECT_LE(nmse(want.to_f32_vector(), got.to_f32_vector()), kNmse)
        << GetParam() << " prompt " << p << " (" << ids.size() << " tokens)";
  }
}

TEST_P(Bf16Cpu, TeacherForcedDecodeTracksF32) {
  std::vector<int32_t> ids;
  for (const auto& p : meta_["prompts"]) {
    if (p.size() > ids.size()) ids = p.get<std::vector<int32_t>>();
  }
  ASSERT_GT(ids.size(), 40u) << GetParam();
  CacheList a = f32_->make_caches(), b = bf16_->make_caches();
  RouterTape tape;
  std::vector<float> want, got;
  for (size_t t0 = 0, n = 0; t0 < ids.size(); t0 += n) {
    n = t0 == 0 ? 5 : 1;
    std::vector<int32_t> part(ids.begin() + static_cast<std::ptrdiff_t>(t0),
                              ids.begin() + static_cast<std::ptrdiff_t>(t0 + n));
    std::vector<float> w, g;
    tape.record([&] { w = f32_->forward(ids_tensor(part), a, false).to_f32_vector(); });
    tape.replay([&] { g = bf16_->forward(ids_tensor(part), b, false).to_f32_vector(); });
    want.insert(want.end(), w.begin(), w.end());
    got.insert(got.end(), g.begin(), g.end());
  }
  EXPECT_LE(nmse(want, got), kNmse) << GetParam() << " over " << ids.size() - 4 << " steps";
}

INSTANTIATE_TEST_SUITE_P(Models, Bf16Cpu,
                         ::testing::Values("qwen3", "qwen3_tied", "llama", "qwen3_moe", "qwen3_5", "qwen3_5_moe", "gemma4",
                                           "gemma4_moe"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace tern
