#include "worker/reference/ops_linear.h"

namespace mobius::reference {
namespace {

// Element W[i][o] (input feature i, output feature o) in either layout.
inline int64_t WeightIndex(int64_t i, int64_t o, int64_t in_features, int64_t out_features,
                           WeightLayout layout) {
  return layout == WeightLayout::kInOut ? i * out_features + o : o * in_features + i;
}

}  // namespace

void LinearForward(float* out, const float* inp, const float* weight, const float* bias, int64_t n,
                   int64_t in_features, int64_t out_features, WeightLayout layout) {
  for (int64_t row = 0; row < n; ++row) {
    const float* x = inp + row * in_features;
    for (int64_t o = 0; o < out_features; ++o) {
      // Double accumulation: the oracle should be closer to exact than what it checks.
      double acc = bias ? bias[o] : 0.0;
      for (int64_t i = 0; i < in_features; ++i) {
        acc += static_cast<double>(x[i]) *
               weight[WeightIndex(i, o, in_features, out_features, layout)];
      }
      out[row * out_features + o] = static_cast<float>(acc);
    }
  }
}

void LinearBackward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                    const float* weight, int64_t n, int64_t in_features, int64_t out_features,
                    WeightLayout layout) {
  // dinp[row, i] += sum_o dout[row, o] * W[i][o]
  for (int64_t row = 0; row < n; ++row) {
    const float* dy = dout + row * out_features;
    for (int64_t i = 0; i < in_features; ++i) {
      double acc = 0.0;
      for (int64_t o = 0; o < out_features; ++o) {
        acc += static_cast<double>(dy[o]) *
               weight[WeightIndex(i, o, in_features, out_features, layout)];
      }
      dinp[row * in_features + i] += static_cast<float>(acc);
    }
  }
  // dW[i][o] += sum_row inp[row, i] * dout[row, o]
  for (int64_t i = 0; i < in_features; ++i) {
    for (int64_t o = 0; o < out_features; ++o) {
      double acc = 0.0;
      for (int64_t row = 0; row < n; ++row) {
        acc += static_cast<double>(inp[row * in_features + i]) * dout[row * out_features + o];
      }
      dweight[WeightIndex(i, o, in_features, out_features, layout)] += static_cast<float>(acc);
    }
  }
  if (dbias != nullptr) {
    for (int64_t o = 0; o < out_features; ++o) {
      double acc = 0.0;
      for (int64_t row = 0; row < n; ++row) acc += dout[row * out_features + o];
      dbias[o] += static_cast<float>(acc);
    }
  }
}

}  // namespace mobius::reference
