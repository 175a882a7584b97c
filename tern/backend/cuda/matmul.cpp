// CUDA matmul and linear: row-major tensor views mapped onto column-major cuBLASLt GEMMs (C^T = B^T A^T),
// strided views used in place where one of the two matrix strides is 1, batch dims flattened when the
// strides allow, else looped.
#include "tern/ops/matmul.h"

#include "tern/backend/cuda/blas/gemm.h"
#include "tern/backend/cuda/launch.h"
#include "tern/backend/cuda/layout.h"
#include "tern/backend/cuda/runtime/context.h"
#include "tern/ops/elementwise.h"
#include "tern/ops/gated_linear.h"

namespace tern::cuda {
namespace {

// A logical row-major matrix [rows, cols] inside a tensor: element (r, c) at r * sr + c * sc.
struct MatView {
  int64_t rows, cols, sr, sc;
};

// Column-major operand for cuBLAS holding the transpose of v ([cols, rows]): returns false when
// neither stride is 1. ld and trans describe the stored matrix.
bool as_colmajor_transpose(MatView v, bool& trans, int64_t& ld) {
  // A unit dim's stride is free: pick the one that makes the layout legal.
  if (v.rows == 1) v.sr = v.sc == 1 ? v.cols : 1;
  if (v.cols == 1) v.sc = v.sr == 1 ? v.rows : 1;
  if (v.sc == 1 && v.sr >= v.cols) {  // col-major [cols, rows] with ld = sr: v^T as stored
    trans = false;
    ld = v.sr;
    return true;
  }
  if (v.sr == 1 && v.sc >= v.rows) {  // the memory is col-major [rows, cols] (v itself): transpose it
    trans = true;
    ld = v.sc;
    return true;
  }
  return false;
}

MatView mat_of(const Tensor& t, bool trans) {
  const int64_t r = t.size(-2), c = t.size(-1), sr = t.stride(-2), sc = t.stride(-1);
  return trans ? MatView{c, r, sc, sr} : MatView{r, c, sr, sc};
}

// out[..., M, N] (contiguous) = A_l[..., M, K] B_l[..., K, N], operands already broadcast to out's batch.
void gemm_batched(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& out) {
  Tensor A = a, B = b;
  bool op_a = false, op_b = false;
  int64_t ld_a = 0, ld_b = 0;
  // cuBLAS A := B_l^T [N, K]; cuBLAS B := A_l^T [K, M].
  if (!as_colmajor_transpose(mat_of(B, tb), op_a, ld_a)) {
    B = b.contiguous();
    TERN_ASSERT(as_colmajor_transpose(mat_of(B, tb), op_a, ld_a), "contiguous operand has a cuBLAS layout");
  }
  if (!as_colmajor_transpose(mat_of(A, ta), op_b, ld_b)) {
    A = a.contiguous();
    TERN_ASSERT(as_colmajor_transpose(mat_of(A, ta), op_b, ld_b), "contiguous operand has a cuBLAS layout");
  }
  const int64_t M = out.size(-2), N = out.size(-1);
  const int64_t K = ta ? a.size(-2) : a.size(-1);
  Shape batch(out.shape().begin(), out.shape().end() - 2);
  Strides sa(A.strides().begin(), A.strides().end() - 2), sb(B.strides().begin(), B.strides().end() - 2),
      sc(out.strides().begin(), out.strides().end() - 2);
  auto l = coalesce<3>(batch, {&sa, &sb, &sc});
  GemmDesc d;
  d.ab_dtype = A.dtype();
  d.c_dtype = out.dtype();
  d.trans_a = op_a;
  d.trans_b = op_b;
  d.m = N;
  d.n = M;
  d.k = K;
  d.lda = ld_a;
  d.ldb = ld_b;
  d.ldc = N;
  const int rank = l[0].rank;
  d.batch = rank ? l[0].shape[rank - 1] : 1;
  d.stride_a = rank ? l[1].stride[rank - 1] : 0;
  d.stride_b = rank ? l[0].stride[rank - 1] : 0;
  d.stride_c = rank ? l[2].stride[rank - 1] : 0;
  int64_t outer = 1;
  for (int i = 0; i + 1 < rank; ++i) outer *= l[0].shape[i];
  const size_t ea = dtype_size(A.dtype()), ec = dtype_size(out.dtype());
  for (int64_t o = 0; o < outer; ++o) {
    int64_t off_a = 0, off_b = 0, off_c = 0, rem = o;
    for (int i = rank - 2; i >= 0; --i) {
      const int64_t idx = rem % l[0].shape[i];
      rem /= l[0].shape[i];
      off_a += idx * l[0].stride[i];
      off_b += idx * l[1].stride[i];
      off_c += idx * l[2].stride[i];
    }
    gemm(d, static_cast<const char*>(B.data_ptr()) + off_b * ea, static_cast<const char*>(A.data_ptr()) + off_a * ea,
         static_cast<char*>(out.data_ptr()) + off_c * ec, stream());
  }
}

}  // namespace

void matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, Tensor& out) {
  check_cuda(a, "matmul");
  check_cuda(b, "matmul");
  Shape batch(out.shape().begin(), out.shape().end() - 2);
  auto expand = [&](const Tensor& t) {
    Shape s = batch;
    s.push_back(t.size(-2));
    s.push_back(t.size(-1));
    return t.broadcast_to(s);
  };
  gemm_batched(expand(a), trans_a, expand(b), trans_b, out);
}

void linear(const Tensor& x2d, const Tensor& w, const Tensor& bias, Tensor& out2d) {
  check_cuda(x2d, "linear");
  check_cuda(w, "linear");
  // cuBLASLt takes one input type: an f32 activation meets bf16/f16 weights in the weights' type,
  // with the product written in f32.
  Tensor x = x2d.dtype() == w.dtype() ? x2d : ops::cast(x2d, w.dtype());
  // Decode-sized products (a few tokens) are weight-bandwidth bound: the GEMV kernel reads w at full
  // width where cuBLASLt's small-M paths reach 40-75% of it.
  // A few more rows (gemv_mma.cu says which) take the tensor-core variant.
  const bool gemv = x.dtype() == Dtype::bf16 && w.is_contiguous() && x.is_contiguous() &&
                    (launch_gemv(x.size(0), x.data_ptr(), w.data_ptr(), out2d.dtype(), out2d.data_ptr(), w.size(0),
                                 w.size(1), stream()) ||
                     launch_gemv_mma(x.size(0), x.data_ptr(), w.data_ptr(), out2d.dtype(), out2d.data_ptr(), w.size(0),
                                     w.size(1), stream()));
  if (!gemv) gemm_batched(x, false, w, true, out2d);
  if (bias.defined()) {
    check_cuda(bias, "linear");
    Tensor bc = bias.contiguous();
    launch_add_bias(out2d.dtype(), out2d.data_ptr(), bc.dtype(), bc.data_ptr(), out2d.size(0), out2d.size(1),
                    stream());
  }
}

bool gated_linear(const Tensor& x2d, const Tensor& w, ops::UnaryOp act, Tensor& out2d) {
  check_cuda(x2d, "gated_linear");
  return launch_gemv_gated(x2d.size(0), static_cast<int>(act), x2d.data_ptr(), w.data_ptr(), out2d.data_ptr(),
                           w.size(0) / 2, w.size(1), stream()) ||
         launch_gemv_mma_gated(x2d.size(0), static_cast<int>(act), x2d.data_ptr(), w.data_ptr(), out2d.data_ptr(),
                               w.size(0) / 2, w.size(1), stream());
}

}  // namespace tern::cuda
