// Token (and learned position) embeddings: out[b, t] = wte[tokens[b, t]] (+ wpe[t]).
#ifndef MOBIUS_WORKER_REFERENCE_OPS_EMBEDDING_H_
#define MOBIUS_WORKER_REFERENCE_OPS_EMBEDDING_H_

#include <cstdint>

namespace mobius::reference {

// out [B, T, C]; tokens [B, T]; wte [V, C]; wpe [P, C] or nullptr (RoPE models).
// REQUIRES: tokens in [0, V), T <= P.
void EmbeddingForward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                      int64_t b, int64_t t, int64_t c);

// dwte[tokens[b, t]] += dout[b, t]; dwpe[t] += dout[b, t] (dwpe may be nullptr).
void EmbeddingBackward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                       int64_t b, int64_t t, int64_t c);

}  // namespace mobius::reference

#endif  // MOBIUS_WORKER_REFERENCE_OPS_EMBEDDING_H_
