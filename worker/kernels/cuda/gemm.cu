#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "worker/kernels/cuda/device_utils.cuh"
#include "worker/kernels/cuda/gemm.h"

namespace mobius::kernels::cuda {
namespace {

KernelStatus FromCublas(cublasStatus_t st, const char* what, const char* file, int line) {
  if (st == CUBLAS_STATUS_SUCCESS) return OkStatus();
  std::string msg = std::string(file) + ":" + std::to_string(line) + ": " + what + ": " +
                    cublasLtGetStatusName(st) + ": " + cublasLtGetStatusString(st);
  return KernelStatus(st == CUBLAS_STATUS_ALLOC_FAILED    ? KernelCode::kResourceExhausted
                      : st == CUBLAS_STATUS_NOT_SUPPORTED ? KernelCode::kUnimplemented
                                                          : KernelCode::kInternal,
                      std::move(msg));
}

#define MOBIUS_CUBLAS_RETURN_IF_ERROR(expr) \
  MOBIUS_KERNEL_RETURN_IF_ERROR(FromCublas((expr), #expr, __FILE__, __LINE__))

cudaDataType_t CudaType(GemmType t) {
  switch (t) {
    case GemmType::kBf16:
      return CUDA_R_16BF;
    case GemmType::kF16:
      return CUDA_R_16F;
    case GemmType::kFp32:
      break;
  }
  return CUDA_R_32F;
}

std::string Types(const GemmArgs& g) {
  return std::string("a=") + GemmTypeName(g.a_type) + " b=" + GemmTypeName(g.b_type) +
         " c=" + GemmTypeName(g.c_type) + (g.half_accumulate ? " (half_accumulate)" : "");
}

// Largest power of two (<= 256) dividing the address: what cuBLASLt's heuristic must assume.
int64_t Alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  int64_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

// k == 0: C = beta * C (+ bias), which cuBLASLt does not promise to handle.
template <typename T>
__global__ void gemm_scale_c_kernel(T* c, const T* bias, int64_t m, int64_t n, int64_t ldc,
                                    int64_t stride_c, int64_t batch, float beta) {
  const int64_t total = batch * m * n;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t col = i % n, row = i / n % m, b = i / (m * n);
    const int64_t at = b * stride_c + row * ldc + col;
    float x = beta == 0.0f ? 0.0f : beta * internal::Load(c, at);
    if (bias != nullptr) x += internal::Load(bias, col);
    internal::Store(c, at, x);
  }
}

KernelStatus ScaleC(const GemmArgs& a, cudaStream_t stream) {
  const int64_t total = a.batch * a.m * a.n;
  const unsigned int grid = internal::GridFor(total, 256);
  if (a.c_type == GemmType::kBf16) {
    gemm_scale_c_kernel<<<grid, 256, 0, stream>>>(static_cast<uint16_t*>(a.c),
                                                  static_cast<const uint16_t*>(a.bias), a.m, a.n,
                                                  a.ldc, a.stride_c, a.batch, a.beta);
  } else if (a.c_type == GemmType::kF16) {
    gemm_scale_c_kernel<<<grid, 256, 0, stream>>>(static_cast<__half*>(a.c),
                                                  static_cast<const __half*>(a.bias), a.m, a.n,
                                                  a.ldc, a.stride_c, a.batch, a.beta);
  } else {
    gemm_scale_c_kernel<<<grid, 256, 0, stream>>>(static_cast<float*>(a.c),
                                                  static_cast<const float*>(a.bias), a.m, a.n,
                                                  a.ldc, a.stride_c, a.batch, a.beta);
  }
  return MOBIUS_KERNEL_LAUNCH_STATUS("gemm_scale_c_kernel");
}

KernelStatus Invalid(const std::string& what) { return InvalidArgument("gemm: " + what); }

}  // namespace

const char* GemmTypeName(GemmType type) {
  switch (type) {
    case GemmType::kBf16:
      return "bf16";
    case GemmType::kF16:
      return "fp16";
    case GemmType::kFp32:
      break;
  }
  return "fp32";
}

struct CublasLtGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLAS's A (our B), B (our A)
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

KernelStatus CheckGemmArgs(const GemmArgs& g) {
  if (g.m < 0 || g.n < 0 || g.k < 0) return Invalid("negative m, n or k");
  if (g.batch < 1) return Invalid("batch " + std::to_string(g.batch) + " < 1");
  const bool empty = g.m == 0 || g.n == 0;
  if (empty) return OkStatus();
  if (g.c == nullptr) return Invalid("c is null");
  if (g.ldc < g.n) return Invalid("ldc " + std::to_string(g.ldc) + " < n");
  if (g.batch > 1 && g.stride_c < g.m * g.ldc) return Invalid("stride_c < m * ldc");
  if (g.k > 0) {
    if (g.a == nullptr || g.b == nullptr) return Invalid("a or b is null");
    if (g.lda < (g.trans_a ? g.m : g.k)) return Invalid("lda too small");
    if (g.ldb < (g.trans_b ? g.k : g.n)) return Invalid("ldb too small");
    if (g.stride_a < 0 || g.stride_b < 0) return Invalid("negative stride");
  }
  // cuBLASLt's type combinations for these compute types (gemm.h).
  const bool same_in = g.a_type == g.b_type;
  bool supported;
  if (g.half_accumulate) {
    supported = same_in && g.a_type == GemmType::kF16 && g.c_type == GemmType::kF16;
  } else if (same_in && g.a_type == GemmType::kFp32) {
    supported = g.c_type == GemmType::kFp32;
  } else {
    supported = same_in && (g.c_type == g.a_type || g.c_type == GemmType::kFp32);
  }
  if (!supported) {
    return Unimplemented(
        "gemm: types " + Types(g) +
        " (cuBLASLt, as used here: bf16 x bf16 -> bf16/fp32, fp16 x fp16 -> fp16/fp32, fp32 x "
        "fp32 -> fp32 with fp32 accumulation; fp16 x fp16 -> fp16 with half_accumulate)");
  }
  if (g.half_accumulate) {
    // alpha and beta become fp16 scalars (CUBLAS_COMPUTE_16F's scale type): an infinite one would
    // silently give inf or NaN.
    const std::pair<const char*, float> scalars[] = {{"alpha", g.alpha}, {"beta", g.beta}};
    for (const auto& [name, x] : scalars) {
      if (!(std::fabs(x) <= 65504.0f)) {
        return Invalid(std::string(name) + " " + std::to_string(x) +
                       " is not a finite fp16 value (half_accumulate scales in fp16)");
      }
    }
  }
  return OkStatus();
}

KernelStatus CublasLtGemm::Create(size_t workspace_bytes, std::unique_ptr<CublasLtGemm>* out) {
  std::unique_ptr<CublasLtGemm> g(new CublasLtGemm());
  cublasLtHandle_t handle = nullptr;
  MOBIUS_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&handle));
  g->handle_ = handle;
  if (workspace_bytes > 0) {
    MOBIUS_KERNEL_RETURN_IF_ERROR(FromCudaError(cudaMalloc(&g->workspace_, workspace_bytes),
                                                "cudaMalloc(gemm workspace)", __FILE__, __LINE__));
  }
  g->workspace_bytes_ = workspace_bytes;
  *out = std::move(g);
  return OkStatus();
}

CublasLtGemm::~CublasLtGemm() {
  plans_.clear();
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

KernelStatus CublasLtGemm::MakePlan(const GemmArgs& g, const PlanKey& key, Plan** plan_out) {
  auto plan = std::make_unique<Plan>();
  // CUBLAS_COMPUTE_16F takes fp16 scalars (scale type CUDA_R_16F), CUBLAS_COMPUTE_32F fp32 ones.
  MOBIUS_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(
      &plan->desc, g.half_accumulate ? CUBLAS_COMPUTE_16F : CUBLAS_COMPUTE_32F,
      g.half_accumulate ? CUDA_R_16F : CUDA_R_32F));
  // Column-major view: C^T [n, m] = op(B)^T [n, k] * op(A)^T [k, m].
  const cublasOperation_t op_a = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLAS's A = our B
  const cublasOperation_t op_b = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLAS's B = our A
  MOBIUS_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  MOBIUS_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  if (g.bias != nullptr) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    MOBIUS_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    MOBIUS_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)));
  }
  // Stored shapes (rows, cols) in column-major terms.
  const uint64_t a_rows = g.trans_b ? g.k : g.n, a_cols = g.trans_b ? g.n : g.k;
  const uint64_t b_rows = g.trans_a ? g.m : g.k, b_cols = g.trans_a ? g.k : g.m;
  MOBIUS_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatrixLayoutCreate(&plan->a, CudaType(g.b_type), a_rows, a_cols, g.ldb));
  MOBIUS_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatrixLayoutCreate(&plan->b, CudaType(g.a_type), b_rows, b_cols, g.lda));
  MOBIUS_CUBLAS_RETURN_IF_ERROR(
      cublasLtMatrixLayoutCreate(&plan->c, CudaType(g.c_type), g.n, g.m, g.ldc));
  if (g.batch > 1) {
    const int32_t count = static_cast<int32_t>(g.batch);
    const struct {
      cublasLtMatrixLayout_t layout;
      int64_t stride;
    } batched[] = {{plan->a, g.stride_b}, {plan->b, g.stride_a}, {plan->c, g.stride_c}};
    for (const auto& x : batched) {
      MOBIUS_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(
          x.layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
      MOBIUS_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutSetAttribute(
          x.layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &x.stride, sizeof(x.stride)));
    }
  }
  cublasLtMatmulPreference_t pref = nullptr;
  MOBIUS_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = workspace_bytes_;
  const uint32_t align_a = static_cast<uint32_t>(Alignment(g.b));
  const uint32_t align_b = static_cast<uint32_t>(Alignment(g.a));
  const uint32_t align_c = static_cast<uint32_t>(Alignment(g.c));
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                              &align_a, sizeof(align_a));
  }
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                              &align_b, sizeof(align_b));
  }
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                              &align_c, sizeof(align_c));
  }
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                              &align_c, sizeof(align_c));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(handle_), plan->desc, plan->a,
                                        plan->b, plan->c, plan->c, pref, 1, &result, &found);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  MOBIUS_KERNEL_RETURN_IF_ERROR(FromCublas(st, "cublasLt heuristic", __FILE__, __LINE__));
  if (found == 0) {
    return Unimplemented("gemm: cuBLASLt has no algorithm for m=" + std::to_string(g.m) +
                         " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k) + " types " +
                         Types(g) + (g.bias != nullptr ? " with bias" : ""));
  }
  plan->algo = result.algo;
  *plan_out = plan.get();
  plans_[key] = std::move(plan);
  return OkStatus();
}

KernelStatus CublasLtGemm::Run(const GemmArgs& g, cudaStream_t stream) {
  MOBIUS_KERNEL_RETURN_IF_ERROR(CheckGemmArgs(g));
  if (g.m == 0 || g.n == 0) return OkStatus();
  if (g.k == 0) return ScaleC(g, stream);
  const PlanKey key = {g.m,
                       g.n,
                       g.k,
                       (g.trans_a ? 1 : 0) | (g.trans_b ? 2 : 0),
                       static_cast<int64_t>(g.a_type),
                       static_cast<int64_t>(g.b_type),
                       static_cast<int64_t>(g.c_type),
                       g.lda,
                       g.ldb,
                       g.ldc,
                       g.batch > 1 ? g.stride_a : 0,
                       g.batch > 1 ? g.stride_b : 0,
                       g.batch > 1 ? g.stride_c : 0,
                       g.batch,
                       g.bias != nullptr ? 1 : 0,
                       Alignment(g.a),
                       Alignment(g.b),
                       Alignment(g.c),
                       g.bias != nullptr ? Alignment(g.bias) : 0,
                       g.half_accumulate ? 1 : 0};
  Plan* plan = nullptr;
  auto it = plans_.find(key);
  if (it != plans_.end()) {
    plan = it->second.get();
  } else {
    MOBIUS_KERNEL_RETURN_IF_ERROR(MakePlan(g, key, &plan));
  }
  if (g.bias != nullptr) {  // the pointer may differ between calls with the same plan
    MOBIUS_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)));
  }
  // Host scalars of the plan's scale type, read by cuBLASLt during the call.
  const __half alpha16 = __float2half_rn(g.alpha), beta16 = __float2half_rn(g.beta);
  const void* alpha = g.half_accumulate ? static_cast<const void*>(&alpha16) : &g.alpha;
  const void* beta = g.half_accumulate ? static_cast<const void*>(&beta16) : &g.beta;
  MOBIUS_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(
      static_cast<cublasLtHandle_t>(handle_), plan->desc, alpha, g.b, plan->a, g.a, plan->b, beta,
      g.c, plan->c, g.c, plan->c, &plan->algo, workspace_, workspace_bytes_, stream));
  return OkStatus();
}

}  // namespace mobius::kernels::cuda
