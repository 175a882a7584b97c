// Tensor views and copies: slice, select, transpose, permute, unsqueeze/squeeze, broadcast_to,
// view/reshape (incl. non-contiguous layouts), contiguous, clone, copy_from and from_storage bounds.
#include "tern/core/tensor.h"

#include <gtest/gtest.h>

#include <numeric>

namespace tern {
namespace {

// [rows, cols] f32 holding 0, 1, 2, ... in row-major order.
Tensor iota(const Shape& shape) {
  std::vector<float> v(static_cast<size_t>(numel(shape)));
  std::iota(v.begin(), v.end(), 0.0f);
  return Tensor::from_vector(v, shape);
}

// Element at a multi-index, read through the view's offset and strides.
float at(const Tensor& t, const std::vector<int64_t>& idx) {
  int64_t off = 0;
  for (size_t i = 0; i < idx.size(); ++i) off += idx[i] * t.strides()[i];
  return static_cast<const float*>(t.data_ptr())[off];
}

TEST(Tensor, EmptyZerosFullFromVector) {
  Tensor z = Tensor::zeros({3, 5}, Dtype::f32);
  EXPECT_EQ(z.shape(), (Shape{3, 5}));
  EXPECT_EQ(z.strides(), (Strides{5, 1}));
  for (float v : z.to_f32_vector()) EXPECT_EQ(v, 0.0f);
  Tensor f = Tensor::full({2, 2}, 2.5, Dtype::bf16);
  for (float v : f.to_f32_vector()) EXPECT_EQ(v, 2.5f);
  Tensor i = Tensor::full({3}, 7.0, Dtype::i64);
  EXPECT_EQ(i.select(0, 2).item<int64_t>(), 7);
  EXPECT_THROW(i.item<int64_t>(), Error);
  EXPECT_THROW(Tensor::from_vector(std::vector<float>{1, 2, 3}, {2, 2}), Error);
  EXPECT_THROW(Tensor::empty({2, -1}, Dtype::f32), Error);
  EXPECT_EQ(Tensor::from_vector(std::vector<int32_t>{42}, {}).item<int>(), 42);
}

TEST(Tensor, SliceWithStepAndNegativeBounds) {
  Tensor x = iota({4, 10});
  Tensor s = x.slice(1, 1, 8, 3);  // cols 1, 4, 7
  EXPECT_EQ(s.shape(), (Shape{4, 3}));
  EXPECT_EQ(s.strides(), (Strides{10, 3}));
  EXPECT_FALSE(s.is_contiguous());
  EXPECT_EQ(s.to_f32_vector(), (std::vector<float>{1, 4, 7, 11, 14, 17, 21, 24, 27, 31, 34, 37}));
  Tensor n = x.slice(0, -2, 100);  // rows 2, 3; end clamps
  EXPECT_EQ(n.shape(), (Shape{2, 10}));
  EXPECT_EQ(at(n, {0, 0}), 20.0f);
  EXPECT_EQ(x.slice(0, 3, 1).shape(), (Shape{0, 10}));
  EXPECT_EQ(x.narrow(1, 2, 3).to_f32_vector()[0], 2.0f);
  EXPECT_THROW(x.slice(0, 0, 2, 0), Error);
  EXPECT_THROW(x.slice(2, 0, 1), Error);
}

TEST(Tensor, SelectRemovesDim) {
  Tensor x = iota({3, 4, 5});
  Tensor s = x.select(1, -1);
  EXPECT_EQ(s.shape(), (Shape{3, 5}));
  EXPECT_EQ(at(s, {2, 4}), 2 * 20 + 3 * 5 + 4);
  EXPECT_THROW(x.select(1, 4), Error);
  EXPECT_THROW(x.select(1, -5), Error);
}

TEST(Tensor, TransposeAndPermute) {
  Tensor x = iota({2, 3, 4});
  Tensor t = x.transpose(0, -1);
  EXPECT_EQ(t.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(at(t, {3, 2, 1}), at(x, {1, 2, 3}));
  Tensor p = x.permute({1, 2, 0});
  EXPECT_EQ(p.shape(), (Shape{3, 4, 2}));
  EXPECT_EQ(p.strides(), (Strides{4, 1, 12}));
  EXPECT_EQ(at(p, {2, 1, 1}), at(x, {1, 2, 1}));
  EXPECT_THROW(x.permute({0, 0, 1}), Error);
  EXPECT_THROW(x.permute({0, 1}), Error);
}

TEST(Tensor, UnsqueezeSqueeze) {
  Tensor x = iota({3, 4});
  Tensor u = x.unsqueeze(1);
  EXPECT_EQ(u.shape(), (Shape{3, 1, 4}));
  EXPECT_TRUE(u.is_contiguous());
  EXPECT_EQ(x.unsqueeze(-1).shape(), (Shape{3, 4, 1}));
  EXPECT_EQ(x.unsqueeze(0).shape(), (Shape{1, 3, 4}));
  EXPECT_EQ(u.squeeze(1).shape(), (Shape{3, 4}));
  EXPECT_THROW(x.squeeze(0), Error);
  EXPECT_THROW(x.unsqueeze(3), Error);
  // unsqueeze of a transposed view keeps element addressing
  Tensor tu = x.transpose(0, 1).unsqueeze(1);
  EXPECT_EQ(at(tu, {2, 0, 1}), at(x, {1, 2}));
}

TEST(Tensor, BroadcastToUsesStrideZero) {
  Tensor x = iota({3, 1});
  Tensor b = x.broadcast_to({2, 3, 5});
  EXPECT_EQ(b.strides(), (Strides{0, 1, 0}));
  std::vector<float> v = b.to_f32_vector();
  ASSERT_EQ(v.size(), 30u);
  EXPECT_EQ(v[0], 0.0f);
  EXPECT_EQ(v[4], 0.0f);
  EXPECT_EQ(v[5], 1.0f);
  EXPECT_EQ(v[29], 2.0f);
  EXPECT_THROW(x.broadcast_to({3, 4}).broadcast_to({2, 3}), Error);
  EXPECT_THROW(x.broadcast_to({4, 5}), Error);
  EXPECT_THROW(x.broadcast_to({5}), Error);
}

TEST(Tensor, ViewContiguousAndInferred) {
  Tensor x = iota({4, 6});
  Tensor v = x.view({2, -1, 3});
  EXPECT_EQ(v.shape(), (Shape{2, 4, 3}));
  EXPECT_EQ(v.data_ptr(), x.data_ptr());
  EXPECT_EQ(v.to_f32_vector(), x.to_f32_vector());
  EXPECT_THROW(x.view({-1, -1}), Error);
  EXPECT_THROW(x.view({5, -1}), Error);
  EXPECT_THROW(x.view({5, 5}), Error);
}

TEST(Tensor, ViewNonContiguous) {
  Tensor x = iota({4, 6});
  // [6, 4] with strides [1, 6]: splitting the strided dim is a view, merging the two is not.
  Tensor t = x.transpose(0, 1);
  Tensor v = t.view({6, 2, 2});
  EXPECT_EQ(v.strides(), (Strides{1, 12, 6}));
  EXPECT_EQ(v.to_f32_vector(), t.to_f32_vector());
  EXPECT_THROW(t.view({24}), Error);
  // Column slice [4, 3] of rows of 6: rows stay separate, a leading split is a view.
  Tensor s = iota({4, 6}).slice(1, 0, 3);
  Tensor sv = s.view({2, 2, 3});
  EXPECT_EQ(sv.strides(), (Strides{12, 6, 1}));
  EXPECT_EQ(sv.to_f32_vector(), s.to_f32_vector());
  EXPECT_THROW(s.view({12}), Error);
  // Size-1 dims anywhere do not block a view.
  Tensor w = x.unsqueeze(1).transpose(0, 2);  // [6, 1, 4]
  EXPECT_EQ(w.view({6, 4, 1}).to_f32_vector(), w.to_f32_vector());
}

TEST(Tensor, ReshapeCopiesOnlyWhenNeeded) {
  Tensor x = iota({4, 6});
  Tensor r = x.reshape({3, 8});
  EXPECT_EQ(r.data_ptr(), x.data_ptr());
  Tensor t = x.transpose(0, 1);
  Tensor rt = t.reshape({24});
  EXPECT_NE(rt.storage(), x.storage());
  EXPECT_EQ(rt.to_f32_vector(), t.to_f32_vector());
  Tensor rv = t.reshape({6, 2, 2});
  EXPECT_EQ(rv.storage(), x.storage());
}

TEST(Tensor, ContiguousCloneCopyFrom) {
  Tensor x = iota({3, 5});
  EXPECT_EQ(x.contiguous().storage(), x.storage());
  Tensor t = x.transpose(0, 1);
  Tensor c = t.contiguous();
  EXPECT_NE(c.storage(), x.storage());
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.to_f32_vector(), t.to_f32_vector());
  Tensor cl = x.clone();
  EXPECT_NE(cl.storage(), x.storage());
  EXPECT_EQ(cl.to_f32_vector(), x.to_f32_vector());

  // Write a contiguous row into a strided column view.
  Tensor dst = Tensor::zeros({5, 3}, Dtype::f32);
  Tensor col = dst.select(1, 2);
  col.copy_from(x.select(0, 1));
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(at(dst, {i, 2}), 5.0f + i);
    EXPECT_EQ(at(dst, {i, 0}), 0.0f);
  }
  // Strided to strided with a broadcast source.
  Tensor b = Tensor::from_vector(std::vector<float>{9.0f}, {1}).broadcast_to({5});
  Tensor col0 = dst.select(1, 0);
  col0.copy_from(b);
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(at(dst, {i, 0}), 9.0f);
  EXPECT_THROW(col.copy_from(x), Error);
  EXPECT_THROW(col.copy_from(Tensor::zeros({5}, Dtype::bf16)), Error);
}

TEST(Tensor, CopyFromHalfDtypes) {
  std::vector<bf16> v;
  for (int i = 0; i < 12; ++i) v.push_back(bf16(static_cast<float>(i) * 0.5f));
  Tensor x = Tensor::from_vector(v, {3, 4});
  Tensor t = x.transpose(0, 1).contiguous();
  EXPECT_EQ(t.dtype(), Dtype::bf16);
  std::vector<float> f = t.to_f32_vector();
  EXPECT_EQ(f[1], 2.0f);  // element (0, 1) of the transpose is x(1, 0) = 4 * 0.5
}

TEST(Tensor, FromStorageBounds) {
  auto st = Storage::allocate(12 * sizeof(float), Device::cpu());
  Tensor ok = Tensor::from_storage(st, 2, {2, 5}, {5, 1}, Dtype::f32);  // last element 11: fits
  EXPECT_EQ(ok.numel(), 10);
  EXPECT_THROW(Tensor::from_storage(st, 3, {2, 5}, {5, 1}, Dtype::f32), Error);
  EXPECT_THROW(Tensor::from_storage(st, 0, {3, 5}, {5, 1}, Dtype::f32), Error);
  EXPECT_THROW(Tensor::from_storage(st, 0, {2}, {5, 1}, Dtype::f32), Error);
  EXPECT_THROW(Tensor::from_storage(st, -1, {2}, {1}, Dtype::f32), Error);
  // Broadcast (stride 0) views need only one element; empty views need none.
  EXPECT_NO_THROW(Tensor::from_storage(st, 11, {100}, {0}, Dtype::f32));
  EXPECT_NO_THROW(Tensor::from_storage(st, 0, {0, 50}, {50, 1}, Dtype::f32));
  // The element size counts: 12 floats hold 6 i64.
  EXPECT_NO_THROW(Tensor::from_storage(st, 0, {6}, {1}, Dtype::i64));
  EXPECT_THROW(Tensor::from_storage(st, 0, {7}, {1}, Dtype::i64), Error);
}

TEST(Tensor, DataTypeCheckAndItem) {
  Tensor x = iota({2});
  EXPECT_THROW(x.data<int32_t>(), Error);
  EXPECT_THROW(x.item<float>(), Error);
  EXPECT_EQ(x.select(0, 1).item<float>(), 1.0f);
  Tensor u;
  EXPECT_FALSE(u.defined());
  EXPECT_THROW(u.data_ptr(), Error);
}

}  // namespace
}  // namespace tern
