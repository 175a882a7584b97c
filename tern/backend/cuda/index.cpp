// CUDA embedding and scatter_rows entry points. Ids given on the host are range-checked there before the upload; ids
// already on the device (e.g. sampled there) are trusted, and an out-of-range one gathers zeros.
#include "tern/ops/index.h"

#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/layout.h"
#include "tern/backend/cuda/runtime/context.h"

namespace tern::cuda {

void embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  check_cuda(table, "embedding");
  const int64_t n_ids = ids.numel();
  if (n_ids == 0) return;
  TERN_CHECK(table.rank() == 2, "[embedding] expected table [V, D], got {}", shape_str(table.shape()));
  const int64_t V = table.size(0);
  Tensor idc;
  if (ids.device().is_cpu()) {
    Tensor host = ids.contiguous();
    dispatch_dtype(host.dtype(), [&](auto tag) {
      using I = decltype(tag);
      if constexpr (std::is_same_v<I, int32_t> || std::is_same_v<I, int64_t>) {
        const I* p = host.data<I>();
        for (int64_t i = 0; i < n_ids; ++i) {
          TERN_CHECK(p[i] >= 0 && p[i] < V, "[embedding] expected token id in [0, {}), got {}", V,
                     static_cast<int64_t>(p[i]));
        }
      }
    });
    idc = host.to(table.device());
  } else {
    idc = ids.contiguous();
  }
  Tensor tc = table.contiguous();
  Tensor bad = Tensor::empty({1}, Dtype::i32, table.device());
  launch_embedding(tc.dtype(), tc.data_ptr(), V, tc.size(1), idc.dtype(), idc.data_ptr(), n_ids, out.dtype(),
                   out.data_ptr(), bad.data<int32_t>(), stream());
}

namespace {

kernels::PositionWrites::One position_write(Tensor& dst, const Tensor& src) {
  kernels::PositionWrites::One o{};
  o.dst = dst.data_ptr();
  o.src = src.data_ptr();
  for (int i = 0; i < 4; ++i) {
    o.ds[i] = dst.stride(i);
    o.ss[i] = src.stride(i);
  }
  o.H = dst.size(1), o.N = dst.size(2), o.D = dst.size(3);
  return o;
}

}  // namespace

void write_positions(Tensor& dst, const Tensor& src, const Tensor& positions) {
  check_cuda(dst, "write_positions");
  kernels::PositionWrites w{};
  w.pair[0] = position_write(dst, src);
  launch_write_positions(dtype_size(dst.dtype()), 1, w, dst.size(0), positions.data<int32_t>(), stream());
}

void write_positions(Tensor& keys, const Tensor& k, Tensor& values, const Tensor& v, const Tensor& positions,
                     int64_t ring) {
  check_cuda(keys, "write_positions");
  kernels::PositionWrites w{};
  w.pair[0] = position_write(keys, k);
  w.pair[1] = position_write(values, v);
  w.ring = ring;
  launch_write_positions(dtype_size(keys.dtype()), 2, w, keys.size(0), positions.data<int32_t>(), stream());
}

void scatter_rows(Tensor& table, const Tensor& ids, const Tensor& rows) {
  check_cuda(table, "scatter_rows");
  check_cuda(ids, "scatter_rows");
  check_cuda(rows, "scatter_rows");
  const int64_t n_ids = ids.numel();
  if (n_ids == 0) return;
  Tensor idc = ids.contiguous(), rc = rows.contiguous();
  launch_scatter_rows(table.dtype(), table.data_ptr(), table.size(0), table.size(1), idc.dtype(), idc.data_ptr(),
                      n_ids, rc.data_ptr(), stream());
}

}  // namespace tern::cuda
