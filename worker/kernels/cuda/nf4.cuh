// The NF4 dequantise of a QLoRA base weight on the GPU (backend::DequantizeNf4Params): out [n]
// 16-bit = the blob's values (common/numeric/nf4.h), computed in fp32 in numeric::DequantizeNf4's
// order without fused multiply-adds and rounded once, so every element equals the CPU kernel's
// (worker/kernels/cpu/nf4.h) bit for bit.
//
// The format comes from the caller (the backend fills both structs from common/numeric/nf4.h, so
// this library stays free of it): the blob's byte offsets and block sizes, and the two code tables
// (passed by value as kernel arguments: no device globals).
#ifndef MOBIUS_WORKER_KERNELS_CUDA_NF4_CUH_
#define MOBIUS_WORKER_KERNELS_CUDA_NF4_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "worker/kernels/cuda/half_type.h"
#include "worker/kernels/cuda/kernel_status.h"

namespace mobius::kernels::cuda {

struct Nf4BlobFormat {
  int64_t n = 0;            // values
  int64_t block = 64;       // values per absmax
  int64_t group = 256;      // absmax codes per fp32 scale
  int64_t scales = 4, codes = 0, packed = 0;  // byte offsets (the offset fp32 at 0)
};
struct Nf4Tables {
  float level[16];
  float dynamic[256];
};

// blob: a device address, 4-byte aligned.
KernelStatus dequantize_nf4(HalfType out_type, uint16_t* out, const uint8_t* blob,
                            const Nf4BlobFormat& format, const Nf4Tables& tables,
                            cudaStream_t stream);

}  // namespace mobius::kernels::cuda

#endif  // MOBIUS_WORKER_KERNELS_CUDA_NF4_CUH_
