// GEMM on the GPU through cuBLASLt, with the meaning of backend::GemmParams
// (worker/backend/gemm_params.h), row-major as PyTorch stores tensors:
//
//   for b in [0, batch):  C_b[m,n] = alpha * op(A_b)[m,k] * op(B_b)[k,n] + beta * C_b[m,n] (+
//   bias[n])
//
// A is stored [m, k] (lda >= k) or, with trans_a, [k, m]; B is [k, n] (ldb >= n) or, with trans_b,
// [n, k] (nn.Linear's weight: y = x W^T + bias is trans_b with the bias epilogue); C is [m, n]
// (ldc >= n). Leading dimensions and batch strides count elements; stride 0 broadcasts one A or B.
// Computation: fp32 accumulation and fp32 alpha/beta (CUBLAS_COMPUTE_32F: no TF32, no reduced
// precision reductions), or with half_accumulate fp16 accumulation and fp16 alpha/beta
// (CUBLAS_COMPUTE_16F, scale type CUDA_R_16F: alpha and beta are rounded to fp16 once; twice the
// fp32-accumulate tensor rate on GeForce GPUs). Types (cuBLASLt's own combinations, no conversion
// here):
//   CUBLAS_COMPUTE_32F:  A, B bf16 -> C bf16 or fp32;  A, B fp16 -> C fp16 or fp32;
//                        A, B, C fp32
//   CUBLAS_COMPUTE_16F:  A, B, C fp16 (half_accumulate)
// Anything else (bf16 x fp16, fp32 x 16-bit, 16-bit x 16-bit into the other 16-bit C, fp32 x fp32
// into a 16-bit C) is UNIMPLEMENTED naming the types: the backend converts such operands first.
// The bias, when given, has C's type (cuBLASLt's rule) and is added in the compute type before C
// is rounded. beta == 0: C is not read. k == 0: C = beta * C (+ bias), in fp32, rounded once.
//
// cuBLASLt works column-major; a row-major C = op(A) op(B) is the column-major C^T = op(B)^T
// op(A)^T, so the call swaps A and B (gemm.cu). Algorithms come from cuBLASLt's heuristic for the
// shape, types, transposes and pointer alignment, looked up once per distinct call and cached.
//
// Thread-safety: one CublasLtGemm per stream (or per thread issuing in order): Run mutates the
// plan cache and every call shares one workspace, so calls on different streams could overlap on
// it.
#ifndef MOBIUS_WORKER_KERNELS_CUDA_GEMM_H_
#define MOBIUS_WORKER_KERNELS_CUDA_GEMM_H_

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

#include "worker/kernels/cuda/kernel_status.h"

namespace mobius::kernels::cuda {

enum class GemmType { kFp32, kBf16, kF16 };
const char* GemmTypeName(GemmType type);  // "fp32", "bf16", "fp16"

struct GemmArgs {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 0.0f;

  GemmType a_type = GemmType::kBf16;
  const void* a = nullptr;
  int64_t lda = 0;
  int64_t stride_a = 0;  // elements between batches

  GemmType b_type = GemmType::kBf16;
  const void* b = nullptr;
  int64_t ldb = 0;
  int64_t stride_b = 0;

  GemmType c_type = GemmType::kBf16;
  void* c = nullptr;
  int64_t ldc = 0;
  int64_t stride_c = 0;

  int64_t batch = 1;
  const void* bias = nullptr;  // [n] of c_type, or nullptr: no bias epilogue

  bool half_accumulate = false;  // CUBLAS_COMPUTE_16F; REQUIRES a, b, c fp16 (see above)
};

// INVALID_ARGUMENT (naming the field) unless sizes >= 0, batch >= 1, pointers set for non-empty
// operands, leading dimensions as above, stride_c >= m * ldc when batch > 1, and with
// half_accumulate alpha and beta finite in fp16 (|x| <= 65504); UNIMPLEMENTED for a type
// combination cuBLASLt is not asked to do here (see above), naming the types.
KernelStatus CheckGemmArgs(const GemmArgs& args);

class CublasLtGemm {
 public:
  // 32 MiB: what NVIDIA recommends for Hopper; enough for every heuristic choice on Ampere/Ada.
  static constexpr size_t kDefaultWorkspaceBytes = size_t{32} << 20;

  // Creates the cuBLASLt handle and allocates the workspace on the current device.
  static KernelStatus Create(size_t workspace_bytes, std::unique_ptr<CublasLtGemm>* out);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // Enqueues the GEMM on `stream`. Errors: CheckGemmArgs's; UNIMPLEMENTED when cuBLASLt has no
  // algorithm for the call; INTERNAL for a cuBLAS/CUDA failure (with its name and text).
  KernelStatus Run(const GemmArgs& args, cudaStream_t stream);

  size_t cached_plans() const { return plans_.size(); }

 private:
  struct Plan;  // descriptors + the chosen algorithm (gemm.cu)
  using PlanKey = std::array<int64_t, 20>;

  CublasLtGemm() = default;
  KernelStatus MakePlan(const GemmArgs& args, const PlanKey& key, Plan** plan);

  void* handle_ = nullptr;  // cublasLtHandle_t
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
};

}  // namespace mobius::kernels::cuda

#endif  // MOBIUS_WORKER_KERNELS_CUDA_GEMM_H_
