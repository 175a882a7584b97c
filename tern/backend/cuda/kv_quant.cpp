// CUDA quantized KV rows: lays out the codec and TurboQuant's tables for the kernels, picks the key
// splits of the fused decode attention and allocates its workspace.
#include "tern/ops/kv_quant.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>

#include "tern/backend/cuda/kv_quant_launch.h"
#include "tern/backend/cuda/layout.h"
#include "tern/backend/cuda/runtime/context.h"
#include "tern/ops/attention.h"
#include "tern/ops/elementwise.h"
#include "tern/ops/turboquant.h"

namespace tern::cuda {
namespace {

KVCodecArgs codec_args(const ops::KVRowCodec& c) {
  KVCodecArgs a;
  a.kind = static_cast<int>(c.kind);
  a.bits = c.bits;
  a.group = static_cast<int>(c.group);
  a.dim = static_cast<int>(c.dim);
  a.row_bytes = static_cast<int>(c.row_bytes());
  a.codes_bytes = static_cast<int>(c.dim * c.bits / 8);
  return a;
}

// The value constants exactly as the CPU codec computes them (bounds, 1/sqrt(dim)).
TurboTables turbo_tables(const ops::KVRowCodec& c) {
  TurboTables t;
  if (c.kind != ops::KVRowCodec::turbo_value) return t;
  const std::vector<float>& book = turboquant::codebook(c.bits);
  for (size_t i = 0; i < book.size(); ++i) t.book[i] = book[i];
  for (size_t i = 0; i + 1 < book.size(); ++i) t.bounds[i] = 0.5f * (book[i] + book[i + 1]);
  t.n_bounds = static_cast<int>(book.size()) - 1;
  const std::vector<float>& signs = turboquant::signs(c.dim);
  for (int64_t i = 0; i < c.dim; ++i)
    if (signs[i] < 0) t.signs[i / 32] |= 1u << (i % 32);
  t.norm = 1.0f / std::sqrt(static_cast<float>(c.dim));
  return t;
}

// The fused read's constants: the value codec's tables, or (affine values) the rotation's of rotated
// keys, plus the codebook of rotated keys (a turbo_value key codec: TurboQuant keys of 4 or 3 bits).
TurboTables attention_tables(const ops::KVRowCodec& key_codec, const ops::KVRowCodec& value_codec) {
  const bool rotated_keys = key_codec.kind == ops::KVRowCodec::turbo_value;
  TurboTables t = turbo_tables(rotated_keys && value_codec.kind != ops::KVRowCodec::turbo_value ? key_codec : value_codec);
  if (rotated_keys) {
    const std::vector<float>& book = turboquant::codebook(key_codec.bits);
    TERN_CHECK(book.size() <= std::size(t.key_book), "[kv_decode_attention] expected key codes of at most 4 bits, got {}",
               key_codec.bits);
    for (size_t i = 0; i < book.size(); ++i) t.key_book[i] = book[i];
  }
  return t;
}

Tensor last_dim_contiguous(const Tensor& t) { return t.stride(-1) == 1 || t.size(-1) == 1 ? t : t.contiguous(); }

KVEncodeJob encode_job(const Tensor& x, const ops::KVRowCodec& codec, Tensor& rows) {
  TERN_CHECK(reinterpret_cast<uintptr_t>(rows.data_ptr()) % 2 == 0,
             "[kv_encode] expected rows at an even address (the f16 fields are stored 16 bits at a time)");
  KVEncodeJob j;
  j.x = x.data_ptr();
  for (int i = 0; i < 3; ++i) j.xs[i] = x.stride(i);
  j.rows = rows.data<uint8_t>();
  j.c = codec_args(codec);
  return j;
}

// The switched reads are on unless their variable is 0 (for benchmarks against the older paths).
bool switched_on(const char* name) {
  const char* e = std::getenv(name);
  return !(e && std::string(e) == "0");
}

// The launch fields every read over packed rows k_rows / v_rows [S, B, Hkv, row bytes] sets from q
// [B, Hq, L, D] (last dim contiguous), its codecs and its scale.
KVAttnLaunch read_launch(const Tensor& q, const Tensor& k_rows, const ops::KVRowCodec& key_codec, const Tensor& v_rows,
                         const ops::KVRowCodec& value_codec, float scale = 1.0f, float softcap = 0.0f) {
  KVAttnLaunch p;
  p.q = q.data_ptr();
  p.qs[0] = q.stride(0), p.qs[1] = q.stride(1), p.qs_l = q.stride(2);
  p.L = q.size(2);
  p.k_rows = k_rows.data<uint8_t>();
  p.v_rows = v_rows.data<uint8_t>();
  p.B = q.size(0), p.Hq = q.size(1), p.Hkv = k_rows.size(2), p.S = k_rows.size(0);
  p.scale = scale;
  p.softcap = softcap;
  p.kc = codec_args(key_codec);
  p.vc = codec_args(value_codec);
  return p;
}

// Splits of n_keys keys for a read that wants `want` of them (TERN_CUDA_KV_SPLITS=N asks for N, for
// benchmarks and tests): at most max_splits, each >= 64 keys and none empty; with tiles, each a whole
// number of kKVMmaTileKeys staged keys. Sets p.chunk and returns the split count.
int key_splits(KVAttnLaunch& p, int64_t want, int64_t n_keys, int64_t max_splits, bool tiles) {
  if (const char* e = std::getenv("TERN_CUDA_KV_SPLITS")) want = std::max(1, std::atoi(e));
  const int64_t n = std::max<int64_t>(1, std::min<int64_t>({want, (n_keys + 63) / 64, max_splits}));
  int64_t chunk = std::max<int64_t>(1, (n_keys + n - 1) / n);
  if (tiles) chunk = (chunk + kKVMmaTileKeys - 1) / kKVMmaTileKeys * kKVMmaTileKeys;
  p.chunk = chunk;
  return static_cast<int>(std::max<int64_t>(1, (n_keys + chunk - 1) / chunk));
}

}  // namespace

bool kv_decode_reads_rotated_keys() { return switched_on("TERN_CUDA_KV_ROTATED_KEYS"); }

bool kv_ring_steps() { return switched_on("TERN_CUDA_KV_RING_STEPS"); }

bool kv_window_tiled(const Tensor& q, const Tensor& k_rows, const ops::KVRowCodec& key_codec, const Tensor& v_rows,
                     const ops::KVRowCodec& value_codec) {
  const int64_t L = q.size(2);
  const bool short_window = L <= kKVMmaWindowMax;
  // The long windows' read only with TERN_CUDA_KV_PREFIX_READ=1: it measured slower than the decoded
  // temporary (H200, 2026-12-06: 8B prefill of 32,768 tokens with affine4 storage, 11,052 against 16,366
  // tok/s; docs/cuda.md: each query tile decodes the prefix again), and is kept for its memory (no bf16
  // prefix).
  const char* prefix = std::getenv("TERN_CUDA_KV_PREFIX_READ");
  const bool on = short_window ? switched_on("TERN_CUDA_KV_WINDOW_READ") : prefix && std::string(prefix) == "1";
  if (!on || L < 2 || key_codec.dim > 128) return false;
  if (key_codec.kind == ops::KVRowCodec::turbo_value && !kv_decode_reads_rotated_keys()) return false;
  const KVAttnLaunch p = read_launch(q, k_rows, key_codec, v_rows, value_codec);
  if (!kv_mma_attention_supported(q.dtype(), p)) return false;  // it also bounds G = Hq / Hkv to 1-16
  const int64_t G = p.Hq / p.Hkv;
  const int64_t per = short_window ? 16 / G : kernels::kv_prefix_block_positions(static_cast<int>(G));
  const int64_t rows = q.size(0) * p.Hq * L;  // f32 partials of (D + 2) per row and split
  return q.size(0) * ((L + per - 1) / per) <= 65535 && (short_window || rows <= (int64_t{1} << 24));
}

void kv_encode(const Tensor& x_in, const ops::KVRowCodec& codec, Tensor& rows) {
  check_cuda(x_in, "kv_encode");
  const Tensor x = last_dim_contiguous(x_in);
  const KVEncodeJob job = encode_job(x, codec, rows);
  launch_kv_encode(x.dtype(), &job, 1, x.size(0), x.size(1), x.size(2), turbo_tables(codec), stream());
}

void kv_encode_positions(const Tensor& k_in, const ops::KVRowCodec& key_codec, Tensor& keys, const Tensor& v_in,
                         const ops::KVRowCodec& value_codec, Tensor& values, const Tensor& positions, int64_t ring) {
  check_cuda(k_in, "kv_encode");
  const Tensor k = last_dim_contiguous(k_in), v = last_dim_contiguous(v_in);
  KVEncodeJob jobs[2] = {encode_job(k, key_codec, keys), encode_job(v, value_codec, values)};
  for (KVEncodeJob& j : jobs) {
    j.positions = positions.data<int32_t>();
    j.capacity = keys.size(0);
    j.ring = ring;
  }
  const bool both_rotated =
      key_codec.kind == ops::KVRowCodec::turbo_value && value_codec.kind == ops::KVRowCodec::turbo_value;
  if (k.dtype() != v.dtype() || k.size(0) != v.size(0) || k.size(1) != v.size(1) || both_rotated) {
    launch_kv_encode(k.dtype(), &jobs[0], 1, k.size(0), k.size(1), 1, turbo_tables(key_codec), stream());
    launch_kv_encode(v.dtype(), &jobs[1], 1, v.size(0), v.size(1), 1, turbo_tables(value_codec), stream());
    return;
  }
  const ops::KVRowCodec& rotated = key_codec.kind == ops::KVRowCodec::turbo_value ? key_codec : value_codec;
  launch_kv_encode(k.dtype(), jobs, 2, k.size(0), k.size(1), 1, turbo_tables(rotated), stream());
}

void kv_decode(const Tensor& rows, const ops::KVRowCodec& codec, bool unrotate, Tensor& out) {
  check_cuda(rows, "kv_decode");
  check_cuda(out, "kv_decode");
  launch_kv_decode(out.dtype(), rows.data<uint8_t>(), rows.size(0), rows.size(1), rows.size(2), out.data_ptr(),
                   out.stride(1) / codec.dim, codec_args(codec), turbo_tables(codec), unrotate, stream());
}

void kv_window_attention(const Tensor& q_in, const Tensor& k_rows, const ops::KVRowCodec& key_codec,
                         const Tensor& v_rows, const ops::KVRowCodec& value_codec, const Tensor& k_new,
                         const Tensor& v_new, float scale, float softcap, Tensor& out) {
  if (q_in.size(2) <= kKVMmaWindowMax) {
    kv_decode_attention(q_in, k_rows, key_codec, v_rows, value_codec, k_new, v_new, scale, softcap, Tensor(), 0, out);
    return;
  }
  // A long window: the stored rows by the tiled prefix read (splits [0, n)), the window's own keys by the
  // flash prefill as split n, then one combine. Each split's partial already holds values in their own
  // domain, so the combine rotates nothing.
  const Tensor q = last_dim_contiguous(q_in);
  const int64_t D = key_codec.dim;
  KVAttnLaunch p = read_launch(q, k_rows, key_codec, v_rows, value_codec, scale, softcap);
  // Splits only where the blocks of one split leave the SMs short of about three each (a prefill chunk's
  // thousands of positions take one); one split is left for the window's own keys.
  const int64_t per = kernels::kv_prefix_block_positions(static_cast<int>(p.Hq / p.Hkv));
  const int64_t blocks = p.B * p.Hkv * ((p.L + per - 1) / per), sms = device_props().multiProcessorCount;
  const int splits = key_splits(p, (3 * sms + blocks - 1) / blocks, p.S, kernels::kKVMaxSplits - 1, true);
  const int64_t rows = p.B * p.Hq * p.L;
  Tensor workspace = Tensor::empty({splits + 1, rows, D + 2}, Dtype::f32, q.device());
  const TurboTables tables = attention_tables(key_codec, value_codec);
  launch_kv_prefix_attention(p, tables, splits, workspace.data<float>(), stream());
  const Tensor k = k_new.dtype() == q.dtype() ? k_new : ops::cast(k_new, q.dtype());
  const Tensor v = v_new.dtype() == q.dtype() ? v_new : ops::cast(v_new, q.dtype());
  ops::AttentionMask mask;
  mask.causal = true;
  sdpa_partial(q, k, v, scale, mask, softcap, workspace.data<float>() + splits * rows * (D + 2));
  launch_kv_attention_combine(q.dtype(), workspace.data<float>(), splits + 1, rows, static_cast<int>(D), false, tables,
                              out.data_ptr(), stream());
}

void kv_decode_attention(const Tensor& q_in, const Tensor& k_rows, const ops::KVRowCodec& key_codec,
                         const Tensor& v_rows, const ops::KVRowCodec& value_codec, const Tensor& k_new_in,
                         const Tensor& v_new_in, float scale, float softcap, const Tensor& lengths, int64_t ring,
                         Tensor& out, Tensor* store_keys, Tensor* store_values) {
  check_cuda(q_in, "kv_decode_attention");
  const int64_t D = key_codec.dim;
  TERN_CHECK(value_codec.dim == D && (D == 32 || D == 64 || D == 128 || D == 256 || D == 512),
             "[kv_decode_attention] expected key and value head_dim equal and in {{32, 64, 128, 256, 512}} on cuda, "
             "got {} and {}",
             D, value_codec.dim);
  const Tensor q = last_dim_contiguous(q_in);
  KVAttnLaunch p = read_launch(q, k_rows, key_codec, v_rows, value_codec, scale, softcap);
  Tensor k_new, v_new;
  if (k_new_in.defined() && k_new_in.size(2) > 0) {
    // the kernel reads the new position in q's dtype
    k_new = last_dim_contiguous(k_new_in.dtype() == q.dtype() ? k_new_in : ops::cast(k_new_in, q.dtype()));
    v_new = last_dim_contiguous(v_new_in.dtype() == q.dtype() ? v_new_in : ops::cast(v_new_in, q.dtype()));
    p.k_new = k_new.data_ptr();
    p.v_new = v_new.data_ptr();
    p.kns[0] = k_new.stride(0), p.kns[1] = k_new.stride(1), p.kns_l = k_new.stride(2);
    p.vns[0] = v_new.stride(0), p.vns[1] = v_new.stride(1), p.vns_l = v_new.stride(2);
  }
  if (lengths.defined()) p.lengths = lengths.data<int32_t>();
  p.ring = ring;
  p.out = out.data_ptr();
  // One wave: the tensor-core read fills the SMs' block slots without starting a second, partial wave
  // (its occupancy decides); the CUDA-core read aims at about three blocks per SM. Every split keeps
  // >= 64 keys (16 per warp) and none is empty. TERN_CUDA_KV_SPLITS=N asks for N splits (within those
  // limits), a tuning knob for benchmarks.
  // A window of L > 1 positions (kv_window_attention's tiled read) runs on the tensor-core kernel only,
  // whose blocks take 16 / G positions each.
  const int64_t n_keys = p.S + (p.k_new ? p.L : 0);
  const int64_t sms = device_props().multiProcessorCount;
  const bool mma = kv_mma_attention_supported(q.dtype(), p);
  if (store_keys) {
    // The step's store: the tensor-core read's combine launch encodes the new rows beside its merge
    // (kv_attention_combine_store_kernel) when they are in q's dtype and the tables the combine holds are
    // theirs (not two rotated codecs); otherwise, or with TERN_CUDA_KV_STORE=launch, the encode launch
    // first, for benchmarks.
    const char* e = std::getenv("TERN_CUDA_KV_STORE");
    const bool both_rotated =
        key_codec.kind == ops::KVRowCodec::turbo_value && value_codec.kind == ops::KVRowCodec::turbo_value;
    const bool in_combine = mma && p.L == 1 && p.lengths && p.k_new && !both_rotated &&
                            k_new.dtype() == q.dtype() && v_new.dtype() == q.dtype() &&
                            !(e && std::strcmp(e, "launch") == 0);
    if (in_combine) {
      p.store[0] = encode_job(k_new, key_codec, *store_keys);
      p.store[1] = encode_job(v_new, value_codec, *store_values);
      for (KVEncodeJob& j : p.store) {
        j.positions = p.lengths;
        j.capacity = store_keys->size(0);
        j.ring = ring;
      }
      p.store_B = k_new.size(0), p.store_H = k_new.size(1);
    } else {
      cuda::kv_encode_positions(k_new_in, key_codec, *store_keys, v_new_in, value_codec, *store_values, lengths, ring);
    }
  }
  TERN_CHECK(p.L == 1 || (mma && p.k_new && p.L <= kKVMmaWindowMax && !p.lengths && D <= 128),
             "[kv_window_attention] expected a window of at most {} positions with its keys, bf16 queries, head dims "
             "of at most 128 and codecs the tensor-core read takes, got {} positions of head dim {}",
             kKVMmaWindowMax, p.L, D);
  const int64_t heads = mma ? p.Hq / p.Hkv : kv_attention_heads_per_block(D), G = p.Hq / p.Hkv;
  const int64_t tiles = p.L > 1 ? (p.L + 16 / G - 1) / (16 / G) : 1;
  const int64_t blocks = p.B * p.Hkv * ((G + heads - 1) / heads) * tiles;
  const int64_t want =
      mma ? std::max<int64_t>(1, sms * kv_mma_blocks_per_sm(p) / blocks) : (3 * sms + blocks - 1) / blocks;
  const int splits = key_splits(p, want, n_keys, kernels::kKVMaxSplits, mma);  // mma: whole staged tiles
  Tensor workspace = Tensor::empty({splits, p.B * p.Hq * p.L, D + 2}, Dtype::f32, q.device());
  if (mma) {
    launch_kv_mma_attention(q.dtype(), p, attention_tables(key_codec, value_codec), splits, workspace.data<float>(),
                            stream());
  } else {
    launch_kv_decode_attention(q.dtype(), p, attention_tables(key_codec, value_codec), splits, workspace.data<float>(),
                               stream());
  }
}

}  // namespace tern::cuda
