#include "worker/reference/ops_activation.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace mobius::reference {
namespace {

const double kGeluScale = std::sqrt(2.0 / std::numbers::pi);

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace

void GeluForward(float* out, const float* inp, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double x = inp[i];
    out[i] =
        static_cast<float>(0.5 * x * (1.0 + std::tanh(kGeluScale * (x + 0.044715 * x * x * x))));
  }
}

void GeluBackward(float* dinp, const float* dout, const float* inp, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double x = inp[i];
    const double u = kGeluScale * (x + 0.044715 * x * x * x);
    const double th = std::tanh(u);
    const double du_dx = kGeluScale * (1.0 + 3.0 * 0.044715 * x * x);
    const double grad = 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du_dx;
    dinp[i] += static_cast<float>(grad * dout[i]);
  }
}

void SwiGluForward(float* out, const float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g * Sigmoid(g) * up[i]);
  }
}

void SwiGluBackward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                    int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    const double sig = Sigmoid(g);
    const double silu = g * sig;
    const double dsilu = sig * (1.0 + g * (1.0 - sig));
    dgate[i] += static_cast<float>(dout[i] * up[i] * dsilu);
    dup[i] += static_cast<float>(dout[i] * silu);
  }
}

void ClampedSwiGluForward(float* out, const float* gate_up, int64_t n, int64_t width, float alpha,
                          float limit) {
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < width; ++c) {
      const double g = std::min<double>(gate_up[(r * width + c) * 2], limit);
      const double u = std::clamp<double>(gate_up[(r * width + c) * 2 + 1], -limit, limit);
      out[r * width + c] = static_cast<float>((u + 1.0) * g / (1.0 + std::exp(-alpha * g)));
    }
  }
}

void ClampedSwiGluBackward(float* dgate_up, const float* dout, const float* gate_up, int64_t n,
                           int64_t width, float alpha, float limit) {
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < width; ++c) {
      const double gate = gate_up[(r * width + c) * 2], up = gate_up[(r * width + c) * 2 + 1];
      const double g = std::min<double>(gate, limit), u = std::clamp<double>(up, -limit, limit);
      const double s = 1.0 / (1.0 + std::exp(-alpha * g));
      const double dy = dout[r * width + c];
      dgate_up[(r * width + c) * 2] =
          gate <= limit ? static_cast<float>(dy * (u + 1.0) * (s + alpha * g * s * (1.0 - s))) : 0.0f;
      dgate_up[(r * width + c) * 2 + 1] =
          up >= -limit && up <= limit ? static_cast<float>(dy * g * s) : 0.0f;
    }
  }
}

}  // namespace mobius::reference
