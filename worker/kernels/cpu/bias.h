// Bias add over rows and its gradient (column sums), for linear layers whose GEMM does not fuse
// the bias. Storage: activations and bias bf16 (uint16_t) or fp16 (F16, storage.h), bias gradient
// fp32; fp32 arithmetic, one rounding per 16-bit output. Oracle: the bias part of
// reference::LinearForward/LinearBackward.
//
// Thread-safety: reentrant; rows are split over `pool` (nullptr: calling thread). Results are
// bitwise identical for any pool size (column sums use fixed row pieces summed in order).
#ifndef MOBIUS_WORKER_KERNELS_CPU_BIAS_H_
#define MOBIUS_WORKER_KERNELS_CPU_BIAS_H_

#include <cstdint>

#include "worker/kernels/cpu/parallel.h"

namespace mobius::kernels::cpu {

// out[n, j] = inp[n, j] + bias[j]; out, inp [N, C] (out may alias inp); bias [C]; all bf16 or all
// fp16.
void bias_add_fwd(uint16_t* out, const uint16_t* inp, const uint16_t* bias, int64_t n, int64_t c,
                  ThreadPool* pool);
void bias_add_fwd(F16* out, const F16* inp, const F16* bias, int64_t n, int64_t c,
                  ThreadPool* pool);

// The same over fp32 rows (a GEMM's fp32 output) with a 16-bit bias.
void bias_add_fwd(float* out, const float* inp, const uint16_t* bias, int64_t n, int64_t c,
                  ThreadPool* pool);
void bias_add_fwd(float* out, const float* inp, const F16* bias, int64_t n, int64_t c,
                  ThreadPool* pool);

// dbias[j] += sum_n dout[n, j]; dbias [C] fp32, dout [N, C] bf16, fp16 or fp32.
void bias_bwd(float* dbias, const uint16_t* dout, int64_t n, int64_t c, ThreadPool* pool);
void bias_bwd(float* dbias, const F16* dout, int64_t n, int64_t c, ThreadPool* pool);
void bias_bwd(float* dbias, const float* dout, int64_t n, int64_t c, ThreadPool* pool);

}  // namespace mobius::kernels::cpu

#endif  // MOBIUS_WORKER_KERNELS_CPU_BIAS_H_
