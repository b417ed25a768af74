#include "worker/backend/gemm_params.h"

#include "absl/strings/str_cat.h"

namespace mobius::backend {

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFp32: return "fp32";
    case DType::kBf16: return "bf16";
    case DType::kF16: return "fp16";
  }
  return "?";
}

namespace {

absl::Status Invalid(absl::string_view what, int64_t value, absl::string_view want) {
  return absl::InvalidArgumentError(absl::StrCat("gemm: ", what, " = ", value, ", want ", want));
}

}  // namespace

absl::Status ValidateGemm(const GemmParams& p) {
  if (p.m < 0) return Invalid("m", p.m, ">= 0");
  if (p.n < 0) return Invalid("n", p.n, ">= 0");
  if (p.k < 0) return Invalid("k", p.k, ">= 0");
  if (p.batch < 1) return Invalid("batch", p.batch, ">= 1");
  const int64_t a_cols = p.trans_a ? p.m : p.k;
  const int64_t b_cols = p.trans_b ? p.k : p.n;
  const bool a_used = p.m > 0 && p.k > 0, b_used = p.n > 0 && p.k > 0;
  if (a_used && p.lda < a_cols) {
    return Invalid("lda", p.lda, absl::StrCat(">= ", a_cols, p.trans_a ? " (m, trans_a)" : " (k)"));
  }
  if (b_used && p.ldb < b_cols) {
    return Invalid("ldb", p.ldb, absl::StrCat(">= ", b_cols, p.trans_b ? " (k, trans_b)" : " (n)"));
  }
  if (p.m > 0 && p.n > 0 && p.ldc < p.n) return Invalid("ldc", p.ldc, absl::StrCat(">= n = ", p.n));
  if (a_used && p.a == nullptr) return absl::InvalidArgumentError("gemm: a is null");
  if (b_used && p.b == nullptr) return absl::InvalidArgumentError("gemm: b is null");
  if (p.m > 0 && p.n > 0 && p.c == nullptr) return absl::InvalidArgumentError("gemm: c is null");
  if (p.stride_a < 0) return Invalid("stride_a", p.stride_a, ">= 0");
  if (p.stride_b < 0) return Invalid("stride_b", p.stride_b, ">= 0");
  if (p.batch > 1 && p.m > 0 && p.n > 0 && p.stride_c < p.m * p.ldc) {
    return Invalid("stride_c", p.stride_c, absl::StrCat(">= m * ldc = ", p.m * p.ldc, " (batches of C must not overlap)"));
  }
  if (p.half_accumulate &&
      (p.a_type != DType::kF16 || p.b_type != DType::kF16 || p.c_type != DType::kF16)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gemm: half_accumulate needs fp16 a, b and c (a ", DTypeName(p.a_type), ", b ",
        DTypeName(p.b_type), ", c ", DTypeName(p.c_type), ")"));
  }
  return absl::OkStatus();
}

}  // namespace mobius::backend
