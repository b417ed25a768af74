#include "worker/kernels/cpu/residual.h"

namespace mobius::kernels::cpu {

void residual_fwd(uint16_t* out, const uint16_t* a, const uint16_t* b, int64_t n,
                  ThreadPool* pool) {
  ParallelForRange(pool, n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      out[i] = numeric::Fp32ToBf16(numeric::Bf16ToFp32(a[i]) + numeric::Bf16ToFp32(b[i]));
    }
  });
}

}  // namespace mobius::kernels::cpu
