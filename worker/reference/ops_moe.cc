#include "worker/reference/ops_moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace mobius::reference {

void RouteForward(float* probs, int32_t* ids, float* weights, const float* logits, int64_t n,
                  int64_t e, int64_t k, bool renormalize) {
  std::vector<int32_t> order(e);
  for (int64_t row = 0; row < n; ++row) {
    const float* l = logits + row * e;
    float* p = probs + row * e;
    float max = l[0];
    for (int64_t i = 1; i < e; ++i) max = std::max(max, l[i]);
    double sum = 0.0;
    for (int64_t i = 0; i < e; ++i) sum += std::exp(static_cast<double>(l[i]) - max);
    for (int64_t i = 0; i < e; ++i) {
      p[i] = static_cast<float>(std::exp(static_cast<double>(l[i]) - max) / sum);
    }
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [p](int32_t a, int32_t b) { return p[a] > p[b]; });
    double chosen = 0.0;
    for (int64_t j = 0; j < k; ++j) chosen += p[order[j]];
    for (int64_t j = 0; j < k; ++j) {
      ids[row * k + j] = order[j];
      weights[row * k + j] =
          renormalize ? static_cast<float>(p[order[j]] / chosen) : p[order[j]];
    }
  }
}

void RouteBackward(float* dlogits, const float* dweights, const float* aux_grad, const float* probs,
                   const int32_t* ids, const float* weights, int64_t n, int64_t e, int64_t k,
                   bool renormalize) {
  std::vector<double> dp(e);
  for (int64_t row = 0; row < n; ++row) {
    const float* p = probs + row * e;
    const float* w = weights + row * k;
    const float* dw = dweights + row * k;
    for (int64_t i = 0; i < e; ++i) dp[i] = aux_grad ? aux_grad[i] : 0.0;
    if (renormalize) {
      // w_j = p_j / s, s = sum of the chosen p: d p_j = (dw_j - sum_i dw_i w_i) / s.
      double s = 0.0, dot = 0.0;
      for (int64_t j = 0; j < k; ++j) {
        s += p[ids[row * k + j]];
        dot += static_cast<double>(dw[j]) * w[j];
      }
      for (int64_t j = 0; j < k; ++j) dp[ids[row * k + j]] += (dw[j] - dot) / s;
    } else {
      for (int64_t j = 0; j < k; ++j) dp[ids[row * k + j]] += dw[j];
    }
    // Softmax: d logits_i = p_i (dp_i - sum_j p_j dp_j).
    double pdp = 0.0;
    for (int64_t i = 0; i < e; ++i) pdp += p[i] * dp[i];
    for (int64_t i = 0; i < e; ++i) dlogits[row * e + i] += static_cast<float>(p[i] * (dp[i] - pdp));
  }
}

void AccumulateRouting(std::vector<double>& counts, std::vector<double>& prob_sums,
                       const float* probs, const int32_t* ids, int64_t n, int64_t e, int64_t k) {
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t j = 0; j < k; ++j) counts[ids[row * k + j]] += 1.0;
    for (int64_t i = 0; i < e; ++i) prob_sums[i] += probs[row * e + i];
  }
}

double LoadBalancingLoss(const std::vector<double>& counts, const std::vector<double>& prob_sums,
                         int64_t rows) {
  if (rows == 0) return 0.0;
  double sum = 0.0;
  for (size_t i = 0; i < counts.size(); ++i) sum += counts[i] * prob_sums[i];
  return static_cast<double>(counts.size()) * sum / (static_cast<double>(rows) * rows);
}

std::vector<float> LoadBalancingGrad(const std::vector<double>& counts, int64_t rows,
                                     double scale) {
  std::vector<float> g(counts.size(), 0.0f);
  if (rows == 0) return g;
  const double e = static_cast<double>(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) {
    g[i] = static_cast<float>(scale * e * counts[i] / (static_cast<double>(rows) * rows));
  }
  return g;
}

}  // namespace mobius::reference
