// Mixture-of-experts routing kernels on the GPU: the contracts of worker/kernels/cpu/moe.h
// (backend/moe_params.h). fp32 arithmetic (the softmax's sum in fp32 here, double on the CPU).
// The expert sort is a stable counting sort of one thread per expert over all routed rows
// (O(E N K) reads, no atomics: deterministic); fine for tens of thousands of routed rows, a
// segmented radix sort is the next step for long microbatches.
//
// All functions enqueue on `stream` and return the launch status; pointers are device addresses.
#ifndef MOBIUS_WORKER_KERNELS_CUDA_MOE_CUH_
#define MOBIUS_WORKER_KERNELS_CUDA_MOE_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "worker/kernels/cuda/half_type.h"
#include "worker/kernels/cuda/kernel_status.h"

namespace mobius::kernels::cuda {

KernelStatus moe_route(float* probs, int32_t* ids, float* weights, int32_t* order, int32_t* pos,
                       int32_t* offsets, const float* logits, int64_t n, int64_t e, int64_t k,
                       bool renormalize, cudaStream_t stream);
KernelStatus moe_route_bwd(float* dlogits, const float* dweights, const float* aux_grad,
                           const float* probs, const int32_t* ids, const float* weights, int64_t n,
                           int64_t e, int64_t k, bool renormalize, cudaStream_t stream);
KernelStatus moe_gather(HalfType type, uint16_t* dst, const uint16_t* src, const int32_t* order,
                        int64_t n, int64_t k, int64_t c, cudaStream_t stream);
KernelStatus moe_combine(HalfType type, uint16_t* out, const uint16_t* y, const int32_t* pos,
                         const float* weights, int64_t n, int64_t k, int64_t c,
                         cudaStream_t stream);
KernelStatus moe_combine_bwd(HalfType type, float* dy, float* dweights, const float* dout,
                             const uint16_t* y, const int32_t* pos, const float* weights,
                             int64_t n, int64_t k, int64_t c, cudaStream_t stream);
KernelStatus moe_scatter_add(float* dst, const float* src, const int32_t* pos, int64_t n,
                             int64_t k, int64_t c, cudaStream_t stream);

}  // namespace mobius::kernels::cuda

#endif  // MOBIUS_WORKER_KERNELS_CUDA_MOE_CUH_
