// Tensor-core prefill and flash-decoding for head dim 512 (Gemma 4's full layers, bf16 and f16): scores
// over all 512 dims, values in two 256-wide launches (a block's accumulators for 512 value dims would
// not fit its registers).
#include "tern/backend/cuda/flash_launch.cuh"

namespace tern::cuda {

void run_flash_512(Dtype dt, const SdpaParams& p, cudaStream_t s) { run_flash<512, 32, 256>(dt, p, s); }

void run_decode_512(Dtype dt, const SdpaParams& p, int n_splits, float* workspace, unsigned* counters, cudaStream_t s) {
  run_decode<512, 16, 1, 256>(dt, p, n_splits, workspace, counters, s);
}

int decode_blocks_per_sm_512(Dtype dt) { return decode_blocks_per_sm<512, 16, 1, 256>(dt); }

}  // namespace tern::cuda
