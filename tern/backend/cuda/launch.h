// Launchers: the host-callable functions the .cu files define around their kernels. Raw device
// pointers, sizes, dtypes and the engine stream only; the family .cpp files validate Tensors and
// call these. Every launch is checked where it is made (launch_kernel.cuh).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "tern/backend/cuda/kernels/index_args.h"
#include "tern/backend/cuda/kernels/layout.h"
#include "tern/backend/cuda/kernels/norm_rope_args.h"
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
// out[m, n] = act(x[m] . w[n]) * (x[m] . w[N + n]) in bf16 for w [2N, K] (gate rows over up rows), act
// a UnaryOp code (silu, gelu_tanh, gelu_erf); the same conditions and false otherwise.
bool launch_gemv_gated(int64_t M, int act, const void* x, const void* w, void* out, int64_t N, int64_t K,
                       cudaStream_t s);
// gemv_mma.cu: the same two products on tensor cores (sm_90) for 5 <= M <= 8 over weights of at most 2^23
// elements (up to 32 rows of any size with TERN_CUDA_MMA_GEMV=1), K % 32 == 0 and out 16-byte aligned too;
// false (nothing launched) otherwise.
bool launch_gemv_mma(int64_t M, const void* x, const void* w, Dtype out_dt, void* out, int64_t N, int64_t K,
                     cudaStream_t s);
bool launch_gemv_mma_gated(int64_t M, int act, const void* x, const void* w, void* out, int64_t N, int64_t K,
                           cudaStream_t s);

// norm.cu: x, out contiguous [rows, d]; w [d] (nullptr: no scale).
// RMSNorm of `rows` rows of d elements: row r of x at offset_of(rows_layout, r); with delta (contiguous
// [rows, d]) the row is x + delta, rounded and written to sum first. out (and sum) contiguous.
void launch_rms_norm(Dtype xt, const void* x, const Layout& rows_layout, const void* delta, void* sum, Dtype wt,
                     const void* w, void* out, int64_t rows, int64_t d, float eps, cudaStream_t s);

// delta.cu (gated DeltaNet), every operand contiguous. l2norm: x, out [rows, d] of dt.
void launch_l2norm(Dtype dt, const void* x, void* out, int64_t rows, int64_t d, float eps, cudaStream_t s);
// x, out [B, L, C], w [C, K], history [B, K-1, C] (updated in place), all f32.
void launch_causal_conv1d(const float* x, const float* w, float* history, float* out, int64_t B, int64_t L,
                          int64_t C, int64_t K, cudaStream_t s);
// The token-by-token gated delta rule (layouts as in ops::gated_delta_rule), Dk <= 256; state updated in
// place.
void launch_delta_recurrent(const float* q, const float* k, const float* v, const float* g, const float* beta,
                            float* state, float* out, int64_t B, int64_t L, int64_t Hk, int64_t Dk, int64_t Hv,
                            int64_t Dv, cudaStream_t s);
// The chunked gated delta rule, same operands; 1 <= chunk <= 64 positions per chunk, Dk <= 256. scratch
// holds delta_chunked_scratch(B, L, Hv, chunk) floats.
int64_t delta_chunked_scratch(int64_t B, int64_t L, int64_t Hv, int64_t chunk);
void launch_delta_chunked(const float* q, const float* k, const float* v, const float* g, const float* beta,
                          float* state, float* out, int64_t B, int64_t L, int64_t Hk, int64_t Dk, int64_t Hv,
                          int64_t Dv, int64_t chunk, float* scratch, cudaStream_t s);

// rope.cu: x, out contiguous [B, H, L, D]; pos [L] or [B, L] (per_batch) of pos_dt (i32/i64);
// inv_freq [rot / 2] on the device.
void launch_rope(Dtype dt, const void* x, void* out, int64_t B, int64_t H, int64_t L, int64_t D, Dtype pos_dt,
                 const void* pos, bool per_batch, const float* inv_freq, int64_t rot, float attn_scale,
                 cudaStream_t s);
// norm_rope.cu: the fused q/k norm and rotary embedding (kernels/norm_rope_args.h); wt the weights'
// dtype, pos_dt the positions' (i32/i64).
void launch_norm_rope(Dtype dt, Dtype wt, Dtype pos_dt, const kernels::NormRopeArgs& a, cudaStream_t s);

// reduce.cu: x viewed as contiguous [outer, n, inner], reduced over n; out [outer, inner] (softmax:
// [outer, n, inner]). op: ops::ReduceOp value.
// workspace: row_workspace_bytes(outer, n) bytes when inner == 1 (0: none needed).
size_t row_workspace_bytes(int64_t outer, int64_t n);
void launch_softmax(Dtype dt, const void* x, void* out, int64_t outer, int64_t n, int64_t inner, bool log,
                    void* workspace, cudaStream_t s);
void launch_reduce(Dtype dt, int op, const void* x, void* out, int64_t outer, int64_t n, int64_t inner,
                   void* workspace, cudaStream_t s);
// workspace: argmax_workspace_bytes(outer * inner, n) bytes (0: none needed).
size_t argmax_workspace_bytes(int64_t lines, int64_t n);
void launch_argmax(Dtype dt, const void* x, int32_t* out, int64_t outer, int64_t n, int64_t inner, void* workspace,
                   cudaStream_t s);
// ops::token_logprobs of rows [rows, n] in dt: one block a row.
void launch_token_logprobs(Dtype dt, const void* x, int64_t rows, int64_t n, const int32_t* targets, float* out,
                           cudaStream_t s);
// ops::greedy_choice of f32 rows [lines, n]; workspace: greedy_workspace_bytes(lines, n) bytes (0: none needed).
size_t greedy_workspace_bytes(int64_t lines, int64_t n);
void launch_greedy_choice(const float* x, int64_t lines, int64_t n, void* workspace, int32_t* ids, float* logprobs,
                          cudaStream_t s);
// values [outer, k, inner] in dt, indices [outer, k, inner] i32; sorted descending (NaN first), ties
// lower index. workspace: topk_workspace_bytes(outer, n, inner, k) bytes (0: none needed).
size_t topk_workspace_bytes(int64_t outer, int64_t n, int64_t inner, int64_t k);
void launch_topk(Dtype dt, const void* x, void* values, int32_t* indices, int64_t outer, int64_t n, int64_t inner,
                 int64_t k, void* workspace, cudaStream_t s);
// ops::draw_index over f32 logits [n] whose max is *max_logit (device): *out = the drawn id (n - 1 for a
// max that is not finite). workspace: draw_workspace_bytes(n) bytes.
size_t draw_workspace_bytes(int64_t n);
// u_dev: u read on the device instead of u (nullptr: none; a u outside [0, 1) draws n - 1).
void launch_draw_index(const float* logits, int64_t n, const float* max_logit, float u, const float* u_dev,
                       void* workspace, int32_t* out, cudaStream_t s);
// ops::top_p_mask over f32 logits [n] whose max is *max_logit (device): fraction is
// top_p_fraction(top_p) (tern/base/draw_weight.h), use_p false for top_p >= 1. workspace:
// top_p_workspace_bytes(n) bytes.
size_t top_p_workspace_bytes(int64_t n);
void launch_top_p_mask(const float* logits, int64_t n, const float* max_logit, uint64_t fraction, bool use_p,
                       float min_gap, void* workspace, float* out, cudaStream_t s);

// index.cu: out[i, :] = table[ids[i], :] converted; an id outside [0, V) writes zeros and sets *bad.
void launch_embedding(Dtype table_dt, const void* table, int64_t V, int64_t D, Dtype id_dt, const void* ids,
                      int64_t n_ids, Dtype out_dt, void* out, int32_t* bad, cudaStream_t s);
// The first `count` (1 or 2) writes of w (kernels/index_args.h) over batch B in one launch.
void launch_write_positions(size_t elem, int count, const kernels::PositionWrites& w, int64_t B,
                            const int32_t* positions, cudaStream_t s);

// moe.cu. Decode: out [T, H] (f32, or bf16 with out_bf16) = sum_j weights[t, j] * down_e(act(gate_e(x_t)) * up_e(x_t)),
// e = experts[t, j], for bf16 x [T, H], gate_up [E, 2I, H] and down [E, H, I] (contiguous), act SwiGLU or (geglu)
// GeGLU-tanh; h is [T * k, I] f32 scratch. Returns false (launching nothing) unless H and I are multiples of 8 and the
// pointers 16-byte aligned.
bool launch_moe_decode(const void* x, const int32_t* experts, const float* weights, int64_t T, int64_t k,
                       const void* gate_up, const void* down, int64_t E, int64_t H, int64_t I, bool geglu, float* h,
                       void* out, bool out_bf16, cudaStream_t s);
// Counting sort of the P = T * k pairs by expert: counts [E] (zeroed here), offsets [E] and cursor [E]
// (exclusive prefix sums), rows [P] (the token of each sorted slot; only the first sum(counts) are
// written) and pos [P] (each pair's slot, -1 for an id outside [0, E)).
void launch_moe_sort(const int32_t* experts, int64_t P, int64_t k, int64_t E, int32_t* counts, int32_t* offsets,
                     int32_t* cursor, int32_t* rows, int32_t* pos, cudaStream_t s);
// out [T, H] (f32, or bf16 with out_bf16) = sum_j weights[t, j] * y[pos[t, j]] over slots with pos >= 0;
// y [n_sorted, H] f32.
void launch_moe_combine(const float* y, const int32_t* pos, const float* weights, int64_t T, int64_t k, int64_t H,
                        void* out, bool out_bf16, cudaStream_t s);
// The device buffers of launch_moe_grouped for P = T * k pairs: counts, offsets, cursor [E]; rows, pos
// [P] (as launch_moe_sort); h [P, I] and y [P, H] f32.
struct MoeGroupedScratch {
  int32_t *counts, *offsets, *cursor, *rows, *pos;
  float *h, *y;
};
// The same product as launch_moe_decode for any T without a host sync: the pairs sorted by expert on
// the device (launch_moe_sort), grouped products per expert reading each routed expert's weights once
// per 4 of its slots, and the weighted combine. Returns false (launching nothing) unless H and I are
// multiples of 8, E <= 65535 and the pointers 16-byte aligned.
bool launch_moe_grouped(const void* x, const int32_t* experts, const float* weights, int64_t T, int64_t k,
                        const void* gate_up, const void* down, int64_t E, int64_t H, int64_t I, bool geglu,
                        const MoeGroupedScratch& w, void* out, bool out_bf16, cudaStream_t s);
// A mixture-of-experts sub-layer's entry for M <= 4 bf16 rows [M, H] in one launch: sum = x + delta
// (delta may be null: no sum is written), normed = rms_norm(sum) * weight (weight may be null), logits
// [M, E] f32 = normed router^T, then launch_moe_route's choice into weights / experts [M, k]. done: a
// device counter at zero (left at zero). Returns false (nothing launched) unless M <= 4, E <= 256,
// k <= 32, H % 8 == 0 and the bf16 pointers are 16-byte aligned.
bool launch_moe_norm_route(const void* x, const void* delta, void* sum, const void* weight, float eps,
                           const void* router, int64_t M, int64_t E, int64_t H, void* normed, float* logits, int64_t k,
                           bool renormalize, float* weights, int32_t* experts, unsigned* done, cudaStream_t s);
// The router's softmax top-k: logits [T, E] f32 contiguous (E <= 1024), k <= min(E, 32); weights [T, k]
// f32 and experts [T, k] i32 out.
void launch_moe_route(const float* logits, int64_t T, int64_t E, int64_t k, bool renormalize, float* weights,
                      int32_t* experts, cudaStream_t s);
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
  int64_t fresh_keys = -1;          // ops::AttentionMask::fresh_keys
  const float* bias = nullptr;      // f32, broadcast by bias_stride (b, h, i, j; 0 for broadcast dims)
  int64_t bias_stride[4] = {};
  // Flash-decoding only: the key splits of each kv head run as one thread-block cluster and merge
  // through distributed shared memory (2 <= n_splits <= kDecodeClusterSplits, value dims <= 128, sm_90).
  bool cluster_splits = false;
  // The tensor-core prefill only (Dv <= 256): write the rows' (acc, max, sum) partial [B Hq Lq][Dv + 2]
  // here instead of out (kernels::FlashArgs::partial).
  float* partial = nullptr;
};
constexpr int kDecodeClusterSplits = 8;
// The shape and mask fields every attention kernel's arguments share (kernels::RowsArgs, FlashArgs,
// DecodeArgs), copied from p.
template <typename A>
void copy_sdpa_common(A& a, const SdpaParams& p) {
  a.q = p.q, a.k = p.k;
  a.Hq = p.Hq, a.Hkv = p.Hkv, a.Lq = p.Lq, a.Lk = p.Lk;
  for (int i = 0; i < 3; ++i) a.qs[i] = p.q_stride[i], a.ks[i] = p.k_stride[i], a.vs[i] = p.v_stride[i];
  a.scale = p.scale, a.softcap = p.softcap;
  a.causal = p.causal;
  a.q_offset = p.q_offset, a.window = p.window;
  a.kv_len = p.kv_len;
}
// attention_rows.cu: any shape and dtype; one block per (query row, key split). workspace holds
// n_splits * B * Hq * Lq * (Dv + 2) floats when n_splits > 1.
void launch_sdpa_rows(Dtype dt, const SdpaParams& p, int n_splits, float* workspace, cudaStream_t s);
// attention_flash*.cu: whether the tensor-core kernels handle a problem (bf16/f16, D == Dv in
// {64, 128, 256, 512}, no bias, 16-byte aligned rows; 512 only with Lq >= 16 or <= 16 rows per kv head).
bool flash_eligible(Dtype dt, const SdpaParams& p);
// Tensor-core prefill (flash_eligible problems).
void launch_sdpa_flash(Dtype dt, const SdpaParams& p, cudaStream_t s);
// Tensor-core flash-decoding (flash_eligible problems with (Hq / Hkv) * Lq <= 16): one block per
// (key split, kv head, batch row); workspace as for launch_sdpa_rows when n_splits > 1 (n_splits <= 64).
// counters: B * Hkv device counters at zero (left at zero), with which the last split of each kv head
// to finish merges the partials; nullptr: a separate combine launch merges them. With p.cluster_splits
// neither is used: the splits merge inside their cluster.
void launch_sdpa_decode(Dtype dt, const SdpaParams& p, int n_splits, float* workspace, unsigned* counters,
                        cudaStream_t s);
// How many flash-decoding blocks of this problem's head dim and dtype one SM holds at once.
int sdpa_decode_blocks_per_sm(Dtype dt, const SdpaParams& p);

}  // namespace tern::cuda
