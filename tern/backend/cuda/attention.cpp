// CUDA scaled dot-product attention: validates, lays out the mask, and picks the kernel: tensor-core
// flash-decoding when one kv head's query rows fit one mma tile (decode), the tensor-core flash
// kernel for bf16/f16 prefill (with flash-decoding, the only ones for heads of 512), else the row kernel
// with enough key splits to fill the GPU.
#include "tern/ops/attention.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/layout.h"
#include "tern/backend/cuda/runtime/context.h"
#include "tern/ops/elementwise.h"

namespace tern::cuda {
namespace {

// q/k/v views whose last dim is contiguous are used in place.
Tensor last_dim_contiguous(const Tensor& t) { return t.stride(-1) == 1 || t.size(-1) == 1 ? t : t.contiguous(); }

int choose_splits(int64_t rows, int64_t keys) {
  const int64_t sms = device_props().multiProcessorCount;
  const int64_t want = (2 * sms + rows - 1) / rows;  // about two blocks per SM
  const int64_t by_keys = std::max<int64_t>(1, keys / 256);  // each split keeps >= 256 keys
  return static_cast<int>(std::clamp<int64_t>(std::min(want, by_keys), 1, 64));
}

SdpaParams params(const Tensor& q, const Tensor& k, const Tensor& v) {
  SdpaParams p;
  p.B = q.size(0), p.Hq = q.size(1), p.Lq = q.size(2), p.D = q.size(3);
  p.Hkv = k.size(1), p.Lk = k.size(2), p.Dv = v.size(3);
  p.q = q.data_ptr();
  p.k = k.data_ptr();
  p.v = v.data_ptr();
  for (int i = 0; i < 3; ++i) {
    p.q_stride[i] = q.stride(i);
    p.k_stride[i] = k.stride(i);
    p.v_stride[i] = v.stride(i);
  }
  return p;
}

// Query rows of one kv head: at most 16 take flash-decoding.
int64_t group_rows(const SdpaParams& p) { return (p.Hq / p.Hkv) * p.Lq; }

// Heads wider than 256 run only in the tensor-core kernels: flash-decoding or a prefill of >= 16 rows.
bool wide_ok(Dtype dt, const SdpaParams& p) {
  return p.Hkv > 0 && (group_rows(p) <= 16 || p.Lq >= 16) && flash_eligible(dt, p);
}

}  // namespace

bool sdpa_takes_wide_heads(const Tensor& q, const Tensor& k, const Tensor& v, const ops::AttentionMask& mask) {
  if (mask.bias.defined() || q.dtype() != k.dtype() || q.dtype() != v.dtype()) return false;
  // The output is a fresh allocation, aligned like every allocation.
  return wide_ok(q.dtype(), params(last_dim_contiguous(q), last_dim_contiguous(k), last_dim_contiguous(v)));
}

void sdpa(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, float scale, const ops::AttentionMask& mask,
          float softcap, Tensor& out) {
  check_cuda(q_in, "sdpa");
  check_cuda(k_in, "sdpa");
  check_cuda(v_in, "sdpa");
  TERN_CHECK(q_in.rank() == 4 && k_in.rank() == 4 && v_in.rank() == 4,
             "[sdpa] expected q, k, v of rank 4, got {}, {}, {}", shape_str(q_in.shape()), shape_str(k_in.shape()),
             shape_str(v_in.shape()));
  TERN_CHECK(q_in.dtype() == k_in.dtype() && q_in.dtype() == v_in.dtype(),
             "[sdpa] expected q, k, v of one dtype, got {}, {}, {}", dtype_name(q_in.dtype()),
             dtype_name(k_in.dtype()), dtype_name(v_in.dtype()));
  Tensor q = last_dim_contiguous(q_in), k = last_dim_contiguous(k_in), v = last_dim_contiguous(v_in);
  SdpaParams p = params(q, k, v);
  if (out.numel() == 0) return;
  TERN_CHECK(p.Hkv > 0 && p.Hq % p.Hkv == 0, "[sdpa] expected Hq % Hkv == 0, got {} and {}", p.Hq, p.Hkv);
  p.out = out.data_ptr();
  p.scale = scale;
  p.softcap = softcap;
  p.causal = mask.causal;
  p.q_offset = mask.q_offset;
  p.window = mask.window;
  // The read's promise lets flash-decoding stage its older keys before the grid wait;
  // TERN_CUDA_DECODE_PREWAIT=0 ignores it (for benchmarks).
  const char* prewait = std::getenv("TERN_CUDA_DECODE_PREWAIT");
  p.fresh_keys = prewait && std::strcmp(prewait, "0") == 0 ? -1 : mask.fresh_keys;
  Tensor kv_len, bias;
  if (mask.kv_len.defined()) {
    TERN_CHECK(mask.kv_len.numel() == p.B, "[sdpa] expected kv_len [{}], got {}", p.B,
               shape_str(mask.kv_len.shape()));
    kv_len = mask.kv_len.dtype() == Dtype::i32 ? mask.kv_len : ops::cast(mask.kv_len, Dtype::i32);
    kv_len = kv_len.device().is_cuda() ? kv_len.contiguous() : kv_len.contiguous().to(q.device());
    p.kv_len = kv_len.data<int32_t>();
  }
  if (mask.bias.defined()) {
    bias = mask.bias.dtype() == Dtype::f32 ? mask.bias : ops::cast(mask.bias, Dtype::f32);
    if (bias.device().is_cpu()) bias = bias.to(q.device());
    bias = bias.broadcast_to({p.B, p.Hq, p.Lq, p.Lk});
    p.bias = bias.data<float>();
    for (int i = 0; i < 4; ++i) p.bias_stride[i] = bias.stride(i);
  }
  const int64_t rows = p.B * p.Hq * p.Lq;
  const bool wide = p.D > 256 || p.Dv > 256;
  TERN_CHECK(!wide || wide_ok(q.dtype(), p),
             "[sdpa] expected head dims <= 256 on cuda, or bf16/f16 q/k/v dims of 512 with no bias and <= 16 query "
             "rows per kv head or >= 16 queries, got dims {} and {}, {} queries, {}",
             p.D, p.Dv, p.Lq, dtype_name(q.dtype()));
  const bool tensor_cores = flash_eligible(q.dtype(), p);
  if (tensor_cores && group_rows(p) <= 16) {
    // Flash-decoding: blocks of (split, kv head, batch row). Split counts measured on the H200 (bench
    // --decode): a second, nearly empty wave of blocks costs up to 2x; past one block per SM, each
    // further split's share of the merge costs more than its parallelism pays once there are more than
    // about 16 (batch 1, 8 kv heads: 16 splits take 47.6 us at 32k keys, 49 take 57.7). So: at least one
    // block per SM, up to 16 splits while they fit one wave, never more than one wave, and each split
    // keeping at least 128 keys (two 16-key tiles per warp). A span of up to 256 keys takes one split:
    // there the merge's latency costs more than half the walk saves (batch 1, 2026-12-04: one split
    // against two at a 256-key span was 1,110 against 1,072 tok/s on Qwen3-0.6B and 340 against 329 on
    // 30B-A3B; at 512 keys four splits still beat one on 0.6B). TERN_CUDA_DECODE_SPLITS=N forces N
    // (for benchmarks and tests).
    //
    // Where 2-8 splits of a kv head can run as one thread-block cluster (sm_90, value dims <= 128) they
    // merge through distributed shared memory instead: no partials in global memory, no fence, no
    // counter. A span of up to 512 keys then takes a split per 64 keys (one 16-key tile a warp) within
    // one wave. TERN_CUDA_DECODE_CLUSTER=0 keeps the global merge (for benchmarks and tests), =2 takes
    // clusters at longer spans too.
    // The read keeps key positions, masks and head indices in 32 bits (kernels/attention_decode.cuh).
    constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();
    TERN_CHECK(p.Lk < kMax32 && p.q_offset > -kMax32 && p.q_offset + p.Lq < kMax32 && p.window < kMax32 &&
                   p.Hq < kMax32,
               "[sdpa] expected key positions and head counts below 2^31 in the decode read, got {} keys, query "
               "offset {}, window {}, {} query heads",
               p.Lk, p.q_offset, p.window, p.Hq);
    const int64_t heads = p.B * p.Hkv, sms = device_props().multiProcessorCount;
    const char* forced = std::getenv("TERN_CUDA_DECODE_SPLITS");
    const char* cluster_env = std::getenv("TERN_CUDA_DECODE_CLUSTER");
    const bool cluster_ok = device_props().major >= 9 && p.Dv <= 128 && p.D <= 128 &&
                            !(cluster_env && std::strcmp(cluster_env, "0") == 0);
    const bool short_span = cluster_ok && !forced && p.Lk <= 512;
    p.cluster_splits = short_span;  // the tiles a cluster merge takes set the occupancy of the wave
    const int64_t wave = std::max<int64_t>(1, sdpa_decode_blocks_per_sm(q.dtype(), p) * sms / heads);
    int64_t splits = 1;
    if (short_span) {
      splits = std::clamp<int64_t>(std::min((p.Lk + 63) / 64, wave), 1, kDecodeClusterSplits);
    } else {
      int64_t want = std::min(wave, std::max(sms / heads, std::min<int64_t>(wave, 16)));
      if (forced) want = std::max(1, std::atoi(forced));
      else if (p.Lk <= 256) want = 1;
      splits = std::clamp<int64_t>(std::min(want, p.Lk / 128), 1, 64);
    }
    // Splits of more than 256 keys merge globally: with 6 splits of 5,461 keys (bf16, 32k keys, batch 8)
    // the global merge measured 347.2 tok/s against the cluster's 323.3 (H100, 2026-12-05) -- a
    // cluster's blocks all wait for its slowest -- while splits of at most 144 keys (batch 1 up to 1,151
    // keys) are where clusters were measured faster. The 256 between is not measured. Forced split
    // counts (tests) and TERN_CUDA_DECODE_CLUSTER=2 take clusters whatever the split length.
    const bool long_clusters = forced || (cluster_env && std::strcmp(cluster_env, "2") == 0);
    p.cluster_splits =
        cluster_ok && splits >= 2 && splits <= kDecodeClusterSplits && (p.Lk <= 256 * splits || long_clusters);
    Tensor workspace;
    if (splits > 1 && !p.cluster_splits) workspace = Tensor::empty({splits, rows, p.Dv + 2}, Dtype::f32, q.device());
    // The last split of each kv head merges the partials itself, unless TERN_CUDA_DECODE_COMBINE=launch.
    unsigned* counters = nullptr;
    const char* combine = std::getenv("TERN_CUDA_DECODE_COMBINE");
    if (splits > 1 && !p.cluster_splits && heads <= kCounters && !(combine && std::strcmp(combine, "launch") == 0))
      counters = zeroed_counters();
    launch_sdpa_decode(q.dtype(), p, static_cast<int>(splits), workspace.defined() ? workspace.data<float>() : nullptr,
                       counters, stream());
    return;
  }
  if (tensor_cores && p.Lq >= 16) {
    launch_sdpa_flash(q.dtype(), p, stream());
    return;
  }
  const int splits = choose_splits(rows, p.Lk);
  Tensor workspace;
  if (splits > 1) workspace = Tensor::empty({splits, rows, p.Dv + 2}, Dtype::f32, q.device());
  launch_sdpa_rows(q.dtype(), p, splits, splits > 1 ? workspace.data<float>() : nullptr, stream());
}

void sdpa_partial(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, float scale,
                  const ops::AttentionMask& mask, float softcap, float* partial) {
  Tensor q = last_dim_contiguous(q_in), k = last_dim_contiguous(k_in), v = last_dim_contiguous(v_in);
  SdpaParams p = params(q, k, v);
  if (!flash_eligible(q.dtype(), p)) {  // strides or offsets the tensor-core kernel cannot step: dense copies
    q = q.contiguous(), k = k.contiguous(), v = v.contiguous();
    p = params(q, k, v);
  }
  TERN_CHECK(q.device().is_cuda() && q.dtype() == k.dtype() && q.dtype() == v.dtype() && !mask.bias.defined() &&
                 !mask.kv_len.defined() && p.Hkv > 0 && p.Hq % p.Hkv == 0 && p.Lq >= 16 && p.Dv <= 256 &&
                 flash_eligible(q.dtype(), p),
             "[sdpa] expected a partial of the tensor-core prefill: bf16/f16 q, k, v of one dtype, head dims 64-256, "
             ">= 16 queries, no bias or kv_len, got {} queries of dims {} and {}, {}",
             p.Lq, p.D, p.Dv, dtype_name(q.dtype()));
  p.partial = partial;
  p.scale = scale;
  p.softcap = softcap;
  p.causal = mask.causal;
  p.q_offset = mask.q_offset;
  p.window = mask.window;
  launch_sdpa_flash(q.dtype(), p, stream());
}

}  // namespace tern::cuda
