// Gated DeltaNet ops: validation and output allocation; the math lives in the backends.
#include "tern/ops/delta.h"

namespace tern::ops {
namespace {

std::string describe(const Tensor& t) {
  return t.defined() ? shape_str(t.shape()) + " " + dtype_name(t.dtype()) : std::string("an undefined tensor");
}

void check_f32(const Tensor& t, const char* op, const char* name) {
  TERN_CHECK(t.defined() && t.dtype() == Dtype::f32, "[{}] expected {} f32, got {}", op, name, describe(t));
}

}  // namespace

Tensor l2norm(const Tensor& x, float eps) {
  TERN_CHECK(x.defined() && is_floating(x.dtype()) && x.rank() >= 1,
             "[l2norm] expected a float tensor of rank >= 1, got {}", describe(x));
  TERN_CHECK(eps >= 0.0f, "[l2norm] expected eps >= 0, got {}", eps);
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  if (x.device().is_cpu()) {
    cpu::l2norm(x.contiguous(), eps, out);
  } else {
    cuda::l2norm(x.contiguous(), eps, out);
  }
  return out;
}

Tensor causal_conv1d(const Tensor& x, const Tensor& weight, Tensor& history) {
  check_f32(x, "causal_conv1d", "x");
  check_f32(weight, "causal_conv1d", "weight");
  check_f32(history, "causal_conv1d", "history");
  TERN_CHECK(x.rank() == 3, "[causal_conv1d] expected x [B, L, C], got {}", describe(x));
  const int64_t B = x.size(0), C = x.size(2);
  TERN_CHECK(weight.rank() == 2 && weight.size(0) == C && weight.size(1) >= 1,
             "[causal_conv1d] expected weight [{}, K], got {}", C, describe(weight));
  const int64_t K = weight.size(1);
  TERN_CHECK(history.shape() == (Shape{B, K - 1, C}) && history.is_contiguous(),
             "[causal_conv1d] expected a contiguous history [{}, {}, {}], got {}", B, K - 1, C, describe(history));
  TERN_CHECK(weight.device() == x.device() && history.device() == x.device(),
             "[causal_conv1d] expected weight and history on {}, got {} and {}", x.device().str(),
             weight.device().str(), history.device().str());
  Tensor out = Tensor::empty(x.shape(), Dtype::f32, x.device());
  if (out.numel() == 0) return out;
  if (x.device().is_cpu()) {
    cpu::causal_conv1d(x.contiguous(), weight.contiguous(), history, out);
  } else {
    cuda::causal_conv1d(x.contiguous(), weight.contiguous(), history, out);
  }
  return out;
}

Tensor gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                        Tensor& state, DeltaRuleAlgo algo, int64_t chunk) {
  const char* op = "gated_delta_rule";
  check_f32(q, op, "q");
  check_f32(k, op, "k");
  check_f32(v, op, "v");
  check_f32(g, op, "g");
  check_f32(beta, op, "beta");
  check_f32(state, op, "state");
  TERN_CHECK(q.rank() == 4 && v.rank() == 4, "[gated_delta_rule] expected q [B, L, Hk, Dk] and v [B, L, Hv, Dv], got {} and {}",
             describe(q), describe(v));
  const int64_t B = q.size(0), L = q.size(1), Hk = q.size(2), Dk = q.size(3), Hv = v.size(2), Dv = v.size(3);
  TERN_CHECK(k.shape() == q.shape(), "[gated_delta_rule] expected k of q's shape {}, got {}", shape_str(q.shape()),
             describe(k));
  TERN_CHECK(v.size(0) == B && v.size(1) == L, "[gated_delta_rule] expected v [{}, {}, Hv, Dv], got {}", B, L,
             describe(v));
  TERN_CHECK(Hk >= 1 && Hv % Hk == 0, "[gated_delta_rule] expected value heads ({}) a multiple of key heads ({})", Hv,
             Hk);
  TERN_CHECK(g.shape() == (Shape{B, L, Hv}) && beta.shape() == (Shape{B, L, Hv}),
             "[gated_delta_rule] expected g and beta [{}, {}, {}], got {} and {}", B, L, Hv, describe(g), describe(beta));
  TERN_CHECK(state.shape() == (Shape{B, Hv, Dk, Dv}) && state.is_contiguous(),
             "[gated_delta_rule] expected a contiguous state [{}, {}, {}, {}], got {}", B, Hv, Dk, Dv, describe(state));
  TERN_CHECK(algo == DeltaRuleAlgo::recurrent || chunk >= 1, "[gated_delta_rule] expected chunk >= 1, got {}", chunk);
  for (const Tensor* t : {&k, &v, &g, &beta, static_cast<const Tensor*>(&state)}) {
    TERN_CHECK(t->device() == q.device(), "[gated_delta_rule] expected every operand on {}, got {}", q.device().str(),
               t->device().str());
  }
  Tensor out = Tensor::empty({B, L, Hv, Dv}, Dtype::f32, q.device());
  if (out.numel() == 0) return out;
  if (q.device().is_cpu()) {
    cpu::gated_delta_rule(q.contiguous(), k.contiguous(), v.contiguous(), g.contiguous(), beta.contiguous(), state,
                          algo, chunk, out);
  } else {
    cuda::gated_delta_rule(q.contiguous(), k.contiguous(), v.contiguous(), g.contiguous(), beta.contiguous(), state,
                           algo, chunk, out);
  }
  return out;
}

}  // namespace tern::ops
