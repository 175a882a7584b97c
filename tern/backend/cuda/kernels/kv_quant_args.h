// The by-value arguments of the quantized KV kernels: a packed row's codec and TurboQuant's value
// constants. Plain C++, shared by host launch code and device code.
#pragma once
#include <cstdint>

namespace tern::cuda::kernels {

// One packed row: [codes, codes_bytes][f16 per group][f16 per group (affine bias / turbo zero point)].
struct KVCodecArgs {
  int kind = 0;  // 0 affine, 1 turbo key of 8 bits, 2 rotated and codebook-coded (turbo values; keys of 4 or 3 bits)
  int bits = 8, group = 64, dim = 0, row_bytes = 0, codes_bytes = 0;
};

// TurboQuant constants: the value codebook, its bucket bounds (midpoints), the codebook of rotated
// keys (TurboQuant_mse keys of 4 or 3 bits), sign bits (bit i: element i negated) and 1/sqrt(dim), as
// computed on the host.
struct TurboTables {
  float book[256] = {};
  float key_book[16] = {};
  float bounds[255] = {};
  uint32_t signs[16] = {};
  float norm = 1.0f;
  int n_bounds = 0;
};

// One encode of kv_encode_kernel: x [B, H, L, dim] (strides xs (b, h, l), last dim contiguous) into
// rows [L, B, H, row bytes]; with positions (L == 1), row (b, h) into rows [capacity, B, H, row bytes]
// at positions[b], or positions[b] % ring when ring > 0 (a slot outside [0, capacity) writes nothing).
struct KVEncodeJob {
  const void* x = nullptr;
  int64_t xs[3] = {};
  uint8_t* rows = nullptr;
  const int32_t* positions = nullptr;
  int64_t capacity = 0, ring = 0;
  KVCodecArgs c;
};

// The most key splits of a fused decode attention (its combine keeps one weight a split in shared memory).
constexpr int kKVMaxSplits = 256;

// Query positions one block of a long window's tiled read takes (kv_quant_prefix_mma.cuh): 16 / G for
// each of its four warps, G = Hq / Hkv.
constexpr int kv_prefix_block_positions(int G) { return 4 * (16 / G); }

// The fused decode attention's arguments (kv_quant_attention.cuh, kv_quant_attention_mma.cuh).
struct KVAttnArgs {
  const void* q;  // [B, Hq, L, D], strides (b, h) and qs_l (position), last dim contiguous
  int64_t qs[2], qs_l;
  int64_t L;  // query positions per row: 1 for a decode step, the window's length for a window read
  const uint8_t* k_rows;  // [S, B, Hkv, row bytes]
  const uint8_t* v_rows;
  const void* k_new;  // [B, Hkv, L, D] or nullptr, strides (b, h) and kns_l / vns_l (position)
  const void* v_new;
  const int32_t* lengths;  // [B]: row b reads its first lengths[b] (clamped to S) stored keys; nullptr: all S
  int64_t ring;            // > 0 (with lengths): row b also skips stored slot lengths[b] % ring (a ring's step)
  int64_t kns[2], vns[2], kns_l, vns_l;
  float* partial;  // [n_splits, B * Hq * L, D + 2]
  int64_t B, Hq, Hkv, S, chunk;  // keys [split * chunk, ...) of the S (+ L with k_new) visible ones
  int n_splits, n_head_chunks;
  float scale, softcap;
  KVCodecArgs kc, vc;
};

}  // namespace tern::cuda::kernels
