// Normalisations over the last dimension of [N, C] rows.
//
// LayerNorm (GPT-2): out = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var + eps), biased
// variance, as torch.nn.functional.layer_norm.
// RMSNorm (Llama family, Qwen3 q/k norm): out = weight * x / sqrt(mean(x^2) + eps), as
// LlamaRMSNorm computes it in fp32.
// Forward functions save the per-row statistics the backward needs; backward functions
// accumulate (+=) into dinp, dweight and dbias.
#ifndef MOBIUS_WORKER_REFERENCE_OPS_NORM_H_
#define MOBIUS_WORKER_REFERENCE_OPS_NORM_H_

#include <cstdint>

namespace mobius::reference {

// out, inp [N, C]; weight, bias [C] (bias may be nullptr); mean, rstd [N] (saved).
void LayerNormForward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                      const float* bias, int64_t n, int64_t c, float eps);
// dbias may be nullptr.
void LayerNormBackward(float* dinp, float* dweight, float* dbias, const float* dout,
                       const float* inp, const float* weight, const float* mean, const float* rstd,
                       int64_t n, int64_t c);

// out, inp [N, C]; weight [C]; rstd [N] (saved).
void RmsNormForward(float* out, float* rstd, const float* inp, const float* weight, int64_t n,
                    int64_t c, float eps);
void RmsNormBackward(float* dinp, float* dweight, const float* dout, const float* inp,
                     const float* weight, const float* rstd, int64_t n, int64_t c);

}  // namespace mobius::reference

#endif  // MOBIUS_WORKER_REFERENCE_OPS_NORM_H_
