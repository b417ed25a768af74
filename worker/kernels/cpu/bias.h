// Bias add over rows and its gradient (column sums), for linear layers whose GEMM does not fuse
// the bias. Storage: activations and bias bf16, bias gradient fp32. Oracle: the bias part of
// reference::LinearForward/LinearBackward.
//
// Thread-safety: reentrant; rows are split over `pool` (nullptr: calling thread). Results are
// bitwise identical for any pool size (column sums use fixed row pieces summed in order).
#ifndef MOBIUS_WORKER_KERNELS_CPU_BIAS_H_
#define MOBIUS_WORKER_KERNELS_CPU_BIAS_H_

#include <cstdint>

#include "worker/kernels/cpu/parallel.h"

namespace mobius::kernels::cpu {

// out[n, j] = inp[n, j] + bias[j]; out, inp [N, C] bf16 (out may alias inp); bias [C] bf16.
void bias_add_fwd(uint16_t* out, const uint16_t* inp, const uint16_t* bias, int64_t n, int64_t c,
                  ThreadPool* pool);

// dbias[j] += sum_n dout[n, j]; dbias [C] fp32, dout [N, C] bf16 or fp32.
void bias_bwd(float* dbias, const uint16_t* dout, int64_t n, int64_t c, ThreadPool* pool);
void bias_bwd(float* dbias, const float* dout, int64_t n, int64_t c, ThreadPool* pool);

}  // namespace mobius::kernels::cpu

#endif  // MOBIUS_WORKER_KERNELS_CPU_BIAS_H_
