// CPU embedding gather: ids are checked in one serial pass, then rows are copied (converted to the
// output dtype) in parallel. scatter_rows, its inverse, is serial (it writes a few rows).
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tern/backend/cpu/loops.h"
#include "tern/ops/index.h"

namespace tern::cpu {
namespace {

using detail::RowLayout;

template <typename T, typename O, typename I>
void embedding_typed(const Tensor& table, const Tensor& ids, Tensor& out) {
  const int64_t v = table.size(0), d = table.size(1);
  const int64_t st0 = table.stride(0), st1 = table.stride(1);
  const T* pt = static_cast<const T*>(table.data_ptr());
  const I* pid = static_cast<const I*>(ids.data_ptr());
  O* po = static_cast<O*>(out.data_ptr());
  RowLayout<1> lay(ids.shape(), {&ids}, true);
  const int64_t sid = lay.inner_stride[0];
  lay.for_range(0, ids.numel(), [&](const int64_t* o, int64_t n, int64_t) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t id = pid[o[0] + i * sid];
      TERN_CHECK(id >= 0 && id < v, "[embedding] expected token id in [0, {}), got {}", v, id);
    }
  });
  const int64_t grain = std::max<int64_t>(1, detail::kGrain / std::max<int64_t>(d, 1));
  parallel_for(ids.numel(), grain, [&](int64_t b, int64_t e) {
    lay.for_range(b, e, [&](const int64_t* o, int64_t n, int64_t first) {
      for (int64_t i = 0; i < n; ++i) {
        const T* src = pt + static_cast<int64_t>(pid[o[0] + i * sid]) * st0;
        O* dst = po + (first + i) * d;
        if constexpr (std::is_same_v<T, O>) {
          if (st1 == 1) {
            std::memcpy(dst, src, static_cast<size_t>(d) * sizeof(T));
            continue;
          }
        }
        for (int64_t j = 0; j < d; ++j) dst[j] = O(static_cast<float>(src[j * st1]));
      }
    });
  });
}

template <typename I>
void scatter_rows_typed(Tensor& table, const Tensor& ids, const Tensor& rows) {
  const int64_t v = table.size(0), n = ids.size(0);
  const size_t row_bytes = static_cast<size_t>(table.size(1)) * dtype_size(table.dtype());
  Tensor rc = rows.contiguous();
  const I* pid = static_cast<const I*>(ids.data_ptr());
  const int64_t sid = ids.stride(0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = pid[i * sid];
    TERN_CHECK(id >= 0 && id < v, "[scatter_rows] expected ids in [0, {}), got {}", v, id);
  }
  auto* dst = static_cast<uint8_t*>(table.data_ptr());
  const auto* src = static_cast<const uint8_t*>(rc.data_ptr());
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(dst + static_cast<size_t>(pid[i * sid]) * row_bytes, src + static_cast<size_t>(i) * row_bytes,
                row_bytes);
  }
}

}  // namespace

void scatter_rows(Tensor& table, const Tensor& ids, const Tensor& rows) {
  if (ids.dtype() == Dtype::i32) {
    scatter_rows_typed<int32_t>(table, ids, rows);
  } else {
    scatter_rows_typed<int64_t>(table, ids, rows);
  }
}

void embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  detail::dispatch_float(table.dtype(), [&](auto tt) {
    detail::dispatch_float(out.dtype(), [&](auto ot) {
      using T = decltype(tt);
      using O = decltype(ot);
      if (ids.dtype() == Dtype::i32) {
        embedding_typed<T, O, int32_t>(table, ids, out);
      } else {
        embedding_typed<T, O, int64_t>(table, ids, out);
      }
    });
  });
}

void write_positions(Tensor& dst, const Tensor& src, const Tensor& positions) {
  const int32_t* pos = positions.data<int32_t>();
  const int64_t n = dst.size(2);
  for (int64_t b = 0; b < dst.size(0); ++b) {
    TERN_CHECK(pos[b] >= 0 && pos[b] < n, "[write_positions] expected a position in [0, {}), got {}", n, pos[b]);
    Tensor row = dst.narrow(0, b, 1).narrow(2, pos[b], 1);
    row.copy_from(src.narrow(0, b, 1));
  }
}

}  // namespace tern::cpu
