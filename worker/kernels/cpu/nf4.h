// The NF4 dequantise of a QLoRA base weight (backend::DequantizeNf4Params): out [n] = the values
// of an NF4 blob (common/numeric/nf4.h) rounded once to the 16-bit storage type, bit for bit
// numeric::DequantizeNf4 followed by the rounding.
//
// Thread-safety: reentrant; blocks of 64 values are split over `pool` (nullptr: calling thread).
#ifndef MOBIUS_WORKER_KERNELS_CPU_NF4_H_
#define MOBIUS_WORKER_KERNELS_CPU_NF4_H_

#include <cstdint>

#include "worker/kernels/cpu/parallel.h"

namespace mobius::kernels::cpu {

void dequantize_nf4(uint16_t* out, const void* blob, int64_t n, ThreadPool* pool);
void dequantize_nf4(F16* out, const void* blob, int64_t n, ThreadPool* pool);

}  // namespace mobius::kernels::cpu

#endif  // MOBIUS_WORKER_KERNELS_CPU_NF4_H_
