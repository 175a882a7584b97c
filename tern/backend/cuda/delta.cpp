// CUDA gated DeltaNet entry points: L2 norm, the causal conv1d with carried history, and the gated delta
// rule (token by token, or chunked in at most 64-position chunks: the same result up to rounding).
#include "tern/ops/delta.h"

#include <algorithm>
#include <cstdint>

#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/layout.h"
#include "tern/backend/cuda/runtime/context.h"

namespace tern::cuda {

namespace {
constexpr int64_t kMaxKeyDim = 256;  // the kernels keep Dk x 32 state floats in shared memory
constexpr int64_t kMaxChunk = 64;    // launch_delta_chunked's largest chunk
constexpr int64_t kMaxGridYZ = 65535;
}  // namespace

void l2norm(const Tensor& x, float eps, Tensor& out) {
  check_cuda(x, "l2norm");
  Tensor xc = x.contiguous();
  const int64_t d = x.size(-1);
  const int64_t rows = d ? x.numel() / d : 0;
  if (rows == 0) return;
  launch_l2norm(xc.dtype(), xc.data_ptr(), out.data_ptr(), rows, d, eps, stream());
}

void causal_conv1d(const Tensor& x, const Tensor& weight, Tensor& history, Tensor& out) {
  check_cuda(x, "causal_conv1d");
  check_cuda(weight, "causal_conv1d");
  check_cuda(history, "causal_conv1d");
  Tensor xc = x.contiguous(), wc = weight.contiguous();
  launch_causal_conv1d(xc.data<float>(), wc.data<float>(), history.data<float>(), out.data<float>(), x.size(0),
                       x.size(1), x.size(2), weight.size(1), stream());
}

void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                      Tensor& state, ops::DeltaRuleAlgo algo, int64_t chunk, Tensor& out) {
  for (const Tensor* t : {&q, &k, &v, &g, &beta, static_cast<const Tensor*>(&state)}) {
    check_cuda(*t, "gated_delta_rule");
  }
  const int64_t B = q.size(0), L = q.size(1), Hk = q.size(2), Dk = q.size(3), Hv = v.size(2), Dv = v.size(3);
  TERN_CHECK(Dk <= kMaxKeyDim, "[gated_delta_rule] expected a key head dim <= {} on CUDA, got {}", kMaxKeyDim, Dk);
  TERN_CHECK(B <= kMaxGridYZ && Hv <= kMaxGridYZ,
             "[gated_delta_rule] expected batch and value heads <= {} on CUDA, got {} and {}", kMaxGridYZ, B, Hv);
  Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous(), gc = g.contiguous(), bc = beta.contiguous();
  // The chunked kernels read query and key rows four floats at a time; other key dims step token by token
  // (the same result up to rounding).
  if (Dk % 4 != 0) algo = ops::DeltaRuleAlgo::recurrent;
  auto aligned = [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 ? t.clone() : t; };
  if (algo == ops::DeltaRuleAlgo::recurrent) {
    launch_delta_recurrent(qc.data<float>(), kc.data<float>(), vc.data<float>(), gc.data<float>(), bc.data<float>(),
                           state.data<float>(), out.data<float>(), B, L, Hk, Dk, Hv, Dv, stream());
  } else {
    // Any chunk size gives the same result up to rounding; the kernels' chunk matrices cap it.
    const int64_t c = std::min(chunk, kMaxChunk);
    Tensor scratch = Tensor::empty({delta_chunked_scratch(B, L, Hv, c)}, Dtype::f32, q.device());
    qc = aligned(qc);
    kc = aligned(kc);
    launch_delta_chunked(qc.data<float>(), kc.data<float>(), vc.data<float>(), gc.data<float>(), bc.data<float>(),
                         state.data<float>(), out.data<float>(), B, L, Hk, Dk, Hv, Dv, c, scratch.data<float>(),
                         stream());
  }
}

}  // namespace tern::cuda
