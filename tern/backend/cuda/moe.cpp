// CUDA mixture of experts. Decode-sized batches (T <= kDecodeTokens, bf16 experts) run the grouped GEMV
// kernels on the device-resident routing: no host sync, no per-expert host loop. Larger batches sort the
// (token, slot) pairs by expert on the device, read the per-expert counts back once, run the gate_up and
// down products per used expert through linear (cuBLASLt) on the gathered rows, and combine on the device.
#include "tern/ops/moe.h"

#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/layout.h"
#include "tern/backend/cuda/runtime/context.h"
#include "tern/ops/elementwise.h"
#include "tern/ops/index.h"
#include "tern/ops/matmul.h"

namespace tern::cuda {
namespace {

// Up to this many tokens the grouped GEMV reads each routed expert's rows at full width; beyond it the
// same experts recur across tokens and per-expert GEMMs reuse each weight tile.
constexpr int64_t kDecodeTokens = 8;
// Up to this many tokens (decode batches) the grouped products (launch_moe_grouped) may run instead of
// cuBLASLt per expert: few rows per expert, where a GEMM tile would be mostly empty.
constexpr int64_t kGroupedTokens = 64;

bool run_decode(const Tensor& x, const Tensor& experts, const Tensor& weights, const Tensor& gate_up,
                const Tensor& down, ops::MoeActivation act, Tensor& out) {
  if (gate_up.dtype() != Dtype::bf16 || !gate_up.is_contiguous() || !down.is_contiguous()) return false;
  const int64_t T = x.size(0), H = x.size(1), K = experts.size(1), E = gate_up.size(0), I = gate_up.size(1) / 2;
  Tensor xb = x.dtype() == Dtype::bf16 ? x : ops::cast(x, Dtype::bf16);
  if (out.dtype() != Dtype::f32 && out.dtype() != Dtype::bf16) return false;
  Tensor h = Tensor::empty({T * K, I}, Dtype::f32, x.device());  // [T * k, inter]
  return launch_moe_decode(xb.data_ptr(), experts.data<int32_t>(), weights.data<float>(), T, K, gate_up.data_ptr(),
                           down.data_ptr(), E, H, I, act == ops::MoeActivation::geglu_tanh, h.data<float>(),
                           out.data_ptr(), out.dtype() == Dtype::bf16, stream());
}

void run_sorted(const Tensor& x, const Tensor& experts, const Tensor& weights, const Tensor& gate_up,
                const Tensor& down, ops::MoeActivation act, Tensor& out) {
  const int64_t T = x.size(0), H = x.size(1), K = experts.size(1), E = gate_up.size(0), I = gate_up.size(1) / 2;
  const int64_t P = T * K;
  const Device dev = x.device();
  Tensor counts = Tensor::empty({E}, Dtype::i32, dev), offsets = Tensor::empty({E}, Dtype::i32, dev);
  Tensor cursor = Tensor::empty({E}, Dtype::i32, dev);
  Tensor rows = Tensor::empty({P}, Dtype::i32, dev), pos = Tensor::empty({P}, Dtype::i32, dev);
  launch_moe_sort(experts.data<int32_t>(), P, K, E, counts.data<int32_t>(), offsets.data<int32_t>(),
                  cursor.data<int32_t>(), rows.data<int32_t>(), pos.data<int32_t>(), stream());
  const Tensor host_counts = counts.to(Device::cpu());  // the one sync
  const int32_t* host = host_counts.data<int32_t>();
  int64_t n_sorted = 0;
  for (int64_t e = 0; e < E; ++e) n_sorted += host[e];
  if (n_sorted == 0) {
    out.copy_from(Tensor::zeros(out.shape(), out.dtype(), dev));
    return;
  }

  // Gather once, in the experts' dtype (cuBLASLt takes one input type).
  Tensor xs = ops::embedding(x, rows.slice(0, 0, n_sorted), gate_up.dtype());  // [n_sorted, hidden]
  Tensor y = Tensor::empty({n_sorted, H}, Dtype::f32, dev);                     // [n_sorted, hidden]
  int64_t at = 0;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = host[e];
    if (n == 0) continue;
    Tensor gu = Tensor::empty({n, 2 * I}, Dtype::f32, dev);  // [n, 2 * inter]
    linear(xs.slice(0, at, at + n), gate_up.select(0, e), Tensor(), gu);
    Tensor g = gu.slice(1, 0, I), u = gu.slice(1, I, 2 * I);
    Tensor hh = act == ops::MoeActivation::swiglu ? ops::swiglu(g, u) : ops::geglu(g, u, true);  // [n, inter] f32
    Tensor ye = y.slice(0, at, at + n);
    linear(hh, down.select(0, e), Tensor(), ye);
    at += n;
  }
  launch_moe_combine(y.data<float>(), pos.data<int32_t>(), weights.data<float>(), T, K, H, out.data_ptr(),
                     out.dtype() == Dtype::bf16, stream());
}

// Batches of kDecodeTokens < T <= kGroupedTokens take the grouped products (launch_moe_grouped: no host
// sync, so a compiled decode captures them); TERN_CUDA_MOE_GROUPED=0 sends them to cuBLASLt per expert
// instead, for comparison.
bool grouped_enabled() {
  const char* v = std::getenv("TERN_CUDA_MOE_GROUPED");
  return !(v && std::strcmp(v, "0") == 0);
}

bool run_grouped(const Tensor& x, const Tensor& experts, const Tensor& weights, const Tensor& gate_up,
                 const Tensor& down, ops::MoeActivation act, Tensor& out) {
  if (gate_up.dtype() != Dtype::bf16 || !gate_up.is_contiguous() || !down.is_contiguous()) return false;
  const int64_t T = x.size(0), H = x.size(1), K = experts.size(1), E = gate_up.size(0), I = gate_up.size(1) / 2;
  const int64_t P = T * K;
  const Device dev = x.device();
  Tensor xb = x.dtype() == Dtype::bf16 ? x : ops::cast(x, Dtype::bf16);
  Tensor counts = Tensor::empty({E}, Dtype::i32, dev), offsets = Tensor::empty({E}, Dtype::i32, dev);
  Tensor cursor = Tensor::empty({E}, Dtype::i32, dev);
  Tensor rows = Tensor::empty({P}, Dtype::i32, dev), pos = Tensor::empty({P}, Dtype::i32, dev);
  Tensor h = Tensor::empty({P, I}, Dtype::f32, dev), y = Tensor::empty({P, H}, Dtype::f32, dev);
  const MoeGroupedScratch w{counts.data<int32_t>(), offsets.data<int32_t>(), cursor.data<int32_t>(),
                            rows.data<int32_t>(),   pos.data<int32_t>(),     h.data<float>(),
                            y.data<float>()};
  return launch_moe_grouped(xb.data_ptr(), experts.data<int32_t>(), weights.data<float>(), T, K, gate_up.data_ptr(),
                            down.data_ptr(), E, H, I, act == ops::MoeActivation::geglu_tanh, w, out.data_ptr(),
                            out.dtype() == Dtype::bf16, stream());
}

}  // namespace

void moe_experts(const Tensor& x, const Tensor& experts, const Tensor& weights, const Tensor& gate_up,
                 const Tensor& down, ops::MoeActivation act, Tensor& out) {
  for (const Tensor* t : {&x, &experts, &weights, &gate_up, &down}) check_cuda(*t, "moe_experts");
  if (x.size(0) <= kDecodeTokens && run_decode(x, experts, weights, gate_up, down, act, out)) return;
  if (x.size(0) <= kGroupedTokens && grouped_enabled() && run_grouped(x, experts, weights, gate_up, down, act, out))
    return;
  run_sorted(x, experts, weights, gate_up, down, act, out);
}

// TERN_CUDA_MOE_ENTRY=0 declines every call, so the caller runs add+norm, the router product and the
// route as three launches (for benchmarks; read once).
bool moe_norm_route(const Tensor& x2d, const Tensor& delta2d, const Tensor& weight, float eps, const Tensor& router,
                    int64_t k, bool renormalize, ops::MoeNormRoute& r) {
  static const bool off = [] {
    const char* v = std::getenv("TERN_CUDA_MOE_ENTRY");
    return v && std::strcmp(v, "0") == 0;
  }();
  if (off) return false;
  const int64_t M = x2d.size(0), H = x2d.size(1), E = router.size(0);
  const Device dev = x2d.device();
  r.sum = delta2d.defined() ? Tensor::empty({M, H}, Dtype::bf16, dev) : x2d;
  r.normed = Tensor::empty({M, H}, Dtype::bf16, dev);
  r.weights = Tensor::empty({M, k}, Dtype::f32, dev);
  r.experts = Tensor::empty({M, k}, Dtype::i32, dev);
  Tensor logits = Tensor::empty({M, E}, Dtype::f32, dev);
  return launch_moe_norm_route(x2d.data_ptr(), delta2d.defined() ? delta2d.data_ptr() : nullptr,
                               delta2d.defined() ? r.sum.data_ptr() : nullptr,
                               weight.defined() ? weight.data_ptr() : nullptr, eps, router.data_ptr(), M, E, H,
                               r.normed.data_ptr(), logits.data<float>(), k, renormalize, r.weights.data<float>(),
                               r.experts.data<int32_t>(), zeroed_counters(), stream());
}

void moe_route(const Tensor& logits, int64_t k, bool renormalize, Tensor& weights, Tensor& experts) {
  check_cuda(logits, "moe_route");
  launch_moe_route(logits.data<float>(), logits.size(0), logits.size(1), k, renormalize, weights.data<float>(),
                   experts.data<int32_t>(), stream());
}

}  // namespace tern::cuda
