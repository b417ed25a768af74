#include "worker/reference/ops_norm.h"

#include <cmath>

namespace mobius::reference {

void LayerNormForward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                      const float* bias, int64_t n, int64_t c, float eps) {
  for (int64_t row = 0; row < n; ++row) {
    const float* x = inp + row * c;
    double m = 0.0;
    for (int64_t i = 0; i < c; ++i) m += x[i];
    m /= c;
    double var = 0.0;
    for (int64_t i = 0; i < c; ++i) var += (x[i] - m) * (x[i] - m);
    var /= c;
    const double s = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < c; ++i) {
      const double normed = (x[i] - m) * s;
      out[row * c + i] = static_cast<float>(normed * weight[i] + (bias ? bias[i] : 0.0f));
    }
    mean[row] = static_cast<float>(m);
    rstd[row] = static_cast<float>(s);
  }
}

void LayerNormBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                       const float* inp, const float* weight, const float* mean, const float* rstd,
                       int64_t n, int64_t c) {
  for (int64_t row = 0; row < n; ++row) {
    const float* x = inp + row * c;
    const float* dy = dout + row * c;
    // With xhat = (x - mean) * rstd and g = weight * dy:
    // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
    double g_mean = 0.0, g_xhat_mean = 0.0;
    for (int64_t i = 0; i < c; ++i) {
      const double xhat = (x[i] - mean[row]) * rstd[row];
      const double g = static_cast<double>(weight[i]) * dy[i];
      g_mean += g;
      g_xhat_mean += g * xhat;
    }
    g_mean /= c;
    g_xhat_mean /= c;
    for (int64_t i = 0; i < c; ++i) {
      const double xhat = (x[i] - mean[row]) * rstd[row];
      const double g = static_cast<double>(weight[i]) * dy[i];
      dinp[row * c + i] += static_cast<float>(rstd[row] * (g - g_mean - xhat * g_xhat_mean));
      dweight[i] += static_cast<float>(dy[i] * xhat);
      if (dbias != nullptr) dbias[i] += dy[i];
    }
  }
}

void RmsNormForward(float* out, float* rstd, const float* inp, const float* weight, int64_t n,
                    int64_t c, float eps) {
  for (int64_t row = 0; row < n; ++row) {
    const float* x = inp + row * c;
    double ms = 0.0;
    for (int64_t i = 0; i < c; ++i) ms += static_cast<double>(x[i]) * x[i];
    ms /= c;
    const double s = 1.0 / std::sqrt(ms + eps);
    for (int64_t i = 0; i < c; ++i) out[row * c + i] = static_cast<float>(weight[i] * (x[i] * s));
    rstd[row] = static_cast<float>(s);
  }
}

void RmsNormBackward(float* dinp, float* dweight, const float* dout, const float* inp,
                     const float* weight, const float* rstd, int64_t n, int64_t c) {
  for (int64_t row = 0; row < n; ++row) {
    const float* x = inp + row * c;
    const float* dy = dout + row * c;
    const double s = rstd[row];
    // y = w * x * s, s = (mean(x^2) + eps)^(-1/2), ds/dx_j = -s^3 x_j / C:
    // dx_j = s * w_j * dy_j - s^3 * x_j * mean_i(w_i * dy_i * x_i).
    double g_x_mean = 0.0;
    for (int64_t i = 0; i < c; ++i) g_x_mean += static_cast<double>(weight[i]) * dy[i] * x[i];
    g_x_mean /= c;
    for (int64_t i = 0; i < c; ++i) {
      const double g = static_cast<double>(weight[i]) * dy[i];
      dinp[row * c + i] += static_cast<float>(s * g - s * s * s * x[i] * g_x_mean);
      dweight[i] += static_cast<float>(dy[i] * x[i] * s);
    }
  }
}

}  // namespace mobius::reference
