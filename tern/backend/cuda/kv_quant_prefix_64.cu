// The tiled read of a long window over packed KV rows for head dim 64 (bf16 queries): its stored part.
#include "tern/backend/cuda/kv_quant_mma_launch.cuh"

namespace tern::cuda {

void launch_kv_prefix_attention_64(const KVAttnLaunch& p, const TurboTables& t, int n_splits, float* workspace,
                                   cudaStream_t s) {
  run_kv_prefix<64>(p, t, n_splits, workspace, s);
}

}  // namespace tern::cuda
