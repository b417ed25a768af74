#include "worker/reference/ops_rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace mobius::reference {
namespace {

// transformers.modeling_rope_utils._compute_llama3_parameters, element-wise.
double Llama3Remap(double inv_freq, const model::RopeScaling& s) {
  const double old_context_len = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = old_context_len / s.low_freq_factor;
  const double high_freq_wavelen = old_context_len / s.high_freq_factor;
  const double wavelen = 2.0 * std::numbers::pi / inv_freq;
  if (wavelen > low_freq_wavelen) return inv_freq / s.factor;  // low frequency: slowed down
  if (wavelen < high_freq_wavelen) return inv_freq;            // high frequency: unchanged
  const double smooth =
      (old_context_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  return (1.0 - smooth) * inv_freq / s.factor + smooth * inv_freq;
}

// transformers.modeling_rope_utils._compute_yarn_parameters: between the dimensions that turn
// beta_fast and beta_slow times over the original context, a linear ramp from the original
// frequencies (extrapolation) to the ones divided by `factor` (interpolation).
std::vector<float> YarnInverseFrequencies(int64_t dim, double base, const model::RopeScaling& s) {
  auto correction_dim = [&](double rotations) {
    return dim * std::log(s.original_max_position_embeddings / (rotations * 2 * std::numbers::pi)) /
           (2 * std::log(base));
  };
  double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
  if (s.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // as transformers: no division by zero
  std::vector<float> inv_freq(dim / 2);
  for (int64_t i = 0; i < dim / 2; ++i) {
    // fp32 as torch computes the frequencies and the ramp.
    const float pos_freq = static_cast<float>(std::pow(base, static_cast<float>(2 * i) / dim));
    const float extrapolation = 1.0f / pos_freq;
    const float interpolation = 1.0f / (static_cast<float>(s.factor) * pos_freq);
    const float ramp = std::clamp(static_cast<float>((i - low) / (high - low)), 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    inv_freq[i] = interpolation * (1.0f - extrapolation_factor) +
                  extrapolation * extrapolation_factor;
  }
  return inv_freq;
}

}  // namespace

float RopeTableScale(const model::RopeScaling& scaling) {
  return scaling.type == model::RopeScaling::Type::kYarn
             ? static_cast<float>(scaling.attention_factor)
             : 1.0f;
}

std::vector<float> RopeInverseFrequencies(int64_t head_dim, double theta,
                                          const model::RopeScaling& scaling) {
  if (scaling.type == model::RopeScaling::Type::kYarn) {
    return YarnInverseFrequencies(head_dim, theta, scaling);
  }
  std::vector<float> inv_freq(head_dim / 2);
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    double f = 1.0 / std::pow(theta, static_cast<double>(2 * i) / head_dim);
    switch (scaling.type) {
      case model::RopeScaling::Type::kNone:
        break;
      case model::RopeScaling::Type::kLinear:
        f /= scaling.factor;
        break;
      case model::RopeScaling::Type::kLlama3:
        f = Llama3Remap(static_cast<float>(f), scaling);
        break;
      case model::RopeScaling::Type::kYarn:  // above
        break;
    }
    inv_freq[i] = static_cast<float>(f);
  }
  return inv_freq;
}

void RopeTables(std::vector<float>* cos, std::vector<float>* sin,
                const std::vector<float>& inv_freq, int64_t t, float scale) {
  const int64_t half = static_cast<int64_t>(inv_freq.size());
  cos->assign(t * half, 0.0f);
  sin->assign(t * half, 0.0f);
  for (int64_t p = 0; p < t; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      // HF forms the angle as an fp32 product; do the same, then take cos/sin accurately.
      const float angle = static_cast<float>(p) * inv_freq[i];
      (*cos)[p * half + i] = static_cast<float>(std::cos(static_cast<double>(angle))) * scale;
      (*sin)[p * half + i] = static_cast<float>(std::sin(static_cast<double>(angle))) * scale;
    }
  }
}

void RopeForward(float* out, const float* inp, const float* cos, const float* sin, int64_t b,
                 int64_t t, int64_t nh, int64_t head_dim) {
  const int64_t half = head_dim / 2;
  for (int64_t bt = 0; bt < b * t; ++bt) {
    const int64_t pos = bt % t;
    for (int64_t h = 0; h < nh; ++h) {
      const float* x = inp + (bt * nh + h) * head_dim;
      float* y = out + (bt * nh + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const double c = cos[pos * half + i], s = sin[pos * half + i];
        y[i] = static_cast<float>(x[i] * c - x[i + half] * s);
        y[i + half] = static_cast<float>(x[i + half] * c + x[i] * s);
      }
    }
  }
}

void RopeBackward(float* dinp, const float* dout, const float* cos, const float* sin, int64_t b,
                  int64_t t, int64_t nh, int64_t head_dim) {
  const int64_t half = head_dim / 2;
  for (int64_t bt = 0; bt < b * t; ++bt) {
    const int64_t pos = bt % t;
    for (int64_t h = 0; h < nh; ++h) {
      const float* dy = dout + (bt * nh + h) * head_dim;
      float* dx = dinp + (bt * nh + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const double c = cos[pos * half + i], s = sin[pos * half + i];
        dx[i] += static_cast<float>(dy[i] * c + dy[i + half] * s);
        dx[i + half] += static_cast<float>(dy[i + half] * c - dy[i] * s);
      }
    }
  }
}

}  // namespace mobius::reference
