// safetensors: writer/reader round trips, the fixture checkpoints, and every malformed-header case.
#include "tern/io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "tests/io/io_test_util.h"

namespace tern::io {
namespace {

using testing_util::expect_error;
using testing_util::fresh_dir;
using testing_util::raw_safetensors;
using testing_util::read_file;
using testing_util::write_file;

const Dtype kAllDtypes[] = {Dtype::f32, Dtype::bf16, Dtype::f16, Dtype::i32,
                            Dtype::i64, Dtype::u8,   Dtype::i8,  Dtype::boolean};

// A tensor of shape whose bytes are a deterministic pattern (0/1 for bool).
Tensor patterned(const Shape& shape, Dtype dtype, int seed) {
  Tensor t = Tensor::empty(shape, dtype);
  auto* p = static_cast<uint8_t*>(t.data_ptr());
  for (size_t i = 0; i < t.nbytes(); ++i) {
    p[i] = dtype == Dtype::boolean ? static_cast<uint8_t>((i + seed) % 2) : static_cast<uint8_t>(i * 31 + seed * 7);
  }
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.dtype() == cb.dtype() && ca.shape() == cb.shape() &&
         std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

TEST(Safetensors, RoundTripEveryDtype) {
  std::string dir = fresh_dir("rt");
  for (Dtype d : kAllDtypes) {
    SCOPED_TRACE(dtype_name(d));
    std::string path = dir + "/" + dtype_name(d) + ".safetensors";
    Tensor a = patterned({3, 5}, d, 1), b = patterned({7}, d, 2), s = patterned({}, d, 3), e = patterned({0, 4}, d, 4);
    save_safetensors(path, {{"a", a}, {"b", b}, {"scalar", s}, {"empty", e}}, {{"format", "pt"}});
    auto f = SafetensorsFile::open(path);
    ASSERT_EQ(f->tensors().size(), 4u);
    EXPECT_TRUE(f->has("a"));
    EXPECT_FALSE(f->has("c"));
    EXPECT_EQ(f->metadata().at("format"), "pt");
    EXPECT_EQ(f->entry("a").dtype, d);
    EXPECT_EQ(f->entry("a").shape, (Shape{3, 5}));
    EXPECT_TRUE(same_bytes(f->get("a"), a));
    EXPECT_TRUE(same_bytes(f->get("b"), b));
    EXPECT_TRUE(same_bytes(f->get("scalar"), s));
    EXPECT_EQ(f->get("empty").shape(), (Shape{0, 4}));
    EXPECT_EQ(f->total_bytes(), a.nbytes() + b.nbytes() + s.nbytes());
  }
}

TEST(Safetensors, WriterLayoutIsAlignedPaddedAndAtomic) {
  std::string dir = fresh_dir("layout");
  std::string path = dir + "/x.safetensors";
  Tensor m = patterned({4, 3}, Dtype::f32, 5);
  save_safetensors(path, {{"t", m.transpose(0, 1)}, {"odd", patterned({3}, Dtype::u8, 1)}});
  std::string bytes = read_file(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes[8], '{');
  std::string header = bytes.substr(8, n);
  EXPECT_EQ(header.find_last_not_of(' '), header.rfind('}'));
  EXPECT_EQ(bytes.size(), 8 + n + 12 * 4 + 3);
  auto f = SafetensorsFile::open(path);
  EXPECT_TRUE(same_bytes(f->get("t"), m.transpose(0, 1).contiguous()));
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename(), "x.safetensors") << "leftover temp file";
  }
  save_safetensors(path, {{"again", m}});  // replaces the old file
  EXPECT_TRUE(SafetensorsFile::open(path)->has("again"));
}

TEST(Safetensors, WriterRejectsBadInput) {
  std::string dir = fresh_dir("bad");
  Tensor t = patterned({2}, Dtype::f32, 0);
  expect_error([&] { save_safetensors(dir + "/d.safetensors", {{"x", t}, {"x", t}}); }, {"d.safetensors", "'x'", "duplicate"});
  expect_error([&] { save_safetensors(dir + "/u.safetensors", {{"x", Tensor()}}); }, {"u.safetensors", "'x'", "undefined"});
  expect_error([&] { save_safetensors(dir + "/e.safetensors", {{"", t}}); }, {"e.safetensors", "tensor name"});
  expect_error([&] { save_safetensors(dir + "/no/such/dir/f.safetensors", {{"x", t}}); }, {"f.safetensors"});
}

TEST(Safetensors, ViewsOutliveTheFileHandle) {
  std::string path = fresh_dir("alive") + "/a.safetensors";
  Tensor a = patterned({16, 16}, Dtype::bf16, 9);
  save_safetensors(path, {{"a", a}});
  Tensor v;
  {
    auto f = SafetensorsFile::open(path);
    v = f->get("a");
  }
  EXPECT_TRUE(same_bytes(v, a));
  EXPECT_EQ(v.device(), Device::cpu());
}

TEST(Safetensors, ReadsFixtureCheckpoints) {
  int n_files = 0;
  for (const auto& d : std::filesystem::directory_iterator(std::string(TERN_TEST_DATA) + "/models")) {
    std::string path = (d.path() / "model.safetensors").string();
    if (!std::filesystem::exists(path)) continue;
    SCOPED_TRACE(path);
    ++n_files;
    auto f = SafetensorsFile::open(path);
    EXPECT_GT(f->tensors().size(), 5u);
    EXPECT_EQ(f->metadata().at("format"), "pt");
    for (const auto& e : f->tensors()) {
      EXPECT_EQ(e.dtype, Dtype::bf16) << e.name;
      EXPECT_GE(e.shape.size(), 1u) << e.name;
      EXPECT_EQ(e.nbytes(), static_cast<uint64_t>(numel(e.shape)) * 2) << e.name;
    }
  }
  EXPECT_GE(n_files, 8);

  auto q = SafetensorsFile::open(std::string(TERN_TEST_DATA) + "/models/qwen3/model.safetensors");
  const auto& emb = q->entry("model.embed_tokens.weight");
  EXPECT_EQ(emb.dtype, Dtype::bf16);
  EXPECT_EQ(emb.shape, (Shape{512, 64}));
  Tensor t = q->get("model.embed_tokens.weight");
  std::vector<float> v = t.to_f32_vector();
  float amax = 0;
  for (float x : v) amax = std::max(amax, std::abs(x));
  EXPECT_GT(amax, 0.0f);
  EXPECT_LT(amax, 100.0f);
  EXPECT_TRUE(q->has("model.layers.0.self_attn.q_norm.weight"));

  auto demo = SafetensorsFile::open(std::string(TERN_SOURCE_DIR) + "/models/brown-qwen3-14m/model.safetensors");
  EXPECT_EQ(demo->entry("model.embed_tokens.weight").shape, (Shape{4096, 384}));
}

// A header whose single tensor x.weight is described by entry.
std::string one_tensor(const std::string& entry) { return "{\"x.weight\":" + entry + "}"; }

std::string parse_error(const std::string& bytes, std::initializer_list<std::string> parts) {
  return expect_error(
      [&] {
        parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "model.safetensors");
      },
      parts);
}

TEST(Safetensors, RejectsMalformedHeaders) {
  const std::string data(1024, '\0');
  std::string msg = parse_error(
      raw_safetensors(one_tensor(R"({"dtype":"F32","shape":[1024],"data_offsets":[0,4096]})"), data),
      {"model.safetensors", "'x.weight'"});
  EXPECT_EQ(msg, "[safetensors] model.safetensors: tensor 'x.weight' expected data_offsets within 1024 bytes, got [0, 4096]");

  parse_error("", {"model.safetensors", "at least 8 bytes"});
  parse_error(std::string("\x10\0\0", 3), {"model.safetensors", "at least 8 bytes"});
  parse_error(raw_safetensors("{}", "", 4096), {"model.safetensors", "header length", "4096"});
  parse_error(raw_safetensors("{}", "", 200'000'000), {"model.safetensors", "at most"});
  parse_error(raw_safetensors("{}", "", 0), {"model.safetensors", "JSON object"});
  parse_error(raw_safetensors("[1, 2]"), {"model.safetensors", "JSON object"});
  parse_error(raw_safetensors("{\"a\": "), {"model.safetensors", "valid JSON", "column"});
  parse_error(raw_safetensors("{\"a\": 1} x"), {"model.safetensors", "valid JSON"});
  parse_error(raw_safetensors(std::string(10, '{')), {"model.safetensors", "valid JSON"});
  parse_error(raw_safetensors("{\"a\":" + std::string(5000, '[') + std::string(5000, ']') + "}"),
              {"model.safetensors", "nested"});
  parse_error(raw_safetensors(one_tensor(R"({"dtype":"F64","shape":[1],"data_offsets":[0,8]})"), data),
              {"model.safetensors", "'x.weight'", "unsupported dtype F64"});
  parse_error(raw_safetensors(one_tensor(R"({"dtype":"Q4","shape":[1],"data_offsets":[0,8]})"), data),
              {"model.safetensors", "'x.weight'", "'Q4'"});
  parse_error(raw_safetensors(one_tensor(R"({"dtype":7,"shape":[1],"data_offsets":[0,8]})"), data),
              {"model.safetensors", "'x.weight'", "dtype"});
  parse_error(raw_safetensors(one_tensor(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})"), data),
              {"model.safetensors", "'x.weight'", "shape"});
  parse_error(raw_safetensors(one_tensor(R"({"dtype":"F32","shape":[1.5],"data_offsets":[0,4]})"), data),
              {"model.safetensors", "'x.weight'", "shape"});
  parse_error(raw_safetensors(one_tensor(R"({"dtype":"F32","shape":{},"data_offsets":[0,4]})"), data),
              {"model.safetensors", "'x.weight'", "shape"});
  parse_error(raw_safetensors(one_tensor(
                  R"({"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]})"), data),
              {"model.safetensors", "'x.weight'", "64 bits"});
  parse_error(raw_safetensors(one_tensor(R"({"dtype":"F32","shape":[2],"data_offsets":[0,12]})"), data),
              {"model.safetensors", "'x.weight'", "expected 8 bytes", "[0, 12]"});
  parse_error(raw_safetensors(one_tensor(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})"), data),
              {"model.safetensors", "'x.weight'", "begin <= end"});
  parse_error(raw_safetensors(one_tensor(R"({"dtype":"F32","shape":[2],"data_offsets":[0]})"), data),
              {"model.safetensors", "'x.weight'", "data_offsets"});
  parse_error(raw_safetensors(one_tensor(R"({"dtype":"F32","shape":[2],"data_offsets":[0,-8]})"), data),
              {"model.safetensors", "'x.weight'", "data_offsets"});
  parse_error(raw_safetensors(one_tensor(R"({"dtype":"F32","shape":[2]})"), data),
              {"model.safetensors", "'x.weight'", "'data_offsets'"});
  parse_error(raw_safetensors(one_tensor("[]"), data), {"model.safetensors", "'x.weight'", "object"});
  parse_error(raw_safetensors(R"({"__metadata__":[]})"), {"model.safetensors", "__metadata__"});
  parse_error(raw_safetensors(R"({"__metadata__":{"k":1}})"), {"model.safetensors", "__metadata__", "'k'"});
  parse_error(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                              R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", data),
              {"model.safetensors", "'b'", "overlapping tensor 'a'", "[0, 8]", "[4, 12]"});
}

TEST(Safetensors, AcceptsEdgeCases) {
  auto parse = [](const std::string& b) {
    return parse_safetensors_header(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "f");
  };
  EXPECT_TRUE(parse(raw_safetensors("{}")).tensors.empty());
  const std::string header =
      R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[2,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}   )";
  SafetensorsHeader h = parse(raw_safetensors(header, "xy"));
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.tensors[0].name, "a");
  EXPECT_EQ(h.data_size, 2u);
  EXPECT_EQ(h.data_start, 8u + header.size());
}

TEST(Safetensors, OpenRejectsBadFiles) {
  std::string dir = fresh_dir("open");
  expect_error([&] { SafetensorsFile::open(dir + "/none.safetensors"); }, {"none.safetensors", "readable"});
  expect_error([&] { SafetensorsFile::open(dir); }, {dir, "regular file"});
  write_file(dir + "/empty.safetensors", "");
  expect_error([&] { SafetensorsFile::open(dir + "/empty.safetensors"); }, {"empty.safetensors", "8 bytes"});

  std::string fixture = read_file(std::string(TERN_TEST_DATA) + "/models/qwen3/model.safetensors");
  write_file(dir + "/truncated.safetensors", fixture.substr(0, fixture.size() / 2));
  expect_error([&] { SafetensorsFile::open(dir + "/truncated.safetensors"); },
               {"truncated.safetensors", "tensor '", "expected data_offsets within"});
  write_file(dir + "/cut_header.safetensors", fixture.substr(0, 200));
  expect_error([&] { SafetensorsFile::open(dir + "/cut_header.safetensors"); }, {"cut_header.safetensors", "header length"});

  save_safetensors(dir + "/ok.safetensors", {{"w", patterned({2, 2}, Dtype::f32, 1)}});
  auto f = SafetensorsFile::open(dir + "/ok.safetensors");
  expect_error([&] { f->get("missing.weight"); }, {"ok.safetensors", "missing tensor 'missing.weight'"});
}

}  // namespace
}  // namespace tern::io
