#include "worker/model/linear.h"

#include "common/status_macros.h"

namespace mobius::units {

using backend::DType;
using backend::GemmParams;

absl::Status LinearForward(backend::Backend& be, backend::Queue& q, const LinearWeight& w,
                           const void* x, void* y, DType y_type, int64_t n, int64_t in,
                           int64_t out) {
  GemmParams g;
  g.m = n, g.n = out, g.k = in;
  g.a_type = DType::kBf16, g.a = x, g.lda = in;
  // Conv1D: B = W [in, out] as stored; nn.Linear: B = W^T from W [out, in].
  g.b_type = DType::kBf16, g.b = w.w, g.ldb = w.ld, g.trans_b = !w.in_out;
  g.c_type = y_type, g.c = y, g.ldc = out;
  MOBIUS_RETURN_IF_ERROR(be.Gemm(q, g));
  if (w.bias == nullptr) return absl::OkStatus();
  if (y_type != DType::kBf16) return absl::InvalidArgumentError("linear: bias needs a bf16 output");
  return be.BiasAdd(q, {.n = n, .c = out, .inp = y, .bias = w.bias, .out = y});
}

absl::Status LinearBackward(backend::Backend& be, backend::Queue& q, const LinearWeight& w,
                            const void* x, const void* dy, DType dy_type, float* dx,
                            bool accumulate_dx, int64_t n, int64_t in, int64_t out) {
  if (dx != nullptr) {  // dx [N, in] = dy [N, out] * W^T
    GemmParams g;
    g.m = n, g.n = in, g.k = out;
    g.a_type = dy_type, g.a = dy, g.lda = out;
    g.b_type = DType::kBf16, g.b = w.w, g.ldb = w.ld, g.trans_b = w.in_out;
    g.c_type = DType::kFp32, g.c = dx, g.ldc = in, g.beta = accumulate_dx ? 1.0f : 0.0f;
    MOBIUS_RETURN_IF_ERROR(be.Gemm(q, g));
  }
  GemmParams g;
  g.beta = 1.0f, g.trans_a = true;
  g.c_type = DType::kFp32, g.c = w.dw, g.ldc = w.ld;
  if (w.in_out) {  // dW [in, out] = x^T dy
    g.m = in, g.n = out, g.k = n;
    g.a_type = DType::kBf16, g.a = x, g.lda = in;
    g.b_type = dy_type, g.b = dy, g.ldb = out;
  } else {  // dW [out, in] = dy^T x
    g.m = out, g.n = in, g.k = n;
    g.a_type = dy_type, g.a = dy, g.lda = out;
    g.b_type = DType::kBf16, g.b = x, g.ldb = in;
  }
  MOBIUS_RETURN_IF_ERROR(be.Gemm(q, g));
  if (w.dbias == nullptr) return absl::OkStatus();
  return be.BiasBackward(q, {.n = n, .c = out, .dout_type = dy_type, .dout = dy, .dbias = w.dbias});
}

}  // namespace mobius::units
