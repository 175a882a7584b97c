// Fused decode attention over packed KV rows on tensor cores: a block owns one key split of one kv head
// of one batch row; its 16 mma rows are that kv head's query heads (<= 16). Each warp walks its own
// 16-key tiles of the split: cp.async stages the packed K/V rows kKVStages - 1 tiles ahead in the
// warp's shared memory, and every lane dequantises the bytes it needs straight into mma B fragments
// (half2 arithmetic: byte permutes, a subtract and an FMA per two elements, or a table read and a
// multiply for TurboQuant values) -- no f16 tile, no ldmatrix. Two permutations keep a lane's bytes
// contiguous:
//  - Q K^T sums over head dims, so its k index may visit them in any order Q and K share: lane t of a
//    key holds dims [t HD/4, (t + 1) HD/4) (KC::kdim gives the order), one or two scale groups;
//  - P V's output columns may be permuted if the merge puts them back: column c of n-tile j is dim
//    c HD/8 + j, so lane g holds dims [g HD/8, (g + 1) HD/8) of its four keys (one group).
// The codecs are compile-time (KC, VC: kv_quant_frag.cuh). The partial (acc, max, sum) goes to
// kv_attention_combine_kernel, which merges the splits and rotates TurboQuant values back once per row.
#pragma once
#include "tern/backend/cuda/kernels/attention_decode.cuh"
#include "tern/backend/cuda/kernels/kv_quant.cuh"
#include "tern/backend/cuda/kernels/kv_quant_attention.cuh"
#include "tern/backend/cuda/kernels/kv_quant_frag.cuh"

namespace tern::cuda::kernels {

constexpr int kKVWarpKeys = 16;                         // keys per warp tile (one mma k-step of P V)
constexpr int kKVTileKeys = kFlashWarps * kKVWarpKeys;  // the split granularity
constexpr int kKVStages = 3;                            // staged tiles per warp: two in flight

// A staged packed row's stride: its bytes rounded up to an odd multiple of 16, so the 16-byte reads of
// eight lanes over two rows fall in distinct banks.
__host__ __device__ constexpr int kv_stage_stride(int row_bytes) {
  const int s = (row_bytes + 15) / 16;
  return 16 * (s % 2 == 0 ? s + 1 : s);
}

// The staging area of a block (its warps' buffers; the merge reuses it, so at least its scratch).
template <int HD>
__host__ __device__ constexpr int kv_mma_stage_area(int k_stage, int v_stage) {
  const int staged = kFlashWarps * kKVStages * kKVWarpKeys * (k_stage + v_stage);
  const int merge = kFlashWarps * 16 * (HD + 2) * 4;
  return staged > merge ? staged : merge;
}

// Words of the key codec's own table: none when it has none or reads the value codec's (the same
// codebook: rotated keys and values of equal bits).
template <typename KC, typename VC>
constexpr int kv_key_table_words() {
  return KC::kBookBits != 0 && KC::kBookBits == VC::kBookBits ? 0 : KC::kTableWords;
}

// Unquantized positions a block has room for (f32 K and V rows in shared memory): the n_new of the read
// (1 for a decode step, the window's length, at most 16, for a window read), at least one.
__host__ __device__ constexpr int kv_mma_new_rows(int n_new) { return n_new < 1 ? 1 : n_new; }

// Bytes of dynamic shared memory: the query fragments, the staging area, the value and key codecs'
// tables (VC::kTableWords, kv_key_table_words) and `new_rows` unquantized K and V rows (f32).
template <int HD, typename KC, typename VC>
constexpr size_t kv_mma_smem_bytes(int k_stage, int v_stage, int new_rows = 1) {
  return HD / 16 * 32 * 16 + kv_mma_stage_area<HD>(k_stage, v_stage) +
         (VC::kTableWords + kv_key_table_words<KC, VC>() + 2 * HD * new_rows) * sizeof(float);
}

// A lane's walk over the GRAN-byte pieces of a staged tile's rows of per_row pieces: piece i 32 + lane
// (row-major) on trip i, so that consecutive lanes copy consecutive pieces of a row and each cp.async
// of the warp reads whole sectors. r0, c0: the lane's first piece; dr, dc: what 32 pieces add.
struct StageWalk {
  int r0, c0, dr, dc, per_row;
};
__device__ __forceinline__ StageWalk stage_walk(int per_row, int lane) {
  return {lane / per_row, lane % per_row, 32 / per_row, 32 % per_row, per_row};
}

// One warp copies the first n rows of a 16-row tile (row r at src + r * src_step bytes) into dst (rows
// of `stage` bytes), GRAN bytes per cp.async, walking the pieces as w says. Every lane runs the same
// trip count, so the loop has no divergent exit. The lanes that read a piece are not the ones that
// copied it: the warp waits for its copies and then __syncwarp()s before reading.
template <int GRAN>
__device__ __forceinline__ void warp_stage_rows(uint8_t* dst, const uint8_t* src, int64_t src_step, int stage, int n,
                                                const StageWalk& w) {
  const int trips = (kKVWarpKeys * w.per_row + 31) / 32;
  int r = w.r0, c = w.c0;
#pragma unroll 4
  for (int i = 0; i < trips; ++i) {
    if (r < n) {
      const uint32_t d = smem_addr(dst + r * stage + c * GRAN);
      const uint8_t* g = src + r * src_step + c * GRAN;
      if constexpr (GRAN == 16) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(g));
      } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(d), "l"(g), "n"(GRAN));
      }
    }
    r += w.dr, c += w.dc;
    if (c >= w.per_row) c -= w.per_row, ++r;
  }
}

__device__ __forceinline__ void warp_stage_any(int gran, uint8_t* dst, const uint8_t* src, int64_t src_step, int stage,
                                               int n, const StageWalk& w) {
  if (gran == 16) warp_stage_rows<16>(dst, src, src_step, stage, n, w);
  else if (gran == 8) warp_stage_rows<8>(dst, src, src_step, stage, n, w);
  else warp_stage_rows<4>(dst, src, src_step, stage, n, w);
}

// x with its half `hi` (0 low, 1 high) replaced by the f16 of `value`.
__device__ __forceinline__ uint32_t with_half(uint32_t x, int hi, float value) {
  const uint32_t h = __half_as_ushort(__float2half_rn(value));
  return hi ? (x & 0xFFFFu) | (h << 16) : (x & 0xFFFF0000u) | h;
}

// One warp's 16-key tile of staged packed rows (ck keys, cv values, row strides k_stage / v_stage):
// Q K^T against the warp's query fragments sqf, the online softmax (masked(rr, j) applied unless `full`),
// and O += P V. Unless `full`, mend_key(kb, j) and mend_value(v, j, half) may replace the fragments of
// rows that were not staged (key j; value j in half `half` of each word).
template <int HD, typename KC, typename VC, typename Masked, typename MendKey, typename MendValue>
__device__ __forceinline__ void kv_mma_tile(const uint8_t* ck, const uint8_t* cv, int k_stage, int v_stage, int k_shift,
                                            int v_shift, const uint32_t* key_table, const uint32_t* table,
                                            const uint4* sqf, int n0, bool full, float scale, float softcap,
                                            float (&o)[HD / 8][4], float (&row_m)[2], float (&row_l)[2],
                                            Masked masked, MendKey mend_key, MendValue mend_value) {
  constexpr int BN = kKVWarpKeys, VD = HD / 8;
  const int lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
  // Both n-tiles' keys decoded first, so that their two chains of HD / 16 dependent mma interleave
  // and each query fragment is read once per tile.
  float s[BN / 8][4];
  uint32_t kb[BN / 8][HD / 16][2];
#pragma unroll
  for (int nn = 0; nn < BN / 8; ++nn) {
    s[nn][0] = s[nn][1] = s[nn][2] = s[nn][3] = 0.0f;
    const int r = nn * 8 + g;  // the key this lane feeds to n-tile nn
    KC::template decode<HD>(ck + r * k_stage, tq, k_shift, key_table, kb[nn]);
    if (!full) mend_key(kb[nn], n0 + r);
  }
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) {
    const uint4 q4 = sqf[kk * 32 + lane];
    const uint32_t qa[4] = {q4.x, q4.y, q4.z, q4.w};
#pragma unroll
    for (int nn = 0; nn < BN / 8; ++nn) mma16816<__half>(s[nn], qa, kb[nn][kk][0], kb[nn][kk][1]);
  }
  if (full) {  // nothing in the tile is hidden
    decode_softmax<HD, BN>(s, n0, scale, softcap, o, row_m, row_l, [](int, int) { return false; });
  } else {
    decode_softmax<HD, BN>(s, n0, scale, softcap, o, row_m, row_l, masked);
  }
  const uint32_t pa[4] = {pack2<__half>(s[0][0], s[0][1]), pack2<__half>(s[0][2], s[0][3]),
                          pack2<__half>(s[1][0], s[1][1]), pack2<__half>(s[1][2], s[1][3])};
  uint32_t v0[VD], v1[VD];  // keys 2 tq, 2 tq + 1 and 2 tq + 8, 2 tq + 9
  VC::template decode2<HD>(cv + 2 * tq * v_stage, cv + (2 * tq + 1) * v_stage, g, v_shift, table, v0);
  VC::template decode2<HD>(cv + (2 * tq + 8) * v_stage, cv + (2 * tq + 9) * v_stage, g, v_shift, table, v1);
  if (!full) {
    mend_value(v0, n0 + 2 * tq, 0), mend_value(v0, n0 + 2 * tq + 1, 1);
    mend_value(v1, n0 + 2 * tq + 8, 0), mend_value(v1, n0 + 2 * tq + 9, 1);
  }
#pragma unroll
  for (int j = 0; j < VD; ++j) mma16816<__half>(o[j], pa, v0[j], v1[j]);
}

// a.chunk is a multiple of kKVTileKeys; k_stage / v_stage the staged row strides (kv_stage_stride);
// k_gran / v_gran the cp.async widths (4, 8 or 16) that divide the packed row sizes and the rows'
// alignment; k_shift / v_shift log2 of the groups. Three blocks per SM (168 registers) below head dim
// 256, whose accumulators alone take 128. WINDOW: a window read of a.L > 1 query positions (its own
// instances, so that a decode step's keeps the registers of one position).
template <typename T, int HD, typename KC, typename VC, bool WINDOW = false>
__global__ void __launch_bounds__(kFlashWarps * 32, HD == 256 ? 1 : 3)
    kv_decode_attention_mma_kernel(KVAttnArgs a, TurboTables t, int k_stage, int v_stage, int k_gran, int v_gran,
                                   int k_shift, int v_shift) {
  grid_dependency_wait();
  extern __shared__ __align__(16) unsigned char kv_mma_smem[];
  constexpr int BN = kKVWarpKeys, VD = HD / 8;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
  uint4* sqf = reinterpret_cast<uint4*>(kv_mma_smem);  // [HD / 16][32]: each lane's query A fragments
  uint8_t* stage_all = reinterpret_cast<uint8_t*>(sqf + HD / 16 * 32);
  const int stage_bytes = BN * (k_stage + v_stage);
  uint8_t* raw = stage_all + warp * kKVStages * stage_bytes;  // this warp's staging buffers
  uint32_t* table = reinterpret_cast<uint32_t*>(stage_all + kv_mma_stage_area<HD>(k_stage, v_stage));
  constexpr int kKeyTableWords = kv_key_table_words<KC, VC>();
  uint32_t* key_table = kKeyTableWords > 0 ? table + VC::kTableWords : table;  // or the value codec's
  const int64_t split = blockIdx.x, hk = blockIdx.y;
  const int64_t G = a.Hq / a.Hkv;
  // Query rows: r = G w + h is head h of query position pos0 + w; a window read (a.L > 1) takes the
  // positions 16 / G at a time (blockIdx.z: batch row, then position tile), a decode step its one.
  const int Lq = WINDOW ? static_cast<int>(a.L) : 1, P = WINDOW ? static_cast<int>(16 / G) : 1;
  const int tiles = WINDOW ? (Lq + P - 1) / P : 1;
  const int64_t b = WINDOW ? blockIdx.z / tiles : blockIdx.z;
  const int pos0 = WINDOW ? static_cast<int>(blockIdx.z % tiles) * P : 0;
  const int rows = WINDOW ? static_cast<int>(G) * (Lq - pos0 < P ? Lq - pos0 : P) : static_cast<int>(G);  // [0, rows)
  const bool has_new = a.k_new != nullptr;
  // Key indices fit 32 bits (the caller checks S); only addresses are 64-bit. Keys [S, S + n_new) are
  // the unquantized positions: position t is seen by query positions t and later.
  const int S = static_cast<int>(a.S);
  const int n_new = has_new ? Lq : 0;
  const int n_keys = S + n_new;
  const int j0 = static_cast<int>(split * a.chunk), j1 = j0 + a.chunk < n_keys ? static_cast<int>(j0 + a.chunk) : n_keys;
  float* new_k = reinterpret_cast<float*>(table + VC::kTableWords + kKeyTableWords);
  float* new_v = new_k + kv_mma_new_rows(n_new) * HD;
  int len = S;  // stored keys this batch row reads (a compiled decode step's row length)
  int skip = -1;  // a ring's slot this row does not read
  if (a.lengths) {
    const int n = a.lengths[b];
    len = n < 0 ? 0 : (n < S ? n : S);
    if (a.ring > 0 && n >= 0 && n % a.ring < len) skip = static_cast<int>(n % a.ring);  // never the new key
  }
  const int hi = len < j1 ? len : j1;  // stored rows this split reads: [j0, hi)
  const int64_t slot = b * a.Hkv + hk, pos_stride = a.B * a.Hkv;
  const int64_t k_step = pos_stride * a.kc.row_bytes, v_step = pos_stride * a.vc.row_bytes;  // bytes per key
  const uint8_t* k_base = a.k_rows + slot * a.kc.row_bytes;
  const uint8_t* v_base = a.v_rows + slot * a.vc.row_bytes;

  const StageWalk k_walk = stage_walk(a.kc.row_bytes / k_gran, lane), v_walk = stage_walk(a.vc.row_bytes / v_gran, lane);
  auto stage = [&](int n0, int buf) {
    uint8_t* dst = raw + buf * stage_bytes;
    const int n = hi - n0 < BN ? hi - n0 : BN;  // rows past hi are never decoded
    warp_stage_any(k_gran, dst, k_base + n0 * k_step, k_step, k_stage, n, k_walk);
    warp_stage_any(v_gran, dst + BN * k_stage, v_base + n0 * v_step, v_step, v_stage, n, v_walk);
  };
  // Query fragments in KC's dim order: lane l holds rows l / 4 and l / 4 + 8 (zero past rows); q_at(r, d)
  // is element d of query row r.
  auto query_fragments = [&](auto&& q_at) {
    for (int idx = threadIdx.x; idx < HD / 16 * 32; idx += blockDim.x) {
      const int kk = idx >> 5, qg = (idx & 31) >> 2, qt = idx & 3;
      float x[2][4];
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        const int r = qg + 8 * rr;
#pragma unroll
        for (int e = 0; e < 4; ++e) x[rr][e] = r < rows ? q_at(r, KC::template kdim<HD>(qt, kk, e)) : 0.0f;
      }
      sqf[idx] = make_uint4(pack2<__half>(x[0][0], x[0][1]), pack2<__half>(x[1][0], x[1][1]),
                            pack2<__half>(x[0][2], x[0][3]), pack2<__half>(x[1][2], x[1][3]));
    }
  };
  auto q_global = [&](int r, int d) {
    const T* q = static_cast<const T*>(a.q) + b * a.qs[0];
    if constexpr (WINDOW) return to_f32(q[(hk * G + r % G) * a.qs[1] + (pos0 + r / G) * a.qs_l + d]);
    else return to_f32(q[(hk * G + r) * a.qs[1] + d]);
  };
  if constexpr (KC::kRotated) {
    // Rotated keys: the query rows are rotated in the staging area (16 HD floats fit in the merge's
    // scratch) before any tile is staged there.
    float* q_rot = reinterpret_cast<float*>(stage_all);
    for (int i = threadIdx.x; i < rows * HD; i += blockDim.x) q_rot[i] = q_global(i / HD, i % HD);
    __syncthreads();
    block_rotate(q_rot, HD, t, false, rows);
    query_fragments([&](int r, int d) { return q_rot[r * HD + d]; });
    __syncthreads();
  }

  const int first = j0 + warp * BN, step = kFlashWarps * BN;
#pragma unroll
  for (int i = 0; i < kKVStages - 1; ++i) {
    if (first + i * step < j1) stage(first + i * step, i);
    cp_async_commit();
  }
  if constexpr (!KC::kRotated) query_fragments(q_global);
  VC::prepare_table(table, t);
  if constexpr (kKeyTableWords > 0) KC::prepare_table(key_table, t);
  // The unquantized positions [t0, t1) of this split, as f32 rows new_k / new_v [t - t0] (uniform across
  // the block).
  const int t0 = j0 > S ? j0 - S : 0, t1 = j1 - S;
  const bool owns_new = t1 > t0;
  if (owns_new) {
    const T* kp = static_cast<const T*>(a.k_new) + b * a.kns[0] + hk * a.kns[1];
    const T* vp = static_cast<const T*>(a.v_new) + b * a.vns[0] + hk * a.vns[1];
    for (int i = threadIdx.x; i < (t1 - t0) * HD; i += blockDim.x) {
      const int64_t tp = t0 + i / HD, d = i % HD;
      new_k[i] = to_f32(kp[tp * a.kns_l + d]);
      new_v[i] = to_f32(vp[tp * a.vns_l + d]);
    }
    __syncthreads();
    if constexpr (KC::kRotated) block_rotate(new_k, HD, t, false, t1 - t0);
    if (a.vc.kind == 2) block_rotate(new_v, HD, t, false, t1 - t0);  // the read attends in the rotated domain
  }
  __syncthreads();

  float o[HD / 8][4];
#pragma unroll
  for (int i = 0; i < HD / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float row_m[2] = {-INFINITY, -INFINITY}, row_l[2] = {0.0f, 0.0f};
  // Unquantized position t is hidden from query positions before it (a decode step's one sees it).
  auto masked = [&](int rr, int j) {
    if (j >= j1 || j == skip) return true;
    if constexpr (WINDOW) {
      return j < S ? j >= len : j - S > pos0 + (g + 8 * rr) / static_cast<int>(G);
    } else {
      return j < S && j >= len;
    }
  };
  // Whether key j is the split's unquantized position S + tp, tp in [t0, t1), and its row in new_k / new_v.
  auto fresh_row = [&](int j, int& row) {
    if constexpr (WINDOW) {
      const int tp = j - S;
      row = tp - t0;
      return tp >= t0 && tp < t1;
    } else {
      row = 0;
      return owns_new && j == S;
    }
  };
  // A key past hi is one of the split's unquantized positions or zeros (a stored row past a compiled
  // step's length): its staged row was never written.
  auto fix_key = [&](uint32_t(&kb)[HD / 16][2], int j) {
    int row;
    const bool fresh = fresh_row(j, row);
    const float* nk = new_k + (fresh ? row : 0) * HD;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        kb[kk][h] = fresh ? pack2<__half>(nk[KC::template kdim<HD>(tq, kk, 2 * h)],
                                          nk[KC::template kdim<HD>(tq, kk, 2 * h + 1)])
                          : 0u;
      }
    }
  };
  auto fix_value = [&](uint32_t(&v)[VD], int j, int half) {
    if (j < hi) return;
    int row;
    const bool fresh = fresh_row(j, row);
    const float* nv = new_v + (fresh ? row : 0) * HD;
#pragma unroll
    for (int i = 0; i < VD; ++i) v[i] = with_half(v[i], half, fresh ? nv[g * VD + i] : 0.0f);
  };

  int buf = 0;
  for (int n0 = first; n0 < j1; n0 += step) {
    const int ahead = n0 + (kKVStages - 1) * step;
    if (ahead < j1) stage(ahead, buf == 0 ? kKVStages - 1 : buf - 1);
    cp_async_commit();
    cp_async_wait<kKVStages - 1>();
    __syncwarp();
    const uint8_t* ck = raw + buf * stage_bytes;
    const uint8_t* cv = ck + BN * k_stage;
    const bool full = n0 + BN <= hi && (skip < n0 || skip >= n0 + BN);  // uniform across the warp

    kv_mma_tile<HD, KC, VC>(ck, cv, k_stage, v_stage, k_shift, v_shift, key_table, table, sqf, n0, full, a.scale,
                            a.softcap, o, row_m, row_l, masked,
                            [&](uint32_t(&kb)[HD / 16][2], int j) {
                              if (j >= hi) fix_key(kb, j);
                            },
                            fix_value);
    __syncwarp();  // two tiles on, this buffer is staged again
    buf = buf + 1 == kKVStages ? 0 : buf + 1;
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with its buffers: the merge reuses them

  float* scratch = reinterpret_cast<float*>(stage_all);
  // Row r is output row ((b Hq + hk G + h) L + position) of the split's partials [B Hq L][HD + 2].
  decode_merge<HD>(
      scratch, rows, o, row_m, row_l,
      [&](int r, int d, float acc, float M, float sum) {
        const int64_t out_row = WINDOW ? (b * a.Hq + hk * G + r % G) * Lq + pos0 + r / G : b * a.Hq + hk * G + r;
        store_partial<HD>(a.partial + (split * a.B * a.Hq * Lq + out_row) * (HD + 2), d, acc, M, sum);
      },
      [](int c) { return (c & 7) * VD + (c >> 3); });  // column c of n-tile j is dim c HD/8 + j
}

}  // namespace tern::cuda::kernels
