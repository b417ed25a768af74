#include "worker/reference/ops_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace mobius::reference {
namespace {

// Offsets of row (b, t, head) in [B, T, NH, hd] and of row (b, h, t) in [B, H, T, T].
inline int64_t Row(const AttentionShape& s, int64_t b, int64_t t, int64_t nh, int64_t head) {
  return ((b * s.t + t) * nh + head) * s.head_dim;
}
inline int64_t AttRow(const AttentionShape& s, int64_t b, int64_t h, int64_t t) {
  return ((b * s.heads + h) * s.t + t) * s.t;
}

// First key position that query position t may attend to.
inline int64_t FirstKey(const AttentionShape& s, int64_t t) {
  return s.window > 0 ? std::max<int64_t>(0, t - s.window + 1) : 0;
}

double Dot(const float* a, const float* b, int64_t n) {
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(a[i]) * b[i];
  return acc;
}

}  // namespace

void AttentionForward(float* out, float* att, const float* q, const float* k, const float* v,
                      const AttentionShape& s) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  const int64_t group = s.heads / s.kv_heads;
  std::vector<double> scores(s.t);
  for (int64_t b = 0; b < s.b; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t kvh = h / group;
      for (int64_t t = 0; t < s.t; ++t) {
        const float* qr = q + Row(s, b, t, s.heads, h);
        double max_score = s.sinks != nullptr ? static_cast<double>(s.sinks[h]) : -INFINITY;
        for (int64_t t2 = FirstKey(s, t); t2 <= t; ++t2) {
          scores[t2] = scale * Dot(qr, k + Row(s, b, t2, s.kv_heads, kvh), s.head_dim);
          max_score = std::max(max_score, scores[t2]);
        }
        double sum = s.sinks != nullptr ? std::exp(s.sinks[h] - max_score) : 0.0;
        for (int64_t t2 = FirstKey(s, t); t2 <= t; ++t2) {
          scores[t2] = std::exp(scores[t2] - max_score);
          sum += scores[t2];
        }
        float* a = att + AttRow(s, b, h, t);
        for (int64_t t2 = 0; t2 < s.t; ++t2) {
          a[t2] = t2 >= FirstKey(s, t) && t2 <= t ? static_cast<float>(scores[t2] / sum) : 0.0f;
        }
        float* o = out + Row(s, b, t, s.heads, h);
        for (int64_t i = 0; i < s.head_dim; ++i) {
          double acc = 0.0;
          for (int64_t t2 = FirstKey(s, t); t2 <= t; ++t2) {
            acc += static_cast<double>(a[t2]) * v[Row(s, b, t2, s.kv_heads, kvh) + i];
          }
          o[i] = static_cast<float>(acc);
        }
      }
    }
  }
}

void AttentionBackward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                       const float* k, const float* v, const float* att, const AttentionShape& s,
                       float* dsinks) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  const int64_t group = s.heads / s.kv_heads;
  std::vector<double> datt(s.t);
  for (int64_t b = 0; b < s.b; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t kvh = h / group;
      for (int64_t t = 0; t < s.t; ++t) {
        const float* a = att + AttRow(s, b, h, t);
        const float* dy = dout + Row(s, b, t, s.heads, h);
        // out[t] = sum_t2 a[t2] v[t2]: gradients of the probabilities and of v.
        double a_datt = 0.0;
        for (int64_t t2 = FirstKey(s, t); t2 <= t; ++t2) {
          const int64_t kv_row = Row(s, b, t2, s.kv_heads, kvh);
          datt[t2] = Dot(dy, v + kv_row, s.head_dim);
          a_datt += a[t2] * datt[t2];
          for (int64_t i = 0; i < s.head_dim; ++i) dv[kv_row + i] += a[t2] * dy[i];
        }
        // Softmax backward: dscore = a * (datt - sum(a * datt)); then score = scale * q.k. A sink
        // has no value (its datt is 0): d sink = p_sink * (0 - sum(a * datt)).
        if (s.sinks != nullptr) {
          double kept = 0.0;
          for (int64_t t2 = FirstKey(s, t); t2 <= t; ++t2) kept += a[t2];
          dsinks[h] += static_cast<float>(-(1.0 - kept) * a_datt);
        }
        const int64_t q_row = Row(s, b, t, s.heads, h);
        for (int64_t t2 = FirstKey(s, t); t2 <= t; ++t2) {
          const double dscore = a[t2] * (datt[t2] - a_datt) * scale;
          const int64_t kv_row = Row(s, b, t2, s.kv_heads, kvh);
          for (int64_t i = 0; i < s.head_dim; ++i) {
            dq[q_row + i] += static_cast<float>(dscore * k[kv_row + i]);
            dk[kv_row + i] += static_cast<float>(dscore * q[q_row + i]);
          }
        }
      }
    }
  }
}

}  // namespace mobius::reference
