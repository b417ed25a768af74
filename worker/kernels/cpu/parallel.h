// Shared helpers for the CPU op kernels: work splitting over an optional thread pool, and (through
// storage.h) the bf16 / fp16 / fp32 element and row loads and stores.
//
// Every kernel takes `optim::ThreadPool* pool` as its last argument; nullptr runs on the calling
// thread. Work is always cut into the same pieces whatever the pool size (pieces depend only on the
// shapes), and reductions combine per-piece partial sums in piece order, so results are bitwise
// identical for any number of threads. The pool hands pieces out dynamically, so uneven pieces
// (causal attention) balance themselves.
//
// Thread-safety: the kernels are reentrant; one pool serves one call at a time (ThreadPool's rule).
#ifndef MOBIUS_WORKER_KERNELS_CPU_PARALLEL_H_
#define MOBIUS_WORKER_KERNELS_CPU_PARALLEL_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "worker/kernels/cpu/storage.h"
#include "worker/optim/thread_pool.h"

namespace mobius::kernels::cpu {

using optim::ThreadPool;

// Runs fn(i) for i in [0, n), on `pool` when given.
inline void ParallelFor(ThreadPool* pool, int64_t n, const std::function<void(int64_t)>& fn) {
  if (n <= 0) return;
  if (pool == nullptr || n == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  pool->ParallelFor(static_cast<size_t>(n), [&fn](size_t i) { fn(static_cast<int64_t>(i)); });
}

// Runs fn(begin, end) over consecutive ranges of [0, n) of about `grain` elements each.
inline void ParallelForRange(ThreadPool* pool, int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn) {
  grain = std::max<int64_t>(grain, 1);
  const int64_t pieces = (n + grain - 1) / grain;
  ParallelFor(pool, pieces, [&](int64_t p) { fn(p * grain, std::min(n, (p + 1) * grain)); });
}

// Elements per piece for element-wise ops: large enough to amortise the pool's hand-off.
inline constexpr int64_t kElementwiseGrain = 1 << 14;

// Rows per piece for row reductions into parameter gradients: a fixed count (never derived from the
// thread count) so that the partial sums, and hence the result, do not depend on the pool.
inline int64_t ReductionPieces(int64_t rows) { return std::min<int64_t>(64, (rows + 15) / 16); }

// Column reduction over rows into parameter gradients: out[j] += sum over rows of the per-row
// contributions, for `width` output columns (e.g. [dweight | dbias] side by side). rows_fn(begin,
// end, partial) handles rows [begin, end) and adds their contributions into `partial` [width]
// (zeroed); partials are summed in piece order, so the result is independent of the pool.
inline void ReduceRows(ThreadPool* pool, int64_t rows, int64_t width,
                       const std::function<void(int64_t, int64_t, float*)>& rows_fn,
                       const std::function<void(int64_t, float)>& add_out) {
  const int64_t pieces = ReductionPieces(rows);
  if (pieces == 0) return;
  const int64_t grain = (rows + pieces - 1) / pieces;
  std::vector<float> partial(pieces * width, 0.0f);
  ParallelFor(pool, pieces, [&](int64_t p) {
    const int64_t begin = p * grain, end = std::min(rows, begin + grain);
    if (begin < end) rows_fn(begin, end, partial.data() + p * width);
  });
  ParallelForRange(pool, width, 1024, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      float acc = 0.0f;
      for (int64_t p = 0; p < pieces; ++p) acc += partial[p * width + j];
      add_out(j, acc);
    }
  });
}

}  // namespace mobius::kernels::cpu

#endif  // MOBIUS_WORKER_KERNELS_CPU_PARALLEL_H_
