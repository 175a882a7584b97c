// Quantized KV rows as an op family: encode activations into the packed row layout of the affine and
// TurboQuant codecs (tern/ops/affine_codec.h, tern/ops/turboquant.h), decode packed rows, and the fused
// decode and window attention that read packed keys and values directly (the storage of the quantized caches).
#pragma once
#include "tern/core/tensor.h"

namespace tern::ops {

// The codec of one packed row of `dim` values.
// turbo_key rows of 8 bits are signed int8 per group; of 4 or 3 bits they are TurboQuant_mse, coded
// as values are (rotated, RMS per group, Lloyd-Max indices), and a read takes their dot products in
// the rotated domain (the rotation is orthogonal, so q.k = rotate(q).rotate(k)).
struct KVRowCodec {
  enum Kind : int { affine = 0, turbo_key = 1, turbo_value = 2 };
  Kind kind = affine;
  int bits = 8;        // affine: 4 or 8; turbo_key: 8, 4 or 3; turbo_value: 2, 3, 4 or 8
  int64_t group = 64;  // affine: 32, 64 or 128; turbo kinds: 32
  int64_t dim = 0;

  // Packed bytes of one row; throws tern::Error for an invalid codec (bits, group, dim).
  int64_t row_bytes() const;
  // Rows coded in the rotated domain (TurboQuant values, and keys of 4 or 3 bits).
  bool rotated() const { return kind == turbo_value || (kind == turbo_key && bits != 8); }
};

// Encodes x [B, H, L, dim] (f32/bf16/f16, any strides) into rows, a contiguous u8 tensor
// [L, B, H, row_bytes] on x's device (row (l, b, h) holds x[b, h, l, :]). Bits are those of the CPU
// codecs on x widened to f32, on either device. turbo_value rows hold the rotated, coded values.
void kv_encode(const Tensor& x, const KVRowCodec& codec, Tensor& rows);
// The step append of a packed cache: k [B, H, 1, dk] and v [B, H, 1, dv] encoded as kv_encode does and
// row (b, h) stored at keys[positions[b], b, h] and values[positions[b], b, h] (contiguous u8 storage
// [N, B, H, row_bytes]); positions [B] i32 on the storage's device. The CPU encodes, then writes as
// write_positions does (throwing for a position outside [0, N)); CUDA encodes straight into the storage
// in one launch (two when both codecs are rotated), and a device position outside [0, N) writes nothing.
// ring > 0: row b lands in slot positions[b] % ring instead (an affine ring's compiled step).
void kv_encode_positions(const Tensor& k, const KVRowCodec& key_codec, Tensor& keys, const Tensor& v,
                         const KVRowCodec& value_codec, Tensor& values, const Tensor& positions, int64_t ring = 0);

// rows [S, B, H, row_bytes] u8 (contiguous) -> [B, H, S, dim] in dtype (f32/bf16/f16) on rows' device.
// Rotated rows (codec.rotated()) decode to their own domain when unrotate, else stay rotated.
// TurboQuant keys of 4 or 3 bits are value rows byte for byte: on CUDA the value kernels code them.
Tensor kv_decode(const Tensor& rows, const KVRowCodec& codec, Dtype dtype, bool unrotate = true);
// kv_decode into out [B, H, S, dim] (a float dtype, rows' device), which may be any view: positions
// [0, S) of a longer buffer are written in place (on CUDA too), other views through a temporary.
void kv_decode_into(const Tensor& rows, const KVRowCodec& codec, Tensor& out, bool unrotate = true);

// Decode attention over packed storage: q [B, Hq, 1, D] (f32/bf16/f16) attends, with no mask, to S packed
// positions (k_rows / v_rows [S, B, Hkv, row_bytes], S >= 0) followed by T unquantized ones
// (k_new [B, Hkv, T, D], v_new [B, Hkv, T, Dv], T in {0, 1}; undefined tensors for T = 0), with
// Hq % Hkv == 0 and S + T > 0. turbo_value storage is attended in the rotated domain (v_new rotated
// in) and each output row rotated back once (attention is linear in V). softmax(q k^T * scale
// [softcapped]) v with f32 accumulation -> [B, Hq, 1, Dv] in q's dtype.
// lengths (optional, [B] i32 on q's device; a compiled decode step's): batch row b attends to its
// first lengths[b] stored positions only (clamped to [0, S]), then the T new ones; the device reads
// them without a host sync. Undefined: every row attends to all S.
// ring (> 0, with lengths; S <= ring): the stored rows are the slots of a ring of `ring` positions
// (position p in slot p % ring, an affine ring's compiled step) and lengths[b] is row b's new position:
// the row also skips slot lengths[b] % ring, which holds position lengths[b] - ring (outside the window
// of `ring` positions that ends at the new one) or, once the step has stored it, the new position.
Tensor kv_decode_attention(const Tensor& q, const Tensor& k_rows, const KVRowCodec& key_codec, const Tensor& v_rows,
                           const KVRowCodec& value_codec, const Tensor& k_new, const Tensor& v_new, float scale,
                           float softcap = 0.0f, const Tensor& lengths = Tensor(), int64_t ring = 0);
// kv_decode_attention of a compiled step with the step's store folded in: k_new / v_new (one position a
// row) are also encoded into slot lengths[b] of the storages keys / values ([N, B, Hkv, row bytes], whose
// first S slots k_rows / v_rows view), as kv_encode_positions(k_new, key_codec, keys, v_new,
// value_codec, values, lengths) would. The same output and the same storage as that op and then
// kv_decode_attention; on CUDA the tensor-core read's combine launch writes the rows beside its merge
// (k_new / v_new in q's dtype, not two rotated codecs; TERN_CUDA_KV_STORE=launch launches the encode
// first, for benchmarks).
Tensor kv_decode_attention_store(const Tensor& q, const Tensor& k_rows, const KVRowCodec& key_codec, const Tensor& v_rows,
                                 const KVRowCodec& value_codec, const Tensor& k_new, const Tensor& v_new, float scale,
                                 float softcap, const Tensor& lengths, Tensor& keys, Tensor& values);
// Whether kv_decode_attention reads this codec pair on `device`: the CPU reads every pair; CUDA reads
// key and value rows of one head dim in {32, 64, 128, 256, 512}, TurboQuant keys of 4 or 3 bits included
// unless TERN_CUDA_KV_ROTATED_KEYS=0 (a cache then reads such a decode append with kv_window_attention).
bool kv_decode_attention_supported(const KVRowCodec& key_codec, const KVRowCodec& value_codec, const Device& device);
// Whether a ring's compiled step (kv_encode_positions and kv_decode_attention with `ring`) runs on
// `device`: always on the CPU; on CUDA unless TERN_CUDA_KV_RING_STEPS=0 (an affine ring then decodes
// eagerly there).
bool kv_ring_steps_supported(const Device& device);

// Window attention over packed storage (a prefill chunk after a quantized prefix): q [B, Hq, L, D]
// holds the queries of the L positions after S packed ones (k_rows / v_rows [S, B, Hkv, row_bytes],
// S >= 0), k_new [B, Hkv, L, D] / v_new [.., Dv] their keys and values unquantized. Query i attends to
// positions [max(0, S + i + 1 - window), S + i] of the sequence [stored ; new] (window 0: from 0, the
// causal mask). f32 accumulation -> [B, Hq, L, Dv] in q's dtype. turbo_value storage is attended in the
// rotated domain with each output row rotated back once when deferred, else decoded to its own domain.
// The CPU reads the packed rows block by block, never decoding the prefix whole; so does CUDA without a
// sliding mask where cuda::kv_window_tiled says so (the fused decode kernel for windows of up to 16
// positions; with TERN_CUDA_KV_PREFIX_READ=1 the tiled prefix read and the flash prefill for longer ones),
// else it decodes the prefix into a temporary (keys and values to their own domain) and runs the flash sdpa.
Tensor kv_window_attention(const Tensor& q, const Tensor& k_rows, const KVRowCodec& key_codec, const Tensor& v_rows,
                           const KVRowCodec& value_codec, const Tensor& k_new, const Tensor& v_new, float scale,
                           float softcap = 0.0f, int64_t window = 0, bool deferred = false);

}  // namespace tern::ops

namespace tern::cpu {
void kv_encode(const Tensor& x, const ops::KVRowCodec& codec, Tensor& rows);
void kv_decode(const Tensor& rows, const ops::KVRowCodec& codec, bool unrotate, Tensor& out);
void kv_decode_attention(const Tensor& q, const Tensor& k_rows, const ops::KVRowCodec& key_codec,
                         const Tensor& v_rows, const ops::KVRowCodec& value_codec, const Tensor& k_new,
                         const Tensor& v_new, float scale, float softcap, const Tensor& lengths, int64_t ring,
                         Tensor& out);
void kv_window_attention(const Tensor& q, const Tensor& k_rows, const ops::KVRowCodec& key_codec, const Tensor& v_rows,
                         const ops::KVRowCodec& value_codec, const Tensor& k_new, const Tensor& v_new, float scale,
                         float softcap, int64_t window, bool deferred, Tensor& out);
}
namespace tern::cuda {
// Unless TERN_CUDA_KV_ROTATED_KEYS=0: the fused decode attention reads TurboQuant keys of 4 or 3 bits.
bool kv_decode_reads_rotated_keys();
// Unless TERN_CUDA_KV_RING_STEPS=0: affine rings take compiled decode steps (ops::kv_ring_steps_supported).
bool kv_ring_steps();
// Whether kv_window_attention reads q [B, Hq, L, D] over these rows with the tiled packed read rather than a
// decoded temporary: head dims 64 or 128, bf16 queries and the codecs and groups the tensor-core decode
// read takes, and either 2 <= L <= 16 (the fused decode kernel over L query positions; TERN_CUDA_KV_WINDOW_READ
// not 0) or L > 16 (the stored rows by the tiled prefix read, 4 x 16 / G positions a block, and the window's
// own keys by the flash prefill, merged by one combine; TERN_CUDA_KV_PREFIX_READ=1, B Hq L <= 2^24).
bool kv_window_tiled(const Tensor& q, const Tensor& k_rows, const ops::KVRowCodec& key_codec, const Tensor& v_rows,
                     const ops::KVRowCodec& value_codec);
// kv_window_attention's tiled read (where kv_window_tiled says so) into out [B, Hq, L, D] of q's dtype.
void kv_window_attention(const Tensor& q, const Tensor& k_rows, const ops::KVRowCodec& key_codec, const Tensor& v_rows,
                         const ops::KVRowCodec& value_codec, const Tensor& k_new, const Tensor& v_new, float scale,
                         float softcap, Tensor& out);
void kv_encode(const Tensor& x, const ops::KVRowCodec& codec, Tensor& rows);
void kv_encode_positions(const Tensor& k, const ops::KVRowCodec& key_codec, Tensor& keys, const Tensor& v,
                         const ops::KVRowCodec& value_codec, Tensor& values, const Tensor& positions, int64_t ring);
// out [B, H, S, dim]: rows of dim contiguous elements one after another within each (b, h), (b, h) at
// stride(1) and b at H stride(1) (ops::kv_decode_into passes other views through a temporary).
void kv_decode(const Tensor& rows, const ops::KVRowCodec& codec, bool unrotate, Tensor& out);
// store_keys / store_values (both or neither): ops::kv_decode_attention_store's storages.
void kv_decode_attention(const Tensor& q, const Tensor& k_rows, const ops::KVRowCodec& key_codec,
                         const Tensor& v_rows, const ops::KVRowCodec& value_codec, const Tensor& k_new,
                         const Tensor& v_new, float scale, float softcap, const Tensor& lengths, int64_t ring,
                         Tensor& out, Tensor* store_keys = nullptr, Tensor* store_values = nullptr);
}
