// Indexing ops: embedding gather and concat.
#pragma once
#include <vector>

#include "tern/core/tensor.h"

namespace tern::ops {

// table [V, D] (any float dtype), ids [...] (i32/i64) -> [..., D] in out_dtype.
// Throws "[embedding] expected token id in [0, V), got x" on an out-of-range id.
Tensor embedding(const Tensor& table, const Tensor& ids, Dtype out_dtype);

// Joins tensors that agree on every dim but dim; all share dtype and device.
Tensor concat(const std::vector<Tensor>& xs, int64_t dim);

}  // namespace tern::ops

namespace tern::cpu {
void embedding(const Tensor& table, const Tensor& ids, Tensor& out);
}
namespace tern::cuda {
void embedding(const Tensor& table, const Tensor& ids, Tensor& out);
}
