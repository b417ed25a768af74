#include "worker/kernels/cpu/residual.h"

namespace mobius::kernels::cpu {
namespace {

template <typename T>
void Residual(T* out, const T* a, const T* b, int64_t n, ThreadPool* pool) {
  ParallelForRange(pool, n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) Store(out, i, Load(a, i) + Load(b, i));
  });
}

}  // namespace

void residual_fwd(uint16_t* out, const uint16_t* a, const uint16_t* b, int64_t n,
                  ThreadPool* pool) {
  Residual(out, a, b, n, pool);
}
void residual_fwd(F16* out, const F16* a, const F16* b, int64_t n, ThreadPool* pool) {
  Residual(out, a, b, n, pool);
}

}  // namespace mobius::kernels::cpu
