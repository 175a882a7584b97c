// Dispatch of the tensor-core attention kernels by head dim, and the problems they accept.
#include <cstdint>

#include "tern/backend/cuda/flash_launch.cuh"

namespace tern::cuda {
namespace {
bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
}  // namespace

bool flash_eligible(Dtype dt, const SdpaParams& p) {
  if (dt != Dtype::bf16 && dt != Dtype::f16) return false;
  if (p.bias || p.D != p.Dv) return false;
  if (p.D != 64 && p.D != 128 && p.D != 256 && p.D != 512) return false;
  if ((p.Lq + kernels::flash_rows<1>() - 1) / kernels::flash_rows<1>() > 65535)
    return false;  // the grid's y dim holds the query blocks
  if (!aligned16(p.q) || !aligned16(p.k) || !aligned16(p.v) || !aligned16(p.out)) return false;
  // A dim of size 1 is never stepped, so its stride (whatever a view left there) does not matter.
  const int64_t q_size[3] = {p.B, p.Hq, p.Lq}, kv_size[3] = {p.B, p.Hkv, p.Lk};
  for (int i = 0; i < 3; ++i) {
    if ((q_size[i] > 1 && p.q_stride[i] % 8) || (kv_size[i] > 1 && (p.k_stride[i] % 8 || p.v_stride[i] % 8)))
      return false;
  }
  return true;
}

void launch_sdpa_flash(Dtype dt, const SdpaParams& p, cudaStream_t s) {
  switch (p.D) {
    case 64: run_flash_64(dt, p, s); break;
    case 128: run_flash_128(dt, p, s); break;
    case 256:
      run_flash_256(dt, p, s);
      break;
    default:
      run_flash_512(dt, p, s);
      break;
  }
}

void launch_sdpa_decode(Dtype dt, const SdpaParams& p, int n_splits, float* workspace, unsigned* counters,
                        cudaStream_t s) {
  switch (p.D) {
    case 64:
      run_decode_64(dt, p, n_splits, workspace, counters, s);
      break;
    case 128:
      run_decode_128(dt, p, n_splits, workspace, counters, s);
      break;
    case 256:
      run_decode_256(dt, p, n_splits, workspace, counters, s);
      break;
    default:
      run_decode_512(dt, p, n_splits, workspace, counters, s);
      break;
  }
}

int sdpa_decode_blocks_per_sm(Dtype dt, const SdpaParams& p) {
  switch (p.D) {
    case 64:
      return decode_blocks_per_sm_64(dt);
    case 128:
      return decode_blocks_per_sm_128(dt, p);
    case 256:
      return decode_blocks_per_sm_256(dt);
    default:
      return decode_blocks_per_sm_512(dt);
  }
}

}  // namespace tern::cuda
