// Residual add: out = a + b over bf16 or fp16 buffers (storage.h), summed in fp32 and rounded
// once. The backward is the identity (the gradient flows to both inputs unchanged), so there is no
// residual_bwd.
//
// Thread-safety: reentrant; elements are split over `pool` (nullptr: calling thread). Results are
// bitwise identical for any pool size.
#ifndef MOBIUS_WORKER_KERNELS_CPU_RESIDUAL_H_
#define MOBIUS_WORKER_KERNELS_CPU_RESIDUAL_H_

#include <cstdint>

#include "worker/kernels/cpu/parallel.h"

namespace mobius::kernels::cpu {

// out, a, b [N] bf16 (or all fp16); out may alias a or b.
void residual_fwd(uint16_t* out, const uint16_t* a, const uint16_t* b, int64_t n,
                  ThreadPool* pool);
void residual_fwd(F16* out, const F16* a, const F16* b, int64_t n, ThreadPool* pool);

}  // namespace mobius::kernels::cpu

#endif  // MOBIUS_WORKER_KERNELS_CPU_RESIDUAL_H_
