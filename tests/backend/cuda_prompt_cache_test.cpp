// Prompt-cache files on the GPU: caches saved from a model on the device load back onto the device
// (plain, ring, TurboQuant and affine storage, the affine ring, and the recurrent state of the hybrid), and continuing
// from the loaded caches gives the logits continuing from the saved ones gives. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "tern/models/registry.h"
#include "tern/state/cache_file.h"
#include "tests/backend/cuda_test_util.h"

namespace tern {
namespace {

using cuda_test::kGpu;
using cuda_test::nmse;

std::string fixture(const std::string& name) {
  const char* env = std::getenv("TERN_TEST_DATA");
  return std::string(env && *env ? env : TERN_TEST_DATA) + "/models/" + name;
}

Tensor ids_tensor(const std::vector<int32_t>& ids) {
  return Tensor::from_vector(ids, {1, static_cast<int64_t>(ids.size())});
}

class CudaPromptCache : public cuda_test::CudaTest {};

TEST_F(CudaPromptCache, SavedDeviceCachesReloadOntoTheDevice) {
  struct Case {
    const char* model;
    const char* kind;
  };
  // gemma4: sliding layers keep rings (window 16, wrapped by the 40-token prompt); qwen3_5: recurrent
  // state beside the attention layers.
  const Case cases[] = {{"qwen3", "bf16"},   {"qwen3", "turbo"},    {"qwen3", "affine8"}, {"gemma4", "bf16"},
                        {"gemma4", "turbo"}, {"gemma4", "affine8"}, {"qwen3_5", "bf16"},  {"qwen3_5", "turbo:k8v4"}};
  const CacheFileIdentity id{"test-model", "test-tokenizer"};
  const std::string path = ::testing::TempDir() + "/tern_cuda_prompt_cache.bin";
  for (const Case& c : cases) {
    auto model = load_model(fixture(c.model), LoadOptions{kGpu, Dtype::bf16});
    KVCacheOptions kv;
    kv.kind = c.kind;
    kv.group = 32;  // the fixtures' head_dim is 32
    std::vector<int32_t> prompt(40);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((7 * i + 3) % 200);
    CacheList saved = model->make_caches(kv);
    Tensor logits = model->forward(ids_tensor(prompt), saved, false);
    save_cache_file(path, id, prompt, logits, saved);
    CacheList loaded = model->make_caches(kv);
    CacheFileContents f = load_cache_file(path, id, loaded, kGpu);
    EXPECT_EQ(f.ids, prompt) << c.model << " " << c.kind;
    for (int32_t token : {11, 12, 13}) {
      Tensor want = model->forward(ids_tensor({token}), saved, false);
      Tensor got = model->forward(ids_tensor({token}), loaded, false);
      EXPECT_LE(nmse(want, got), 1e-12) << c.model << " " << c.kind << " token " << token;
    }
    std::filesystem::remove(path);
  }
}

}  // namespace
}  // namespace tern
