// Tensor-core fused decode attention over packed KV rows for head dim 128 (bf16 and f16 queries).
#include "tern/backend/cuda/kv_quant_mma_launch.cuh"

namespace tern::cuda {

void launch_kv_mma_attention_128(Dtype dt, const KVAttnLaunch& p, const TurboTables& t, int n_splits, float* workspace,
                                cudaStream_t s) {
  run_kv_mma<128>(dt, p, t, n_splits, workspace, s);
}

}  // namespace tern::cuda
