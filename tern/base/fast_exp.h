// exp_f32: e^x in f32 within about 2 ulp, branch-free so that loops calling it vectorise (the CPU
// kernels' softmax and activations, the sampler's whole-row passes). GCC vectorises such loops only
// without trapping math: the sampler's sources are built with -fno-trapping-math (CMakeLists.txt).
#pragma once
#include <bit>
#include <cstdint>

namespace tern {

// exp(x) in f32 within ~2 ulp (Cephes polynomial), branch-free so loops calling it vectorise.
// Handles +-inf, NaN and subnormal results.
inline float exp_f32(float x) {
  float xc = x > 88.8f ? 88.8f : (x < -104.0f ? -104.0f : x);
  xc = xc == xc ? xc : 0.0f;
  float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  int32_t ni = static_cast<int32_t>(n);
  int32_t n1 = ni / 2, n2 = ni - n1;  // two factors keep 2^n normal over [-150, 128]
  float s1 = std::bit_cast<float>((n1 + 127) << 23);
  float s2 = std::bit_cast<float>((n2 + 127) << 23);
  float res = y * s1 * s2;
  return x == x ? res : x;
}

}  // namespace tern
