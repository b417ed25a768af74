#include "worker/kernels/cuda/kernel_status.h"

#include <cuda_runtime_api.h>

namespace mobius::kernels::cuda {
namespace {

const char* CodeName(KernelCode code) {
  switch (code) {
    case KernelCode::kOk:
      return "OK";
    case KernelCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case KernelCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case KernelCode::kUnimplemented:
      return "UNIMPLEMENTED";
    case KernelCode::kInternal:
      return "INTERNAL";
  }
  return "UNKNOWN";
}

}  // namespace

std::string KernelStatus::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code_)) + ": " + message_;
}

KernelStatus InvalidArgument(std::string message) {
  return KernelStatus(KernelCode::kInvalidArgument, std::move(message));
}

KernelStatus Unimplemented(std::string message) {
  return KernelStatus(KernelCode::kUnimplemented, std::move(message));
}

KernelStatus FromCudaError(int cuda_error, const char* what, const char* file, int line) {
  const auto e = static_cast<cudaError_t>(cuda_error);
  if (e == cudaSuccess) return OkStatus();
  std::string msg = std::string(file) + ":" + std::to_string(line) + ": " + what + ": " +
                    cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  return KernelStatus(
      e == cudaErrorMemoryAllocation ? KernelCode::kResourceExhausted : KernelCode::kInternal,
      std::move(msg));
}

KernelStatus LaunchStatus(const char* kernel, const char* file, int line) {
  return FromCudaError(cudaGetLastError(), kernel, file, line);
}

}  // namespace mobius::kernels::cuda
