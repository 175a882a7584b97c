// Embedding gather, scatter_rows and concat against direct indexing: id dtypes, strided tables and ids, dtype
// conversion on the way out, out-of-range ids, and concat along every dim.
#include "tern/ops/index.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "tern/ops/elementwise.h"
#include "tests/ops/ops_test_util.h"

namespace tern {
namespace {

using ops_test::random_uniform;
using ops_test::round_to;

// table rows picked by ids (row-major), rounded to out_dtype.
std::vector<float> ref_embedding(const Tensor& table, const std::vector<int64_t>& ids, Dtype out_dtype) {
  std::vector<float> tv = table.to_f32_vector(), out;
  const int64_t d = table.size(1);
  for (int64_t id : ids) {
    for (int64_t j = 0; j < d; ++j) out.push_back(round_to(tv[id * d + j], out_dtype));
  }
  return out;
}

TEST(Embedding, GatherI32AndI64) {
  for (int64_t d : {1, 7, 129}) {
    Tensor table = random_uniform({10, d}, Dtype::f32, static_cast<uint32_t>(d));
    std::vector<int32_t> ids32 = {3, 0, 9, 3, 5, 1};
    std::vector<int64_t> ids64(ids32.begin(), ids32.end());
    Tensor a = ops::embedding(table, Tensor::from_vector(ids32, {2, 3}), Dtype::f32);
    EXPECT_EQ(a.shape(), (Shape{2, 3, d}));
    EXPECT_EQ(a.to_f32_vector(), ref_embedding(table, ids64, Dtype::f32));
    Tensor b = ops::embedding(table, Tensor::from_vector(ids64, {6}), Dtype::f32);
    EXPECT_EQ(b.shape(), (Shape{6, d}));
    EXPECT_EQ(b.to_f32_vector(), ref_embedding(table, ids64, Dtype::f32));
  }
  Tensor table = random_uniform({4, 3}, Dtype::f32, 1);
  Tensor one = ops::embedding(table, Tensor::from_vector(std::vector<int64_t>{2}, {}), Dtype::f32);
  EXPECT_EQ(one.shape(), (Shape{3}));
  EXPECT_EQ(one.to_f32_vector(), ref_embedding(table, {2}, Dtype::f32));
}

TEST(Embedding, DtypesAndStrides) {
  std::vector<int64_t> ids = {1, 4, 4, 0, 2};
  Tensor idt = Tensor::from_vector(ids, {5});
  for (Dtype td : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
    for (Dtype od : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
      Tensor table = random_uniform({5, 33}, td, 2);
      Tensor y = ops::embedding(table, idt, od);
      EXPECT_EQ(y.dtype(), od);
      EXPECT_EQ(y.to_f32_vector(), ref_embedding(table, ids, od)) << dtype_name(td) << " -> " << dtype_name(od);
    }
  }
  // A transposed table ([D, V] stored, [V, D] viewed) and strided ids.
  Tensor table = random_uniform({33, 5}, Dtype::bf16, 3).transpose(0, 1);
  std::vector<int32_t> padded = {1, -7, 4, -7, 4, -7, 0, -7, 2, -7};
  Tensor sid = Tensor::from_vector(padded, {10}).slice(0, 0, 10, 2);
  EXPECT_EQ(ops::embedding(table, sid, Dtype::f32).to_f32_vector(), ref_embedding(table, ids, Dtype::f32));
  // Many ids: the parallel path.
  std::vector<int64_t> many(5000);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<int64_t>(i * 7 % 5);
  Tensor big = random_uniform({5, 64}, Dtype::f32, 4);
  EXPECT_EQ(ops::embedding(big, Tensor::from_vector(many, {50, 100}), Dtype::bf16).to_f32_vector(),
            ref_embedding(big, many, Dtype::bf16));
}

TEST(Embedding, OutOfRangeIds) {
  Tensor table = random_uniform({10, 4}, Dtype::f32, 5);
  try {
    ops::embedding(table, Tensor::from_vector(std::vector<int32_t>{1, 12, 3}, {3}), Dtype::f32);
    FAIL() << "expected an out-of-range error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[embedding] expected token id in [0, 10), got 12"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ops::embedding(table, Tensor::from_vector(std::vector<int64_t>{-1}, {1}), Dtype::f32), Error);
  EXPECT_THROW(ops::embedding(table, Tensor::from_vector(std::vector<int64_t>{10}, {1}), Dtype::f32), Error);
  EXPECT_THROW(ops::embedding(table, Tensor::from_vector(std::vector<float>{1}, {1}), Dtype::f32), Error);
  EXPECT_THROW(ops::embedding(table, Tensor::from_vector(std::vector<int64_t>{1}, {1}), Dtype::i32), Error);
  EXPECT_THROW(ops::embedding(random_uniform({10}, Dtype::f32, 6), Tensor::from_vector(std::vector<int64_t>{1}, {1}),
                              Dtype::f32),
               Error);
  EXPECT_EQ(ops::embedding(table, Tensor::empty({0}, Dtype::i64), Dtype::f32).shape(), (Shape{0, 4}));
}

// table with rows[i] written at ids[i], by direct indexing.
std::vector<float> ref_scatter(const Tensor& table, const std::vector<int64_t>& ids, const Tensor& rows) {
  std::vector<float> out = table.to_f32_vector(), rv = rows.to_f32_vector();
  const int64_t d = table.size(1);
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int64_t j = 0; j < d; ++j) out[ids[i] * d + j] = rv[i * d + j];
  }
  return out;
}

TEST(ScatterRows, WritesRowsAtIds) {
  for (Dtype dt : {Dtype::f32, Dtype::bf16, Dtype::f16}) {
    for (Dtype id_dt : {Dtype::i32, Dtype::i64}) {
      Tensor table = random_uniform({12, 5}, dt, 7);
      Tensor rows = random_uniform({4, 5}, dt, 8);
      std::vector<int64_t> ids = {11, 0, 6, 3};
      std::vector<float> want = ref_scatter(table, ids, rows);
      Tensor idt = id_dt == Dtype::i64 ? Tensor::from_vector(ids, {4})
                                       : Tensor::from_vector(std::vector<int32_t>{11, 0, 6, 3}, {4});
      ops::scatter_rows(table, idt, rows);
      EXPECT_EQ(table.to_f32_vector(), want) << dtype_name(dt) << " " << dtype_name(id_dt);
    }
  }
  // One column: a vocab row seen as [V, 1], the way a sampler patches a few logits.
  Tensor row = random_uniform({1000, 1}, Dtype::f32, 9);
  Tensor vals = Tensor::from_vector(std::vector<float>{-INFINITY, 5.0f, -1.5f}, {3, 1});
  std::vector<int64_t> ids = {999, 17, 500};
  std::vector<float> want = ref_scatter(row, ids, vals);
  ops::scatter_rows(row, Tensor::from_vector(ids, {3}), vals);
  EXPECT_EQ(row.to_f32_vector(), want);
  // Strided ids and rows are read through their strides.
  Tensor table = random_uniform({8, 3}, Dtype::f32, 10);
  Tensor sid = Tensor::from_vector(std::vector<int64_t>{1, 99, 4, 99, 6}, {5}).slice(0, 0, 5, 2);
  Tensor srows = random_uniform({3, 3}, Dtype::f32, 11).transpose(0, 1);
  want = ref_scatter(table, {1, 4, 6}, srows.contiguous());
  ops::scatter_rows(table, sid, srows);
  EXPECT_EQ(table.to_f32_vector(), want);
}

TEST(ScatterRows, BadInput) {
  Tensor table = random_uniform({10, 2}, Dtype::f32, 12);
  Tensor rows = random_uniform({1, 2}, Dtype::f32, 13);
  try {
    ops::scatter_rows(table, Tensor::from_vector(std::vector<int32_t>{10}, {1}), rows);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[scatter_rows] expected ids in [0, 10), got 10"), std::string::npos)
        << e.what();
  }
  std::vector<float> before = table.to_f32_vector();
  EXPECT_THROW(ops::scatter_rows(table, Tensor::from_vector(std::vector<int64_t>{-1}, {1}), rows), Error);
  EXPECT_EQ(table.to_f32_vector(), before);  // ids are checked before anything is written
  EXPECT_THROW(ops::scatter_rows(table, Tensor::from_vector(std::vector<float>{1}, {1}), rows), Error);
  EXPECT_THROW(ops::scatter_rows(table, Tensor::from_vector(std::vector<int64_t>{1}, {1}), ops::cast(rows, Dtype::bf16)),
               Error);
  EXPECT_THROW(ops::scatter_rows(table, Tensor::from_vector(std::vector<int64_t>{1, 2}, {2}), rows), Error);
  Tensor strided = table.transpose(0, 1);
  EXPECT_THROW(ops::scatter_rows(strided, Tensor::from_vector(std::vector<int64_t>{1}, {1}),
                                 random_uniform({1, 10}, Dtype::f32, 14)),
               Error);
  ops::scatter_rows(table, Tensor::empty({0}, Dtype::i64), Tensor::empty({0, 2}, Dtype::f32));
  EXPECT_EQ(table.to_f32_vector(), before);
}

TEST(Concat, EveryDim) {
  Tensor a = random_uniform({2, 3, 4}, Dtype::f32, 7);
  for (int64_t dim : {0, 1, 2, -1}) {
    int d = normalize_dim(dim, 3, "test");
    Shape sb = a.shape(), sc = a.shape();
    sb[d] = 1;
    sc[d] = 5;
    Tensor b = random_uniform(sb, Dtype::f32, 8), c = random_uniform(sc, Dtype::f32, 9);
    Tensor y = ops::concat({a, b, c}, dim);
    Shape want = a.shape();
    want[d] = a.size(d) + 1 + 5;
    ASSERT_EQ(y.shape(), want);
    // Each part reads back through a slice of the result.
    EXPECT_EQ(y.narrow(d, 0, a.size(d)).to_f32_vector(), a.to_f32_vector());
    EXPECT_EQ(y.narrow(d, a.size(d), 1).to_f32_vector(), b.to_f32_vector());
    EXPECT_EQ(y.narrow(d, a.size(d) + 1, 5).to_f32_vector(), c.to_f32_vector());
  }
}

TEST(Concat, StridedInputsDtypesAndEmptyParts) {
  Tensor a = random_uniform({5, 3}, Dtype::bf16, 10).transpose(0, 1);      // [3, 5]
  Tensor b = random_uniform({3, 14}, Dtype::bf16, 11).slice(1, 0, 14, 2);  // [3, 7]
  Tensor e = Tensor::empty({3, 0}, Dtype::bf16);
  Tensor y = ops::concat({e, a, e, b}, 1);
  EXPECT_EQ(y.shape(), (Shape{3, 12}));
  EXPECT_EQ(y.dtype(), Dtype::bf16);
  EXPECT_EQ(y.narrow(1, 0, 5).to_f32_vector(), a.to_f32_vector());
  EXPECT_EQ(y.narrow(1, 5, 7).to_f32_vector(), b.to_f32_vector());
  Tensor i = ops::concat({Tensor::from_vector(std::vector<int32_t>{1, 2}, {2}),
                          Tensor::from_vector(std::vector<int32_t>{3}, {1})},
                         0);
  EXPECT_EQ(i.to_f32_vector(), (std::vector<float>{1, 2, 3}));
  Tensor single = ops::concat({a}, 0);
  EXPECT_EQ(single.to_f32_vector(), a.to_f32_vector());
}

TEST(Concat, BadInput) {
  Tensor a = random_uniform({2, 3}, Dtype::f32, 12);
  EXPECT_THROW(ops::concat({}, 0), Error);
  EXPECT_THROW(ops::concat({a, random_uniform({2, 3}, Dtype::bf16, 13)}, 0), Error);
  try {
    ops::concat({a, random_uniform({3, 3}, Dtype::f32, 14)}, 1);
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[concat] expected shapes matching [2, 3] except at dim 1, got [3, 3] at 1"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ops::concat({a, random_uniform({2, 3, 1}, Dtype::f32, 15)}, 0), Error);
  EXPECT_THROW(ops::concat({a, a}, 2), Error);
  EXPECT_THROW(ops::concat({a, Tensor()}, 0), Error);
  EXPECT_THROW(ops::concat({Tensor::from_vector(std::vector<float>{1}, {})}, 0), Error);
}

TEST(WritePositions, WritesEachRowAtItsPosition) {
  for (Dtype dt : {Dtype::f32, Dtype::bf16}) {
    Tensor dst = random_uniform({3, 2, 5, 4}, dt, 7), src = random_uniform({3, 2, 1, 4}, dt, 8);
    std::vector<float> before = dst.to_f32_vector(), sv = src.to_f32_vector();
    Tensor pos = Tensor::from_vector(std::vector<int32_t>{4, 0, 2}, {3});
    ops::write_positions(dst, src, pos);
    std::vector<float> after = dst.to_f32_vector();
    const int32_t p[3] = {4, 0, 2};
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t n = 0; n < 5; ++n)
          for (int64_t d = 0; d < 4; ++d) {
            const size_t i = static_cast<size_t>(((b * 2 + h) * 5 + n) * 4 + d);
            const float want = n == p[b] ? sv[static_cast<size_t>((b * 2 + h) * 4 + d)] : before[i];
            EXPECT_EQ(after[i], want) << b << " " << h << " " << n << " " << d;
          }
  }
}

TEST(WritePositions, StridedDestinationAndBadInput) {
  // A view with the head and position dims transposed in memory, as a [B, L, H, D] buffer seen as [B, H, L, D].
  Tensor base = random_uniform({2, 6, 3, 4}, Dtype::f32, 9);
  Tensor dst = base.transpose(1, 2);  // [2, 3, 6, 4]
  Tensor src = random_uniform({2, 3, 1, 4}, Dtype::f32, 10);
  ops::write_positions(dst, src, Tensor::from_vector(std::vector<int32_t>{5, 1}, {2}));
  for (int64_t h = 0; h < 3; ++h)
    for (int64_t d = 0; d < 4; ++d) {
      EXPECT_EQ(base.data<float>()[((0 * 6 + 5) * 3 + h) * 4 + d], src.data<float>()[(0 * 3 + h) * 4 + d]);
      EXPECT_EQ(base.data<float>()[((1 * 6 + 1) * 3 + h) * 4 + d], src.data<float>()[(1 * 3 + h) * 4 + d]);
    }
  EXPECT_THROW(ops::write_positions(dst, src, Tensor::from_vector(std::vector<int32_t>{6, 0}, {2})), Error);
  EXPECT_THROW(ops::write_positions(dst, src, Tensor::from_vector(std::vector<int32_t>{0}, {1})), Error);
  Tensor wide = random_uniform({2, 3, 2, 4}, Dtype::f32, 11);
  EXPECT_THROW(ops::write_positions(dst, wide, Tensor::from_vector(std::vector<int32_t>{0, 0}, {2})), Error);
}

}  // namespace
}  // namespace tern
