// Element-wise ops against naive reference loops: broadcasting (incl. stride 0), strided views,
// bf16/f16 storage, the parallel path, special values of exp, every cast pair, and bad input.
#include "tern/ops/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "tests/ops/ops_test_util.h"

namespace tern {
namespace {

using ops_test::random_uniform;
using ops_test::round_to;

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, float rtol, float atol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
      continue;
    }
    EXPECT_NEAR(got[i], want[i], atol + rtol * std::fabs(want[i])) << "at " << i;
  }
}

using BinFn = std::function<float(float, float)>;

// Reference for a OP b on shapes already broadcast to `shape` (reads through the views).
std::vector<float> ref_binary(const Tensor& a, const Tensor& b, const Shape& shape, const BinFn& f, Dtype dt) {
  std::vector<float> av = a.broadcast_to(shape).to_f32_vector(), bv = b.broadcast_to(shape).to_f32_vector();
  std::vector<float> out(av.size());
  for (size_t i = 0; i < av.size(); ++i) out[i] = round_to(f(av[i], bv[i]), dt);
  return out;
}

struct BinCase {
  ops::BinaryOp op;
  BinFn f;
};

std::vector<BinCase> bin_cases() {
  return {{ops::BinaryOp::add, [](float x, float y) { return x + y; }},
          {ops::BinaryOp::sub, [](float x, float y) { return x - y; }},
          {ops::BinaryOp::mul, [](float x, float y) { return x * y; }},
          {ops::BinaryOp::div, [](float x, float y) { return x / y; }},
          {ops::BinaryOp::maximum, [](float x, float y) { return std::max(x, y); }},
          {ops::BinaryOp::minimum, [](float x, float y) { return std::min(x, y); }}};
}

TEST(Binary, AllOpsOddSizes) {
  for (int64_t n : {1, 7, 33, 129}) {
    for (const Shape& s : {Shape{n}, Shape{3, n}}) {
      Tensor a = random_uniform(s, Dtype::f32, 1), b = random_uniform(s, Dtype::f32, 2, 0.5f, 3.0f);
      for (const BinCase& c : bin_cases()) {
        Tensor out = ops::binary(a, b, c.op);
        EXPECT_EQ(out.shape(), s);
        EXPECT_EQ(out.to_f32_vector(), ref_binary(a, b, s, c.f, Dtype::f32));
      }
    }
  }
}

TEST(Binary, Broadcasting) {
  Tensor a = random_uniform({5, 7}, Dtype::f32, 3);
  Tensor row = random_uniform({7}, Dtype::f32, 4), col = random_uniform({5, 1}, Dtype::f32, 5);
  Tensor scalar = Tensor::from_vector(std::vector<float>{1.5f}, {});
  auto add = [](float x, float y) { return x + y; };
  auto mul = [](float x, float y) { return x * y; };
  EXPECT_EQ(ops::add(a, row).to_f32_vector(), ref_binary(a, row, {5, 7}, add, Dtype::f32));
  EXPECT_EQ(ops::mul(col, a).to_f32_vector(), ref_binary(col, a, {5, 7}, mul, Dtype::f32));
  EXPECT_EQ(ops::mul(a, scalar).to_f32_vector(), ref_binary(a, scalar, {5, 7}, mul, Dtype::f32));
  // [5, 1] x [1, 7] -> [5, 7]: both operands broadcast.
  Tensor r17 = row.unsqueeze(0);
  Tensor outer = ops::mul(col, r17);
  EXPECT_EQ(outer.shape(), (Shape{5, 7}));
  EXPECT_EQ(outer.to_f32_vector(), ref_binary(col, r17, {5, 7}, mul, Dtype::f32));
  // An explicit stride-0 operand and a rank-3 broadcast.
  Tensor b0 = row.broadcast_to({5, 7});
  EXPECT_EQ(b0.strides()[0], 0);
  EXPECT_EQ(ops::sub(a, b0).to_f32_vector(),
            ref_binary(a, b0, {5, 7}, [](float x, float y) { return x - y; }, Dtype::f32));
  Tensor c = random_uniform({2, 1, 7}, Dtype::f32, 6);
  EXPECT_EQ(ops::add(c, a).shape(), (Shape{2, 5, 7}));
  EXPECT_EQ(ops::add(c, a).to_f32_vector(), ref_binary(c, a, {2, 5, 7}, add, Dtype::f32));
}

TEST(Binary, NonContiguousOperands) {
  Tensor base = random_uniform({7, 5}, Dtype::f32, 7);
  Tensor a = base.transpose(0, 1);                                  // [5, 7], strides [1, 5]
  Tensor b = random_uniform({5, 14}, Dtype::f32, 8, 1.0f, 2.0f).slice(1, 0, 14, 2);  // [5, 7], strides [14, 2]
  for (const BinCase& c : bin_cases()) {
    EXPECT_EQ(ops::binary(a, b, c.op).to_f32_vector(), ref_binary(a, b, {5, 7}, c.f, Dtype::f32));
  }
}

TEST(Binary, HalfDtypesRoundOnce) {
  for (Dtype dt : {Dtype::bf16, Dtype::f16}) {
    Tensor a = random_uniform({3, 33}, dt, 9), b = random_uniform({33}, dt, 10, 0.5f, 2.0f);
    for (const BinCase& c : bin_cases()) {
      Tensor out = ops::binary(a, b, c.op);
      EXPECT_EQ(out.dtype(), dt);
      EXPECT_EQ(out.to_f32_vector(), ref_binary(a, b, {3, 33}, c.f, dt));
    }
  }
}

TEST(Binary, NaNPropagatesThroughMaximumMinimum) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor a = Tensor::from_vector(std::vector<float>{nan, 1.0f, 2.0f}, {3});
  Tensor b = Tensor::from_vector(std::vector<float>{0.0f, nan, 3.0f}, {3});
  for (ops::BinaryOp op : {ops::BinaryOp::maximum, ops::BinaryOp::minimum}) {
    std::vector<float> v = ops::binary(a, b, op).to_f32_vector();
    EXPECT_TRUE(std::isnan(v[0]));
    EXPECT_TRUE(std::isnan(v[1]));
  }
}

TEST(Binary, IntegerDtypes) {
  Tensor a = Tensor::from_vector(std::vector<int32_t>{1, -2, 3}, {3});
  Tensor b = Tensor::from_vector(std::vector<int32_t>{10}, {1});
  Tensor s = ops::add(a, b);
  EXPECT_EQ(s.dtype(), Dtype::i32);
  EXPECT_EQ(s.to_f32_vector(), (std::vector<float>{11, 8, 13}));
  Tensor l = Tensor::from_vector(std::vector<int64_t>{int64_t{1} << 40, 5}, {2});
  Tensor m = ops::mul(l, Tensor::from_vector(std::vector<int64_t>{2, 3}, {2}));
  EXPECT_EQ(m.data<int64_t>()[0], int64_t{1} << 41);
  EXPECT_EQ(m.data<int64_t>()[1], 15);
  EXPECT_EQ(ops::binary(a, b, ops::BinaryOp::minimum).to_f32_vector(), (std::vector<float>{1, -2, 3}));
  EXPECT_THROW(ops::div(a, b), Error);
  Tensor u8 = Tensor::zeros({3}, Dtype::u8);
  EXPECT_THROW(ops::add(u8, u8), Error);
}

TEST(Binary, BadInput) {
  Tensor a = random_uniform({3, 4}, Dtype::f32, 11);
  try {
    ops::add(a, random_uniform({3, 5}, Dtype::f32, 12));
    FAIL() << "expected a broadcast error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[add] expected broadcastable shapes, got [3, 4] and [3, 5]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ops::mul(a, random_uniform({3, 4}, Dtype::bf16, 13)), Error);
  EXPECT_THROW(ops::add(a, Tensor()), Error);
}

TEST(Binary, InPlace) {
  Tensor a = random_uniform({4, 33}, Dtype::f32, 14);
  Tensor b = random_uniform({33}, Dtype::f32, 15);
  std::vector<float> want = ref_binary(a, b, {4, 33}, [](float x, float y) { return x * y; }, Dtype::f32);
  void* p = a.data_ptr();
  ops::binary_(a, b, ops::BinaryOp::mul);
  EXPECT_EQ(a.data_ptr(), p);
  EXPECT_EQ(a.to_f32_vector(), want);
  Tensor t = random_uniform({33, 4}, Dtype::f32, 16).transpose(0, 1);
  EXPECT_THROW(ops::binary_(t, b, ops::BinaryOp::add), Error);
  Tensor narrow = random_uniform({4, 1}, Dtype::f32, 17);
  EXPECT_THROW(ops::binary_(narrow, a, ops::BinaryOp::add), Error);
}

TEST(Binary, LargeParallel) {
  const int64_t n = 100003;  // several parallel_for blocks, a ragged tail
  Tensor a = random_uniform({n}, Dtype::f32, 18), b = random_uniform({n}, Dtype::f32, 19);
  EXPECT_EQ(ops::add(a, b).to_f32_vector(), ref_binary(a, b, {n}, [](float x, float y) { return x + y; }, Dtype::f32));
  Tensor m = random_uniform({3, n}, Dtype::bf16, 20), r = random_uniform({n}, Dtype::bf16, 21);
  EXPECT_EQ(ops::mul(m, r).to_f32_vector(),
            ref_binary(m, r, {3, n}, [](float x, float y) { return x * y; }, Dtype::bf16));
}

struct UnCase {
  ops::UnaryOp op;
  std::function<double(double)> f;
  float lo, hi;
};

std::vector<UnCase> un_cases() {
  const double k = std::sqrt(2.0 / M_PI);
  return {
      {ops::UnaryOp::neg, [](double x) { return -x; }, -3, 3},
      {ops::UnaryOp::exp, [](double x) { return std::exp(x); }, -20, 20},
      {ops::UnaryOp::log, [](double x) { return std::log(x); }, 0.01f, 50},
      {ops::UnaryOp::sqrt, [](double x) { return std::sqrt(x); }, 0, 50},
      {ops::UnaryOp::rsqrt, [](double x) { return 1.0 / std::sqrt(x); }, 0.01f, 50},
      {ops::UnaryOp::tanh, [](double x) { return std::tanh(x); }, -5, 5},
      {ops::UnaryOp::sigmoid, [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, -20, 20},
      {ops::UnaryOp::silu, [](double x) { return x / (1.0 + std::exp(-x)); }, -20, 20},
      {ops::UnaryOp::gelu_tanh,
       [k](double x) { return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x))); }, -6, 6},
      {ops::UnaryOp::gelu_erf, [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }, -6, 6},
      {ops::UnaryOp::relu, [](double x) { return x > 0 ? x : 0.0; }, -3, 3},
      {ops::UnaryOp::softplus, [](double x) { return x > 20 ? x : std::log1p(std::exp(x)); }, -30, 30},
      {ops::UnaryOp::abs, [](double x) { return std::fabs(x); }, -3, 3},
      {ops::UnaryOp::square, [](double x) { return x * x; }, -3, 3},
  };
}

TEST(Unary, AllOpsAgainstDoubleReference) {
  for (const UnCase& c : un_cases()) {
    for (int64_t n : {1, 7, 129}) {
      Tensor x = random_uniform({2, n}, Dtype::f32, 30 + static_cast<uint32_t>(n), c.lo, c.hi);
      std::vector<float> xv = x.to_f32_vector(), want(xv.size());
      for (size_t i = 0; i < xv.size(); ++i) want[i] = static_cast<float>(c.f(xv[i]));
      SCOPED_TRACE(static_cast<int>(c.op));
      expect_near_all(ops::unary(x, c.op).to_f32_vector(), want, 2e-6f, 1e-6f);
    }
  }
}

TEST(Unary, StridedAndHalfInputs) {
  for (const UnCase& c : un_cases()) {
    Tensor x = random_uniform({33, 6}, Dtype::f32, 40, c.lo, c.hi).transpose(0, 1);  // [6, 33], strides [1, 6]
    std::vector<float> xv = x.to_f32_vector(), want(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) want[i] = static_cast<float>(c.f(xv[i]));
    expect_near_all(ops::unary(x, c.op).to_f32_vector(), want, 2e-6f, 1e-6f);
    for (Dtype dt : {Dtype::bf16, Dtype::f16}) {
      Tensor h = random_uniform({5, 7}, dt, 41, c.lo, std::min(c.hi, 10.0f));
      std::vector<float> hv = h.to_f32_vector(), hw(hv.size());
      for (size_t i = 0; i < hv.size(); ++i) hw[i] = static_cast<float>(c.f(hv[i]));
      Tensor out = ops::unary(h, c.op);
      EXPECT_EQ(out.dtype(), dt);
      expect_near_all(out.to_f32_vector(), hw, dt == Dtype::bf16 ? 8e-3f : 1e-3f, 1e-5f);
    }
  }
}

TEST(Unary, ExpSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> in = {-inf, inf, nan, 0.0f, 100.0f, -100.0f, 88.7f, -87.0f, 1.0f, -103.0f};
  std::vector<float> out = ops::unary(Tensor::from_vector(in, {10}), ops::UnaryOp::exp).to_f32_vector();
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], inf);
  EXPECT_TRUE(std::isnan(out[2]));
  EXPECT_EQ(out[3], 1.0f);
  EXPECT_EQ(out[4], inf);
  EXPECT_NEAR(out[5], std::exp(-100.0f), 2e-45f);  // subnormal result
  EXPECT_NEAR(out[6], std::exp(88.7f), 4e-7f * std::exp(88.7f));
  EXPECT_NEAR(out[7], std::exp(-87.0f), 4e-7f * std::exp(-87.0f));
  EXPECT_NEAR(out[8], std::exp(1.0f), 4e-7f * std::exp(1.0f));
  EXPECT_NEAR(out[9], std::exp(-103.0f), 2e-45f);
  EXPECT_TRUE(std::isnan(ops::silu(Tensor::from_vector(std::vector<float>{nan}, {1})).to_f32_vector()[0]));
}

TEST(Unary, RejectsIntegers) {
  EXPECT_THROW(ops::silu(Tensor::zeros({3}, Dtype::i32)), Error);
  EXPECT_THROW(ops::affine(Tensor::zeros({3}, Dtype::i64), 2.0f), Error);
  EXPECT_THROW(ops::unary(Tensor(), ops::UnaryOp::exp), Error);
}

TEST(Affine, ScaleShiftAndSoftcap) {
  Tensor x = random_uniform({7, 33}, Dtype::f32, 50, -60, 60).slice(1, 1, 33, 2);
  std::vector<float> xv = x.to_f32_vector(), aff(xv.size()), cap(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    aff[i] = xv[i] * 0.5f + 3.0f;
    cap[i] = static_cast<float>(30.0 * std::tanh(xv[i] / 30.0));
  }
  expect_near_all(ops::affine(x, 0.5f, 3.0f).to_f32_vector(), aff, 1e-6f, 1e-6f);
  EXPECT_EQ(ops::scale(x, 0.5f).to_f32_vector(), ops::affine(x, 0.5f).to_f32_vector());
  expect_near_all(ops::softcap(x, 30.0f).to_f32_vector(), cap, 2e-6f, 1e-6f);
  Tensor h = random_uniform({9}, Dtype::bf16, 51);
  std::vector<float> hv = h.to_f32_vector();
  std::vector<float> got = ops::affine(h, 2.0f, 1.0f).to_f32_vector();
  for (size_t i = 0; i < hv.size(); ++i) EXPECT_EQ(got[i], static_cast<float>(bf16(hv[i] * 2.0f + 1.0f)));
  EXPECT_THROW(ops::softcap(x, 0.0f), Error);
}

TEST(Gated, SwigluGegluOnFusedProjection) {
  // gate and up as the two halves of one [N, 2F] projection: strided views.
  for (int64_t f : {1, 7, 129}) {
    Tensor fused = random_uniform({3, 2 * f}, Dtype::f32, 60, -6, 6);
    Tensor gate = fused.slice(-1, 0, f), up = fused.slice(-1, f, 2 * f);
    std::vector<float> g = gate.to_f32_vector(), u = up.to_f32_vector();
    std::vector<float> sw(g.size()), gt(g.size()), ge(g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      double x = g[i];
      sw[i] = static_cast<float>(x / (1.0 + std::exp(-x)) * u[i]);
      gt[i] = static_cast<float>(0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))) * u[i]);
      ge[i] = static_cast<float>(0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))) * u[i]);
    }
    expect_near_all(ops::swiglu(gate, up).to_f32_vector(), sw, 3e-6f, 1e-6f);
    expect_near_all(ops::geglu(gate, up, true).to_f32_vector(), gt, 3e-6f, 1e-6f);
    expect_near_all(ops::geglu(gate, up, false).to_f32_vector(), ge, 3e-6f, 1e-6f);
  }
  Tensor hg = random_uniform({4, 33}, Dtype::bf16, 61), hu = random_uniform({4, 33}, Dtype::bf16, 62);
  std::vector<float> g = hg.to_f32_vector(), u = hu.to_f32_vector(), want(g.size());
  for (size_t i = 0; i < g.size(); ++i) want[i] = static_cast<float>(g[i] / (1.0 + std::exp(-g[i])) * u[i]);
  Tensor out = ops::swiglu(hg, hu);
  EXPECT_EQ(out.dtype(), Dtype::bf16);
  expect_near_all(out.to_f32_vector(), want, 8e-3f, 1e-6f);
  EXPECT_THROW(ops::swiglu(hg, random_uniform({4, 32}, Dtype::bf16, 63)), Error);
  EXPECT_THROW(ops::swiglu(hg, random_uniform({4, 33}, Dtype::f32, 64)), Error);
}

TEST(Cast, EveryDtypePair) {
  const std::vector<Dtype> all = {Dtype::f32, Dtype::bf16, Dtype::f16, Dtype::i32,
                                  Dtype::i64, Dtype::u8,   Dtype::i8,  Dtype::boolean};
  const std::vector<float> vals = {0, 1, 2, 3, 7, 100, 127, 0};
  for (Dtype src : all) {
    std::vector<float> in = vals;
    if (src == Dtype::boolean) in = {0, 1, 1, 0, 1, 0, 1, 0};
    Tensor x = Tensor::empty({8}, src);
    dispatch_dtype(src, [&](auto tag) {
      using T = decltype(tag);
      for (size_t i = 0; i < in.size(); ++i) {
        if constexpr (std::is_same_v<T, bool>) x.data<T>()[i] = in[i] != 0;
        else x.data<T>()[i] = T(in[i]);
      }
    });
    for (Dtype dst : all) {
      Tensor y = ops::cast(x, dst);
      EXPECT_EQ(y.dtype(), dst);
      std::vector<float> want = in;
      if (dst == Dtype::boolean) {
        for (float& v : want) v = v != 0 ? 1.0f : 0.0f;
      }
      EXPECT_EQ(y.to_f32_vector(), want) << dtype_name(src) << " -> " << dtype_name(dst);
    }
  }
}

TEST(Cast, RoundingTruncationAndStrides) {
  std::vector<float> in = {2.7f, -2.7f, 1.00390625f, 1.01171875f, 65520.0f, 1e-8f, 5.9604645e-8f, 0.0f};
  Tensor x = Tensor::from_vector(in, {8});
  std::vector<float> i32 = ops::cast(x, Dtype::i32).to_f32_vector();
  EXPECT_EQ(i32[0], 2.0f);
  EXPECT_EQ(i32[1], -2.0f);
  std::vector<float> b = ops::cast(x, Dtype::bf16).to_f32_vector();
  EXPECT_EQ(b[2], 1.0f);        // halfway: ties to even
  EXPECT_EQ(b[3], 1.015625f);   // halfway: ties to even, upward
  std::vector<float> h = ops::cast(x, Dtype::f16).to_f32_vector();
  EXPECT_EQ(h[4], std::numeric_limits<float>::infinity());
  EXPECT_EQ(h[5], 0.0f);
  EXPECT_EQ(h[6], 5.9604645e-8f);  // smallest f16 subnormal
  std::vector<float> bo = ops::cast(x, Dtype::boolean).to_f32_vector();
  EXPECT_EQ(bo, (std::vector<float>{1, 1, 1, 1, 1, 1, 1, 0}));
  // Out of range and NaN saturate / go to zero instead of being undefined.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor big = Tensor::from_vector(std::vector<float>{1e10f, -1e10f, nan, 300.0f}, {4});
  EXPECT_EQ(ops::cast(big, Dtype::i32).data<int32_t>()[0], std::numeric_limits<int32_t>::max());
  EXPECT_EQ(ops::cast(big, Dtype::i32).data<int32_t>()[1], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(ops::cast(big, Dtype::i32).data<int32_t>()[2], 0);
  EXPECT_EQ(ops::cast(big, Dtype::u8).data<uint8_t>()[3], 255);
  // Strided source, several blocks.
  Tensor s = random_uniform({129, 7}, Dtype::f32, 70).transpose(0, 1);
  std::vector<float> sv = s.to_f32_vector(), got = ops::cast(s, Dtype::bf16).to_f32_vector();
  for (size_t i = 0; i < sv.size(); ++i) EXPECT_EQ(got[i], static_cast<float>(bf16(sv[i])));
  Tensor back = ops::cast(ops::cast(s, Dtype::f16), Dtype::f32);
  EXPECT_TRUE(back.is_contiguous());
  EXPECT_THROW(ops::cast(Tensor(), Dtype::f32), Error);
}

TEST(Elementwise, EmptyTensors) {
  Tensor e = Tensor::empty({0, 5}, Dtype::f32);
  EXPECT_EQ(ops::add(e, random_uniform({5}, Dtype::f32, 80)).shape(), (Shape{0, 5}));
  EXPECT_EQ(ops::silu(e).numel(), 0);
  EXPECT_EQ(ops::cast(e, Dtype::bf16).shape(), (Shape{0, 5}));
}

}  // namespace
}  // namespace tern
