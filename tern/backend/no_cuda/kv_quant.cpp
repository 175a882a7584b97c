// CPU-only build: the CUDA quantized KV entry points throw.
#include "tern/ops/kv_quant.h"

namespace tern::cuda {

void kv_encode(const Tensor&, const ops::KVRowCodec&, Tensor&) { TERN_THROW("[kv_encode] needs a CUDA build"); }
void kv_encode_positions(const Tensor&, const ops::KVRowCodec&, Tensor&, const Tensor&, const ops::KVRowCodec&, Tensor&,
                         const Tensor&, int64_t) {
  TERN_THROW("[kv_encode] needs a CUDA build");
}
void kv_decode(const Tensor&, const ops::KVRowCodec&, bool, Tensor&) { TERN_THROW("[kv_decode] needs a CUDA build"); }
bool kv_decode_reads_rotated_keys() { return false; }
bool kv_ring_steps() { return false; }
bool kv_window_tiled(const Tensor&, const Tensor&, const ops::KVRowCodec&, const Tensor&, const ops::KVRowCodec&) {
  return false;
}
void kv_decode_attention(const Tensor&, const Tensor&, const ops::KVRowCodec&, const Tensor&, const ops::KVRowCodec&,
                         const Tensor&, const Tensor&, float, float, const Tensor&, int64_t, Tensor&, Tensor*, Tensor*) {
  TERN_THROW("[kv_decode_attention] needs a CUDA build");
}
void kv_window_attention(const Tensor&, const Tensor&, const ops::KVRowCodec&, const Tensor&, const ops::KVRowCodec&,
                         const Tensor&, const Tensor&, float, float, Tensor&) {
  TERN_THROW("[kv_window_attention] needs a CUDA build");
}

}  // namespace tern::cuda
