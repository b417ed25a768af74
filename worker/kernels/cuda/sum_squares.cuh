// *out += sum of x[i]^2 over [0, n) (the backend's SumSquares op, for the global gradient norm):
// each thread accumulates its grid-stride elements in double, blocks reduce in double and add
// their partial to *out with a double atomicAdd (sm_60+). The block partials arrive in any order,
// so the result varies run to run by double rounding only (~1e-16 relative); the CPU backend sums
// in another order too, so backends agree to that precision, not bitwise.
// Enqueued on `stream`; x and out are device addresses.
#ifndef MOBIUS_WORKER_KERNELS_CUDA_SUM_SQUARES_CUH_
#define MOBIUS_WORKER_KERNELS_CUDA_SUM_SQUARES_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "worker/kernels/cuda/kernel_status.h"

namespace mobius::kernels::cuda {

KernelStatus sum_squares(double* out, const float* x, int64_t n, cudaStream_t stream);

// Per chunk: out[j] += sum of x[i]^2 over chunk j ([j * chunk, min((j + 1) * chunk, n))), one
// block per chunk (grid-strided over chunks), reduced in a fixed tree: deterministic run to run.
// REQUIRES chunk > 0.
KernelStatus sum_squares_chunks(double* out, const float* x, int64_t n, int64_t chunk,
                                cudaStream_t stream);

}  // namespace mobius::kernels::cuda

#endif  // MOBIUS_WORKER_KERNELS_CUDA_SUM_SQUARES_CUH_
