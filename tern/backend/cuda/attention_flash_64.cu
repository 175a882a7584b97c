// Tensor-core attention instances for head dim 64 (bf16 and f16): flash prefill and flash-decoding.
#include "tern/backend/cuda/flash_launch.cuh"

namespace tern::cuda {

void run_flash_64(Dtype dt, const SdpaParams& p, cudaStream_t s) { run_flash<64, 64>(dt, p, s); }

void run_decode_64(Dtype dt, const SdpaParams& p, int n_splits, float* workspace, unsigned* counters, cudaStream_t s) {
  run_decode<64, 16, 2>(dt, p, n_splits, workspace, counters, s);
}

int decode_blocks_per_sm_64(Dtype dt) { return decode_blocks_per_sm<64, 16, 2>(dt); }

}  // namespace tern::cuda
