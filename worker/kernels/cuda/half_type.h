// The 16-bit storage formats of the CUDA kernels' activations and weights: backend::DType kBf16
// and kF16 (a job's training.precision). Host code passes both as raw bits in uint16_t
// (common/numeric/bf16.h, f16.h); every kernel with 16-bit tensors takes their format as its first
// argument, computes in fp32 for both formats and rounds each 16-bit output once to nearest even
// (fp16: finite values from 65520 up become +-inf, which a fp16 job's loss scaler detects).
// Standard library only: included by host C++ and device code alike.
#ifndef MOBIUS_WORKER_KERNELS_CUDA_HALF_TYPE_H_
#define MOBIUS_WORKER_KERNELS_CUDA_HALF_TYPE_H_

namespace mobius::kernels::cuda {

enum class HalfType { kBf16, kF16 };

inline const char* HalfTypeName(HalfType type) { return type == HalfType::kF16 ? "fp16" : "bf16"; }

}  // namespace mobius::kernels::cuda

#endif  // MOBIUS_WORKER_KERNELS_CUDA_HALF_TYPE_H_
