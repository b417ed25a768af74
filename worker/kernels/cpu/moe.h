// Mixture-of-experts routing kernels (backend/moe_params.h has the contracts; oracle:
// worker/reference/ops_moe.h). 16-bit tensors are bf16 (uint16_t) or fp16 (F16), arithmetic fp32
// (the softmax's sum in double). Work is split by rows over `pool`, results are bitwise identical
// for any pool size; the expert sort is serial (a stable counting sort, O(N K + E)).
#ifndef MOBIUS_WORKER_KERNELS_CPU_MOE_H_
#define MOBIUS_WORKER_KERNELS_CPU_MOE_H_

#include <cstdint>

#include "worker/kernels/cpu/parallel.h"

namespace mobius::kernels::cpu {

void moe_route(float* probs, int32_t* ids, float* weights, int32_t* order, int32_t* pos,
               int32_t* offsets, const float* logits, int64_t n, int64_t e, int64_t k,
               bool renormalize, ThreadPool* pool);
void moe_route_bwd(float* dlogits, const float* dweights, const float* aux_grad, const float* probs,
                   const int32_t* ids, const float* weights, int64_t n, int64_t e, int64_t k,
                   bool renormalize, ThreadPool* pool);

void moe_gather(uint16_t* dst, const uint16_t* src, const int32_t* order, int64_t n, int64_t k,
                int64_t c, ThreadPool* pool);
void moe_gather(F16* dst, const F16* src, const int32_t* order, int64_t n, int64_t k, int64_t c,
                ThreadPool* pool);

void moe_combine(uint16_t* out, const uint16_t* y, const int32_t* pos, const float* weights,
                 int64_t n, int64_t k, int64_t c, ThreadPool* pool);
void moe_combine(F16* out, const F16* y, const int32_t* pos, const float* weights, int64_t n,
                 int64_t k, int64_t c, ThreadPool* pool);

void moe_combine_bwd(float* dy, float* dweights, const float* dout, const uint16_t* y,
                     const int32_t* pos, const float* weights, int64_t n, int64_t k, int64_t c,
                     ThreadPool* pool);
void moe_combine_bwd(float* dy, float* dweights, const float* dout, const F16* y,
                     const int32_t* pos, const float* weights, int64_t n, int64_t k, int64_t c,
                     ThreadPool* pool);

void moe_scatter_add(float* dst, const float* src, const int32_t* pos, int64_t n, int64_t k,
                     int64_t c, ThreadPool* pool);

}  // namespace mobius::kernels::cpu

#endif  // MOBIUS_WORKER_KERNELS_CPU_MOE_H_
