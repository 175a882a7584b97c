// The packed reads: the kv_quant attention ops behind the AttentionRead contract.
#include "tern/state/packed_read.h"

namespace tern {
namespace {

class PackedRead : public AttentionRead {
 public:
  PackedRead(Tensor k_rows, Tensor v_rows, ops::KVRowCodec kc, ops::KVRowCodec vc, Tensor k, Tensor v)
      : k_rows_(std::move(k_rows)), v_rows_(std::move(v_rows)), kc_(kc), vc_(vc), k_(std::move(k)), v_(std::move(v)) {}

 protected:
  Tensor k_rows_, v_rows_;
  ops::KVRowCodec kc_, vc_;
  Tensor k_, v_;
};

// The fused decode read; with store storages (packed_store_read) its first attend also encodes k / v
// into them (ops::kv_decode_attention_store) and later ones only read (a Gemma donor's read is attended
// again by the layers that share its K/V: the slot they would write holds those bytes already).
class DecodeRead : public PackedRead {
 public:
  DecodeRead(Tensor k_rows, Tensor v_rows, ops::KVRowCodec kc, ops::KVRowCodec vc, Tensor k, Tensor v, Tensor lengths,
             int64_t ring, Tensor keys = Tensor(), Tensor values = Tensor())
      : PackedRead(std::move(k_rows), std::move(v_rows), kc, vc, std::move(k), std::move(v)),
        lengths_(std::move(lengths)),
        ring_(ring),
        keys_(std::move(keys)),
        values_(std::move(values)) {}
  Tensor attend(const Tensor& q, float scale, float softcap) const override {
    if (keys_.defined() && !stored_) {
      stored_ = true;
      return ops::kv_decode_attention_store(q, k_rows_, kc_, v_rows_, vc_, k_, v_, scale, softcap, lengths_, keys_,
                                            values_);
    }
    return ops::kv_decode_attention(q, k_rows_, kc_, v_rows_, vc_, k_, v_, scale, softcap, lengths_, ring_);
  }

 private:
  Tensor lengths_;
  int64_t ring_ = 0;
  mutable Tensor keys_, values_;  // the storages the first attend writes (the cache's handles), or none
  mutable bool stored_ = false;
};

class WindowRead : public PackedRead {
 public:
  WindowRead(Tensor k_rows, Tensor v_rows, ops::KVRowCodec kc, ops::KVRowCodec vc, Tensor k, Tensor v, int64_t window,
             bool deferred)
      : PackedRead(std::move(k_rows), std::move(v_rows), kc, vc, std::move(k), std::move(v)),
        window_(window),
        deferred_(deferred) {}
  Tensor attend(const Tensor& q, float scale, float softcap) const override {
    return ops::kv_window_attention(q, k_rows_, kc_, v_rows_, vc_, k_, v_, scale, softcap, window_, deferred_);
  }

 private:
  int64_t window_ = 0;
  bool deferred_ = false;
};

}  // namespace

std::unique_ptr<AttentionRead> packed_decode_read(Tensor k_rows, Tensor v_rows, const ops::KVRowCodec& kc,
                                                  const ops::KVRowCodec& vc, Tensor k, Tensor v, Tensor lengths,
                                                  int64_t ring) {
  return std::make_unique<DecodeRead>(std::move(k_rows), std::move(v_rows), kc, vc, std::move(k), std::move(v),
                                      std::move(lengths), ring);
}

std::unique_ptr<AttentionRead> packed_store_read(Tensor k_rows, Tensor v_rows, const ops::KVRowCodec& kc,
                                                 const ops::KVRowCodec& vc, Tensor k, Tensor v, Tensor lengths,
                                                 Tensor keys, Tensor values) {
  return std::make_unique<DecodeRead>(std::move(k_rows), std::move(v_rows), kc, vc, std::move(k), std::move(v),
                                      std::move(lengths), 0, std::move(keys), std::move(values));
}

std::unique_ptr<AttentionRead> packed_read(Tensor k_rows, Tensor v_rows, const ops::KVRowCodec& kc,
                                           const ops::KVRowCodec& vc, Tensor k, Tensor v, AppendPhase phase,
                                           int64_t window, bool deferred) {
  if (phase == AppendPhase::decode && ops::kv_decode_attention_supported(kc, vc, k.device()))
    return packed_decode_read(std::move(k_rows), std::move(v_rows), kc, vc, std::move(k), std::move(v));
  return std::make_unique<WindowRead>(std::move(k_rows), std::move(v_rows), kc, vc, std::move(k), std::move(v), window,
                                      deferred);
}

}  // namespace tern
