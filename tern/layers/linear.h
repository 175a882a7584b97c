// Linear layer y = x W^T (+ b) and Embedding lookup.
#pragma once
#include "tern/core/tensor.h"
#include "tern/layers/weight_loader.h"

namespace tern {

struct Linear {
  Tensor weight;  // [out, in]
  Tensor bias;    // [out] or undefined

  // Loads name.weight [out, in] and, when with_bias, name.bias [out].
  static Linear load(const WeightLoader& w, const std::string& name, int64_t in, int64_t out, bool with_bias);
  // x [..., in] -> [..., out]
  Tensor forward(const Tensor& x) const;
};

struct Embedding {
  Tensor table;  // [vocab, dim]
  Dtype out_dtype = Dtype::f32;  // the compute dtype rows are returned in

  static Embedding load(const WeightLoader& w, const std::string& name, int64_t vocab, int64_t dim);
  // ids [B, L] (i32) -> [B, L, dim] in out_dtype.
  Tensor forward(const Tensor& ids) const;
};

}  // namespace tern
