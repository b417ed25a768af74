// The error type of the CUDA kernels and the cuBLASLt GEMM (worker/kernels/cuda/).
//
// The kernels are part of the CUDA-only subset of the tree (MOBIUS_SERVICE=OFF), which must build
// on a GPU machine without Abseil, so they cannot return absl::Status. KernelStatus is the smallest
// thing that carries what the backend needs to build one: a canonical code (same numbers as
// absl::StatusCode, so the conversion at the edge is a cast) and a message that already holds the
// file:line and the library's own error name and text.
//
// Thread-safety: a value type.
#ifndef MOBIUS_WORKER_KERNELS_CUDA_KERNEL_STATUS_H_
#define MOBIUS_WORKER_KERNELS_CUDA_KERNEL_STATUS_H_

#include <string>
#include <utility>

namespace mobius::kernels::cuda {

// Canonical codes, numbered as absl::StatusCode / grpc::StatusCode.
enum class KernelCode : int {
  kOk = 0,
  kInvalidArgument = 3,
  kResourceExhausted = 8,  // device out of memory
  kUnimplemented = 12,     // a shape or type combination this kernel does not handle
  kInternal = 13,          // any other CUDA / cuBLAS error
};

class [[nodiscard]] KernelStatus {
 public:
  KernelStatus() = default;  // OK
  KernelStatus(KernelCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == KernelCode::kOk; }
  KernelCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "OK" or "INVALID_ARGUMENT: message".
  std::string ToString() const;

 private:
  KernelCode code_ = KernelCode::kOk;
  std::string message_;
};

inline KernelStatus OkStatus() { return KernelStatus(); }
KernelStatus InvalidArgument(std::string message);
KernelStatus Unimplemented(std::string message);

// A CUDA runtime error (an int so that this header needs no CUDA include): "file:line: what:
// cudaErrorX: text". cudaErrorMemoryAllocation maps to kResourceExhausted, everything else to
// kInternal. cudaSuccess gives OK.
KernelStatus FromCudaError(int cuda_error, const char* what, const char* file, int line);

// After a kernel launch: cudaGetLastError() as a KernelStatus naming the kernel.
KernelStatus LaunchStatus(const char* kernel, const char* file, int line);

}  // namespace mobius::kernels::cuda

#define MOBIUS_KERNEL_LAUNCH_STATUS(kernel) \
  ::mobius::kernels::cuda::LaunchStatus(kernel, __FILE__, __LINE__)

#define MOBIUS_KERNEL_RETURN_IF_ERROR(expr)                               \
  do {                                                                    \
    ::mobius::kernels::cuda::KernelStatus mobius_kernel_status_ = (expr); \
    if (!mobius_kernel_status_.ok()) return mobius_kernel_status_;        \
  } while (0)

#endif  // MOBIUS_WORKER_KERNELS_CUDA_KERNEL_STATUS_H_
