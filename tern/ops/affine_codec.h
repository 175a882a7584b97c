// The affine (MLX-style) row codec of quantized KV storage: a row of dim values cut into groups of G;
// per group an f16 scale = (max - min) / (2^bits - 1) and an f16 bias = min, codes
// q = round((x - bias) / scale) in [0, 2^bits) bit-packed (4-bit: two per byte, element 0 low).
#pragma once
#include <cstdint>

namespace tern {

// One row's codec: dim values -> row_bytes(dim) bytes laid out [codes][f16 scales][f16 biases].
struct AffineRowCodec {
  int bits = 8;
  int64_t group = 64;
  int64_t dim = 0;

  static int64_t row_bytes(int bits, int64_t group, int64_t dim);
  int64_t row_bytes() const { return row_bytes(bits, group, dim); }
  void encode(const float* x, uint8_t* out) const;
  // x[i] = fma(code_i, scale, bias) in f32 (the same bits with and without the AVX2 path).
  void decode(const uint8_t* in, float* x) const;
};

}  // namespace tern
