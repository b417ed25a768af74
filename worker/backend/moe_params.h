// Parameter structs of the mixture-of-experts ops (backend.h: MoeRoute ... MoeScatterAdd), the
// routing of transformers' Qwen3MoeSparseMoeBlock / MixtralSparseMoeBlock split into steps a
// backend runs on its queue (oracle: worker/reference/ops_moe.h and model_moe.cc):
//
//   MoeRoute        probs = softmax(logits); ids = top k (descending, ties: lower expert first);
//                   weights = probs at ids (/ their sum when renormalize); and the routed rows
//                   (token * K + slot, R = N * K of them) sorted by expert, stable by row:
//                   order[i] the routed row at sorted position i, pos[row] its sorted position,
//                   offsets[e] .. offsets[e + 1] expert e's positions (offsets [E + 1])
//   MoeGather       dst [R, C] = src [N, C] rows in sorted order: dst[i] = src[order[i] / K]
//   (the caller runs each expert's SwiGLU on its rows offsets[e] .. offsets[e + 1])
//   MoeCombine      out [N, C] = sum_j weights[t, j] * y[pos[t K + j]], summed in fp32 in
//                   increasing pos (= increasing expert) and rounded once
//   MoeCombineBackward  dy [R, C] fp32 = weights * dout rows; dweights [N, K] = dout . y rows
//   MoeScatterAdd   dst [N, C] fp32 += sum_j src[pos[t K + j]] (the gathered rows' gradient;
//                   the same order)
//   MoeRouteBackward dlogits [N, E] fp32 = d/d logits of (sum dweights . weights + sum over rows of
//                   aux_grad . probs) (softmax, top k, renormalisation; = not +=); aux_grad [E]
//                   (or null): the load-balancing loss's d/d probs, the same for every row
//
// Index buffers are int32 device memory; N * K must fit in int32 and K <= kMaxMoeTopK.
#ifndef MOBIUS_WORKER_BACKEND_MOE_PARAMS_H_
#define MOBIUS_WORKER_BACKEND_MOE_PARAMS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "worker/backend/gemm_params.h"

namespace mobius::backend {

inline constexpr int64_t kMaxMoeTopK = 64;  // experts per token (real models: 1 .. 8)

struct MoeRouteParams {
  int64_t n = 0, experts = 0, k = 0;
  bool renormalize = false;
  const float* logits = nullptr;  // [N, E]
  float* probs = nullptr;         // [N, E]
  int32_t* ids = nullptr;         // [N, K]
  float* weights = nullptr;       // [N, K]
  int32_t* order = nullptr;       // [N K]
  int32_t* pos = nullptr;         // [N K]
  int32_t* offsets = nullptr;     // [E + 1]
};

struct MoeRouteBackwardParams {
  int64_t n = 0, experts = 0, k = 0;
  bool renormalize = false;
  const float* dweights = nullptr;  // [N, K]
  const float* probs = nullptr;     // MoeRoute's
  const int32_t* ids = nullptr;
  const float* weights = nullptr;
  const float* aux_grad = nullptr;  // [E] fp32 device memory, or nullptr
  float* dlogits = nullptr;  // [N, E], written
};

struct MoeGatherParams {
  DType dtype = DType::kBf16;  // src and dst, 16-bit
  int64_t n = 0, k = 0, c = 0;
  const int32_t* order = nullptr;  // [N K]
  const void* src = nullptr;       // [N, C]
  void* dst = nullptr;             // [N K, C]
};

struct MoeCombineParams {
  DType dtype = DType::kBf16;  // y and out, 16-bit
  int64_t n = 0, k = 0, c = 0;
  const int32_t* pos = nullptr;    // [N K]
  const float* weights = nullptr;  // [N, K]
  const void* y = nullptr;         // [N K, C] sorted rows
  void* out = nullptr;             // [N, C]
};

struct MoeCombineBackwardParams {
  DType dtype = DType::kBf16;  // y, 16-bit
  int64_t n = 0, k = 0, c = 0;
  const int32_t* pos = nullptr;
  const float* weights = nullptr;
  const float* dout = nullptr;  // [N, C] fp32
  const void* y = nullptr;      // [N K, C] sorted rows
  float* dy = nullptr;          // [N K, C] fp32 sorted rows, written
  float* dweights = nullptr;    // [N, K], written
};

struct MoeScatterAddParams {
  int64_t n = 0, k = 0, c = 0;
  const int32_t* pos = nullptr;
  const float* src = nullptr;  // [N K, C] fp32 sorted rows
  float* dst = nullptr;        // [N, C] fp32, +=
};

absl::Status ValidateMoeRoute(const MoeRouteParams& p);
absl::Status ValidateMoeRouteBackward(const MoeRouteBackwardParams& p);
absl::Status ValidateMoeGather(const MoeGatherParams& p);
absl::Status ValidateMoeCombine(const MoeCombineParams& p);
absl::Status ValidateMoeCombineBackward(const MoeCombineBackwardParams& p);
absl::Status ValidateMoeScatterAdd(const MoeScatterAddParams& p);

}  // namespace mobius::backend

#endif  // MOBIUS_WORKER_BACKEND_MOE_PARAMS_H_
