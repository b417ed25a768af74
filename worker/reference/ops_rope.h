// Rotary position embeddings, Hugging Face convention (LlamaRotaryEmbedding + rotate_half).
//
// inv_freq[i] = 1 / theta^(2i / head_dim), i < head_dim/2, remapped by rope_scaling:
//   linear: inv_freq / factor;
//   llama3: per transformers' _compute_llama3_parameters (long wavelengths divided by factor,
//           short ones kept, the band between smoothly interpolated).
// For position p and angle a_i = p * inv_freq[i], dimensions i and i + head_dim/2 form a pair:
//   out[i]        = x[i] cos a_i - x[i + d/2] sin a_i
//   out[i + d/2]  = x[i + d/2] cos a_i + x[i] sin a_i
// Positions are 0 .. T-1 (HF's default position_ids).
#ifndef MOBIUS_WORKER_REFERENCE_OPS_ROPE_H_
#define MOBIUS_WORKER_REFERENCE_OPS_ROPE_H_

#include <cstdint>
#include <vector>

#include "common/model/model_config.h"

namespace mobius::reference {

// [head_dim / 2], fp32 as HF keeps it. REQUIRES: head_dim even.
std::vector<float> RopeInverseFrequencies(int64_t head_dim, double theta,
                                          const model::RopeScaling& scaling);

// cos, sin [T, head_dim / 2] for positions 0 .. T-1, each times `scale` (RopeTableScale).
void RopeTables(std::vector<float>* cos, std::vector<float>* sin,
                const std::vector<float>& inv_freq, int64_t t, float scale = 1.0f);

// What the tables are multiplied by: YaRN's attention factor, else 1.
float RopeTableScale(const model::RopeScaling& scaling);

// out, inp [B, T, NH, head_dim]; cos, sin [T, head_dim / 2]. out may not alias inp.
void RopeForward(float* out, const float* inp, const float* cos, const float* sin, int64_t b,
                 int64_t t, int64_t nh, int64_t head_dim);
// dinp += R^T dout (the rotation's transpose: the same rotation by -a).
void RopeBackward(float* dinp, const float* dout, const float* cos, const float* sin, int64_t b,
                  int64_t t, int64_t nh, int64_t head_dim);

}  // namespace mobius::reference

#endif  // MOBIUS_WORKER_REFERENCE_OPS_ROPE_H_
