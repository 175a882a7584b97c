// The reads of the quantized storages over their packed KV rows (tern/ops/kv_quant.h): a decode append
// by the fused decode attention, a window append by the window attention, each over the stored rows
// plus the appended positions as given.
#pragma once
#include <memory>

#include "tern/ops/kv_quant.h"
#include "tern/state/cache.h"

namespace tern {

// Attention of one query per row over k_rows / v_rows [S, B, Hkv, row bytes] (contiguous, S >= 0) and
// the appended k [B, Hkv, 1, D] / v unquantized (codecs that ops::kv_decode_attention_supported takes);
// with lengths ([B] i32, a compiled step's), row b reads its first lengths[b] stored positions only, and
// with ring > 0 also skips slot lengths[b] % ring (ops::kv_decode_attention). The tensors are held, not
// copied: the rows must stay unchanged until the read is used (an AttentionRead lives until the
// storage's next append).
std::unique_ptr<AttentionRead> packed_decode_read(Tensor k_rows, Tensor v_rows, const ops::KVRowCodec& key_codec,
                                                  const ops::KVRowCodec& value_codec, Tensor k, Tensor v,
                                                  Tensor lengths = Tensor(), int64_t ring = 0);

// packed_decode_read of a compiled step (lengths: step.positions) that also stores the step: its first
// attend encodes k / v into slot lengths[b] of the storages keys / values ([N, B, Hkv, row bytes], whose
// first S slots k_rows / v_rows view) with the read (ops::kv_decode_attention_store); later attends only
// read. The store happens only once the read is attended.
std::unique_ptr<AttentionRead> packed_store_read(Tensor k_rows, Tensor v_rows, const ops::KVRowCodec& key_codec,
                                                 const ops::KVRowCodec& value_codec, Tensor k, Tensor v, Tensor lengths,
                                                 Tensor keys, Tensor values);

// The read of an append of k / v [B, Hkv, L, D] (as given) after the S stored rows: a decode append by
// the fused decode attention where the rows' device takes the codecs (ops::kv_decode_attention_supported), otherwise
// the window attention under the causal mask (and the last `window` keys per query when window > 0),
// TurboQuant values attended rotated (deferred) or decoded. Held as packed_decode_read's are.
std::unique_ptr<AttentionRead> packed_read(Tensor k_rows, Tensor v_rows, const ops::KVRowCodec& key_codec,
                                           const ops::KVRowCodec& value_codec, Tensor k, Tensor v, AppendPhase phase,
                                           int64_t window = 0, bool deferred = false);

}  // namespace tern
