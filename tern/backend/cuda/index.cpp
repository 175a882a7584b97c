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

void write_positions(Tensor& dst, const Tensor& src, const Tensor& positions) {
  check_cuda(dst, "write_positions");
  int64_t dshape[4], dstride[4], sstride[4];
  for (int i = 0; i < 4; ++i) {
    dshape[i] = dst.size(i);
    dstride[i] = dst.stride(i);
    sstride[i] = src.stride(i);
  }
  launch_write_positions(dtype_size(dst.dtype()), dst.data_ptr(), dshape, dstride, src.data_ptr(), sstride,
                         positions.data<int32_t>(), stream());
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
