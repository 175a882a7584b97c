// safetensors: a validating header parser, a read-only mmap'd file whose tensors are zero-copy CPU
// views, and an atomic writer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tern/core/tensor.h"

namespace tern::io {

// One tensor of a safetensors header. begin/end are byte offsets into the data section (the bytes
// after the 8-byte length and the JSON header).
struct SafetensorsEntry {
  std::string name;
  Dtype dtype = Dtype::f32;
  Shape shape;
  uint64_t begin = 0, end = 0;
  uint64_t nbytes() const { return end - begin; }
};

// A parsed, fully validated header: tensors sorted by name, metadata, and where the data section
// starts within the buffer (8 + header length) and how long it is.
struct SafetensorsHeader {
  std::vector<SafetensorsEntry> tensors;
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;
  uint64_t data_size = 0;
};

// The largest JSON header accepted (the format's own limit).
constexpr uint64_t kMaxSafetensorsHeader = 100ull * 1000 * 1000;

// Validates a whole safetensors buffer (length, header, data section) of size bytes without touching
// tensor bytes. Any malformation (short buffer, header length past the end or over 100 MB, invalid
// JSON, unsupported dtype, bad shape, offsets out of range, overlapping or mis-sized tensors) throws
// tern::Error "[safetensors] <filename>: ..." naming the tensor where there is one; never anything else.
SafetensorsHeader parse_safetensors_header(const uint8_t* data, size_t size, const std::string& filename);

// The bytes of a tensor of `shape` in `dtype`, or nullopt unless every dim is non-negative, every
// partial product of the dims (zeros counted as 1) fits in int64 -- so that element counts and
// contiguous strides of any view of it cannot overflow -- and its byte size fits in uint64.
std::optional<uint64_t> checked_tensor_bytes(const Shape& shape, Dtype dtype);

// The safetensors spelling of a dtype ("F32", "BF16", "BOOL", ...).
const char* safetensors_dtype_name(Dtype d);

// A read-only, private mapping of one safetensors file. Tensors returned by get() borrow the
// mapping and keep it alive, so they stay valid after the SafetensorsFile handle is dropped.
class SafetensorsFile : public std::enable_shared_from_this<SafetensorsFile> {
 public:
  // Maps and validates path; throws tern::Error naming the file when it cannot be opened or read,
  // or when parse_safetensors_header rejects it.
  static std::shared_ptr<SafetensorsFile> open(const std::string& path);

  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  // Every tensor, sorted by name.
  const std::vector<SafetensorsEntry>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  bool has(const std::string& name) const;
  // The header entry of name; throws "[safetensors] <path>: missing tensor 'name'" when absent.
  const SafetensorsEntry& entry(const std::string& name) const;
  // A contiguous CPU view of name's bytes in the mapping (zero-copy; a copy only when the bytes are
  // not aligned to the dtype size). The mapping is read-only: write to a clone(), never to the view.
  // Throws like entry() when absent.
  Tensor get(const std::string& name) const;
  // Sum of all tensors' byte sizes.
  uint64_t total_bytes() const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  SafetensorsHeader header_;
  std::map<std::string, size_t> index_;  // name -> position in header_.tensors
};

// Writes tensors (any device, any layout; copied contiguous to the host) and metadata as a safetensors
// file: header padded with spaces to a multiple of 8, data in the given order. The file appears
// atomically (written to "<path>.tmp.<pid>", fsynced, renamed). Duplicate or empty names, undefined
// tensors, or I/O failures throw tern::Error naming the path.
void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace tern::io
