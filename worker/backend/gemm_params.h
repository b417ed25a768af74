// Arguments of the GEMM op, shared by every backend:
//
//   for b in [0, batch):  C_b[m,n] = alpha * op(A_b)[m,k] * op(B_b)[k,n] + beta * C_b[m,n]
//
// Row-major (C order, as PyTorch stores tensors). op(X) = X, or X^T when trans_x is set:
//   A is stored [m, k] (lda >= k) or, transposed, [k, m] (lda >= m);
//   B is stored [k, n] (ldb >= n) or, transposed, [n, k] (ldb >= k)  -- nn.Linear's weight [out, in]
//     with trans_b gives y = x W^T;
//   C is stored [m, n] (ldc >= n).
// Leading dimensions and batch strides count elements, not bytes. A and B are fp32, bf16 or fp16
// (raw bits in uint16_t, common/numeric/bf16.h, f16.h), independently. C is fp32, bf16 or fp16: a
// 16-bit C is read (when beta != 0), combined and rounded to nearest even once at the end.
// Accumulation is fp32, except with `half_accumulate` (A, B and C all fp16): the products are summed
// in fp16 where the device has that mode (cuBLAS CUBLAS_COMPUTE_16F, twice the fp32-accumulate rate
// on GeForce tensor cores); the CPU backend sums in fp32 and rounds the result once (documented
// difference, within the fp16 tolerance of the tests).
// beta == 0 means C is not read (NaNs in it do not propagate), as in BLAS.
// Batched: X_b starts stride_x elements after X_{b-1}; stride 0 broadcasts one matrix (a shared
// weight). The C batches must not overlap.
//
// Pointers are device addresses (DeviceBuffer::at(offset)) that must stay valid until the op ran.
#ifndef MOBIUS_WORKER_BACKEND_GEMM_PARAMS_H_
#define MOBIUS_WORKER_BACKEND_GEMM_PARAMS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace mobius::backend {

// kF16: IEEE binary16. The 16-bit types are the "half" formats of the activations and weights
// (a job's training.precision); everything else (statistics, losses, gradients) stays fp32.
enum class DType { kFp32, kBf16, kF16 };
absl::string_view DTypeName(DType dtype);  // "fp32", "bf16", "fp16"
inline int DTypeBytes(DType dtype) { return dtype == DType::kFp32 ? 4 : 2; }
inline bool IsHalf(DType dtype) { return dtype != DType::kFp32; }

struct GemmParams {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 0.0f;

  DType a_type = DType::kFp32;
  const void* a = nullptr;
  int64_t lda = 0;
  int64_t stride_a = 0;  // elements between batches

  DType b_type = DType::kFp32;
  const void* b = nullptr;
  int64_t ldb = 0;
  int64_t stride_b = 0;

  DType c_type = DType::kFp32;
  void* c = nullptr;
  int64_t ldc = 0;
  int64_t stride_c = 0;

  int64_t batch = 1;

  bool half_accumulate = false;  // REQUIRES a, b and c fp16 (see above)
};

// INVALID_ARGUMENT (naming the field) unless: m, n, k >= 0, batch >= 1, non-null pointers for
// non-empty operands, leading dimensions as above, stride_c >= m*ldc when batch > 1 (the strides
// of A and B may be 0), half_accumulate only with fp16 A, B and C. m, n or k == 0 is valid (with
// k == 0, C = beta * C).
absl::Status ValidateGemm(const GemmParams& params);

}  // namespace mobius::backend

#endif  // MOBIUS_WORKER_BACKEND_GEMM_PARAMS_H_
