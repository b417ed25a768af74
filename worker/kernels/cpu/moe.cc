#include "worker/kernels/cpu/moe.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace mobius::kernels::cpu {
namespace {

constexpr int64_t kRowGrain = 16;

// The K slots of token t in increasing sorted position (= increasing expert id).
int64_t SlotsInOrder(const int32_t* pos, int64_t t, int64_t k, int32_t* out) {
  for (int64_t j = 0; j < k; ++j) out[j] = pos[t * k + j];
  std::sort(out, out + k);
  return k;
}

template <typename T>
void Gather(T* dst, const T* src, const int32_t* order, int64_t n, int64_t k, int64_t c,
            ThreadPool* pool) {
  ParallelForRange(pool, n * k, kRowGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const T* row = src + static_cast<int64_t>(order[i] / k) * c;
      std::copy(row, row + c, dst + i * c);
    }
  });
}

template <typename T>
void Combine(T* out, const T* y, const int32_t* pos, const float* weights, int64_t n, int64_t k,
             int64_t c, ThreadPool* pool) {
  ParallelForRange(pool, n, kRowGrain, [&](int64_t begin, int64_t end) {
    std::vector<float> acc(c), row(c);
    int32_t slots[64];
    for (int64_t t = begin; t < end; ++t) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      SlotsInOrder(pos, t, k, slots);
      for (int64_t s = 0; s < k; ++s) {
        // The weight of the slot at this position: find j with pos[t k + j] == slots[s].
        int64_t j = 0;
        while (pos[t * k + j] != slots[s]) ++j;
        const float w = weights[t * k + j];
        LoadRow(row.data(), y + static_cast<int64_t>(slots[s]) * c, c);
        for (int64_t i = 0; i < c; ++i) acc[i] += w * row[i];
      }
      StoreRow(out + t * c, acc.data(), c);
    }
  });
}

template <typename T>
void CombineBwd(float* dy, float* dweights, const float* dout, const T* y, const int32_t* pos,
                const float* weights, int64_t n, int64_t k, int64_t c, ThreadPool* pool) {
  ParallelForRange(pool, n, kRowGrain, [&](int64_t begin, int64_t end) {
    std::vector<float> row(c);
    for (int64_t t = begin; t < end; ++t) {
      const float* g = dout + t * c;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t p = pos[t * k + j];
        LoadRow(row.data(), y + p * c, c);
        double dot = 0.0;
        for (int64_t i = 0; i < c; ++i) dot += static_cast<double>(g[i]) * row[i];
        dweights[t * k + j] = static_cast<float>(dot);
        const float w = weights[t * k + j];
        float* d = dy + p * c;
        for (int64_t i = 0; i < c; ++i) d[i] = w * g[i];
      }
    }
  });
}

}  // namespace

void moe_route(float* probs, int32_t* ids, float* weights, int32_t* order, int32_t* pos,
               int32_t* offsets, const float* logits, int64_t n, int64_t e, int64_t k,
               bool renormalize, ThreadPool* pool) {
  ParallelForRange(pool, n, kRowGrain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const float* l = logits + t * e;
      float* p = probs + t * e;
      const float max = *std::max_element(l, l + e);
      double sum = 0.0;
      for (int64_t i = 0; i < e; ++i) sum += std::exp(static_cast<double>(l[i]) - max);
      for (int64_t i = 0; i < e; ++i) {
        p[i] = static_cast<float>(std::exp(static_cast<double>(l[i]) - max) / sum);
      }
      // Top k by repeated selection: the largest not yet chosen, the lower index on ties.
      double chosen = 0.0;
      for (int64_t j = 0; j < k; ++j) {
        int32_t best = -1;
        for (int32_t i = 0; i < e; ++i) {
          bool taken = false;
          for (int64_t m = 0; m < j; ++m) taken |= ids[t * k + m] == i;
          if (!taken && (best < 0 || p[i] > p[best])) best = i;
        }
        ids[t * k + j] = best;
        chosen += p[best];
      }
      for (int64_t j = 0; j < k; ++j) {
        const float pj = p[ids[t * k + j]];
        weights[t * k + j] = renormalize ? static_cast<float>(pj / chosen) : pj;
      }
    }
  });
  // Stable counting sort of the routed rows t * k + j by expert.
  std::fill(offsets, offsets + e + 1, 0);
  for (int64_t r = 0; r < n * k; ++r) ++offsets[ids[r] + 1];
  for (int64_t i = 0; i < e; ++i) offsets[i + 1] += offsets[i];
  std::vector<int32_t> next(offsets, offsets + e);
  for (int64_t r = 0; r < n * k; ++r) {
    const int32_t p = next[ids[r]]++;
    order[p] = static_cast<int32_t>(r);
    pos[r] = p;
  }
}

void moe_route_bwd(float* dlogits, const float* dweights, const float* aux_grad, const float* probs,
                   const int32_t* ids, const float* weights, int64_t n, int64_t e, int64_t k,
                   bool renormalize, ThreadPool* pool) {
  ParallelForRange(pool, n, kRowGrain, [&](int64_t begin, int64_t end) {
    std::vector<float> dp(e);
    for (int64_t t = begin; t < end; ++t) {
      const float* p = probs + t * e;
      const float* w = weights + t * k;
      const float* dw = dweights + t * k;
      if (aux_grad != nullptr) {
        std::copy(aux_grad, aux_grad + e, dp.begin());
      } else {
        std::fill(dp.begin(), dp.end(), 0.0f);
      }
      if (renormalize) {
        float s = 0.0f, dot = 0.0f;
        for (int64_t j = 0; j < k; ++j) {
          s += p[ids[t * k + j]];
          dot += dw[j] * w[j];
        }
        for (int64_t j = 0; j < k; ++j) dp[ids[t * k + j]] += (dw[j] - dot) / s;
      } else {
        for (int64_t j = 0; j < k; ++j) dp[ids[t * k + j]] += dw[j];
      }
      float pdp = 0.0f;
      for (int64_t i = 0; i < e; ++i) pdp += p[i] * dp[i];
      for (int64_t i = 0; i < e; ++i) dlogits[t * e + i] = p[i] * (dp[i] - pdp);
    }
  });
}

void moe_gather(uint16_t* dst, const uint16_t* src, const int32_t* order, int64_t n, int64_t k,
                int64_t c, ThreadPool* pool) {
  Gather(dst, src, order, n, k, c, pool);
}
void moe_gather(F16* dst, const F16* src, const int32_t* order, int64_t n, int64_t k, int64_t c,
                ThreadPool* pool) {
  Gather(dst, src, order, n, k, c, pool);
}

void moe_combine(uint16_t* out, const uint16_t* y, const int32_t* pos, const float* weights,
                 int64_t n, int64_t k, int64_t c, ThreadPool* pool) {
  Combine(out, y, pos, weights, n, k, c, pool);
}
void moe_combine(F16* out, const F16* y, const int32_t* pos, const float* weights, int64_t n,
                 int64_t k, int64_t c, ThreadPool* pool) {
  Combine(out, y, pos, weights, n, k, c, pool);
}

void moe_combine_bwd(float* dy, float* dweights, const float* dout, const uint16_t* y,
                     const int32_t* pos, const float* weights, int64_t n, int64_t k, int64_t c,
                     ThreadPool* pool) {
  CombineBwd(dy, dweights, dout, y, pos, weights, n, k, c, pool);
}
void moe_combine_bwd(float* dy, float* dweights, const float* dout, const F16* y,
                     const int32_t* pos, const float* weights, int64_t n, int64_t k, int64_t c,
                     ThreadPool* pool) {
  CombineBwd(dy, dweights, dout, y, pos, weights, n, k, c, pool);
}

void moe_scatter_add(float* dst, const float* src, const int32_t* pos, int64_t n, int64_t k,
                     int64_t c, ThreadPool* pool) {
  ParallelForRange(pool, n, kRowGrain, [&](int64_t begin, int64_t end) {
    int32_t slots[64];
    for (int64_t t = begin; t < end; ++t) {
      SlotsInOrder(pos, t, k, slots);
      float* d = dst + t * c;
      for (int64_t s = 0; s < k; ++s) {
        const float* row = src + static_cast<int64_t>(slots[s]) * c;
        for (int64_t i = 0; i < c; ++i) d[i] += row[i];
      }
    }
  });
}

}  // namespace mobius::kernels::cpu
