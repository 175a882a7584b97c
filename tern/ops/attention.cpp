// Scaled dot-product attention: validation of shapes, dtypes, devices and the mask; output allocation;
// backend dispatch.
#include "tern/ops/attention.h"

#include <algorithm>
#include <cmath>

#include "tern/ops/elementwise.h"
#include "tern/ops/matmul.h"

namespace tern::ops {
namespace {

bool is_float_dtype(Dtype d) { return d == Dtype::f32 || d == Dtype::bf16 || d == Dtype::f16; }

// The widest q/k and v head every CUDA kernel takes; wider heads go through sdpa_split_heads unless the
// tensor-core kernels take them (cuda::sdpa_takes_wide_heads).
constexpr int64_t kCudaMaxHeadDim = 256;

Tensor f32_contiguous(const Tensor& t) { return (t.dtype() == Dtype::f32 ? t : cast(t, Dtype::f32)).contiguous(); }

void check_mask(const AttentionMask& mask, const Shape& scores, Device dev) {
  TERN_CHECK(mask.window >= 0, "[sdpa] expected window >= 0, got {}", mask.window);
  if (mask.kv_len.defined()) {
    const Tensor& kl = mask.kv_len;
    TERN_CHECK(kl.dtype() == Dtype::i32, "[sdpa] expected kv_len of dtype i32, got {}", dtype_name(kl.dtype()));
    TERN_CHECK(kl.rank() == 1 && kl.size(0) == scores[0], "[sdpa] expected kv_len [{}], got {}", scores[0],
               shape_str(kl.shape()));
    TERN_CHECK(kl.device() == dev, "[sdpa] expected kv_len on {}, got {}", dev.str(), kl.device().str());
  }
  if (mask.bias.defined()) {
    const Tensor& bias = mask.bias;
    TERN_CHECK(bias.dtype() == Dtype::f32, "[sdpa] expected bias of dtype f32, got {}", dtype_name(bias.dtype()));
    TERN_CHECK(bias.device() == dev, "[sdpa] expected bias on {}, got {}", dev.str(), bias.device().str());
    bool ok = bias.rank() <= scores.size();
    for (size_t i = 0; ok && i < bias.rank(); ++i) {
      const int64_t d = bias.shape()[bias.rank() - 1 - i];
      ok = d == 1 || d == scores[scores.size() - 1 - i];
    }
    TERN_CHECK(ok, "[sdpa] expected bias broadcastable to {}, got {}", shape_str(scores), shape_str(bias.shape()));
  }
}

}  // namespace

Tensor sdpa(const Tensor& q, const Tensor& k, const Tensor& v, float scale, const AttentionMask& mask,
            float softcap) {
  TERN_CHECK(q.defined() && k.defined() && v.defined(), "[sdpa] expected defined q, k and v, got an undefined one");
  TERN_CHECK(q.rank() == 4, "[sdpa] expected q [B, Hq, Lq, D], got {}", shape_str(q.shape()));
  TERN_CHECK(k.rank() == 4, "[sdpa] expected k [B, Hkv, Lk, D], got {}", shape_str(k.shape()));
  TERN_CHECK(v.rank() == 4, "[sdpa] expected v [B, Hkv, Lk, Dv], got {}", shape_str(v.shape()));
  TERN_CHECK(is_float_dtype(q.dtype()), "[sdpa] expected q f32, bf16 or f16, got {}", dtype_name(q.dtype()));
  TERN_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype(), "[sdpa] expected q, k, v of one dtype, got {}, {}, {}",
             dtype_name(q.dtype()), dtype_name(k.dtype()), dtype_name(v.dtype()));
  TERN_CHECK(k.device() == q.device() && v.device() == q.device(),
             "[sdpa] expected q, k, v on one device, got {}, {}, {}", q.device().str(), k.device().str(),
             v.device().str());
  const int64_t b = q.size(0), hq = q.size(1), lq = q.size(2), d = q.size(3);
  const int64_t hkv = k.size(1), lk = k.size(2), dv = v.size(3);
  TERN_CHECK(k.size(0) == b && v.size(0) == b, "[sdpa] expected batch {} in k and v, got {} and {}", b, k.size(0),
             v.size(0));
  TERN_CHECK(v.size(1) == hkv, "[sdpa] expected v with {} kv heads like k, got {}", hkv, v.size(1));
  TERN_CHECK(hkv > 0 && hq % hkv == 0, "[sdpa] expected Hq divisible by Hkv, got Hq {} and Hkv {}", hq, hkv);
  TERN_CHECK(k.size(3) == d, "[sdpa] expected k head dim {} like q, got {}", d, k.size(3));
  TERN_CHECK(v.size(2) == lk, "[sdpa] expected v with {} keys like k, got {}", lk, v.size(2));
  TERN_CHECK(std::isfinite(scale), "[sdpa] expected a finite scale, got {}", scale);
  TERN_CHECK(softcap >= 0.0f && std::isfinite(softcap), "[sdpa] expected softcap >= 0, got {}", softcap);
  check_mask(mask, {b, hq, lq, lk}, q.device());

  if (!q.device().is_cpu() && (d > kCudaMaxHeadDim || dv > kCudaMaxHeadDim) &&
      !cuda::sdpa_takes_wide_heads(q, k, v, mask)) {
    return sdpa_split_heads(q, k, v, scale, mask, softcap, kCudaMaxHeadDim);
  }
  Tensor out = Tensor::empty({b, hq, lq, dv}, q.dtype(), q.device());
  if (out.numel() == 0) return out;
  if (q.device().is_cpu()) {
    cpu::sdpa(q, k, v, scale, mask, softcap, out);
  } else {
    cuda::sdpa(q, k, v, scale, mask, softcap, out);
  }
  return out;
}

Tensor sdpa_split_heads(const Tensor& q, const Tensor& k, const Tensor& v, float scale, const AttentionMask& mask,
                        float softcap, int64_t max_dim) {
  TERN_CHECK(max_dim > 0, "[sdpa] expected a head-dim limit > 0, got {}", max_dim);
  TERN_CHECK(q.defined() && k.defined() && v.defined() && q.rank() == 4 && k.rank() == 4 && v.rank() == 4,
             "[sdpa] expected q, k, v of rank 4, got {}, {}, {}", shape_str(q.shape()), shape_str(k.shape()),
             shape_str(v.shape()));
  const int64_t B = q.size(0), Hq = q.size(1), Lq = q.size(2), D = q.size(3);
  const int64_t Hkv = k.size(1), Lk = k.size(2), Dv = v.size(3);
  TERN_CHECK(k.size(3) == D && Hkv > 0 && Hq % Hkv == 0,
             "[sdpa] expected k [B, Hkv, Lk, {}] with Hq % Hkv == 0, got {} for q {}", D, shape_str(k.shape()),
             shape_str(q.shape()));
  AttentionMask m = mask;
  Tensor qs = q, ks = k;
  if (D > max_dim) {
    TERN_CHECK(softcap == 0.0f, "[sdpa] expected no softcap with head dim {} > {}, got softcap {}", D, max_dim,
               softcap);
    // The scores of dims [max_dim, D) in f32: query rows of one kv head side by side. [B, Hkv, G * Lq, Lk]
    Tensor qr = f32_contiguous(q.slice(3, max_dim, D)).view({B, Hkv, (Hq / Hkv) * Lq, D - max_dim});
    Tensor kr = f32_contiguous(k.slice(3, max_dim, D));
    Tensor bias = affine(matmul(qr, kr, false, true).view({B, Hq, Lq, Lk}), scale);
    if (mask.bias.defined()) bias = add(bias, f32_contiguous(mask.bias).to(bias.device()));
    m.bias = bias;
    qs = q.slice(3, 0, max_dim);
    ks = k.slice(3, 0, max_dim);
  }
  if (Dv <= max_dim) return sdpa(qs, ks, v, scale, m, softcap);
  Tensor out = Tensor::empty({B, Hq, Lq, Dv}, q.dtype(), q.device());
  for (int64_t c0 = 0; c0 < Dv; c0 += max_dim) {
    const int64_t c1 = std::min(Dv, c0 + max_dim);
    Tensor part = out.slice(3, c0, c1);
    part.copy_from(sdpa(qs, ks, v.slice(3, c0, c1), scale, m, softcap));
  }
  return out;
}

}  // namespace tern::ops
