// CPU-only build: the CUDA reduction entry points throw.
#include "tern/ops/reduce.h"

namespace tern::cuda {

void softmax(const Tensor&, int, bool, Tensor&) { TERN_THROW("[softmax] needs a CUDA build"); }
void reduce(const Tensor&, int, ops::ReduceOp, Tensor&) { TERN_THROW("[reduce] needs a CUDA build"); }
void argmax(const Tensor&, int, Tensor&) { TERN_THROW("[argmax] needs a CUDA build"); }
void greedy_choice(const Tensor&, Tensor&, Tensor&) { TERN_THROW("[greedy_choice] needs a CUDA build"); }
void token_logprobs(const Tensor&, const Tensor&, Tensor&) { TERN_THROW("[token_logprobs] needs a CUDA build"); }
void topk(const Tensor&, int64_t, int, Tensor&, Tensor&) { TERN_THROW("[topk] needs a CUDA build"); }
void draw_index(const Tensor&, const Tensor&, float, const Tensor*, Tensor&) { TERN_THROW("[draw_index] needs a CUDA build"); }
void top_p_mask(const Tensor&, const Tensor&, float, float, Tensor&) { TERN_THROW("[top_p_mask] needs a CUDA build"); }

}  // namespace tern::cuda
