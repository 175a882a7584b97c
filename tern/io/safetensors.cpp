// safetensors header validation, the mmap'd reader and the atomic writer.
#include "tern/io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "tern/base/file.h"
#include "tern/io/json_util.h"

namespace tern::io {
namespace {

using nlohmann::json;

// The header's legal nesting is object -> object -> array; anything deeper is rejected while parsing
// so a hostile header cannot build a deeply nested document.
constexpr int kMaxJsonDepth = 8;

struct DtypeSpelling {
  const char* name;
  Dtype dtype;
};
constexpr DtypeSpelling kDtypes[] = {{"F32", Dtype::f32}, {"BF16", Dtype::bf16}, {"F16", Dtype::f16},
                                     {"I32", Dtype::i32}, {"I64", Dtype::i64},   {"U8", Dtype::u8},
                                     {"I8", Dtype::i8},   {"BOOL", Dtype::boolean}};
// Valid safetensors dtypes tern has no tensor type for.
constexpr const char* kUnsupportedDtypes[] = {"F64", "I16", "U16", "U32", "U64", "F8_E4M3", "F8_E5M2",
                                              "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64"};

Dtype parse_dtype(const json& j, const std::string& file, const std::string& name) {
  TERN_CHECK(j.is_string(), "[safetensors] {}: tensor '{}' expected dtype to be a string, got {}", file, name,
             json_brief(j));
  const auto& s = j.get_ref<const std::string&>();
  for (const auto& d : kDtypes) {
    if (s == d.name) return d.dtype;
  }
  for (const char* u : kUnsupportedDtypes) {
    TERN_CHECK(s != u,
               "[safetensors] {}: tensor '{}' expected a supported dtype (F32, BF16, F16, I32, I64, U8, I8, BOOL), "
               "got unsupported dtype {}",
               file, name, s);
  }
  TERN_THROW("[safetensors] {}: tensor '{}' expected a safetensors dtype, got '{}'", file, name, s);
}

uint64_t parse_u64(const json& j, const std::string& file, const std::string& name, const char* what) {
  TERN_CHECK(j.is_number_unsigned() || (j.is_number_integer() && j.get<int64_t>() >= 0),
             "[safetensors] {}: tensor '{}' expected {} to be non-negative integers, got {}", file, name, what,
             json_brief(j));
  return j.get<uint64_t>();
}

SafetensorsEntry parse_entry(const std::string& name, const json& v, uint64_t data_size, const std::string& file) {
  TERN_CHECK(v.is_object(), "[safetensors] {}: tensor '{}' expected an object, got {}", file, name, json_brief(v));
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    TERN_CHECK(v.contains(key), "[safetensors] {}: tensor '{}' expected key '{}'", file, name, key);
  }
  SafetensorsEntry e;
  e.name = name;
  e.dtype = parse_dtype(v.at("dtype"), file, name);

  const json& shape = v.at("shape");
  TERN_CHECK(shape.is_array(), "[safetensors] {}: tensor '{}' expected shape to be an array, got {}", file, name,
             json_brief(shape));
  for (const json& d : shape) {
    const uint64_t n = parse_u64(d, file, name, "shape dims");
    TERN_CHECK(n <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
               "[safetensors] {}: tensor '{}' expected a shape whose size fits in 64 bits, got {}", file, name,
               json_brief(shape));
    e.shape.push_back(static_cast<int64_t>(n));
  }
  const std::optional<uint64_t> bytes = checked_tensor_bytes(e.shape, e.dtype);
  TERN_CHECK(bytes.has_value(), "[safetensors] {}: tensor '{}' expected a shape whose size fits in 64 bits, got {}",
             file, name, json_brief(shape));
  const uint64_t expected_bytes = *bytes;

  const json& off = v.at("data_offsets");
  TERN_CHECK(off.is_array() && off.size() == 2,
             "[safetensors] {}: tensor '{}' expected data_offsets [begin, end], got {}", file, name, json_brief(off));
  e.begin = parse_u64(off[0], file, name, "data_offsets");
  e.end = parse_u64(off[1], file, name, "data_offsets");
  TERN_CHECK(e.begin <= e.end, "[safetensors] {}: tensor '{}' expected data_offsets begin <= end, got [{}, {}]", file,
             name, e.begin, e.end);
  TERN_CHECK(e.end <= data_size,
             "[safetensors] {}: tensor '{}' expected data_offsets within {} bytes, got [{}, {}]", file, name,
             data_size, e.begin, e.end);
  TERN_CHECK(e.end - e.begin == expected_bytes,
             "[safetensors] {}: tensor '{}' expected {} bytes for {} {}, got data_offsets [{}, {}] ({} bytes)", file,
             name, expected_bytes, safetensors_dtype_name(e.dtype), shape_str(e.shape), e.begin, e.end,
             e.end - e.begin);
  return e;
}

json parse_header_json(const uint8_t* p, size_t n, const std::string& file) {
  // A callback that throws on excessive depth keeps both parsing and destruction shallow.
  json::parser_callback_t depth_guard = [&file](int depth, json::parse_event_t, json&) {
    TERN_CHECK(depth <= kMaxJsonDepth, "[safetensors] {}: expected a header nested at most {} deep, got deeper",
               file, kMaxJsonDepth);
    return true;
  };
  try {
    return json::parse(p, p + n, depth_guard);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    size_t cut = what.find("] ");
    TERN_THROW("[safetensors] {}: expected a valid JSON header, got {}", file,
               cut == std::string::npos ? what : what.substr(cut + 2));
  }
}

SafetensorsHeader parse_impl(const uint8_t* data, size_t size, const std::string& file) {
  TERN_CHECK(data != nullptr || size == 0, "[safetensors] {}: expected a buffer, got null", file);
  TERN_CHECK(size >= 8, "[safetensors] {}: expected at least 8 bytes (the header length), got {}", file, size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
  TERN_CHECK(n <= kMaxSafetensorsHeader, "[safetensors] {}: expected a header length of at most {} bytes, got {}",
             file, kMaxSafetensorsHeader, n);
  TERN_CHECK(n <= size - 8, "[safetensors] {}: expected a header length within the file ({} bytes after the length), got {}",
             file, size - 8, n);
  TERN_CHECK(n >= 2 && data[8] == '{', "[safetensors] {}: expected the header to be a JSON object starting with '{{', got {} bytes{}",
             file, n, n == 0 ? "" : fmt::format(" starting with byte 0x{:02x}", data[8]));

  json h = parse_header_json(data + 8, n, file);
  TERN_CHECK(h.is_object(), "[safetensors] {}: expected the header to be a JSON object, got {}", file, h.type_name());

  SafetensorsHeader out;
  out.data_start = 8 + n;
  out.data_size = size - 8 - n;
  for (const auto& [key, value] : h.items()) {
    if (key == "__metadata__") {
      TERN_CHECK(value.is_object(), "[safetensors] {}: expected __metadata__ to be an object, got {}", file,
                 json_brief(value));
      for (const auto& [mk, mv] : value.items()) {
        TERN_CHECK(mv.is_string(), "[safetensors] {}: expected __metadata__ '{}' to be a string, got {}", file, mk,
                   json_brief(mv));
        out.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    out.tensors.push_back(parse_entry(key, value, out.data_size, file));
  }

  std::vector<const SafetensorsEntry*> by_offset;
  by_offset.reserve(out.tensors.size());
  for (const auto& e : out.tensors) {
    if (e.begin != e.end) by_offset.push_back(&e);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const SafetensorsEntry* a, const SafetensorsEntry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const SafetensorsEntry& a = *by_offset[i - 1];
    const SafetensorsEntry& b = *by_offset[i];
    TERN_CHECK(b.begin >= a.end,
               "[safetensors] {}: tensor '{}' expected data_offsets not overlapping tensor '{}' [{}, {}], got [{}, {}]",
               file, b.name, a.name, a.begin, a.end, b.begin, b.end);
  }
  return out;
}

std::string errno_str() { return std::strerror(errno); }

}  // namespace

std::optional<uint64_t> checked_tensor_bytes(const Shape& shape, Dtype dtype) {
  int64_t extent = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(extent, std::max<int64_t>(d, 1), &extent)) return std::nullopt;
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(numel(shape)), static_cast<uint64_t>(dtype_size(dtype)), &bytes)) {
    return std::nullopt;
  }
  return bytes;
}

const char* safetensors_dtype_name(Dtype d) {
  for (const auto& s : kDtypes) {
    if (s.dtype == d) return s.name;
  }
  return "?";
}

SafetensorsHeader parse_safetensors_header(const uint8_t* data, size_t size, const std::string& filename) {
  try {
    return parse_impl(data, size, filename);
  } catch (const json::exception& e) {
    TERN_THROW("[safetensors] {}: expected a well-formed header, got {}", filename, e.what());
  }
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TERN_CHECK(fd >= 0, "[safetensors] {}: expected a readable file, got error: {}", path, errno_str());
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    TERN_THROW("[safetensors] {}: expected a regular file", path);
  }
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->map_size_ = static_cast<size_t>(st.st_size);
  if (f->map_size_ > 0) {
    void* m = ::mmap(nullptr, f->map_size_, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    ::close(fd);
    TERN_CHECK(m != MAP_FAILED, "[safetensors] {}: expected to map {} bytes, got error: {}", path, f->map_size_,
               std::strerror(err));
    f->map_ = m;
  } else {
    ::close(fd);
  }
  f->header_ = parse_safetensors_header(static_cast<const uint8_t*>(f->map_), f->map_size_, path);
  for (size_t i = 0; i < f->header_.tensors.size(); ++i) f->index_[f->header_.tensors[i].name] = i;
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, map_size_);
}

bool SafetensorsFile::has(const std::string& name) const { return index_.count(name) != 0; }

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  auto it = index_.find(name);
  TERN_CHECK(it != index_.end(), "[safetensors] {}: missing tensor '{}'", path_, name);
  return header_.tensors[it->second];
}

Tensor SafetensorsFile::get(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  uint8_t* p = static_cast<uint8_t*>(map_) + header_.data_start + e.begin;
  size_t elem = dtype_size(e.dtype);
  if (e.nbytes() == 0 || reinterpret_cast<uintptr_t>(p) % elem != 0) {
    // Empty tensors need no mapping; unaligned ones are copied so typed access stays well defined.
    Tensor t = Tensor::empty(e.shape, e.dtype);
    if (e.nbytes() > 0) std::memcpy(t.data_ptr(), p, e.nbytes());
    return t;
  }
  // The mapping is read-only: writing through the view faults, which is the intended contract.
  auto storage = Storage::borrow(p, e.nbytes(), Device::cpu(), std::const_pointer_cast<SafetensorsFile>(shared_from_this()));
  return Tensor::from_storage(std::move(storage), 0, e.shape, contiguous_strides(e.shape), e.dtype);
}

uint64_t SafetensorsFile::total_bytes() const {
  uint64_t n = 0;
  for (const auto& e : header_.tensors) n += e.nbytes();
  return n;
}

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<Tensor> host;
  host.reserve(tensors.size());
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    TERN_CHECK(!name.empty() && name != "__metadata__", "[safetensors] {}: expected a tensor name, got '{}'", path,
               name);
    TERN_CHECK(!header.contains(name), "[safetensors] {}: tensor '{}' expected a unique name, got a duplicate", path,
               name);
    TERN_CHECK(t.defined(), "[safetensors] {}: tensor '{}' expected a defined tensor, got undefined", path, name);
    Tensor h = t.device().is_cpu() ? t.contiguous() : t.to(Device::cpu()).contiguous();
    uint64_t n = h.nbytes();
    header[name] = {{"dtype", safetensors_dtype_name(h.dtype())},
                    {"shape", h.shape()},
                    {"data_offsets", {offset, offset + n}}};
    offset += n;
    host.push_back(std::move(h));
  }
  std::string text = header.dump(-1, ' ', false, json::error_handler_t::strict);
  text.append((8 - text.size() % 8) % 8, ' ');
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));

  write_file_atomic(path, "safetensors", [&](const WriteBytes& write) {
    write(len, 8);
    write(text.data(), text.size());
    for (const Tensor& h : host) {
      if (h.nbytes() > 0) write(h.data_ptr(), h.nbytes());
    }
  });
}

}  // namespace tern::io
