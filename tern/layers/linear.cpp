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

StackedLinear StackedLinear::make(std::vector<Linear> parts, bool stack) {
  StackedLinear s;
  for (const Linear& p : parts) s.outs.push_back(p.weight.size(0));
  bool same_bias = true;
  for (const Linear& p : parts) same_bias = same_bias && p.bias.defined() == parts.front().bias.defined();
  if (!stack || !same_bias || parts.size() < 2) {
    s.parts = std::move(parts);
    return s;
  }
  std::vector<Tensor> w, b;
  for (const Linear& p : parts) {
    w.push_back(p.weight);
    if (p.bias.defined()) b.push_back(p.bias);
  }
  s.stacked.weight = ops::concat(w, 0);
  if (!b.empty()) s.stacked.bias = ops::concat(b, 0);
  return s;
}

namespace {

std::vector<Tensor> split_outs(const Tensor& y, const std::vector<int64_t>& outs) {
  std::vector<Tensor> out;
  int64_t at = 0;
  for (int64_t n : outs) {
    out.push_back(y.narrow(-1, at, n));
    at += n;
  }
  return out;
}

}  // namespace

std::vector<Tensor> StackedLinear::forward(const Tensor& x) const {
  if (stacked.weight.defined()) return split_outs(stacked.forward(x), outs);
  std::vector<Tensor> out;
  for (const Linear& p : parts) out.push_back(p.forward(x));
  return out;
}

std::vector<Tensor> StackedLinear::forward(const ops::PreNorm& in, Tensor& sum) const {
  if (stacked.weight.defined() && !stacked.bias.defined()) {
    ops::NormedProduct r = ops::norm_linear(in, stacked.weight);
    sum = r.sum;
    return split_outs(r.out, outs);
  }
  ops::AddNorm a = ops::pre_norm(in);
  sum = a.sum;
  return forward(a.normed);
}

Embedding Embedding::load(const WeightLoader& w, const std::string& name, int64_t vocab, int64_t dim) {
  return Embedding{w.get_matrix(name + ".weight", {vocab, dim}), w.dtype()};
}

Tensor Embedding::forward(const Tensor& ids) const { return ops::embedding(table, ids, out_dtype); }

}  // namespace tern
