// Prompt-cache files: the entry writer/reader, header encoding and bounds-checked parsing, checksums,
// and the atomic save / verified load of a whole cache list.
#include "tern/state/cache_file.h"

#include <cstring>
#include <set>

#include "tern/base/error.h"
#include "tern/base/file.h"

namespace tern {
namespace {

constexpr char kMagic[8] = {'T', 'E', 'R', 'N', 'P', 'C', '0', '1'};
constexpr uint32_t kVersion = 1;
constexpr uint64_t kAlign = 64;
constexpr size_t kPrefix = 48;
constexpr int kMaxRank = 8;

uint64_t align_up(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

class Encoder {
 public:
  void u8(uint8_t v) { out.push_back(v); }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void str(const std::string& s) {
    u64(s.size());
    out.insert(out.end(), s.begin(), s.end());
  }
  std::vector<uint8_t> out;
};

uint64_t read_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// Bounds-checked reads over the header; every failure names the file.
class Decoder {
 public:
  Decoder(const uint8_t* p, size_t n, const std::string& where) : p_(p), n_(n), where_(where) {}
  [[noreturn]] void bad(const std::string& what) const {
    TERN_THROW("[prompt-cache] {}: corrupt header ({} at header byte {})", where_, what, pos_);
  }
  uint8_t u8() {
    if (n_ - pos_ < 1) bad("ends early");
    return p_[pos_++];
  }
  uint64_t u64() {
    if (n_ - pos_ < 8) bad("ends early");
    uint64_t v = read_u64(p_ + pos_);
    pos_ += 8;
    return v;
  }
  // A count of items that take at least min_bytes each in what remains.
  uint64_t count(uint64_t min_bytes) {
    uint64_t c = u64();
    if (c > (n_ - pos_) / min_bytes) bad("a count of " + std::to_string(c) + " larger than the header");
    return c;
  }
  std::string str() {
    uint64_t len = count(1);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return s;
  }
  bool done() const { return pos_ == n_; }

 private:
  const uint8_t* p_;
  size_t n_, pos_ = 0;
  const std::string& where_;
};

}  // namespace

uint64_t fnv1a64(const void* data, size_t n, uint64_t h) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

// ---- writer / reader ----

void CacheWriter::add(CacheEntry e) {
  e.name = prefix_ + e.name;
  for (const CacheEntry& x : entries_)
    TERN_ASSERT(x.name != e.name, "[prompt-cache] entry '{}' written twice", e.name);
  entries_.push_back(std::move(e));
}

void CacheWriter::put_int(const std::string& name, int64_t v) {
  CacheEntry e;
  e.name = name;
  e.type = CacheEntry::integer;
  e.value = v;
  add(std::move(e));
}

void CacheWriter::put_string(const std::string& name, const std::string& v) {
  CacheEntry e;
  e.name = name;
  e.type = CacheEntry::text;
  e.str = v;
  add(std::move(e));
}

void CacheWriter::put_bytes(const std::string& name, const std::vector<uint8_t>& v) {
  CacheEntry e;
  e.name = name;
  e.type = CacheEntry::bytes;
  e.shape = {static_cast<int64_t>(v.size())};
  e.data = v;
  add(std::move(e));
}

void CacheWriter::put_tensor(const std::string& name, const Tensor& t) {
  Tensor c = t.to(Device::cpu()).contiguous();
  CacheEntry e;
  e.name = name;
  e.type = CacheEntry::tensor;
  e.dtype = c.dtype();
  e.shape = c.shape();
  const uint8_t* p = static_cast<const uint8_t*>(c.data_ptr());
  e.data.assign(p, p + c.nbytes());
  add(std::move(e));
}

CacheReader::CacheReader(std::string where, const std::vector<CacheEntry>& entries, const uint8_t* payload,
                         Device device, std::optional<Dtype> activations)
    : where_(std::move(where)), entries_(entries), payload_(payload), device_(device), activations_(activations) {}

void CacheReader::expect_activations(const std::string& what, Dtype stored) const {
  if (activations_ && *activations_ != stored)
    fail(fmt::format("holds {} in {}, this run computes in {}", what, dtype_name(stored), dtype_name(*activations_)));
}

void CacheReader::fail(const std::string& what) const { TERN_THROW("[prompt-cache] {}: {}", where_, what); }

void put_row_layout(CacheWriter& out, const PackedRowLayout& l) {
  out.put_int("offset", l.offset);
  if (!l.configured) return;
  out.put_int("batch", l.batch);
  out.put_int("heads", l.heads);
  out.put_int("key_dim", l.key_dim);
  out.put_int("value_dim", l.value_dim);
}

PackedRowLayout get_row_layout(const CacheReader& in) {
  PackedRowLayout l;
  l.offset = in.get_int("offset");
  l.configured = in.has("batch");
  if (!l.configured) {
    if (l.offset != 0) in.fail(fmt::format("{} positions stored without a row layout", l.offset));
    return l;
  }
  l.batch = in.get_int("batch");
  l.heads = in.get_int("heads");
  l.key_dim = in.get_int("key_dim");
  l.value_dim = in.get_int("value_dim");
  constexpr int64_t kMaxRows = int64_t{1} << 20;
  if (l.offset < 0 || l.batch < 1 || l.batch > kMaxRows || l.heads < 1 || l.heads > kMaxRows || l.key_dim < 1 ||
      l.key_dim > 1024 || l.value_dim < 1 || l.value_dim > 1024)
    in.fail(
        fmt::format("expected offset >= 0, batch and heads in [1, {}] and head dims in [1, 1024], got offset {}, "
                    "batch {}, heads {}, dims {} / {}",
                    kMaxRows, l.offset, l.batch, l.heads, l.key_dim, l.value_dim));
  return l;
}

bool CacheReader::has(const std::string& name) const {
  for (const CacheEntry& e : entries_)
    if (e.name == prefix_ + name) return true;
  return false;
}

const CacheEntry& CacheReader::find(const std::string& short_name, CacheEntry::Type type) const {
  const std::string name = prefix_ + short_name;
  for (const CacheEntry& e : entries_) {
    if (e.name != name) continue;
    if (e.type != type) fail("entry '" + name + "' has the wrong type (another storage scheme?)");
    return e;
  }
  fail("entry '" + name + "' is missing (another storage scheme?)");
}

int64_t CacheReader::get_int(const std::string& name) const { return find(name, CacheEntry::integer).value; }
std::string CacheReader::get_string(const std::string& name) const { return find(name, CacheEntry::text).str; }

std::vector<uint8_t> CacheReader::get_bytes(const std::string& name) const {
  const CacheEntry& e = find(name, CacheEntry::bytes);
  return std::vector<uint8_t>(payload_ + e.offset, payload_ + e.offset + e.size);
}

Tensor CacheReader::get_tensor(const std::string& name) const {
  const CacheEntry& e = find(name, CacheEntry::tensor);
  Tensor t = Tensor::empty(e.shape, e.dtype);
  if (e.size > 0) std::memcpy(t.data_ptr(), payload_ + e.offset, e.size);
  return device_.is_cpu() ? t : t.to(device_);
}

void CacheReader::expect(const std::string& name, const std::string& here) const {
  const std::string stored = get_string(name);
  if (stored != here)
    fail("differs from this run: " + prefix_ + name + " is '" + stored + "' in the file, '" + here + "' in this run");
}

void CacheReader::expect(const std::string& name, int64_t here) const {
  const int64_t stored = get_int(name);
  if (stored != here)
    fail(fmt::format("differs from this run: {}{} is {} in the file, {} in this run", prefix_, name, stored, here));
}

// ---- parsing ----

ParsedCacheFile parse_cache_file(const uint8_t* data, size_t size, const std::string& where) {
  TERN_CHECK(size >= kPrefix, "[prompt-cache] {}: truncated ({} bytes, shorter than the {}-byte prefix)", where, size,
             kPrefix);
  TERN_CHECK(std::memcmp(data, kMagic, 8) == 0, "[prompt-cache] {}: not a tern prompt-cache file (bad magic)", where);
  const uint32_t version = static_cast<uint32_t>(read_u64(data + 8) & 0xffffffffu);
  const uint32_t align = static_cast<uint32_t>(read_u64(data + 8) >> 32);
  TERN_CHECK(version == kVersion && align == kAlign, "[prompt-cache] {}: expected format version {} (alignment {}), got {} ({})",
             where, kVersion, kAlign, version, align);
  const uint64_t header_size = read_u64(data + 16), payload_size = read_u64(data + 24);
  const uint64_t header_sum = read_u64(data + 32), payload_sum = read_u64(data + 40);
  TERN_CHECK(header_size <= size - kPrefix, "[prompt-cache] {}: truncated (the header needs {} bytes, {} remain)",
             where, header_size, size - kPrefix);
  const uint64_t payload_at = align_up(kPrefix + header_size);
  TERN_CHECK(payload_at <= size && payload_size == size - payload_at,
             "[prompt-cache] {}: truncated or padded (expected {} bytes of payload, the file has {})", where,
             payload_size, payload_at <= size ? size - payload_at : 0);
  TERN_CHECK(fnv1a64(data + kPrefix, header_size) == header_sum, "[prompt-cache] {}: header checksum mismatch (corrupted)",
             where);
  for (uint64_t i = kPrefix + header_size; i < payload_at; ++i)
    TERN_CHECK(data[i] == 0, "[prompt-cache] {}: corrupted padding at byte {}", where, i);
  TERN_CHECK(fnv1a64(data + payload_at, payload_size) == payload_sum,
             "[prompt-cache] {}: payload checksum mismatch (corrupted)", where);

  ParsedCacheFile f;
  f.payload = data + payload_at;
  Decoder d(data + kPrefix, header_size, where);
  f.identity.model = d.str();
  f.identity.tokenizer = d.str();
  const uint64_t n_ids = d.count(4);
  f.ids.resize(n_ids);
  for (uint64_t i = 0; i < n_ids; ++i) {
    uint32_t v = 0;
    for (int b = 0; b < 4; ++b) v |= static_cast<uint32_t>(d.u8()) << (8 * b);
    f.ids[i] = static_cast<int32_t>(v);
  }
  const uint64_t n_records = d.count(16);
  f.records.resize(n_records);
  for (CacheFileRecord& r : f.records) {
    r.signature = d.str();
    const uint64_t n_entries = d.count(10);
    r.entries.resize(n_entries);
    std::set<std::string> names;
    for (CacheEntry& e : r.entries) {
      e.name = d.str();
      if (!names.insert(e.name).second) d.bad("entry '" + e.name + "' twice in one record");
      const uint8_t type = d.u8();
      if (type > CacheEntry::tensor) d.bad("entry type " + std::to_string(type));
      e.type = static_cast<CacheEntry::Type>(type);
      if (e.type == CacheEntry::integer) {
        e.value = static_cast<int64_t>(d.u64());
      } else if (e.type == CacheEntry::text) {
        e.str = d.str();
      } else {
        const uint8_t dt = d.u8();
        if (dt > static_cast<uint8_t>(Dtype::boolean)) d.bad("dtype code " + std::to_string(dt));
        e.dtype = static_cast<Dtype>(dt);
        const uint64_t rank = d.u64();
        if (rank > kMaxRank) d.bad("rank " + std::to_string(rank));
        uint64_t n = dtype_size(e.dtype);
        e.shape.resize(rank);
        for (uint64_t i = 0; i < rank; ++i) {
          const uint64_t dim = d.u64();
          if (dim > payload_size || (dim > 0 && n > payload_size / dim)) d.bad("a shape larger than the payload");
          n *= dim;
          e.shape[i] = static_cast<int64_t>(dim);
        }
        if (e.type == CacheEntry::bytes && (rank != 1 || e.dtype != Dtype::u8)) d.bad("a byte blob of rank != 1");
        e.offset = d.u64();
        e.size = d.u64();
        if (e.size != n || e.offset % kAlign != 0 || e.offset > payload_size || e.size > payload_size - e.offset)
          d.bad("entry '" + e.name + "' outside the payload");
      }
    }
  }
  if (!d.done()) d.bad("trailing bytes");
  return f;
}

// ---- save / load ----

void save_cache_file(const std::string& path, const CacheFileIdentity& identity, const std::vector<int32_t>& ids,
                     const Tensor& logits, const std::vector<std::unique_ptr<Cache>>& caches) {
  std::vector<CacheFileRecord> records(1 + caches.size());
  {
    CacheWriter w;
    if (logits.defined()) w.put_tensor("logits", logits);
    records[0].signature = "session";
    records[0].entries = w.entries();
  }
  for (size_t i = 0; i < caches.size(); ++i) {
    if (!caches[i]) continue;
    CacheWriter w;
    caches[i]->save(w);
    records[i + 1].signature = caches[i]->signature();
    records[i + 1].entries = w.entries();
  }

  Encoder h;
  h.str(identity.model);
  h.str(identity.tokenizer);
  h.u64(ids.size());
  for (int32_t id : ids) {
    const uint32_t v = static_cast<uint32_t>(id);
    for (int b = 0; b < 4; ++b) h.u8(static_cast<uint8_t>(v >> (8 * b)));
  }
  h.u64(records.size());
  uint64_t payload_size = 0;
  for (CacheFileRecord& r : records) {
    h.str(r.signature);
    h.u64(r.entries.size());
    for (CacheEntry& e : r.entries) {
      h.str(e.name);
      h.u8(e.type);
      if (e.type == CacheEntry::integer) {
        h.u64(static_cast<uint64_t>(e.value));
      } else if (e.type == CacheEntry::text) {
        h.str(e.str);
      } else {
        h.u8(static_cast<uint8_t>(e.dtype));
        h.u64(e.shape.size());
        for (int64_t dim : e.shape) h.u64(static_cast<uint64_t>(dim));
        e.offset = align_up(payload_size);
        e.size = e.data.size();
        payload_size = e.offset + e.size;
        h.u64(e.offset);
        h.u64(e.size);
      }
    }
  }
  std::vector<uint8_t> payload(payload_size, 0);
  for (const CacheFileRecord& r : records)
    for (const CacheEntry& e : r.entries)
      if (!e.data.empty()) std::memcpy(payload.data() + e.offset, e.data.data(), e.data.size());

  Encoder prefix;
  prefix.out.assign(kMagic, kMagic + 8);
  prefix.u64(static_cast<uint64_t>(kVersion) | (kAlign << 32));
  prefix.u64(h.out.size());
  prefix.u64(payload_size);
  prefix.u64(fnv1a64(h.out.data(), h.out.size()));
  prefix.u64(fnv1a64(payload.data(), payload.size()));
  const std::vector<uint8_t> pad(align_up(kPrefix + h.out.size()) - kPrefix - h.out.size(), 0);

  write_file_atomic(path, "prompt-cache", [&](const WriteBytes& write) {
    write(prefix.out.data(), prefix.out.size());
    write(h.out.data(), h.out.size());
    write(pad.data(), pad.size());
    write(payload.data(), payload.size());
  });
}

CacheFileContents load_cache_file(const std::string& path, const CacheFileIdentity& identity,
                                  std::vector<std::unique_ptr<Cache>>& caches, Device device,
                                  std::optional<Dtype> activations) {
  const std::string bytes = read_file(path, "prompt-cache");  // one read, not a byte-wise stream copy
  ParsedCacheFile f = parse_cache_file(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path);

  TERN_CHECK(f.identity.model == identity.model,
             "[prompt-cache] {}: saved from another model (fingerprint {} in the file, {} for this model)", path,
             f.identity.model, identity.model);
  TERN_CHECK(f.identity.tokenizer == identity.tokenizer,
             "[prompt-cache] {}: saved with another tokenizer (hash '{}' in the file, '{}' in this run)", path,
             f.identity.tokenizer, identity.tokenizer);
  TERN_CHECK(f.records.size() == caches.size() + 1 && !f.records.empty() && f.records[0].signature == "session",
             "[prompt-cache] {}: expected {} layers, got {}", path, caches.size(),
             f.records.empty() ? 0 : f.records.size() - 1);
  for (size_t i = 0; i < caches.size(); ++i) {
    const CacheFileRecord& r = f.records[i + 1];
    const std::string where = fmt::format("{}: layer {} ({})", path, i, r.signature.empty() ? "no cache" : r.signature);
    TERN_CHECK(r.signature.empty() == !caches[i], "[prompt-cache] {} differs from this run: {}", where,
               caches[i] ? "this run has a cache there" : "this run has none there");
    if (!caches[i]) continue;
    CacheReader reader(where, r.entries, f.payload, device, activations);
    caches[i]->load(reader);
    if (caches[i]->signature() != r.signature)
      reader.fail("differs from this run: the storage loaded as " + caches[i]->signature());
  }
  CacheFileContents out;
  out.ids = f.ids;
  CacheReader session(path + ": session", f.records[0].entries, f.payload);
  if (session.has("logits")) out.logits = session.get_tensor("logits");
  return out;
}

}  // namespace tern
