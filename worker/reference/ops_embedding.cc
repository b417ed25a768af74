#include "worker/reference/ops_embedding.h"

namespace mobius::reference {

void EmbeddingForward(float* out, const int32_t* tokens, const float* wte, const float* wpe,
                      int64_t b, int64_t t, int64_t c) {
  for (int64_t bt = 0; bt < b * t; ++bt) {
    const float* tok = wte + static_cast<int64_t>(tokens[bt]) * c;
    const float* pos = wpe ? wpe + (bt % t) * c : nullptr;
    for (int64_t i = 0; i < c; ++i) out[bt * c + i] = tok[i] + (pos ? pos[i] : 0.0f);
  }
}

void EmbeddingBackward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens,
                       int64_t b, int64_t t, int64_t c) {
  for (int64_t bt = 0; bt < b * t; ++bt) {
    float* dtok = dwte + static_cast<int64_t>(tokens[bt]) * c;
    float* dpos = dwpe ? dwpe + (bt % t) * c : nullptr;
    for (int64_t i = 0; i < c; ++i) {
      dtok[i] += dout[bt * c + i];
      if (dpos) dpos[i] += dout[bt * c + i];
    }
  }
}

}  // namespace mobius::reference
