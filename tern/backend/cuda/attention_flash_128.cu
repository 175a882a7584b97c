// Tensor-core attention instances for head dim 128 (bf16 and f16): flash prefill and flash-decoding.
#include "tern/backend/cuda/flash_launch.cuh"
#include "tern/backend/cuda/runtime/context.h"

namespace tern::cuda {

// Two m-tiles per warp (blocks of 128 query rows) halve the shared-memory reads per product and give
// each warp twice the independent work, but half the blocks: they pay once the grid fills the GPU three
// times over (H200, causal: 8B heads 165 vs 200 us at 2,048 tokens; 0.6B heads 125 vs 105 us at 2,048,
// where the grid is 256 blocks, and 990 vs 1,310 us at 8,192).
void run_flash_128(Dtype dt, const SdpaParams& p, cudaStream_t s) {
  const int64_t wide_blocks = p.B * p.Hq * ((p.Lq + kernels::flash_rows<2>() - 1) / kernels::flash_rows<2>());
  if (wide_blocks >= 3 * device_props().multiProcessorCount) {
    run_flash<128, 64, 128, 2>(dt, p, s);
  } else {
    run_flash<128, 64>(dt, p, s);
  }
}

void run_decode_128(Dtype dt, const SdpaParams& p, int n_splits, float* workspace, unsigned* counters, cudaStream_t s) {
  run_decode<128, 16, 2>(dt, p, n_splits, workspace, counters, s);
}

int decode_blocks_per_sm_128(Dtype dt) { return decode_blocks_per_sm<128, 16, 2>(dt); }

}  // namespace tern::cuda
