// Linear layer y = x W^T (+ b) and Embedding lookup.
#pragma once
#include <vector>

#include "tern/core/tensor.h"
#include "tern/layers/weight_loader.h"
#include "tern/ops/norm_linear.h"

namespace tern {

struct Linear {
  Tensor weight;  // [out, in]
  Tensor bias;    // [out] or undefined

  // Loads name.weight [out, in] and, when with_bias, name.bias [out].
  static Linear load(const WeightLoader& w, const std::string& name, int64_t in, int64_t out, bool with_bias);
  // x [..., in] -> [..., out]
  Tensor forward(const Tensor& x) const;
};

// Linears over the same input (q/k/v, gate/up). Stacked, their weights are concatenated by rows and run
// as one product whose output is split back into views: on CUDA, where weights are device copies anyway
// and one wider product beats several launches. Unstacked (the CPU, which reads the checkpoint's matrices
// in place), each part runs on its own.
struct StackedLinear {
  std::vector<Linear> parts;  // when not stacked
  Linear stacked;             // [sum of outs, in] when stacked
  std::vector<int64_t> outs;  // out features per part

  // Stacks when `stack` and every part agrees on having a bias or not.
  static StackedLinear make(std::vector<Linear> parts, bool stack);
  // x [..., in] -> one [..., out_i] per part.
  std::vector<Tensor> forward(const Tensor& x) const;
  // The same over ops::pre_norm(in), whose residual sum goes to sum: stacked and without a bias, one
  // ops::norm_linear (on CUDA one kernel for decode rows).
  std::vector<Tensor> forward(const ops::PreNorm& in, Tensor& sum) const;
};

struct Embedding {
  Tensor table;  // [vocab, dim]
  Dtype out_dtype = Dtype::f32;  // the compute dtype rows are returned in

  static Embedding load(const WeightLoader& w, const std::string& name, int64_t vocab, int64_t dim);
  // ids [B, L] (i32) -> [B, L, dim] in out_dtype.
  Tensor forward(const Tensor& ids) const;
};

}  // namespace tern
