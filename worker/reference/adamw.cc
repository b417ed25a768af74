#include "worker/reference/adamw.h"

#include <cmath>

namespace mobius::reference {

void AdamW::Step(Parameters* params, const Parameters& grads) {
  ++step_;
  const double bias_correction1 = 1.0 - std::pow(options_.beta1, static_cast<double>(step_));
  const double bias_correction2 = 1.0 - std::pow(options_.beta2, static_cast<double>(step_));
  const double step_size = options_.lr / bias_correction1;
  const double sqrt_bc2 = std::sqrt(bias_correction2);
  for (const auto& [name, grad] : grads.tensors) {
    Tensor& p = params->at(name);
    Tensor& m = m_.tensors[name];
    Tensor& v = v_.tensors[name];
    if (m.data.empty()) m = v = Tensor{grad.shape, std::vector<float>(grad.data.size(), 0.0f)};
    const bool decay = !options_.decay || options_.decay(name);
    const float decay_factor =
        decay ? static_cast<float>(1.0 - options_.lr * options_.weight_decay) : 1.0f;
    for (size_t i = 0; i < grad.data.size(); ++i) {
      // fp32 state and arithmetic in torch's order, so a few steps agree to rounding.
      const float g = grad.data[i];
      p.data[i] *= decay_factor;
      m.data[i] = static_cast<float>(options_.beta1) * m.data[i] +
                  static_cast<float>(1.0 - options_.beta1) * g;
      v.data[i] = static_cast<float>(options_.beta2) * v.data[i] +
                  static_cast<float>(1.0 - options_.beta2) * g * g;
      const double denom = std::sqrt(static_cast<double>(v.data[i])) / sqrt_bc2 + options_.eps;
      p.data[i] = static_cast<float>(p.data[i] - step_size * m.data[i] / denom);
    }
  }
}

}  // namespace mobius::reference
