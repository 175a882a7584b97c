// The tiled read of a long window over packed KV rows for head dim 128 (bf16 queries): its stored part.
#include "tern/backend/cuda/kv_quant_mma_launch.cuh"

namespace tern::cuda {

void launch_kv_prefix_attention_128(const KVAttnLaunch& p, const TurboTables& t, int n_splits, float* workspace,
                                   cudaStream_t s) {
  run_kv_prefix<128>(p, t, n_splits, workspace, s);
}

}  // namespace tern::cuda
