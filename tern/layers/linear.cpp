// Linear and Embedding.
#include "tern/layers/linear.h"

#include "tern/ops/index.h"
#include "tern/ops/matmul.h"

namespace tern {

Linear Linear::load(const WeightLoader& w, const std::string& name, int64_t in, int64_t out, bool with_bias) {
  Linear l;
  l.weight = w.get_matrix(name + ".weight", {out, in});
  if (with_bias) l.bias = w.get(name + ".bias", {out});
  return l;
}

Tensor Linear::forward(const Tensor& x) const { return ops::linear(x, weight, bias); }

Embedding Embedding::load(const WeightLoader& w, const std::string& name, int64_t vocab, int64_t dim) {
  return Embedding{w.get_matrix(name + ".weight", {vocab, dim}), w.dtype()};
}

Tensor Embedding::forward(const Tensor& ids) const { return ops::embedding(table, ids, out_dtype); }

}  // namespace tern
