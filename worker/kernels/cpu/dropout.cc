#include "worker/kernels/cpu/dropout.h"

#include <algorithm>

#include "worker/kernels/dropout_mask.h"

namespace mobius::kernels::cpu {
namespace {

template <typename T>
void Dropout(float* out, const T* inp, int64_t n, int64_t c, float p, uint64_t key,
             int64_t row_offset, bool accumulate, ThreadPool* pool) {
  const float scale = 1.0f / (1.0f - p);
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(c, 1));
  ParallelForRange(pool, n, grain, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const T* x = inp + row * c;
      float* y = out + row * c;
      const uint64_t r = static_cast<uint64_t>(row_offset + row);
      for (int64_t j = 0; j < c; ++j) {
        const float v = DropoutKeep(key, r, static_cast<uint64_t>(j), p) ? Load(x, j) * scale
                                                                          : 0.0f;
        y[j] = accumulate ? y[j] + v : v;
      }
    }
  });
}

}  // namespace

void dropout(float* out, const uint16_t* inp, int64_t n, int64_t c, float p, uint64_t key,
             int64_t row_offset, bool accumulate, ThreadPool* pool) {
  Dropout(out, inp, n, c, p, key, row_offset, accumulate, pool);
}

void dropout(float* out, const F16* inp, int64_t n, int64_t c, float p, uint64_t key,
             int64_t row_offset, bool accumulate, ThreadPool* pool) {
  Dropout(out, inp, n, c, p, key, row_offset, accumulate, pool);
}

void dropout(float* out, const float* inp, int64_t n, int64_t c, float p, uint64_t key,
             int64_t row_offset, bool accumulate, ThreadPool* pool) {
  Dropout(out, inp, n, c, p, key, row_offset, accumulate, pool);
}

}  // namespace mobius::kernels::cpu
