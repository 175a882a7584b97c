// The by-value arguments of the quantized KV kernels: a packed row's codec and TurboQuant's value
// constants. Plain C++, shared by host launch code and device code.
#pragma once
#include <cstdint>

namespace tern::cuda::kernels {

// One packed row: [codes, codes_bytes][f16 per group][f16 per group (affine bias / turbo zero point)].
struct KVCodecArgs {
  int kind = 0;  // 0 affine, 1 turbo key, 2 turbo value (rotated, codebook-coded)
  int bits = 8, group = 64, dim = 0, row_bytes = 0, codes_bytes = 0;
};

// TurboQuant value constants: codebook, bucket bounds (midpoints), sign bits (bit i: element i
// negated) and 1/sqrt(dim), as computed on the host.
struct TurboTables {
  float book[256] = {};
  float bounds[255] = {};
  uint32_t signs[16] = {};
  float norm = 1.0f;
  int n_bounds = 0;
};

}  // namespace tern::cuda::kernels
