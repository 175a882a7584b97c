// Launchers of the quantized KV kernels (kv_quant.cu): raw device pointers, sizes, the codec and the
// engine stream; tern/backend/cuda/kv_quant.cpp validates the Tensors and calls these.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "tern/backend/cuda/kernels/kv_quant_args.h"
#include "tern/core/dtype.h"

namespace tern::cuda {

using kernels::KVAttnArgs;
using kernels::KVCodecArgs;
using kernels::TurboTables;

using kernels::KVEncodeJob;

// jobs[0..count) (count 1 or 2), each x [B, H, L, dim] of dt -> rows [L, B, H, row_bytes], in one launch;
// t: the tables of the (at most one) TurboQuant value codec among them.
void launch_kv_encode(Dtype dt, const KVEncodeJob* jobs, int count, int64_t B, int64_t H, int64_t L,
                      const TurboTables& t, cudaStream_t s);
// rows [S, B, H, row_bytes] -> positions [0, S) of out [B, H, out_len, dim] of dt (contiguous, out_len >= S).
void launch_kv_decode(Dtype dt, const uint8_t* rows, int64_t S, int64_t B, int64_t H, void* out, int64_t out_len,
                      const KVCodecArgs& c, const TurboTables& t, bool unrotate, cudaStream_t s);

// The fused decode attention (see ops::kv_decode_attention); D == Dv in {32, 64, 128, 256, 512}. With
// L > 1 (the tensor-core kernel only) it is a window read: L query positions per row after the S stored
// ones, with their L unquantized keys and values under the causal mask.
struct KVAttnLaunch {
  const void* q = nullptr;
  int64_t qs[2] = {}, qs_l = 0;
  int64_t L = 1;
  const uint8_t* k_rows = nullptr;
  const uint8_t* v_rows = nullptr;
  const void* k_new = nullptr;  // nullptr: no unquantized position
  const void* v_new = nullptr;
  int64_t kns[2] = {}, vns[2] = {}, kns_l = 0, vns_l = 0;
  const int32_t* lengths = nullptr;  // [B] stored positions row b attends to (clamped to S); nullptr: all S
  int64_t ring = 0;                  // > 0: row b skips stored slot lengths[b] % ring (ops::kv_decode_attention)
  void* out = nullptr;  // [B, Hq, L, D] contiguous, q's dtype
  int64_t B = 0, Hq = 0, Hkv = 0, S = 0;
  int64_t chunk = 1;  // keys per split: split i reads keys [i * chunk, (i + 1) * chunk) of S (+ 1 new)
  float scale = 1.0f, softcap = 0.0f;
  KVCodecArgs kc, vc;
  // A compiled step's store done by the tensor-core read's combine launch (kv_attention_combine_store_kernel):
  // encode jobs of the new keys and values ([store_B, store_H] rows each); store_B == 0: none.
  KVEncodeJob store[2];
  int64_t store_B = 0, store_H = 0;
};
// The kernels' arguments for p with `n_splits` key splits writing partials to workspace; n_head_chunks
// is the number of blocks one kv head's query heads take.
inline KVAttnArgs kv_attn_args(const KVAttnLaunch& p, float* workspace, int n_splits, int n_head_chunks) {
  KVAttnArgs a{};
  a.q = p.q;
  a.qs[0] = p.qs[0], a.qs[1] = p.qs[1], a.qs_l = p.qs_l;
  a.L = p.L;
  a.k_rows = p.k_rows, a.v_rows = p.v_rows;
  a.k_new = p.k_new, a.v_new = p.v_new;
  a.lengths = p.lengths;
  a.ring = p.ring;
  for (int i = 0; i < 2; ++i) a.kns[i] = p.kns[i], a.vns[i] = p.vns[i];
  a.kns_l = p.kns_l, a.vns_l = p.vns_l;
  a.partial = workspace;
  a.B = p.B, a.Hq = p.Hq, a.Hkv = p.Hkv, a.S = p.S;
  a.chunk = p.chunk;
  a.n_splits = n_splits;
  a.n_head_chunks = n_head_chunks;
  a.scale = p.scale, a.softcap = p.softcap;
  a.kc = p.kc, a.vc = p.vc;
  return a;
}

// Heads of one kv head's query group that one block serves, for head dim D.
int kv_attention_heads_per_block(int64_t D);
// workspace: n_splits * B * Hq * L * (D + 2) floats; n_splits * chunk must cover S (+ L new) keys.
void launch_kv_decode_attention(Dtype dt, const KVAttnLaunch& p, const TurboTables& t, int n_splits, float* workspace,
                                cudaStream_t s);

// The tensor-core version of the same read (kv_quant_attention_mma.cuh): bf16 queries, D in
// {64, 128, 256}, Hq / Hkv <= 16, the caches' codec pairs (affine8, affine4, TurboQuant k8v2/3/4/8),
// packed rows of a multiple of 4 bytes at a 4-byte aligned address. K and V are dequantised to f16 mma
// fragments in registers (f32 and f16 queries keep the CUDA-core kernel above, which computes in f32).
// p.chunk must be a multiple of kKVMmaTileKeys. A window read (L > 1) takes 16 / (Hq / Hkv) query
// positions a block, and at most kKVMmaWindowMax of them in all.
constexpr int64_t kKVMmaTileKeys = 64;
constexpr int64_t kKVMmaWindowMax = 16;
bool kv_mma_attention_supported(Dtype dt, const KVAttnLaunch& p);
void launch_kv_mma_attention(Dtype dt, const KVAttnLaunch& p, const TurboTables& t, int n_splits, float* workspace,
                             cudaStream_t s);
void launch_kv_mma_attention_64(Dtype dt, const KVAttnLaunch& p, const TurboTables& t, int n_splits, float* workspace,
                                cudaStream_t s);
void launch_kv_mma_attention_128(Dtype dt, const KVAttnLaunch& p, const TurboTables& t, int n_splits, float* workspace,
                                 cudaStream_t s);
void launch_kv_mma_attention_256(Dtype dt, const KVAttnLaunch& p, const TurboTables& t, int n_splits, float* workspace,
                                 cudaStream_t s);
// The stored part of a long window's read (p.L > kKVMmaWindowMax query positions, p.k_new unused): the
// tensor-core codecs and queries as above, head dims 64 or 128, kernels::kv_prefix_block_positions(G)
// positions a block; n_splits splits of p.chunk keys (a multiple of kKVMmaTileKeys, none empty) write
// partials to workspace with TurboQuant values rotated back.
void launch_kv_prefix_attention(const KVAttnLaunch& p, const TurboTables& t, int n_splits, float* workspace,
                                cudaStream_t s);
void launch_kv_prefix_attention_64(const KVAttnLaunch& p, const TurboTables& t, int n_splits, float* workspace,
                                   cudaStream_t s);
void launch_kv_prefix_attention_128(const KVAttnLaunch& p, const TurboTables& t, int n_splits, float* workspace,
                                    cudaStream_t s);
// Merges n_splits partials [n_splits, rows, D + 2] into out [rows, D] of dt, rotating turbo
// values back when rotate_back.
void launch_kv_attention_combine(Dtype dt, const float* workspace, int n_splits, int64_t rows, int D,
                                 bool rotate_back, const TurboTables& t, void* out, cudaStream_t s);
// Blocks of the tensor-core read for p that one SM holds at once (sizes its key splits).
int kv_mma_blocks_per_sm(const KVAttnLaunch& p);
int kv_mma_blocks_per_sm_64(const KVAttnLaunch& p);
int kv_mma_blocks_per_sm_128(const KVAttnLaunch& p);
int kv_mma_blocks_per_sm_256(const KVAttnLaunch& p);

}  // namespace tern::cuda
