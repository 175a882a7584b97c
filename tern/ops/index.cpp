// Indexing ops: embedding and scatter_rows validation and allocation (the copies live in the backends), and
// concat, which is a sequence of strided copies into slices of the result.
#include "tern/ops/index.h"

namespace tern::ops {

Tensor embedding(const Tensor& table, const Tensor& ids, Dtype out_dtype) {
  TERN_CHECK(table.defined() && ids.defined(), "[embedding] expected a defined table and ids, got an undefined one");
  TERN_CHECK(table.rank() == 2, "[embedding] expected a table of shape [V, D], got {}", shape_str(table.shape()));
  TERN_CHECK(is_floating(table.dtype()), "[embedding] expected a float table dtype (f32, bf16, f16), got {}",
             dtype_name(table.dtype()));
  TERN_CHECK(is_floating(out_dtype), "[embedding] expected a float output dtype (f32, bf16, f16), got {}",
             dtype_name(out_dtype));
  TERN_CHECK(ids.dtype() == Dtype::i32 || ids.dtype() == Dtype::i64, "[embedding] expected ids of dtype i32 or i64, got {}",
             dtype_name(ids.dtype()));
  TERN_CHECK(ids.device() == table.device(), "[embedding] expected ids on {}, got {}", table.device().str(),
             ids.device().str());
  Shape shape = ids.shape();
  shape.push_back(table.size(1));
  Tensor out = Tensor::empty(shape, out_dtype, table.device());
  if (ids.numel() == 0) return out;
  if (table.device().is_cpu()) {
    cpu::embedding(table, ids, out);
  } else {
    cuda::embedding(table, ids, out);
  }
  return out;
}

void scatter_rows(Tensor& table, const Tensor& ids, const Tensor& rows) {
  TERN_CHECK(table.defined() && ids.defined() && rows.defined(),
             "[scatter_rows] expected a defined table, ids and rows, got an undefined one");
  TERN_CHECK(table.rank() == 2 && table.is_contiguous(), "[scatter_rows] expected a contiguous table [V, D], got {}{}",
             shape_str(table.shape()), table.is_contiguous() ? "" : " (strided)");
  TERN_CHECK(is_floating(table.dtype()), "[scatter_rows] expected a float table dtype (f32, bf16, f16), got {}",
             dtype_name(table.dtype()));
  TERN_CHECK(rows.dtype() == table.dtype(), "[scatter_rows] expected rows of dtype {}, got {}",
             dtype_name(table.dtype()), dtype_name(rows.dtype()));
  TERN_CHECK(ids.dtype() == Dtype::i32 || ids.dtype() == Dtype::i64,
             "[scatter_rows] expected ids of dtype i32 or i64, got {}", dtype_name(ids.dtype()));
  TERN_CHECK(ids.rank() == 1, "[scatter_rows] expected ids [n], got {}", shape_str(ids.shape()));
  TERN_CHECK(rows.rank() == 2 && rows.size(0) == ids.size(0) && rows.size(1) == table.size(1),
             "[scatter_rows] expected rows [{}, {}], got {}", ids.size(0), table.size(1), shape_str(rows.shape()));
  TERN_CHECK(ids.device() == table.device() && rows.device() == table.device(),
             "[scatter_rows] expected ids and rows on {}, got {} and {}", table.device().str(), ids.device().str(),
             rows.device().str());
  if (ids.numel() == 0 || table.size(1) == 0) return;
  if (table.device().is_cpu()) {
    cpu::scatter_rows(table, ids, rows);
  } else {
    cuda::scatter_rows(table, ids, rows);
  }
}

Tensor concat(const std::vector<Tensor>& xs, int64_t dim) {
  TERN_CHECK(!xs.empty(), "[concat] expected at least one tensor, got none");
  const Tensor& first = xs.front();
  TERN_CHECK(first.defined(), "[concat] expected defined tensors, got an undefined one at 0");
  TERN_CHECK(first.rank() >= 1, "[concat] expected tensors of rank >= 1, got shape {}", shape_str(first.shape()));
  const int d = normalize_dim(dim, first.rank(), "concat");
  Shape shape = first.shape();
  shape[d] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    TERN_CHECK(x.defined(), "[concat] expected defined tensors, got an undefined one at {}", i);
    TERN_CHECK(x.dtype() == first.dtype(), "[concat] expected dtype {}, got {} at {}", dtype_name(first.dtype()),
               dtype_name(x.dtype()), i);
    TERN_CHECK(x.device() == first.device(), "[concat] expected device {}, got {} at {}", first.device().str(),
               x.device().str(), i);
    bool same = x.rank() == first.rank();
    for (size_t k = 0; same && k < x.rank(); ++k) same = static_cast<int>(k) == d || x.shape()[k] == first.shape()[k];
    TERN_CHECK(same, "[concat] expected shapes matching {} except at dim {}, got {} at {}", shape_str(first.shape()), d,
               shape_str(x.shape()), i);
    shape[d] += x.shape()[d];
  }
  Tensor out = Tensor::empty(shape, first.dtype(), first.device());
  int64_t at = 0;
  for (const Tensor& x : xs) {
    const int64_t n = x.shape()[d];
    if (n > 0 && x.numel() > 0) {
      Tensor dst = out.narrow(d, at, n);
      dst.copy_from(x);
    }
    at += n;
  }
  return out;
}

namespace {

// The checks of write_positions.
void check_write_positions(const Tensor& dst, const Tensor& src, const Tensor& positions) {
  TERN_CHECK(dst.defined() && src.defined() && positions.defined(),
             "[write_positions] expected defined dst, src and positions, got an undefined one");
  TERN_CHECK(dst.rank() == 4 && src.rank() == 4 && src.size(2) == 1 && src.size(0) == dst.size(0) &&
                 src.size(1) == dst.size(1) && src.size(3) == dst.size(3),
             "[write_positions] expected dst [B, H, N, D] and src [B, H, 1, D], got {} and {}", shape_str(dst.shape()),
             shape_str(src.shape()));
  TERN_CHECK(src.dtype() == dst.dtype() && src.device() == dst.device(),
             "[write_positions] expected src of dst's dtype and device ({} on {}), got {} on {}", dtype_name(dst.dtype()),
             dst.device().str(), dtype_name(src.dtype()), src.device().str());
  TERN_CHECK(positions.dtype() == Dtype::i32 && positions.numel() == dst.size(0) && positions.device() == dst.device(),
             "[write_positions] expected positions [{}] i32 on {}, got {} {} on {}", dst.size(0), dst.device().str(),
             shape_str(positions.shape()), dtype_name(positions.dtype()), positions.device().str());
}

}  // namespace

void write_positions(Tensor& dst, const Tensor& src, const Tensor& positions) {
  check_write_positions(dst, src, positions);
  if (dst.numel() == 0) return;
  if (dst.device().is_cpu()) cpu::write_positions(dst, src, positions.contiguous());
  else cuda::write_positions(dst, src, positions.contiguous());
}

void check_kv_writes(const Tensor& keys, const Tensor& k, const Tensor& values, const Tensor& v,
                     const Tensor& positions, int64_t ring) {
  check_write_positions(keys, k, positions);
  check_write_positions(values, v, positions);
  TERN_CHECK(keys.dtype() == values.dtype() && keys.size(0) == values.size(0) && keys.size(1) == values.size(1),
             "[write_positions] expected keys and values of one dtype and [B, H], got {} {} and {} {}",
             shape_str(keys.shape()), dtype_name(keys.dtype()), shape_str(values.shape()), dtype_name(values.dtype()));
  TERN_CHECK(ring >= 0, "[write_positions] expected a ring of >= 0 slots, got {}", ring);
}

void write_positions(Tensor& keys, const Tensor& k, Tensor& values, const Tensor& v, const Tensor& positions,
                     int64_t ring) {
  check_kv_writes(keys, k, values, v, positions, ring);
  if (keys.numel() == 0 && values.numel() == 0) return;
  if (keys.device().is_cpu()) {
    Tensor slots = positions.contiguous();
    if (ring > 0) {
      slots = Tensor::empty(positions.shape(), Dtype::i32);
      const int32_t* p = positions.contiguous().data<int32_t>();
      for (int64_t b = 0; b < slots.numel(); ++b)  // negative positions stay negative: the write refuses them
        slots.data<int32_t>()[b] = p[b] < 0 ? p[b] : static_cast<int32_t>(p[b] % ring);
    }
    write_positions(keys, k, slots);
    write_positions(values, v, slots);
    return;
  }
  cuda::write_positions(keys, k, values, v, positions.contiguous(), ring);
}

}  // namespace tern::ops
