// Launchers of the quantized KV kernels: encode, decode, and the fused decode attention with its combine.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "tern/backend/cuda/dispatch.cuh"
#include "tern/backend/cuda/kernels/kv_quant_attention_mma.cuh"
#include "tern/backend/cuda/kv_quant_launch.h"
#include "tern/backend/cuda/launch_kernel.cuh"
#include "tern/backend/cuda/runtime/check.h"

namespace tern::cuda {

void launch_kv_encode(Dtype dt, const KVEncodeJob* jobs, int count, int64_t B, int64_t H, int64_t L,
                      const TurboTables& t, cudaStream_t s) {
  // A block a row, a warp a group (kernels::kv_encode_by_group) or a warp a row (kernels::kv_encode_by_row):
  // enough blocks for the largest of the two jobs.
  constexpr int kThreads = 128;
  const int64_t rows = L * B * H;
  int64_t blocks = 1;
  for (int i = 0; i < count; ++i) {
    const kernels::KVCodecArgs& c = jobs[i].c;
    const int64_t warps = kThreads / 32, groups = c.dim / c.group;
    const int64_t units = kernels::kv_encode_by_group(c) ? rows * groups
                          : kernels::kv_encode_by_row(c) ? rows
                                                         : rows * warps;
    blocks = std::max(blocks, (units + warps - 1) / warps);
  }
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    launch_kernel(kernels::kv_encode_kernel<T>, dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(count)),
                  kThreads, 0, s, jobs[0], jobs[count - 1], B, H, rows, t);
  });
}

void launch_kv_decode(Dtype dt, const uint8_t* rows, int64_t S, int64_t B, int64_t H, void* out, int64_t out_len,
                      const KVCodecArgs& c, const TurboTables& t, bool unrotate, cudaStream_t s) {
  const int64_t n = S * B * H;
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    // A warp a row for head dims 32 W (W a power of two up to 16) when out holds W-element vectors.
    auto rows_kernel = [&](auto w) {
      constexpr int W = decltype(w)::value;
      if (c.dim != 32 * W || reinterpret_cast<uintptr_t>(out) % (W * sizeof(T)) != 0) return false;
      const auto blocks = static_cast<unsigned>((n + kernels::kKVDecodeRows - 1) / kernels::kKVDecodeRows);
      launch_kernel(kernels::kv_decode_rows_kernel<T, W>, blocks, kernels::kKVDecodeRows * 32, 0, s, rows, S, B, H,
                    static_cast<T*>(out), out_len, c, t, unrotate);
      return true;
    };
    using std::integral_constant;
    if (rows_kernel(integral_constant<int, 1>{}) || rows_kernel(integral_constant<int, 2>{}) ||
        rows_kernel(integral_constant<int, 4>{}) || rows_kernel(integral_constant<int, 8>{}) ||
        rows_kernel(integral_constant<int, 16>{}))
      return;
    launch_kernel(kernels::kv_decode_kernel<T>, static_cast<unsigned>(n), 128, 0, s, rows, S, B, H,
                  static_cast<T*>(out), out_len, c, t, unrotate);
  });
}

int kv_attention_heads_per_block(int64_t D) {
  switch (D) {
    case 32: return kernels::kv_attn_heads<1>();
    case 64: return kernels::kv_attn_heads<2>();
    case 128: return kernels::kv_attn_heads<4>();
    case 256: return kernels::kv_attn_heads<8>();
    default: return kernels::kv_attn_heads<16>();
  }
}

namespace {

template <typename T, int EPL>
void launch_attention(const KVAttnLaunch& p, const TurboTables& t, int n_splits, float* workspace, cudaStream_t s) {
  constexpr int GC = kernels::kv_attn_heads<EPL>();
  const int64_t G = p.Hq / p.Hkv;
  const KVAttnArgs a = kv_attn_args(p, workspace, n_splits, static_cast<int>((G + GC - 1) / GC));
  const dim3 grid(static_cast<unsigned>(n_splits), static_cast<unsigned>(p.Hkv * a.n_head_chunks),
                  static_cast<unsigned>(p.B));
  launch_kernel(kernels::kv_decode_attention_kernel<T, EPL>, grid, kernels::kKVAttnWarps * 32, 0, s, a, t);
  const int64_t rows = p.B * p.Hq;
  launch_kernel(kernels::kv_attention_combine_kernel<T>, static_cast<unsigned>(rows), 128, 0, s, workspace, n_splits,
                rows, 32 * EPL, p.vc.kind == 2, t, static_cast<T*>(p.out));
}

}  // namespace

void launch_kv_decode_attention(Dtype dt, const KVAttnLaunch& p, const TurboTables& t, int n_splits, float* workspace,
                                cudaStream_t s) {
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    switch (p.kc.dim) {
      case 32: launch_attention<T, 1>(p, t, n_splits, workspace, s); return;
      case 64: launch_attention<T, 2>(p, t, n_splits, workspace, s); return;
      case 128: launch_attention<T, 4>(p, t, n_splits, workspace, s); return;
      case 256: launch_attention<T, 8>(p, t, n_splits, workspace, s); return;
      default: launch_attention<T, 16>(p, t, n_splits, workspace, s); return;  // 512 (checked by the caller)
    }
  });
}

bool kv_mma_attention_supported(Dtype dt, const KVAttnLaunch& p) {
  const int D = p.kc.dim;
  const bool aligned = [&] {
    for (const auto& [rows, bytes] : {std::pair{p.k_rows, p.kc.row_bytes}, std::pair{p.v_rows, p.vc.row_bytes}})
      if (bytes % 4 != 0 || reinterpret_cast<uintptr_t>(rows) % 4 != 0) return false;
    return true;
  }();
  // The codec pairs run_kv_mma instantiates.
  const bool affine = p.kc.kind == 0 && p.vc.kind == 0 && p.kc.bits == p.vc.bits && (p.kc.bits == 8 || p.kc.bits == 4);
  // TurboQuant keys: int8 (kind 1) or rotated of 4 or 3 bits (kind 2).
  const bool turbo_keys = (p.kc.kind == 1 && p.kc.bits == 8) || (p.kc.kind == 2 && (p.kc.bits == 4 || p.kc.bits == 3));
  const bool turbo = turbo_keys && p.vc.kind == 2 && (p.vc.bits == 2 || p.vc.bits == 3 || p.vc.bits == 4 || p.vc.bits == 8);
  return dt == Dtype::bf16 && p.S < (int64_t{1} << 30) && (D == 64 || D == 128 || D == 256) && p.vc.dim == D && (affine || turbo) && p.Hkv > 0 &&
         p.Hq % p.Hkv == 0 && p.Hq / p.Hkv <= 16 && aligned;
}

void launch_kv_prefix_attention(const KVAttnLaunch& p, const TurboTables& t, int n_splits, float* workspace,
                                cudaStream_t s) {
  if (p.kc.dim == 64) launch_kv_prefix_attention_64(p, t, n_splits, workspace, s);
  else launch_kv_prefix_attention_128(p, t, n_splits, workspace, s);
}

void launch_kv_attention_combine(Dtype dt, const float* workspace, int n_splits, int64_t rows, int D,
                                 bool rotate_back, const TurboTables& t, void* out, cudaStream_t s) {
  dispatch_float(dt, [&](auto tag) {
    using T = decltype(tag);
    launch_kernel(kernels::kv_attention_combine_kernel<T>, static_cast<unsigned>(rows), 128, 0, s, workspace, n_splits,
                  rows, D, rotate_back, t, static_cast<T*>(out));
  });
}

int kv_mma_blocks_per_sm(const KVAttnLaunch& p) {
  switch (p.kc.dim) {
    case 64: return kv_mma_blocks_per_sm_64(p);
    case 128: return kv_mma_blocks_per_sm_128(p);
    default: return kv_mma_blocks_per_sm_256(p);
  }
}

void launch_kv_mma_attention(Dtype dt, const KVAttnLaunch& p, const TurboTables& t, int n_splits, float* workspace,
                             cudaStream_t s) {
  static_assert(kKVMmaTileKeys == kernels::kKVTileKeys);
  switch (p.kc.dim) {
    case 64: launch_kv_mma_attention_64(dt, p, t, n_splits, workspace, s); return;
    case 128: launch_kv_mma_attention_128(dt, p, t, n_splits, workspace, s); return;
    default: launch_kv_mma_attention_256(dt, p, t, n_splits, workspace, s); return;
  }
}

}  // namespace tern::cuda
