// The read of a decode append over packed KV rows (tern/ops/kv_quant.h), shared by the quantized
// storages: the fused decode attention over the stored rows plus the appended position as given.
#pragma once
#include <memory>

#include "tern/ops/kv_quant.h"
#include "tern/state/cache.h"

namespace tern {

// Head dims the fused decode attention takes (else a storage decodes its rows and reads them with sdpa).
bool packed_decode_supported(const ops::KVRowCodec& key_codec, const ops::KVRowCodec& value_codec);

// Attention of one query per row over k_rows / v_rows [S, B, Hkv, row bytes] (contiguous, S >= 0) and
// the appended k [B, Hkv, 1, D] / v unquantized; with lengths ([B] i32, a compiled step's), row b reads
// its first lengths[b] stored positions only. The tensors are held, not copied: the rows must stay
// unchanged until the read is used (an AttentionRead lives until the storage's next append).
std::unique_ptr<AttentionRead> packed_decode_read(Tensor k_rows, Tensor v_rows, const ops::KVRowCodec& key_codec,
                                                  const ops::KVRowCodec& value_codec, Tensor k, Tensor v,
                                                  Tensor lengths = Tensor());

}  // namespace tern
