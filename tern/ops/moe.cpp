// Mixture-of-experts op: validation and allocation; the expert products live in the backends.
#include "tern/ops/moe.h"

#include <string>

#include "tern/ops/elementwise.h"
#include "tern/ops/matmul.h"
#include "tern/ops/reduce.h"

namespace tern::ops {

Tensor moe_experts(const Tensor& x, const Tensor& experts, const Tensor& weights, const Tensor& gate_up,
                   const Tensor& down, MoeActivation act, Dtype out_dtype) {
  TERN_CHECK(x.defined() && experts.defined() && weights.defined() && gate_up.defined() && down.defined(),
             "[moe_experts] expected defined tensors, got an undefined one");
  TERN_CHECK(x.rank() == 2, "[moe_experts] expected x [T, hidden], got {}", shape_str(x.shape()));
  TERN_CHECK(gate_up.rank() == 3 && down.rank() == 3,
             "[moe_experts] expected gate_up [E, 2*inter, hidden] and down [E, hidden, inter], got {} and {}",
             shape_str(gate_up.shape()), shape_str(down.shape()));
  const int64_t T = x.size(0), H = x.size(1), E = gate_up.size(0), I = gate_up.size(1) / 2;
  TERN_CHECK(gate_up.size(1) % 2 == 0 && gate_up.size(2) == H && down.size(0) == E && down.size(1) == H &&
                 down.size(2) == I,
             "[moe_experts] expected gate_up [E, 2*inter, {}] and down [E, {}, inter], got {} and {}", H, H,
             shape_str(gate_up.shape()), shape_str(down.shape()));
  TERN_CHECK(experts.rank() == 2 && experts.size(0) == T && weights.shape() == experts.shape(),
             "[moe_experts] expected experts and weights [{}, k], got {} and {}", T, shape_str(experts.shape()),
             shape_str(weights.shape()));
  TERN_CHECK(experts.dtype() == Dtype::i32 && weights.dtype() == Dtype::f32,
             "[moe_experts] expected experts i32 and weights f32, got {} and {}", dtype_name(experts.dtype()),
             dtype_name(weights.dtype()));
  TERN_CHECK(is_floating(x.dtype()) && is_floating(gate_up.dtype()) && down.dtype() == gate_up.dtype(),
             "[moe_experts] expected float x and expert weights of one float dtype, got {}, {} and {}",
             dtype_name(x.dtype()), dtype_name(gate_up.dtype()), dtype_name(down.dtype()));
  const Device dev = x.device();
  TERN_CHECK(experts.device() == dev && weights.device() == dev && gate_up.device() == dev && down.device() == dev,
             "[moe_experts] expected every tensor on {}, got experts {}, weights {}, gate_up {}, down {}", dev.str(),
             experts.device().str(), weights.device().str(), gate_up.device().str(), down.device().str());
  TERN_CHECK(out_dtype == Dtype::f32 || out_dtype == Dtype::bf16,
             "[moe_experts] expected an f32 or bf16 output, got {}", dtype_name(out_dtype));
  if (T == 0 || experts.size(1) == 0) return Tensor::zeros({T, H}, out_dtype, dev);
  if (dev.is_cpu()) {
    Tensor out = Tensor::zeros({T, H}, Dtype::f32, dev);
    cpu::moe_experts(x.contiguous(), experts.contiguous(), weights.contiguous(), gate_up, down, act, out);
    return out_dtype == Dtype::f32 ? out : cast(out, out_dtype);
  }
  Tensor out = Tensor::empty({T, H}, out_dtype, dev);
  cuda::moe_experts(x.contiguous(), experts.contiguous(), weights.contiguous(), gate_up, down, act, out);
  return out;
}

MoeRoute moe_route(const Tensor& logits, int64_t k, bool renormalize) {
  TERN_CHECK(
      logits.defined() && logits.rank() == 2 && logits.dtype() == Dtype::f32,
      "[moe_route] expected logits [T, n_expert] f32, got {}",
      logits.defined() ? shape_str(logits.shape()) + " " + dtype_name(logits.dtype()) : std::string("undefined"));
  TERN_CHECK(k >= 1 && k <= logits.size(1), "[moe_route] expected top-k in [1, {}], got {}", logits.size(1), k);
  if (logits.device().is_cuda() && logits.size(1) <= 1024 && k <= 32) {
    MoeRoute r{Tensor::empty({logits.size(0), k}, Dtype::f32, logits.device()),
               Tensor::empty({logits.size(0), k}, Dtype::i32, logits.device())};
    if (logits.size(0) > 0) cuda::moe_route(logits.contiguous(), k, renormalize, r.weights, r.experts);
    return r;
  }
  TopK top = topk(softmax(logits, -1), k, -1);
  Tensor w = top.values;
  if (renormalize) w = div(w, sum(w, -1, true));
  return {w.contiguous(), top.indices.contiguous()};
}

MoeNormRoute moe_norm_route(const PreNorm& in, const Tensor& router, int64_t k, bool renormalize) {
  const DecodeRows d = decode_rows(in, router);
  MoeNormRoute r;
  if (d.rows > 0 && k >= 1 && k <= router.size(0) &&
      cuda::moe_norm_route(d.x2d, d.delta2d, d.weight, in.eps, router, k, renormalize, r)) {
    r.sum = in.delta.defined() ? r.sum.view(in.x.shape()) : in.x;
    r.normed = r.normed.view(in.x.shape());
    return r;
  }
  AddNorm a = pre_norm(in);
  const int64_t H = a.normed.size(-1);
  Tensor logits = linear(a.normed.reshape({a.normed.numel() / H, H}), router, {}, Dtype::f32);
  MoeRoute route = moe_route(logits, k, renormalize);
  return {a.sum, a.normed, route.weights, route.experts};
}

}  // namespace tern::ops
