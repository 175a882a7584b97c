// Tensor-core fused decode attention over packed KV rows for head dim 256 (bf16 queries).
#include "tern/backend/cuda/kv_quant_mma_launch.cuh"

namespace tern::cuda {

void launch_kv_mma_attention_256(Dtype dt, const KVAttnLaunch& p, const TurboTables& t, int n_splits, float* workspace,
                                cudaStream_t s) {
  (void)dt;  // bf16 queries (kv_mma_attention_supported)
  run_kv_mma<256>(p, t, n_splits, workspace, s);
}

int kv_mma_blocks_per_sm_256(const KVAttnLaunch& p) { return kv_mma_blocks_per_sm<256>(p); }

}  // namespace tern::cuda
