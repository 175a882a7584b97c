// Prompt-cache files: a generation's cache state (every layer's storage, the prompt ids, the last
// logits) saved to disk and loaded into fresh caches. Layout, little-endian:
//   [48-byte prefix: magic "TERNPC01", u32 version, u32 alignment 64, u64 header size, u64 payload
//    size, u64 FNV-1a of the header, u64 FNV-1a of the payload]
//   [header: identity (model fingerprint, tokenizer hash), token ids, then per record its signature
//    and named entries (ints, strings, byte blobs and tensors with their payload offsets)]
//   [payload at a 64-byte aligned offset; every blob at a 64-byte aligned offset inside it]
// Record 0 is the session (the logits of the last prompt position); records 1..n are the layers.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tern/state/cache.h"

namespace tern {

// 64-bit FNV-1a of n bytes, continuing from h.
constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
uint64_t fnv1a64(const void* data, size_t n, uint64_t h = kFnvOffset);

// One named value a storage saves.
struct CacheEntry {
  enum Type : uint8_t { integer = 0, text = 1, bytes = 2, tensor = 3 };
  std::string name;
  Type type = integer;
  int64_t value = 0;           // integer
  std::string str;             // text
  Dtype dtype = Dtype::u8;     // tensor (bytes: u8)
  Shape shape;                 // tensor (bytes: [n])
  std::vector<uint8_t> data;   // writer side: the blob's bytes
  uint64_t offset = 0, size = 0;  // reader side: where the blob lies in the payload
};

// What a storage's save() writes into: named entries of one record.
class CacheWriter {
 public:
  void put_int(const std::string& name, int64_t v);
  void put_string(const std::string& name, const std::string& v);
  void put_bytes(const std::string& name, const std::vector<uint8_t>& v);
  // Copies t (any device, any strides) as a contiguous CPU tensor.
  void put_tensor(const std::string& name, const Tensor& t);
  const std::vector<CacheEntry>& entries() const { return entries_; }
  // Prepended to every later name (a storage nested in another saves under its own prefix).
  void set_prefix(const std::string& prefix) { prefix_ = prefix; }

 private:
  void add(CacheEntry e);
  std::vector<CacheEntry> entries_;
  std::string prefix_;
};

// What a storage's load() reads from: one record of a parsed file. Every getter throws
// "[prompt-cache] <file>: <record>: ..." for a missing name or a wrong type.
class CacheReader {
 public:
  // Tensors come back on `device` (the caches' own: a file is device-independent); `activations`, when
  // given, is the dtype this run computes in (unquantized storage must hold it).
  CacheReader(std::string where, const std::vector<CacheEntry>& entries, const uint8_t* payload,
              Device device = Device::cpu(), std::optional<Dtype> activations = std::nullopt);
  bool has(const std::string& name) const;
  int64_t get_int(const std::string& name) const;
  std::string get_string(const std::string& name) const;
  std::vector<uint8_t> get_bytes(const std::string& name) const;
  // A new tensor on the reader's device holding the stored values.
  Tensor get_tensor(const std::string& name) const;
  // Where the caches being loaded keep their storage.
  const Device& device() const { return device_; }
  // Fails with "holds <what> in <stored dtype>, this run computes in <dtype>" unless the run's
  // activation dtype is unknown or equals stored.
  void expect_activations(const std::string& what, Dtype stored) const;
  // Throws "[prompt-cache] <where> differs from this run: <name> is <stored> in the file, <here> in
  // this run" unless the stored value equals here.
  void expect(const std::string& name, const std::string& here) const;
  void expect(const std::string& name, int64_t here) const;
  [[noreturn]] void fail(const std::string& what) const;
  // Prepended to every later name, as CacheWriter::set_prefix.
  void set_prefix(const std::string& prefix) { prefix_ = prefix; }

 private:
  const CacheEntry& find(const std::string& name, CacheEntry::Type type) const;
  std::string where_, prefix_;
  const std::vector<CacheEntry>& entries_;
  const uint8_t* payload_;
  Device device_;
  std::optional<Dtype> activations_;
};

// The layout the quantized storages save beside their packed rows (the offset, and batch, heads and
// head dims once configured).
struct PackedRowLayout {
  int64_t offset = 0;
  bool configured = false;  // false: no rows stored, and offset must be 0
  int64_t batch = 0, heads = 0, key_dim = 0, value_dim = 0;
};
void put_row_layout(CacheWriter& out, const PackedRowLayout& layout);
// Reads it back, failing unless offset >= 0 (0 when unconfigured), batch and heads in [1, 2^20] and
// both head dims in [1, 1024] (bounds that keep every size computed from them far from overflow).
PackedRowLayout get_row_layout(const CacheReader& in);

// Who may read a file: hashes computed by the caller (engine/CLI), compared as strings.
struct CacheFileIdentity {
  std::string model;      // fingerprint of config.json and the weight headers
  std::string tokenizer;  // hash of tokenizer.json's bytes; empty without a tokenizer
};

struct CacheFileRecord {
  std::string signature;  // the storage's signature() at save time ("session" for record 0, "" for no cache)
  std::vector<CacheEntry> entries;
};

// A verified file in memory: both checksums matched and every entry lies inside the payload.
struct ParsedCacheFile {
  CacheFileIdentity identity;
  std::vector<int32_t> ids;
  std::vector<CacheFileRecord> records;
  const uint8_t* payload = nullptr;
};

// Parses and verifies data[0, size); where names the file in errors. Any truncation, bad checksum or
// malformed header throws one "[prompt-cache] <where>: ..." error. The result points into data.
ParsedCacheFile parse_cache_file(const uint8_t* data, size_t size, const std::string& where);

// Writes ids, logits (the last prompt position's, may be undefined) and every cache's state to path
// atomically (a temporary file in the same directory, fsync, rename). caches[i] may be null.
void save_cache_file(const std::string& path, const CacheFileIdentity& identity, const std::vector<int32_t>& ids,
                     const Tensor& logits, const std::vector<std::unique_ptr<Cache>>& caches);

struct CacheFileContents {
  std::vector<int32_t> ids;
  Tensor logits;  // undefined when none was saved
};

// Loads path into fresh caches (as make_caches builds them for the same options). Throws one
// "[prompt-cache] <path>: ..." error when the file is unreadable, truncated or corrupted, comes from
// another model or tokenizer, or holds another storage scheme than caches. The caches' tensors land on
// `device` (the model's); the logits stay on the CPU. With `activations` (the model's compute dtype), a
// file whose unquantized storage holds another dtype (a CPU run's f32 in a bf16 GPU run) is refused.
CacheFileContents load_cache_file(const std::string& path, const CacheFileIdentity& identity,
                                  std::vector<std::unique_ptr<Cache>>& caches, Device device = Device::cpu(),
                                  std::optional<Dtype> activations = std::nullopt);

}  // namespace tern
