// Prompt-cache files: every storage kind round-trips (the next append's attention read after save ->
// load into a fresh cache is bit-identical to the original's), tensors sit at 64-byte offsets, and
// truncated, corrupted, foreign or mismatched files fail with one "[prompt-cache] <file>: ..." error.
#include "tern/state/cache_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <random>

#include "tern/state/affine_kv_cache.h"
#include "tern/state/affine_ring_kv_cache.h"
#include "tern/state/plain_kv_cache.h"
#include "tern/state/recurrent_cache.h"
#include "tern/state/ring_kv_cache.h"
#include "tern/state/ring_transition_kv_cache.h"
#include "tern/state/transition_kv_cache.h"
#include "tern/state/turboquant_kv_cache.h"

namespace tern {
namespace {

Tensor randn(const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  Tensor t = Tensor::empty(shape, Dtype::f32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/tern_cache_file_" + std::to_string(getpid()) + "_" + name + ".tpc";
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

const CacheFileIdentity kId{"model-a", "tok-a"};

struct Kind {
  std::string name;
  std::function<std::unique_ptr<KVCache>()> make;
};

std::vector<Kind> kinds() {
  return {
      {"plain", [] { return std::make_unique<PlainKVCache>(); }},
      {"plain_window", [] { return std::make_unique<PlainKVCache>(8); }},
      {"ring16", [] { return std::make_unique<RingKVCache>(16); }},
      {"affine4_start0", [] { return std::make_unique<TransitionKVCache>(0, std::make_unique<AffineKVCache>(4, 32)); }},
      {"affine8_start12",
       [] { return std::make_unique<TransitionKVCache>(12, std::make_unique<AffineKVCache>(8, 64)); }},
      {"affine4_start_late",
       [] { return std::make_unique<TransitionKVCache>(1000, std::make_unique<AffineKVCache>(4, 64)); }},
      {"ring16_affine8_start0",
       [] { return std::make_unique<RingTransitionKVCache>(0, std::make_unique<AffineRingKVCache>(16, 8, 32)); }},
      {"ring16_affine4_start12",
       [] { return std::make_unique<RingTransitionKVCache>(12, std::make_unique<AffineRingKVCache>(16, 4, 64)); }},
      {"turbo_k8v3",
       [] { return std::make_unique<TransitionKVCache>(5, std::make_unique<TurboQuantKVCache>(8, 3, false)); }},
      {"turbo_k4v3",
       [] { return std::make_unique<TransitionKVCache>(3, std::make_unique<TurboQuantKVCache>(4, 3, false)); }},
      {"turbo_k8v4_deferred",
       [] { return std::make_unique<TransitionKVCache>(0, std::make_unique<TurboQuantKVCache>(8, 4, true)); }},
  };
}

std::vector<float> values_of(const Tensor& t) { return t.contiguous().to_f32_vector(); }

// Appends `chunks` positions of random k/v (B 2, Hkv 2, D 64) to c; seeds from `seed`.
void fill(KVCache& c, const std::vector<int64_t>& chunks, uint32_t seed) {
  for (int64_t n : chunks) {
    c.append(randn({2, 2, n, 64}, seed), randn({2, 2, n, 64}, seed + 1), n == 1 ? AppendPhase::decode : AppendPhase::window);
    seed += 2;
  }
}

TEST(CacheFile, EveryKVStorageContinuesBitIdentically) {
  const std::vector<std::vector<int64_t>> histories = {{}, {3}, {7, 5, 1}, {20}, {10, 1, 9, 3}};
  for (const Kind& kind : kinds())
    for (const auto& history : histories) {
      SCOPED_TRACE(kind.name + " after " + std::to_string(history.size()) + " appends");
      std::vector<std::unique_ptr<Cache>> original;
      original.push_back(kind.make());
      fill(static_cast<KVCache&>(*original[0]), history, 11);
      const std::string path = temp_path(kind.name);
      const std::vector<int32_t> ids = {5, 6, 7};
      const Tensor logits = randn({1, 1, 10}, 99);
      save_cache_file(path, kId, ids, logits, original);

      std::vector<std::unique_ptr<Cache>> loaded;
      loaded.push_back(kind.make());
      CacheFileContents c = load_cache_file(path, kId, loaded);
      EXPECT_EQ(c.ids, ids);
      EXPECT_EQ(values_of(c.logits), values_of(logits));
      EXPECT_EQ(loaded[0]->signature(), original[0]->signature());
      EXPECT_EQ(loaded[0]->offset(), original[0]->offset());
      EXPECT_EQ(loaded[0]->minimum_reusable_offset(), original[0]->minimum_reusable_offset());
      EXPECT_EQ(loaded[0]->max_append_tokens(), original[0]->max_append_tokens());

      auto& a = static_cast<KVCache&>(*original[0]);
      auto& b = static_cast<KVCache&>(*loaded[0]);
      // Two further appends: a window then a decode step; each read must match bit for bit.
      for (int64_t n : {6, 1}) {
        Tensor k = randn({2, 2, n, 64}, 500 + n), v = randn({2, 2, n, 64}, 600 + n), q = randn({2, 4, n, 64}, 700 + n);
        const AppendPhase ph = n == 1 ? AppendPhase::decode : AppendPhase::window;
        std::vector<float> ra = values_of(a.append(k, v, ph)->attend(q, 0.125f));
        std::vector<float> rb = values_of(b.append(k, v, ph)->attend(q, 0.125f));
        ASSERT_EQ(ra.size(), rb.size());
        EXPECT_EQ(std::memcmp(ra.data(), rb.data(), ra.size() * sizeof(float)), 0);
        EXPECT_EQ(a.signature(), b.signature());
      }
      std::remove(path.c_str());
    }
}

TEST(CacheFile, RecurrentStateRoundTripsExactly) {
  const RecurrentShape shape{24, 4, 2, 8, 8};
  std::vector<std::unique_ptr<Cache>> original;
  original.push_back(std::make_unique<RecurrentCache>(shape));
  auto& r = static_cast<RecurrentCache&>(*original[0]);
  r.conv_state(1).copy_from(randn({1, 3, 24}, 1));
  r.recurrent_state(1).copy_from(randn({1, 2, 8, 8}, 2));
  r.advance(9);
  const std::string path = temp_path("recurrent");
  save_cache_file(path, kId, {1, 2}, Tensor(), original);

  std::vector<std::unique_ptr<Cache>> loaded;
  loaded.push_back(std::make_unique<RecurrentCache>(shape));
  CacheFileContents c = load_cache_file(path, kId, loaded);
  EXPECT_FALSE(c.logits.defined());
  auto& l = static_cast<RecurrentCache&>(*loaded[0]);
  EXPECT_EQ(l.offset(), 9);
  EXPECT_EQ(values_of(l.conv_state(1)), values_of(r.conv_state(1)));
  EXPECT_EQ(values_of(l.recurrent_state(1)), values_of(r.recurrent_state(1)));

  // Another shape (conv_dim 32): one error naming the layer.
  std::vector<std::unique_ptr<Cache>> other;
  other.push_back(std::make_unique<RecurrentCache>(RecurrentShape{32, 4, 2, 8, 8}));
  try {
    load_cache_file(path, kId, other);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[prompt-cache] " + path + ": layer 0 (recurrent:f32)"), std::string::npos)
        << e.what();
  }
  std::remove(path.c_str());
}

TEST(CacheFile, NullLayersAndAlignment) {
  std::vector<std::unique_ptr<Cache>> caches;
  caches.push_back(std::make_unique<PlainKVCache>());
  caches.push_back(nullptr);
  caches.push_back(std::make_unique<RingKVCache>(4));
  fill(static_cast<KVCache&>(*caches[0]), {5}, 1);
  fill(static_cast<KVCache&>(*caches[2]), {3}, 2);
  const std::string path = temp_path("aligned");
  save_cache_file(path, kId, {1, 2, 3}, randn({1, 1, 7}, 3), caches);
  std::vector<uint8_t> bytes = read_bytes(path);
  ParsedCacheFile f = parse_cache_file(bytes.data(), bytes.size(), path);
  EXPECT_EQ((f.payload - bytes.data()) % 64, 0);
  ASSERT_EQ(f.records.size(), 4u);
  EXPECT_EQ(f.records[2].signature, "");
  int blobs = 0;
  for (const CacheFileRecord& r : f.records)
    for (const CacheEntry& e : r.entries)
      if (e.type == CacheEntry::tensor || e.type == CacheEntry::bytes) {
        EXPECT_EQ(e.offset % 64, 0u) << e.name;
        ++blobs;
      }
  EXPECT_EQ(blobs, 5);  // logits, plain keys/values, ring keys/values

  std::vector<std::unique_ptr<Cache>> fresh;
  fresh.push_back(std::make_unique<PlainKVCache>());
  fresh.push_back(nullptr);
  fresh.push_back(std::make_unique<RingKVCache>(4));
  EXPECT_NO_THROW(load_cache_file(path, kId, fresh));
  std::remove(path.c_str());
}

// Loads path into caches and returns the error text ("" when it loaded).
std::string load_error(const std::string& path, const CacheFileIdentity& id, std::vector<std::unique_ptr<Cache>>& c) {
  try {
    load_cache_file(path, id, c);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<std::unique_ptr<Cache>> one(std::unique_ptr<Cache> c) {
  std::vector<std::unique_ptr<Cache>> v;
  v.push_back(std::move(c));
  return v;
}

std::unique_ptr<Cache> affine_filled() {
  auto c = std::make_unique<TransitionKVCache>(0, std::make_unique<AffineKVCache>(4, 32));
  fill(*c, {9}, 4);
  return c;
}

TEST(CacheFile, MismatchesFailWithOneClearError) {
  const std::string path = temp_path("mismatch");
  save_cache_file(path, kId, {1}, randn({1, 1, 4}, 1), one(affine_filled()));
  auto expect_error = [&](std::vector<std::unique_ptr<Cache>> c, const CacheFileIdentity& id, const std::string& what) {
    std::string e = load_error(path, id, c);
    EXPECT_EQ(e.rfind("[prompt-cache] " + path + ": ", 0), 0u) << e;
    EXPECT_NE(e.find(what), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  };
  expect_error(one(std::make_unique<TransitionKVCache>(0, std::make_unique<AffineKVCache>(4, 32))), {"model-b", "tok-a"},
               "another model");
  expect_error(one(std::make_unique<TransitionKVCache>(0, std::make_unique<AffineKVCache>(4, 32))), {"model-a", ""},
               "another tokenizer");
  expect_error(one(std::make_unique<TransitionKVCache>(0, std::make_unique<TurboQuantKVCache>(8, 3, false))), kId,
               "kv:turboquant:k8v3");
  expect_error(one(std::make_unique<TransitionKVCache>(0, std::make_unique<AffineKVCache>(8, 32))), kId,
               "kv:affine:8:32");
  expect_error(one(std::make_unique<TransitionKVCache>(4, std::make_unique<AffineKVCache>(4, 32))), kId, "at 4");
  expect_error(one(std::make_unique<PlainKVCache>()), kId, "kind is 'bf16-first to kv:affine:4:32 at 0' in the file");
  std::vector<std::unique_ptr<Cache>> two;
  two.push_back(std::make_unique<PlainKVCache>());
  two.push_back(std::make_unique<PlainKVCache>());
  expect_error(std::move(two), kId, "expected 2 layers, got 1");

  // A ring of another window, and a plain cache read as a ring.
  std::vector<std::unique_ptr<Cache>> ring;
  ring.push_back(std::make_unique<RingKVCache>(16));
  fill(static_cast<KVCache&>(*ring[0]), {20}, 1);
  save_cache_file(path, kId, {1}, Tensor(), ring);
  expect_error(one(std::make_unique<RingKVCache>(8)), kId, "window is 16 in the file, 8 in this run");
  expect_error(one(std::make_unique<PlainKVCache>()), kId, "kind is 'ring' in the file, 'plain' in this run");
  auto same = one(std::make_unique<RingKVCache>(16));
  EXPECT_EQ(load_error(path, kId, same), "");  // the matching configuration loads
  std::remove(path.c_str());
  expect_error(one(std::make_unique<PlainKVCache>()), kId, "expected a readable file");
}

TEST(CacheFile, TruncatedOrCorruptedFilesFail) {
  const std::string path = temp_path("corrupt");
  save_cache_file(path, kId, {1, 2, 3}, randn({1, 1, 4}, 1), one(affine_filled()));
  const std::vector<uint8_t> good = read_bytes(path);
  ASSERT_GT(good.size(), 200u);
  ParsedCacheFile parsed = parse_cache_file(good.data(), good.size(), path);
  const size_t payload_at = static_cast<size_t>(parsed.payload - good.data());

  auto error_for = [&](const std::vector<uint8_t>& bytes) {
    write_bytes(path, bytes);
    auto caches = one(std::make_unique<TransitionKVCache>(0, std::make_unique<AffineKVCache>(4, 32)));
    return load_error(path, kId, caches);
  };
  EXPECT_EQ(error_for(good), "");
  for (size_t cut : {size_t(0), size_t(7), size_t(47), size_t(60), payload_at - 1, payload_at, payload_at + 1,
                     good.size() / 2, good.size() - 1}) {
    std::vector<uint8_t> b(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut));
    std::string e = error_for(b);
    EXPECT_EQ(e.rfind("[prompt-cache] " + path + ": ", 0), 0u) << "cut at " << cut << ": " << e;
  }
  for (size_t at : {size_t(3), size_t(20), size_t(50), payload_at - 5, payload_at + 3, good.size() - 2}) {
    std::vector<uint8_t> b = good;
    b[at] ^= 0x10;
    std::string e = error_for(b);
    EXPECT_EQ(e.rfind("[prompt-cache] " + path + ": ", 0), 0u) << "flip at " << at << ": " << e;
  }
  std::vector<uint8_t> flipped = good;
  flipped[payload_at + 3] ^= 1;
  EXPECT_NE(error_for(flipped).find("payload checksum mismatch"), std::string::npos);
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  EXPECT_NE(error_for(longer).find("truncated or padded"), std::string::npos);
  std::remove(path.c_str());
}

class NoPersistence : public Cache {
 public:
  std::string signature() const override { return "kv:test"; }
  int64_t offset() const override { return 0; }
  Tensor next_positions(int64_t n) const override { return uniform_positions(0, n); }
  bool is_trimmable() const override { return false; }
  int64_t trim(int64_t) override { return 0; }
  int64_t bytes() const override { return 0; }
};

TEST(CacheFile, StoragesWithoutPersistenceSaySo) {
  std::vector<std::unique_ptr<Cache>> c;
  c.push_back(std::make_unique<NoPersistence>());
  try {
    save_cache_file(temp_path("none"), kId, {1}, Tensor(), c);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[prompt-cache] storage kv:test does not support persistence yet");
  }
}

// A well-formed record with a hostile row layout (huge batch, negative offset, or a row count the
// payload does not hold) is refused with one error before anything is allocated from it.
TEST(CacheFile, HostileRowLayoutsAreRefused) {
  struct Case {
    int64_t offset, batch, heads;
    const char* needle;
  };
  const Case cases[] = {{4, int64_t{1} << 40, 2, "batch and heads in [1, 1048576]"},
                        {-3, 1, 2, "offset >= 0"},
                        {int64_t{1} << 50, 1, 2, "positions of"}};
  for (const Case& c : cases)
    for (int storage = 0; storage < 2; ++storage) {
      std::unique_ptr<KVCache> cache;
      if (storage == 0) cache = std::make_unique<AffineKVCache>(8, 64);
      else cache = std::make_unique<AffineRingKVCache>(16, 8, 64);
      CacheWriter w;
      w.put_string("kind", storage == 0 ? "quantized" : "affine_ring");
      w.put_string("signature", cache->signature());
      put_row_layout(w, {c.offset, true, c.batch, c.heads, 64, 64});
      w.put_int("key_row_bytes", 68);
      w.put_int("value_row_bytes", 68);
      w.put_bytes("keys", std::vector<uint8_t>(2 * 68));
      w.put_bytes("values", std::vector<uint8_t>(2 * 68));
      std::vector<CacheEntry> entries = w.entries();
      // Blobs read back from a payload: lay them out one after another.
      std::vector<uint8_t> payload;
      for (CacheEntry& e : entries) {
        if (e.type != CacheEntry::bytes) continue;
        e.offset = payload.size();
        e.size = e.data.size();
        payload.insert(payload.end(), e.data.begin(), e.data.end());
      }
      CacheReader in("hostile.tpc", entries, payload.data());
      try {
        cache->load(in);
        ADD_FAILURE() << "expected an error for offset " << c.offset << " batch " << c.batch;
      } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("[prompt-cache] hostile.tpc"), std::string::npos) << what;
        if (storage == 0 || c.batch > 1) EXPECT_NE(what.find(c.needle), std::string::npos) << what;
      }
    }
}

TEST(CacheFile, Fnv1aKnownValues) {
  // Published FNV-1a 64 test vectors.
  EXPECT_EQ(fnv1a64("", 0), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar", 6), 0x85944171f73967e8ull);
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

// A run that computes in another dtype than the file's unquantized storage (a CPU run's f32 file read by a
// bf16 GPU run) is refused at load with one message, before any append could mix the two.
TEST(CacheFile, RefusesStorageOfAnotherActivationDtype) {
  for (int ring = 0; ring < 2; ++ring) {
    auto make = [&]() -> std::unique_ptr<Cache> {
      if (ring) return std::make_unique<RingKVCache>(4);
      return std::make_unique<PlainKVCache>();
    };
    std::vector<std::unique_ptr<Cache>> original;
    original.push_back(make());
    static_cast<KVCache&>(*original[0]).append(randn({1, 2, 3, 8}, 5), randn({1, 2, 3, 8}, 6), AppendPhase::window);
    const std::string path = temp_path(ring ? "dtype-ring" : "dtype-plain");
    save_cache_file(path, kId, {1, 2, 3}, Tensor(), original);
    std::vector<std::unique_ptr<Cache>> same, other;
    same.push_back(make());
    other.push_back(make());
    EXPECT_NO_THROW(load_cache_file(path, kId, same, Device::cpu(), Dtype::f32));
    try {
      load_cache_file(path, kId, other, Device::cpu(), Dtype::bf16);
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("holds keys in f32, this run computes in bf16"), std::string::npos)
          << e.what();
    }
    std::remove(path.c_str());
  }
}

}  // namespace
}  // namespace tern
