// LoRA dropout over [N, C] rows with the counter-based mask of worker/kernels/dropout_mask.h
// (backend::DropoutParams): out = (or += with accumulate) kept ? inp * 1/(1-p) : 0, in fp32; inp
// bf16, fp16 (storage.h) or fp32.
//
// Thread-safety: reentrant; rows are split over `pool` (nullptr: calling thread). Results do not
// depend on the pool size (each element is computed alone).
#ifndef MOBIUS_WORKER_KERNELS_CPU_DROPOUT_H_
#define MOBIUS_WORKER_KERNELS_CPU_DROPOUT_H_

#include <cstdint>

#include "worker/kernels/cpu/parallel.h"

namespace mobius::kernels::cpu {

void dropout(float* out, const uint16_t* inp, int64_t n, int64_t c, float p, uint64_t key,
             int64_t row_offset, bool accumulate, ThreadPool* pool);
void dropout(float* out, const F16* inp, int64_t n, int64_t c, float p, uint64_t key,
             int64_t row_offset, bool accumulate, ThreadPool* pool);
void dropout(float* out, const float* inp, int64_t n, int64_t c, float p, uint64_t key,
             int64_t row_offset, bool accumulate, ThreadPool* pool);

}  // namespace mobius::kernels::cpu

#endif  // MOBIUS_WORKER_KERNELS_CPU_DROPOUT_H_
