// libFuzzer target: parse_cache_file on arbitrary bytes. For most inputs the prefix is repaired first
// (magic, version, sizes, zero padding, both checksums) so the header parser itself is exercised.
// Rejection must be a tern::Error; an accepted file must describe aligned blobs inside the payload
// whose sizes match their shapes, and every tensor must read back. Every record of an accepted file is
// then loaded into a fresh cache of every storage kind: each load either succeeds or throws one
// tern::Error (a hostile but well-formed record must never crash or over-allocate).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "tern/state/affine_kv_cache.h"
#include "tern/state/affine_ring_kv_cache.h"
#include "tern/state/cache_file.h"
#include "tern/state/plain_kv_cache.h"
#include "tern/state/recurrent_cache.h"
#include "tern/state/ring_kv_cache.h"
#include "tern/state/ring_transition_kv_cache.h"
#include "tern/state/transition_kv_cache.h"
#include "tern/state/turboquant_kv_cache.h"

namespace {

uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// Makes everything but the header's content valid.
void repair(std::vector<uint8_t>& b) {
  const size_t size = b.size();
  std::memcpy(b.data(), "TERNPC01", 8);
  put_u64(b.data() + 8, 1ull | (64ull << 32));
  const uint64_t header = get_u64(b.data() + 16) % (size - 48 + 1);
  const uint64_t payload_at = (48 + header + 63) / 64 * 64;
  if (payload_at > size) return;
  put_u64(b.data() + 16, header);
  put_u64(b.data() + 24, size - payload_at);
  for (uint64_t i = 48 + header; i < payload_at; ++i) b[i] = 0;
  put_u64(b.data() + 32, tern::fnv1a64(b.data() + 48, header));
  put_u64(b.data() + 40, tern::fnv1a64(b.data() + payload_at, size - payload_at));
}

// One fresh cache of each storage kind (the configurations the unit tests save).
std::unique_ptr<tern::Cache> make_storage(int kind) {
  using namespace tern;
  switch (kind) {
    case 0:
      return std::make_unique<PlainKVCache>();
    case 1:
      return std::make_unique<PlainKVCache>(8);
    case 2:
      return std::make_unique<RingKVCache>(16);
    case 3:
      return std::make_unique<TransitionKVCache>(0, std::make_unique<AffineKVCache>(4, 32));
    case 4:
      return std::make_unique<TransitionKVCache>(5, std::make_unique<TurboQuantKVCache>(8, 3, false));
    case 5:
      return std::make_unique<TransitionKVCache>(0, std::make_unique<TurboQuantKVCache>(4, 4, true));
    case 6:
      return std::make_unique<RingTransitionKVCache>(0, std::make_unique<AffineRingKVCache>(16, 8, 32));
    case 7:
      return std::make_unique<AffineRingKVCache>(16, 4, 32);
    case 8:
      return std::make_unique<AffineKVCache>(8, 64);
    default:
      return std::make_unique<RecurrentCache>(RecurrentShape{24, 4, 2, 8, 8});
  }
}
constexpr int kStorages = 10;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> b(data, data + size);
  if (size >= 48 && (data[size - 1] & 7) != 0) repair(b);
  tern::ParsedCacheFile f;
  try {
    f = tern::parse_cache_file(b.data(), b.size(), "fuzz.tpc");
  } catch (const tern::Error&) {
    return 0;
  }
  const uint64_t payload_size = static_cast<uint64_t>(b.data() + b.size() - f.payload);
  if ((f.payload - b.data()) % 64 != 0) std::abort();
  for (const tern::CacheFileRecord& r : f.records) {
    tern::CacheReader reader("fuzz", r.entries, f.payload);
    for (const tern::CacheEntry& e : r.entries) {
      if (e.type != tern::CacheEntry::tensor && e.type != tern::CacheEntry::bytes) continue;
      if (e.offset % 64 != 0 || e.offset > payload_size || e.size > payload_size - e.offset) std::abort();
      if (e.size != static_cast<uint64_t>(tern::numel(e.shape)) * tern::dtype_size(e.dtype)) std::abort();
      // Names are unique within a record (the parser rejects duplicates), so each reads back as itself.
      if (e.type == tern::CacheEntry::tensor) {
        if (reader.get_tensor(e.name).nbytes() != e.size) std::abort();
      } else if (reader.get_bytes(e.name).size() != e.size) {
        std::abort();
      }
    }
  }
  for (const tern::CacheFileRecord& r : f.records)
    for (int kind = 0; kind < kStorages; ++kind) {
      tern::CacheReader reader("fuzz", r.entries, f.payload);
      std::unique_ptr<tern::Cache> cache = make_storage(kind);
      try {
        cache->load(reader);
      } catch (const tern::Error&) {
      }
    }
  return 0;
}
