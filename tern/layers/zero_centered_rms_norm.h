// The zero-centred RMSNorm of Qwen3.5 (HF's RMSNormZeroCentered): the checkpoint stores w and the norm
// scales by (1 + w), here folded into an ordinary RMSNorm weight once at load, in f32.
#pragma once
#include "tern/layers/rms_norm.h"
#include "tern/ops/elementwise.h"

namespace tern {

// Loads name.weight [dim] as the RMSNorm weight 1 + w (f32, on the loader's device).
inline RMSNorm load_zero_centered_rms_norm(const WeightLoader& w, const std::string& name, int64_t dim, float eps) {
  Tensor raw = w.get(name + ".weight", {dim});
  if (raw.dtype() != Dtype::f32) raw = ops::cast(raw, Dtype::f32);
  return RMSNorm{ops::affine(raw, 1.0f, 1.0f), eps};
}

}  // namespace tern
