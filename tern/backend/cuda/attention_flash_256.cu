// Tensor-core attention instances for head dim 256 (bf16 and f16): flash prefill and flash-decoding.
#include "tern/backend/cuda/flash_launch.cuh"

namespace tern::cuda {

void run_flash_256(Dtype dt, const SdpaParams& p, cudaStream_t s) { run_flash<256, 32>(dt, p, s); }

void run_decode_256(Dtype dt, const SdpaParams& p, int n_splits, float* workspace, unsigned* counters, cudaStream_t s) {
  run_decode<256, 16, 1>(dt, p, n_splits, workspace, counters, s);
}

int decode_blocks_per_sm_256(Dtype dt) { return decode_blocks_per_sm<256, 16, 1>(dt); }

}  // namespace tern::cuda
