// CPU rotary embedding: cos/sin per (batch, position) computed once in f32 as HF does, then the
// rotate-half rotation of every head's first rotary_dim dims.
#include <cmath>
#include <vector>

#include "tern/backend/cpu/loops.h"
#include "tern/ops/rope.h"

namespace tern::cpu {
namespace {

// Frequencies whose cos/sin fit the per-task stack buffer; larger tables use the heap.
constexpr int64_t kStackHalf = 512;

template <typename T, typename P>
void rope_typed(const Tensor& x, const Tensor& positions, const ops::RopeTable& table, Tensor& out) {
  const int64_t nb = x.size(0), nh = x.size(1), nl = x.size(2), d = x.size(3);
  const int64_t sb = x.stride(0), sh = x.stride(1), sl = x.stride(2), sd = x.stride(3);
  const int64_t half = table.rotary_dim / 2, rot = table.rotary_dim;
  const P* pp = static_cast<const P*>(positions.data_ptr());
  const bool per_row = positions.rank() == 2;
  const int64_t ps0 = positions.stride(0), ps1 = per_row ? positions.stride(1) : 0;
  const T* px = static_cast<const T*>(x.data_ptr());
  T* po = static_cast<T*>(out.data_ptr());
  const float* inv = table.inv_freq.data();
  const float scale = table.attention_scale;

  const int64_t grain = std::max<int64_t>(1, detail::kGrain / std::max<int64_t>(nh * d, 1));
  parallel_for(nb * nl, grain, [&](int64_t r0, int64_t r1) {
    float stack_buf[2 * kStackHalf];
    std::vector<float> heap_buf;
    float* cs = stack_buf;
    if (half > kStackHalf) {
      heap_buf.resize(2 * half);
      cs = heap_buf.data();
    }
    float* sn = cs + half;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / nl, l = r % nl;
      const P pos = per_row ? pp[b * ps0 + l * ps1] : pp[l * ps0];
      // freqs = positions.float() * inv_freq in f32, then cos/sin times the attention scale.
      const float pf = static_cast<float>(pos);
      for (int64_t j = 0; j < half; ++j) {
        const float f = pf * inv[j];
        cs[j] = std::cos(f) * scale;
        sn[j] = std::sin(f) * scale;
      }
      for (int64_t h = 0; h < nh; ++h) {
        const T* xs = px + b * sb + h * sh + l * sl;
        T* os = po + ((b * nh + h) * nl + l) * d;
        if (sd == 1) {
          for (int64_t j = 0; j < half; ++j) {
            const float x1 = static_cast<float>(xs[j]), x2 = static_cast<float>(xs[j + half]);
            os[j] = T(x1 * cs[j] - x2 * sn[j]);
            os[j + half] = T(x2 * cs[j] + x1 * sn[j]);
          }
          for (int64_t j = rot; j < d; ++j) os[j] = xs[j];
        } else {
          for (int64_t j = 0; j < half; ++j) {
            const float x1 = static_cast<float>(xs[j * sd]), x2 = static_cast<float>(xs[(j + half) * sd]);
            os[j] = T(x1 * cs[j] - x2 * sn[j]);
            os[j + half] = T(x2 * cs[j] + x1 * sn[j]);
          }
          for (int64_t j = rot; j < d; ++j) os[j] = xs[j * sd];
        }
      }
    }
  });
}

}  // namespace

void rope(const Tensor& x, const Tensor& positions, const ops::RopeTable& table, Tensor& out) {
  detail::dispatch_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (positions.dtype() == Dtype::i32) {
      rope_typed<T, int32_t>(x, positions, table, out);
    } else {
      rope_typed<T, int64_t>(x, positions, table, out);
    }
  });
}

}  // namespace tern::cpu
