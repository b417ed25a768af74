// AdamW with PyTorch's semantics (torch.optim.AdamW, amsgrad=False, maximize=False):
//   param *= 1 - lr * weight_decay                 (decoupled decay, before the moment update)
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//   param -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// so that the reference model can train and a backend's optimizer can be checked against it.
//
// Not thread-safe.
#ifndef MOBIUS_WORKER_REFERENCE_ADAMW_H_
#define MOBIUS_WORKER_REFERENCE_ADAMW_H_

#include <cstdint>
#include <functional>
#include <string>

#include "worker/reference/parameters.h"

namespace mobius::reference {

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  // Which parameters decay (by HF name); empty = all, as torch.optim.AdamW over one group.
  std::function<bool(const std::string& name)> decay;
};

class AdamW {
 public:
  explicit AdamW(AdamWOptions options) : options_(std::move(options)) {}

  // One step over every tensor of `grads`. Moments are created (zero) on the first step.
  // REQUIRES: params holds every name in grads with the same size.
  void Step(Parameters* params, const Parameters& grads);

  int64_t step() const { return step_; }
  const Parameters& m() const { return m_; }  // first moments
  const Parameters& v() const { return v_; }  // second moments

  // Resumes from a checkpoint: the number of steps taken and the moments they left.
  void RestoreState(int64_t step, Parameters m, Parameters v) {
    step_ = step;
    m_ = std::move(m);
    v_ = std::move(v);
  }

 private:
  AdamWOptions options_;
  int64_t step_ = 0;
  Parameters m_, v_;
};

}  // namespace mobius::reference

#endif  // MOBIUS_WORKER_REFERENCE_ADAMW_H_
