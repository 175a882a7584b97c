// GatedDeltaNet: loading and the forward pass.
#include "tern/layers/gated_delta_net.h"

#include <cmath>

#include "tern/ops/delta.h"
#include "tern/ops/elementwise.h"

namespace tern {
namespace {

Tensor f32(const Tensor& t) { return t.dtype() == Dtype::f32 ? t : ops::cast(t, Dtype::f32); }

}  // namespace

GatedDeltaNet GatedDeltaNet::load(const WeightLoader& w, const GatedDeltaNetShape& s) {
  TERN_CHECK(s.n_k_head > 0 && s.n_v_head % s.n_k_head == 0,
             "[gated-deltanet] expected linear_num_value_heads a multiple of linear_num_key_heads, got {} and {}",
             s.n_v_head, s.n_k_head);
  TERN_CHECK(s.d_k > 0 && s.d_v > 0 && s.conv_kernel >= 1,
             "[gated-deltanet] expected positive head dims and conv kernel, got d_k {}, d_v {}, kernel {}", s.d_k, s.d_v,
             s.conv_kernel);
  GatedDeltaNet m;
  m.shape_ = s;
  const int64_t key_dim = s.n_k_head * s.d_k, value_dim = s.n_v_head * s.d_v, conv_dim = 2 * key_dim + value_dim;
  m.in_qkv_ = Linear::load(w, "in_proj_qkv", s.hidden, conv_dim, false);
  m.in_z_ = Linear::load(w, "in_proj_z", s.hidden, value_dim, false);
  m.in_b_ = Linear::load(w, "in_proj_b", s.hidden, s.n_v_head, false);
  m.in_a_ = Linear::load(w, "in_proj_a", s.hidden, s.n_v_head, false);
  m.out_ = Linear::load(w, "out_proj", value_dim, s.hidden, false);
  m.conv_w_ = f32(w.get("conv1d.weight", {conv_dim, 1, s.conv_kernel})).view({conv_dim, s.conv_kernel});
  m.dt_bias_ = f32(w.get("dt_bias", {s.n_v_head}));
  // -exp(A_log) in f32, as the reference computes it (A_log.float().exp()).
  m.neg_a_ = ops::scale(ops::unary(f32(w.get("A_log", {s.n_v_head})), ops::UnaryOp::exp), -1.0f);
  m.norm_ = RMSNorm::load(w, "norm", s.d_v, s.norm_eps);
  return m;
}

RecurrentShape GatedDeltaNet::cache_shape(const GatedDeltaNetShape& s) {
  return RecurrentShape{.conv_dim = 2 * s.n_k_head * s.d_k + s.n_v_head * s.d_v,
                        .conv_kernel = s.conv_kernel,
                        .n_v_head = s.n_v_head,
                        .d_k = s.d_k,
                        .d_v = s.d_v};
}

std::unique_ptr<RecurrentCache> GatedDeltaNet::make_cache() const {
  return std::make_unique<RecurrentCache>(cache_shape(shape_));
}

Tensor GatedDeltaNet::forward(const Tensor& x, RecurrentCache& cache) const {
  const auto& s = shape_;
  TERN_CHECK(x.rank() == 3 && x.size(2) == s.hidden, "[gated-deltanet] expected x [B, L, {}], got {}", s.hidden,
             shape_str(x.shape()));
  const int64_t B = x.size(0), L = x.size(1), key_dim = s.n_k_head * s.d_k, value_dim = s.n_v_head * s.d_v;
  const bool step = L == 1 && cache.offset() > 0;

  Tensor xf = f32(x);
  Tensor& history = cache.conv_state(B, x.device());
  Tensor mixed = ops::causal_conv1d(f32(in_qkv_.forward(xf)), conv_w_, history);  // [B, L, conv_dim]
  mixed = ops::silu(mixed);
  Tensor q = mixed.slice(2, 0, key_dim).reshape({B, L, s.n_k_head, s.d_k});
  Tensor k = mixed.slice(2, key_dim, 2 * key_dim).reshape({B, L, s.n_k_head, s.d_k});
  Tensor v = mixed.slice(2, 2 * key_dim, 2 * key_dim + value_dim).reshape({B, L, s.n_v_head, s.d_v});
  q = ops::scale(ops::l2norm(q, 1e-6f), 1.0f / std::sqrt(static_cast<float>(s.d_k)));
  k = ops::l2norm(k, 1e-6f);

  Tensor beta = ops::sigmoid(f32(in_b_.forward(xf)));                                          // [B, L, Hv]
  Tensor g = ops::mul(ops::unary(ops::add(f32(in_a_.forward(xf)), dt_bias_), ops::UnaryOp::softplus), neg_a_);

  Tensor o = ops::gated_delta_rule(q, k, v, g, beta, cache.recurrent_state(B, x.device()),
                                   step ? ops::DeltaRuleAlgo::recurrent : ops::DeltaRuleAlgo::chunked);
  cache.appended(L);

  Tensor z = f32(in_z_.forward(xf)).view({B, L, s.n_v_head, s.d_v});
  o = ops::mul(norm_.forward(o), ops::silu(z));  // [B, L, Hv, Dv]
  Tensor out = out_.forward(o.view({B, L, value_dim}));
  return out.dtype() == x.dtype() ? out : ops::cast(out, x.dtype());
}

}  // namespace tern
