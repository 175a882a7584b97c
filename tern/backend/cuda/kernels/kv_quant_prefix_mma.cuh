// The tiled read of a long window over a packed prefix on tensor cores (cuda::kv_window_attention for
// windows of more than kKVMmaWindowMax positions, a prefill chunk after the first): the stored part of
// the read. A block owns kFlashWarps x 16 mma rows of one kv head of one batch row -- each warp 16 / G
// query positions of the G query heads -- and walks one key split of the S stored rows in tiles of
// kKVTileKeys keys: each warp stages 16 of them with cp.async as the decode read does (its staging
// buffers, the same layout), and after one barrier every warp dequantises all four 16-key pieces into
// its own mma B fragments (kv_quant_frag.cuh), so a staged row feeds 64 query rows. No mask but the
// split's end: every stored key precedes every query. The window's own keys are the flash prefill's part
// (its partial, cuda::sdpa_partial); each block writes its rows' (acc, max, sum) partial with TurboQuant
// values already rotated back, so the combine merges the two without a rotation.
#pragma once
#include "tern/backend/cuda/kernels/kv_quant_attention_mma.cuh"

namespace tern::cuda::kernels {

static_assert(kv_prefix_block_positions(1) == kFlashWarps * 16, "a block is kFlashWarps warps of 16 / G positions");

// Bytes of dynamic shared memory: each warp's query fragments, the staging area (whose floor, the decode
// read's merge scratch of kFlashWarps x 16 rows of HD + 2 floats, holds the block's rotated queries and,
// at the end, its rows' accumulators, maxima and sums) and the codecs' tables.
template <int HD, typename KC, typename VC>
constexpr size_t kv_prefix_smem_bytes(int k_stage, int v_stage) {
  return kFlashWarps * (HD / 16 * 32 * 16) + kv_mma_stage_area<HD>(k_stage, v_stage) +
         (VC::kTableWords + kv_key_table_words<KC, VC>()) * sizeof(float);
}

// a.L query positions, a.k_new unused; a.chunk a multiple of kKVTileKeys and every split non-empty.
template <typename T, int HD, typename KC, typename VC>
__global__ void __launch_bounds__(kFlashWarps * 32, 3)
    kv_prefix_attention_mma_kernel(KVAttnArgs a, TurboTables t, int k_stage, int v_stage, int k_gran, int v_gran,
                                   int k_shift, int v_shift) {
  grid_dependency_wait();
  extern __shared__ __align__(16) unsigned char kv_prefix_smem[];
  constexpr int BN = kKVWarpKeys, VD = HD / 8, kRows = kFlashWarps * 16;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
  uint4* sqf = reinterpret_cast<uint4*>(kv_prefix_smem) + warp * (HD / 16 * 32);  // this warp's A fragments
  uint8_t* stage_all = reinterpret_cast<uint8_t*>(kv_prefix_smem) + kFlashWarps * (HD / 16 * 32 * 16);
  const int stage_bytes = BN * (k_stage + v_stage);
  uint32_t* table = reinterpret_cast<uint32_t*>(stage_all + kv_mma_stage_area<HD>(k_stage, v_stage));
  constexpr int kKeyTableWords = kv_key_table_words<KC, VC>();
  uint32_t* key_table = kKeyTableWords > 0 ? table + VC::kTableWords : table;  // or the value codec's

  const int G = static_cast<int>(a.Hq / a.Hkv), P = 16 / G, Lq = static_cast<int>(a.L);
  const int tiles = (Lq + kFlashWarps * P - 1) / (kFlashWarps * P);
  const int64_t split = blockIdx.x, hk = blockIdx.y, b = blockIdx.z / tiles;
  const int block_pos = static_cast<int>(blockIdx.z % tiles) * kFlashWarps * P;
  // Warp w's rows: r = G i + h is head h of query position block_pos + w P + i.
  auto warp_rows = [&](int w) {
    const int left = Lq - (block_pos + w * P);
    return G * (left < 0 ? 0 : left < P ? left : P);
  };
  const int rows = warp_rows(warp);
  const int S = static_cast<int>(a.S);
  const int j0 = static_cast<int>(split * a.chunk), j1 = j0 + a.chunk < S ? static_cast<int>(j0 + a.chunk) : S;
  const int64_t slot = b * a.Hkv + hk, pos_stride = a.B * a.Hkv;
  const int64_t k_step = pos_stride * a.kc.row_bytes, v_step = pos_stride * a.vc.row_bytes;
  const uint8_t* k_base = a.k_rows + slot * a.kc.row_bytes;
  const uint8_t* v_base = a.v_rows + slot * a.vc.row_bytes;

  // Warp w stages keys [n0 + 16 w, n0 + 16 w + 16) of the tile at n0 into its buffer `buf`.
  const StageWalk k_walk = stage_walk(a.kc.row_bytes / k_gran, lane), v_walk = stage_walk(a.vc.row_bytes / v_gran, lane);
  auto buffer = [&](int w, int buf) { return stage_all + (w * kKVStages + buf) * stage_bytes; };
  auto stage = [&](int n0, int buf) {
    const int r0 = n0 + warp * BN;
    const int n = j1 - r0 < BN ? j1 - r0 : BN;  // rows past j1 are never decoded
    if (n <= 0) return;
    uint8_t* dst = buffer(warp, buf);
    warp_stage_any(k_gran, dst, k_base + r0 * k_step, k_step, k_stage, n, k_walk);
    warp_stage_any(v_gran, dst + BN * k_stage, v_base + r0 * v_step, v_step, v_stage, n, v_walk);
  };
  auto q_global = [&](int r, int d) {  // row r of the block (warp r / 16)
    const int w = r / 16, i = r % 16;
    const T* q = static_cast<const T*>(a.q) + b * a.qs[0];
    return to_f32(q[(hk * G + i % G) * a.qs[1] + (block_pos + w * P + i / G) * a.qs_l + d]);
  };
  // The warp's query fragments in KC's dim order: lane l holds rows l / 4 and l / 4 + 8 (zero past rows).
  auto query_fragments = [&](auto&& q_at) {
    for (int idx = lane; idx < HD / 16 * 32; idx += 32) {
      const int kk = idx >> 5, qg = (idx & 31) >> 2, qt = idx & 3;
      float x[2][4];
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        const int r = qg + 8 * rr;
#pragma unroll
        for (int e = 0; e < 4; ++e) x[rr][e] = r < rows ? q_at(warp * 16 + r, KC::template kdim<HD>(qt, kk, e)) : 0.0f;
      }
      sqf[idx] = make_uint4(pack2<__half>(x[0][0], x[0][1]), pack2<__half>(x[1][0], x[1][1]),
                            pack2<__half>(x[0][2], x[0][3]), pack2<__half>(x[1][2], x[1][3]));
    }
  };
  if constexpr (KC::kRotated) {
    // Rotated keys: the block's query rows are rotated in the staging area before any tile is staged.
    float* q_rot = reinterpret_cast<float*>(stage_all);
    for (int i = threadIdx.x; i < kRows * HD; i += blockDim.x) {
      const int r = i / HD;
      q_rot[i] = r % 16 < warp_rows(r / 16) ? q_global(r, i % HD) : 0.0f;
    }
    __syncthreads();
    block_rotate(q_rot, HD, t, false, kRows);
    query_fragments([&](int r, int d) { return q_rot[r * HD + d]; });
    __syncthreads();
  }

  const int n_tiles = (j1 - j0 + kKVTileKeys - 1) / kKVTileKeys;
#pragma unroll
  for (int i = 0; i < kKVStages - 1; ++i) {
    if (i < n_tiles) stage(j0 + i * kKVTileKeys, i);
    cp_async_commit();
  }
  if constexpr (!KC::kRotated) query_fragments(q_global);
  VC::prepare_table(table, t);
  if constexpr (kKeyTableWords > 0) KC::prepare_table(key_table, t);
  __syncthreads();

  float o[HD / 8][4];
#pragma unroll
  for (int i = 0; i < HD / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float row_m[2] = {-INFINITY, -INFINITY}, row_l[2] = {0.0f, 0.0f};
  auto past_end = [&](int, int j) { return j >= j1; };
  // A key past j1 is hidden; a value row past j1 was never staged (whatever the buffer holds, p = 0 must
  // not meet a NaN).
  auto zero_past_end = [&](uint32_t(&v)[VD], int j, int half) {
    if (j < j1) return;
#pragma unroll
    for (int i = 0; i < VD; ++i) v[i] &= half ? 0x0000FFFFu : 0xFFFF0000u;
  };

  int buf = 0;
  for (int it = 0; it < n_tiles; ++it) {
    const int n0 = j0 + it * kKVTileKeys;
    if (it + kKVStages - 1 < n_tiles) stage(n0 + (kKVStages - 1) * kKVTileKeys, buf == 0 ? kKVStages - 1 : buf - 1);
    cp_async_commit();
    cp_async_wait<kKVStages - 1>();
    __syncthreads();  // every warp's piece of this tile has landed
    for (int w = 0; w < kFlashWarps && rows > 0; ++w) {
      const int s0 = n0 + w * BN;
      if (s0 >= j1) break;  // uniform across the block
      const uint8_t* ck = buffer(w, buf);
      const uint8_t* cv = ck + BN * k_stage;
      kv_mma_tile<HD, KC, VC>(ck, cv, k_stage, v_stage, k_shift, v_shift, key_table, table, sqf, s0, s0 + BN <= j1,
                              a.scale, a.softcap, o, row_m, row_l, past_end, [](uint32_t(&)[HD / 16][2], int) {},
                              zero_past_end);
    }
    __syncthreads();  // every warp is done with this tile's buffers: they are staged again
    buf = buf + 1 == kKVStages ? 0 : buf + 1;
  }
  cp_async_wait<0>();

  // The block's 64 rows into the staging area (dims in their own order: column c of n-tile j is dim
  // c HD/8 + j), rotated back for TurboQuant values, then out as partials of this split.
  float* acc = reinterpret_cast<float*>(stage_all);  // [kRows][HD]
  float* row_max = acc + kRows * HD;                  // [kRows], then the sums [kRows]
  float* row_sum = row_max + kRows;
  __syncthreads();
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    row_l[rr] += __shfl_xor_sync(0xffffffffu, row_l[rr], 1);
    row_l[rr] += __shfl_xor_sync(0xffffffffu, row_l[rr], 2);
    if (tq == 0) {
      row_max[warp * 16 + g + 8 * rr] = row_m[rr];
      row_sum[warp * 16 + g + 8 * rr] = row_l[rr];
    }
  }
#pragma unroll
  for (int j = 0; j < VD; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[(warp * 16 + g + 8 * (e >> 1)) * HD + (2 * tq + (e & 1)) * VD + j] = o[j][e];
  }
  __syncthreads();
  if (a.vc.kind == 2) block_rotate(acc, HD, t, true, kRows);  // ends with a barrier
  for (int i = threadIdx.x; i < kRows * HD; i += blockDim.x) {
    const int r = i / HD, d = i % HD, w = r / 16, ri = r % 16;
    if (ri >= warp_rows(w)) continue;
    const int64_t out_row = (b * a.Hq + hk * G + ri % G) * Lq + block_pos + w * P + ri / G;
    store_partial<HD>(a.partial + (split * a.B * a.Hq * Lq + out_row) * (HD + 2), d, acc[i], row_max[r], row_sum[r]);
  }
}

}  // namespace tern::cuda::kernels
