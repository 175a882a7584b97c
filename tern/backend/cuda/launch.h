// Launchers: the host-callable functions the .cu files define around their kernels. Raw device
// pointers, sizes, dtypes and the engine stream only; the family .cpp files validate Tensors and
// call these. Every launcher checks the launch (TERN_CUDA_CHECK_LAUNCH).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "tern/backend/cuda/kernels/layout.h"
#include "tern/core/dtype.h"

namespace tern::cuda {

using kernels::Layout;

// copy.cu: dst[ld] = src[ls], element size 1, 2, 4 or 8 bytes; n elements in row-major order.
void launch_strided_copy(const void* src, const Layout& ls, void* dst, const Layout& ld, int64_t n, size_t elem,
                         cudaStream_t s);

// elementwise.cu. Unary-like op codes: the ops::UnaryOp values, then affine (p0 * x + p1) and
// softcap (p0 * tanh(x / p0)). out is contiguous with n elements.
constexpr int kOpAffine = 100;
constexpr int kOpSoftcap = 101;
void launch_binary(Dtype dt, int op, const void* a, const Layout& la, const void* b, const Layout& lb, void* out,
                   int64_t n, cudaStream_t s);
void launch_unary(Dtype dt, int op, const void* x, const Layout& lx, void* out, int64_t n, float p0, float p1,
                  cudaStream_t s);
// out = act(gate) * up, act an ops::UnaryOp code (silu, gelu_tanh, gelu_erf).
void launch_gated(Dtype dt, int act, const void* gate, const Layout& lg, const void* up, const Layout& lu, void* out,
                  int64_t n, cudaStream_t s);
void launch_cast(Dtype src_dt, const void* x, const Layout& lx, Dtype dst_dt, void* out, int64_t n, cudaStream_t s);
// out[r, c] += bias[c] for a contiguous [rows, cols] out (linear's bias).
void launch_add_bias(Dtype out_dt, void* out, Dtype bias_dt, const void* bias, int64_t rows, int64_t cols,
                     cudaStream_t s);

// gemv.cu: out[m, n] = x[m, :] . w[n, :] for bf16 x [M, K] and w [N, K], both contiguous, out
// contiguous [M, N] in bf16 or f32. Returns false (launching nothing) unless M <= 4, K % 8 == 0 and
// the pointers are 16-byte aligned.
bool launch_gemv(int64_t M, const void* x, const void* w, Dtype out_dt, void* out, int64_t N, int64_t K,
                 cudaStream_t s);

// norm.cu: x, out contiguous [rows, d]; w [d] (nullptr: no scale).
void launch_rms_norm(Dtype xt, const void* x, Dtype wt, const void* w, void* out, int64_t rows, int64_t d, float eps,
                     cudaStream_t s);

// rope.cu: x, out contiguous [B, H, L, D]; pos [L] or [B, L] (per_batch) of pos_dt (i32/i64);
// inv_freq [rot / 2] on the device.
void launch_rope(Dtype dt, const void* x, void* out, int64_t B, int64_t H, int64_t L, int64_t D, Dtype pos_dt,
                 const void* pos, bool per_batch, const float* inv_freq, int64_t rot, float attn_scale,
                 cudaStream_t s);

// reduce.cu: x viewed as contiguous [outer, n, inner], reduced over n; out [outer, inner] (softmax:
// [outer, n, inner]). op: ops::ReduceOp value.
void launch_softmax(Dtype dt, const void* x, void* out, int64_t outer, int64_t n, int64_t inner, bool log,
                    cudaStream_t s);
void launch_reduce(Dtype dt, int op, const void* x, void* out, int64_t outer, int64_t n, int64_t inner,
                   cudaStream_t s);
// workspace: argmax_workspace_bytes(outer * inner, n) bytes (0: none needed).
size_t argmax_workspace_bytes(int64_t lines, int64_t n);
void launch_argmax(Dtype dt, const void* x, int32_t* out, int64_t outer, int64_t n, int64_t inner, void* workspace,
                   cudaStream_t s);
// values [outer, k, inner] in dt, indices [outer, k, inner] i32; sorted descending, ties lower index.
void launch_topk(Dtype dt, const void* x, void* values, int32_t* indices, int64_t outer, int64_t n, int64_t inner,
                 int64_t k, cudaStream_t s);

// index.cu: out[i, :] = table[ids[i], :] converted; an id outside [0, V) writes zeros and sets *bad.
void launch_embedding(Dtype table_dt, const void* table, int64_t V, int64_t D, Dtype id_dt, const void* ids,
                      int64_t n_ids, Dtype out_dt, void* out, int32_t* bad, cudaStream_t s);
// table[ids[i], :] = rows[i, :] for contiguous table [V, D] and rows [n_ids, D] of dtype dt; ids
// outside [0, V) write nothing.
void launch_scatter_rows(Dtype dt, void* table, int64_t V, int64_t D, Dtype id_dt, const void* ids, int64_t n_ids,
                         const void* rows, cudaStream_t s);

// attention: one problem of softmax(q k^T * scale [softcap] + mask) v. q/k/v strides are (b, h, l);
// the last dim is contiguous. out is contiguous [B, Hq, Lq, Dv].
struct SdpaParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  int64_t B = 0, Hq = 0, Hkv = 0, Lq = 0, Lk = 0, D = 0, Dv = 0;
  int64_t q_stride[3] = {}, k_stride[3] = {}, v_stride[3] = {};
  float scale = 1.0f, softcap = 0.0f;
  bool causal = true;
  int64_t q_offset = 0, window = 0;
  const int32_t* kv_len = nullptr;  // [B] on the device, or nullptr
  const float* bias = nullptr;      // f32, broadcast by bias_stride (b, h, i, j; 0 for broadcast dims)
  int64_t bias_stride[4] = {};
};
// attention_rows.cu: any shape and dtype; one block per (query row, key split). workspace holds
// n_splits * B * Hq * Lq * (Dv + 2) floats when n_splits > 1.
void launch_sdpa_rows(Dtype dt, const SdpaParams& p, int n_splits, float* workspace, cudaStream_t s);
// attention_flash*.cu: whether the tensor-core kernels handle a problem (bf16/f16, D == Dv in
// {64, 128, 256}, no bias, 16-byte aligned rows).
bool flash_eligible(Dtype dt, const SdpaParams& p);
// Tensor-core prefill (flash_eligible problems).
void launch_sdpa_flash(Dtype dt, const SdpaParams& p, cudaStream_t s);
// Tensor-core flash-decoding (flash_eligible problems with (Hq / Hkv) * Lq <= 16): one block per
// (key split, kv head, batch row); workspace as for launch_sdpa_rows when n_splits > 1.
void launch_sdpa_decode(Dtype dt, const SdpaParams& p, int n_splits, float* workspace, cudaStream_t s);

}  // namespace tern::cuda
