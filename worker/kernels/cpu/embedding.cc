#include "worker/kernels/cpu/embedding.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace mobius::kernels::cpu {
namespace {

int64_t RowGrain(int64_t c) { return std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(c, 1)); }

template <typename T>
void Forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int64_t b, int64_t t,
             int64_t c, ThreadPool* pool) {
  ParallelForRange(pool, b * t, RowGrain(c), [&](int64_t begin, int64_t end) {
    for (int64_t bt = begin; bt < end; ++bt) {
      const T* tok = wte + static_cast<int64_t>(tokens[bt]) * c;
      T* y = out + bt * c;
      if (wpe == nullptr) {
        std::copy(tok, tok + c, y);
        continue;
      }
      const T* pos = wpe + (bt % t) * c;
      for (int64_t i = 0; i < c; ++i) Store(y, i, Load(tok, i) + Load(pos, i));
    }
  });
}

template <typename T>
void Backward(float* dwte, float* dwpe, const T* dout, const int32_t* tokens, int64_t b,
              int64_t t, int64_t c, ThreadPool* pool) {
  const int64_t n = b * t;
  // Positions sorted by (token, position): each token's positions form one run, in order.
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t x, int64_t y) { return tokens[x] < tokens[y]; });
  std::vector<int64_t> run_start;
  for (int64_t i = 0; i < n; ++i) {
    if (i == 0 || tokens[order[i]] != tokens[order[i - 1]]) run_start.push_back(i);
  }
  const int64_t runs = static_cast<int64_t>(run_start.size());
  run_start.push_back(n);
  ParallelForRange(pool, runs, RowGrain(c), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* dtok = dwte + static_cast<int64_t>(tokens[order[run_start[r]]]) * c;
      for (int64_t j = run_start[r]; j < run_start[r + 1]; ++j) {
        const T* dy = dout + order[j] * c;
        for (int64_t i = 0; i < c; ++i) dtok[i] += Load(dy, i);
      }
    }
  });
  if (dwpe == nullptr) return;
  ParallelForRange(pool, t, RowGrain(c), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      float* dpos = dwpe + p * c;
      for (int64_t bi = 0; bi < b; ++bi) {
        const T* dy = dout + (bi * t + p) * c;
        for (int64_t i = 0; i < c; ++i) dpos[i] += Load(dy, i);
      }
    }
  });
}

}  // namespace

void embedding_fwd(uint16_t* out, const int32_t* tokens, const uint16_t* wte, const uint16_t* wpe,
                   int64_t b, int64_t t, int64_t c, ThreadPool* pool) {
  Forward(out, tokens, wte, wpe, b, t, c, pool);
}
void embedding_fwd(F16* out, const int32_t* tokens, const F16* wte, const F16* wpe, int64_t b,
                   int64_t t, int64_t c, ThreadPool* pool) {
  Forward(out, tokens, wte, wpe, b, t, c, pool);
}

void embedding_bwd(float* dwte, float* dwpe, const uint16_t* dout, const int32_t* tokens,
                   int64_t b, int64_t t, int64_t c, ThreadPool* pool) {
  Backward(dwte, dwpe, dout, tokens, b, t, c, pool);
}
void embedding_bwd(float* dwte, float* dwpe, const F16* dout, const int32_t* tokens, int64_t b,
                   int64_t t, int64_t c, ThreadPool* pool) {
  Backward(dwte, dwpe, dout, tokens, b, t, c, pool);
}

}  // namespace mobius::kernels::cpu
