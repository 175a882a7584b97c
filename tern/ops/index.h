// Indexing ops: embedding gather, its inverse scatter_rows, and concat.
#pragma once
#include <vector>

#include "tern/core/tensor.h"

namespace tern::ops {

// table [V, D] (any float dtype), ids [...] (i32/i64) -> [..., D] in out_dtype.
// Throws "[embedding] expected token id in [0, V), got x" on an out-of-range id.
Tensor embedding(const Tensor& table, const Tensor& ids, Dtype out_dtype);

// The inverse of embedding, in place: table[ids[i], :] = rows[i, :] for a contiguous table [V, D]
// (any float dtype), rows [n, D] of the table's dtype and ids [n] (i32/i64), all on one device. ids
// must be distinct (a repeated id gets one of its rows, unspecified which). Throws on a bad shape,
// dtype or device, and on the CPU on an id outside [0, V); ids on a CUDA device are not range-checked
// (an out-of-range id writes nothing).
void scatter_rows(Tensor& table, const Tensor& ids, const Tensor& rows);

// Joins tensors that agree on every dim but dim; all share dtype and device.
Tensor concat(const std::vector<Tensor>& xs, int64_t dim);

// For each batch row b: dst[b, :, positions[b], :] = src[b, :, 0, :] (the KV append of a compiled
// decode step, whose positions live on the device). dst [B, H, N, D] and src [B, H, 1, D] share dtype
// and device; positions [B] i32 on that device. The CPU throws "[write_positions] expected a position
// in [0, N), got p"; device positions are not checked there (that would sync) and an out-of-range one
// writes nothing.
void write_positions(Tensor& dst, const Tensor& src, const Tensor& positions);
// The keys' and the values' write_positions of one layer (one launch on CUDA); the same checks for each
// pair. With ring > 0 row b lands at positions[b] % ring (a ring cache's slot; throws for ring < 0).
void write_positions(Tensor& keys, const Tensor& k, Tensor& values, const Tensor& v, const Tensor& positions,
                     int64_t ring = 0);
// The checks of that write (for ops that fuse it): throws "[write_positions] expected ..." where it would.
void check_kv_writes(const Tensor& keys, const Tensor& k, const Tensor& values, const Tensor& v,
                     const Tensor& positions, int64_t ring);

}  // namespace tern::ops

namespace tern::cpu {
void embedding(const Tensor& table, const Tensor& ids, Tensor& out);
void write_positions(Tensor& dst, const Tensor& src, const Tensor& positions);
void scatter_rows(Tensor& table, const Tensor& ids, const Tensor& rows);
}  // namespace tern::cpu
namespace tern::cuda {
void embedding(const Tensor& table, const Tensor& ids, Tensor& out);
void write_positions(Tensor& dst, const Tensor& src, const Tensor& positions);
void write_positions(Tensor& keys, const Tensor& k, Tensor& values, const Tensor& v, const Tensor& positions,
                     int64_t ring);
void scatter_rows(Tensor& table, const Tensor& ids, const Tensor& rows);
}  // namespace tern::cuda
