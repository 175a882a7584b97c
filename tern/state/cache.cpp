// Shared helpers of the cache contract.
#include "tern/state/cache.h"

#include "tern/ops/attention.h"

#include "tern/base/error.h"

namespace tern {
namespace {

class CausalRead : public AttentionRead {
 public:
  CausalRead(Tensor k, Tensor v, int64_t q_offset, int64_t window) : k_(std::move(k)), v_(std::move(v)) {
    mask_.causal = true;
    mask_.q_offset = q_offset;
    mask_.window = window;
  }
  Tensor attend(const Tensor& q, float scale, float softcap) const override {
    return ops::sdpa(q, k_, v_, scale, mask_, softcap);
  }

 private:
  Tensor k_, v_;
  ops::AttentionMask mask_;
};

}  // namespace

std::unique_ptr<AttentionRead> causal_read(Tensor k, Tensor v, int64_t q_offset, int64_t window) {
  return std::make_unique<CausalRead>(std::move(k), std::move(v), q_offset, window);
}

void Cache::save(CacheWriter&) const {
  TERN_THROW("[prompt-cache] storage {} does not support persistence yet", signature());
}

void Cache::load(CacheReader&) {
  TERN_THROW("[prompt-cache] storage {} does not support persistence yet", signature());
}

Tensor uniform_positions(int64_t offset, int64_t n) {
  Tensor p = Tensor::empty({n}, Dtype::i32);
  int32_t* d = p.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) d[i] = static_cast<int32_t>(offset + i);
  return p;
}

}  // namespace tern
