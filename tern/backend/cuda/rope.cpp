// CUDA RoPE entry point: the table's inv_freq lives in a cached device constant buffer.
#include "tern/ops/rope.h"

#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/layout.h"
#include "tern/backend/cuda/runtime/context.h"

namespace tern::cuda {

void rope(const Tensor& x, const Tensor& positions, const ops::RopeTable& table, Tensor& out) {
  check_cuda(x, "rope");
  TERN_CHECK(x.rank() == 4, "[rope] expected x [B, H, L, D], got {}", shape_str(x.shape()));
  const int64_t B = x.size(0), H = x.size(1), L = x.size(2), D = x.size(3);
  if (x.numel() == 0) return;
  const int64_t rot = table.rotary_dim ? table.rotary_dim : D;
  TERN_CHECK(rot % 2 == 0 && rot <= D && static_cast<int64_t>(table.inv_freq.size()) * 2 == rot,
             "[rope] expected rotary_dim even, <= {} and 2 * {} inv_freq entries, got {}", D, table.inv_freq.size(),
             rot);
  Tensor pos = positions.device().is_cuda() ? positions.contiguous() : positions.contiguous().to(x.device());
  const bool per_batch = pos.rank() == 2;
  Tensor xc = x.contiguous();
  const float* inv_freq =
      static_cast<const float*>(constant_buffer(table.inv_freq.data(), table.inv_freq.size() * sizeof(float)));
  launch_rope(xc.dtype(), xc.data_ptr(), out.data_ptr(), B, H, L, D, pos.dtype(), pos.data_ptr(), per_batch, inv_freq,
              rot, table.attention_scale, stream());
}

}  // namespace tern::cuda
