// Reductions along one dim: softmax, log_softmax, sum, mean, max, argmax, top-k, and the sampler's
// row draw and nucleus. f32 math.
#pragma once
#include <cmath>

#include "tern/core/tensor.h"

namespace tern::ops {

Tensor softmax(const Tensor& x, int64_t dim = -1);      // same shape and dtype as x
Tensor log_softmax(const Tensor& x, int64_t dim = -1);  // same shape and dtype as x
Tensor sum(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor mean(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);
// Index of the largest element along dim (the first one on ties), i32, dim removed.
Tensor argmax(const Tensor& x, int64_t dim = -1);
// The greedy choice of each row of logits (f32 [B, n], contiguous), in one pass on the device: ids[b] =
// argmax (as ops::argmax) and logprobs[b] = its log-probability, -log(sum_i exp(x_i - x_ids[b])).
// ids: i32 [B], logprobs: f32 [B], both contiguous on the logits' device (views of larger buffers are
// fine: a compiled step writes its next input ids in place).
void greedy_choice(const Tensor& logits, Tensor& ids, Tensor& logprobs);

// The k largest along dim, sorted descending (ties: lower index first). values: x's dtype, indices: i32.
struct TopK {
  Tensor values, indices;
};
TopK topk(const Tensor& x, int64_t k, int64_t dim = -1);

// The id drawn from a row of logits (f32 [n], n < kDrawMaxIds) by the integer inverse-CDF rule of
// tern/base/draw_weight.h, the sampler's own: i32 [1] on the row's device. max_logit: the row's max,
// finite; the row must hold no NaN or +inf (the sampler checks its rows before drawing). u in [0, 1).
Tensor draw_index(const Tensor& logits, float max_logit, float u);
// The same with the max as f32 [1] on the row's device (ops::topk's first value), so nothing waits for
// the host; a max that is not finite draws id n - 1 (the caller checks the max it fetches).
Tensor draw_index(const Tensor& logits, const Tensor& max_logit, float u);
// The same with u as f32 [1] on the row's device too (a captured step's word, uploaded before it runs);
// a u outside [0, 1) draws id n - 1.
Tensor draw_index(const Tensor& logits, const Tensor& max_logit, const Tensor& u);

// The sampler's nucleus of a row (f32 [n], n < kDrawMaxIds): the row with every id it does not keep
// set to -inf. Top-p by the integer rule of tern/base/draw_weight.h (top_p in (0, 1]; 1 keeps every
// id), then min-p as !(logit - max < min_gap) in f32 (min_gap = log(min_p); -inf keeps every id).
// max_logit: the row's max as f32 [1] on the row's device; the row must hold no NaN or +inf (the
// sampler checks). A max that is not finite returns the row unchanged (the caller checks the max).
Tensor top_p_mask(const Tensor& logits, const Tensor& max_logit, float top_p, float min_gap = -INFINITY);

// Teacher-forced log-probabilities: out[r] = x[r, targets[r]] - log(sum_i exp(x[r, i])) for logits
// [R, V] (any float dtype, read in f32) and targets i32 [R] on the CPU, each in [0, V); f32 [R] on the
// logits' device. Only R numbers leave the device (tern score).
Tensor token_logprobs(const Tensor& logits, const Tensor& targets);

enum class ReduceOp { sum, mean, max };

}  // namespace tern::ops

namespace tern::cpu {
// x is viewed as [outer, n, inner] around the reduced dim; out has the matching layout.
void softmax(const Tensor& x, int dim, bool log, Tensor& out);
void reduce(const Tensor& x, int dim, ops::ReduceOp op, Tensor& out);
void argmax(const Tensor& x, int dim, Tensor& out);
void greedy_choice(const Tensor& logits, Tensor& ids, Tensor& logprobs);
// logits [R, V] contiguous, targets i32 [R] on the logits' device, out f32 [R].
void token_logprobs(const Tensor& logits, const Tensor& targets, Tensor& out);
void topk(const Tensor& x, int64_t k, int dim, Tensor& values, Tensor& indices);
void draw_index(const Tensor& logits, float max_logit, float u, Tensor& out);
void top_p_mask(const Tensor& logits, float max_logit, float top_p, float min_gap, Tensor& out);
}  // namespace tern::cpu
namespace tern::cuda {
void softmax(const Tensor& x, int dim, bool log, Tensor& out);
void reduce(const Tensor& x, int dim, ops::ReduceOp op, Tensor& out);
void argmax(const Tensor& x, int dim, Tensor& out);
void greedy_choice(const Tensor& logits, Tensor& ids, Tensor& logprobs);
void token_logprobs(const Tensor& logits, const Tensor& targets, Tensor& out);
void topk(const Tensor& x, int64_t k, int dim, Tensor& values, Tensor& indices);
// u_dev: u on the device instead of u (nullptr: none).
void draw_index(const Tensor& logits, const Tensor& max_logit, float u, const Tensor* u_dev, Tensor& out);
void top_p_mask(const Tensor& logits, const Tensor& max_logit, float top_p, float min_gap, Tensor& out);
}  // namespace tern::cuda
