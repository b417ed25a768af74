// Element-wise MLP activations.
//
// GELU, tanh approximation (HF "gelu_new", GPT-2):
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// SwiGLU (Llama family): act = silu(gate) * up, silu(g) = g * sigmoid(g); the MLP is
//   down(silu(gate(x)) * up(x)).
// Backward functions accumulate (+=).
#ifndef MOBIUS_WORKER_REFERENCE_OPS_ACTIVATION_H_
#define MOBIUS_WORKER_REFERENCE_OPS_ACTIVATION_H_

#include <cstdint>

namespace mobius::reference {

// out, inp [N]
void GeluForward(float* out, const float* inp, int64_t n);
void GeluBackward(float* dinp, const float* dout, const float* inp, int64_t n);

// out, gate, up [N]
void SwiGluForward(float* out, const float* gate, const float* up, int64_t n);
// gpt-oss's clamped SwiGLU (backend::ClampedSwiGluParams): gate_up [N, 2W] interleaved (gate at
// even columns) -> out [N, W]; the backward writes dgate_up [N, 2W] (zero where a clamp holds).
void ClampedSwiGluForward(float* out, const float* gate_up, int64_t n, int64_t width, float alpha,
                          float limit);
void ClampedSwiGluBackward(float* dgate_up, const float* dout, const float* gate_up, int64_t n,
                           int64_t width, float alpha, float limit);
void SwiGluBackward(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                    int64_t n);

}  // namespace mobius::reference

#endif  // MOBIUS_WORKER_REFERENCE_OPS_ACTIVATION_H_
