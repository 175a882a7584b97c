// Tensor-core attention instances for head dim 128 (bf16 and f16): flash prefill and flash-decoding.
#include <cstdlib>
#include <cstring>

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

// The decode kernel's key tile and pipeline depth, two stages either way. Grids of at most 16 blocks per
// kv head in one wave at one block an SM (batch 1 at Qwen3's 4-8 kv heads) take 32-key tiles: 143 KB of
// shared memory, one block an SM, twice the bytes in flight a warp (H200, 2026-12-04: Qwen3-8B at 32k,
// 175.5 against 166.0 tok/s; 16-key tiles in 3 or 4 stages: 161.3 and 174.7). Larger grids keep 16-key
// tiles (74 KB, three blocks an SM) so batched steps stay in one wave, and so do GPUs whose blocks cannot
// have 143 KB (sm_86/89: 99 KB), and so do cluster-merged splits (64 keys a split: one 16-key tile a warp).
// TERN_CUDA_DECODE_TILE=16x2|32x2 forces one where it fits (for benchmarks and tests).
namespace {
bool wide_decode_tiles(const SdpaParams& p) {
  const cudaDeviceProp& dev = device_props();
  if (dev.sharedMemPerBlockOptin < DecodeKernel<__nv_bfloat16, 128, 32, 2, 128>::smem) return false;
  if (const char* e = std::getenv("TERN_CUDA_DECODE_TILE")) return std::strcmp(e, "32x2") == 0;
  return !p.cluster_splits && p.B * p.Hkv * 16 <= dev.multiProcessorCount;
}
}  // namespace

void run_decode_128(Dtype dt, const SdpaParams& p, int n_splits, float* workspace, unsigned* counters, cudaStream_t s) {
  if (wide_decode_tiles(p)) {
    run_decode<128, 32, 2>(dt, p, n_splits, workspace, counters, s);
  } else {
    run_decode<128, 16, 2>(dt, p, n_splits, workspace, counters, s);
  }
}

int decode_blocks_per_sm_128(Dtype dt, const SdpaParams& p) {
  return wide_decode_tiles(p) ? decode_blocks_per_sm<128, 32, 2>(dt) : decode_blocks_per_sm<128, 16, 2>(dt);
}

}  // namespace tern::cuda
