// TurboQuant's building blocks for KV rows (no QJL stage): keys as signed int8 per group of 32 with
// f16 scale and zero point; values rotated by a normalised Walsh-Hadamard transform after fixed +-1
// signs, scaled per group of 32 by their RMS (f16) and coded with the Lloyd-Max codebook of N(0,1).
#pragma once
#include <cstdint>
#include <vector>

namespace tern::turboquant {

constexpr int64_t kGroup = 32;

// The Lloyd-Max codebook of N(0,1) for bits in {1, 2, 3, 4, 8}: 2^bits ascending centroids.
const std::vector<float>& codebook(int bits);
// The fixed sign vector (+1/-1) for head_dim in {32, 64, 128, 256, 512}.
const std::vector<float>& signs(int64_t dim);

// x[dim] <- H (signs * x) with H the normalised Sylvester-Hadamard matrix (orthogonal, symmetric).
void rotate(float* x, int64_t dim);
// The inverse: x[dim] <- signs * (H x).
void unrotate(float* x, int64_t dim);

// Keys: [int8 codes x dim][f16 scale x dim/32][f16 zero point x dim/32].
int64_t key_row_bytes(int64_t dim);
void encode_key(const float* x, int64_t dim, uint8_t* out);
void decode_key(const uint8_t* in, int64_t dim, float* x);

// Values, already in the rotated domain: [bits-wide codebook indices, bit-packed][f16 RMS x dim/32].
int64_t value_row_bytes(int bits, int64_t dim);
void encode_rotated_value(const float* r, int64_t dim, int bits, uint8_t* out);
void decode_rotated_value(const uint8_t* in, int64_t dim, int bits, float* r);
// Values in their own domain (dim <= 512): rotate, then encode_rotated_value; decode, then unrotate.
void encode_value(const float* x, int64_t dim, int bits, uint8_t* out);
void decode_value(const uint8_t* in, int64_t dim, int bits, float* x);

}  // namespace tern::turboquant
