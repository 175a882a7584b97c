// Tensor-core attention instances for head dim 128 (bf16 and f16): flash prefill and flash-decoding.
#include "tern/backend/cuda/flash_launch.cuh"

namespace tern::cuda {

void run_flash_128(Dtype dt, const SdpaParams& p, cudaStream_t s) { run_flash<128, 64>(dt, p, s); }

void run_decode_128(Dtype dt, const SdpaParams& p, int n_splits, float* workspace, unsigned* counters, cudaStream_t s) {
  run_decode<128, 16, 2>(dt, p, n_splits, workspace, counters, s);
}

int decode_blocks_per_sm_128(Dtype dt) { return decode_blocks_per_sm<128, 16, 2>(dt); }

}  // namespace tern::cuda
