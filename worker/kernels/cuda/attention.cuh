// Causal softmax attention with grouped-query heads (and an optional sliding window) on the GPU.
// Same contract as worker/kernels/cpu/attention.h (backend::AttentionParams /
// AttentionBackwardParams): q [B, T, H, hd], k, v [B, T, KV, hd], out [B, T, H, hd] of `type`
// (bf16 or fp16, half_type.h; the gradients too), lse [B, H, T] fp32; query head h reads kv head
// h / (H / KV) (HF repeat_kv); scores scaled by 1 / sqrt(hd); position t attends to 0..t, or with
// a window W > 0 to t - W < t2 <= t.
//
// attention_bwd_reference and attention_fwd_reference are the *reference* kernels: simple and
// obviously correct, no T x T matrix in memory, but not fast (no tensor cores, no shared-memory
// tiling). attention_fwd and attention_bwd run the tiled tensor-core kernels (attention_flash_fwd,
// attention_flash_bwd) where they apply. In the
// reference forward one warp per query row walks the keys 32 at a time (one key per lane for the
// scores, an online softmax across chunks, the output accumulated with each lane owning
// head_dim / 32 dimensions). The backward is FlashAttention-2's math in two race-free kernels: dQ
// per (b, h, query row); dK, dV per (b, kv head, key row) summing over the group's heads,
// recomputing P = exp(S - lse) and D = rowsum(dO * O) on the fly. Deterministic.
//
// All functions enqueue on `stream` and return the launch status; pointers are device addresses.
#ifndef MOBIUS_WORKER_KERNELS_CUDA_ATTENTION_CUH_
#define MOBIUS_WORKER_KERNELS_CUDA_ATTENTION_CUH_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "worker/kernels/cuda/half_type.h"
#include "worker/kernels/cuda/kernel_status.h"

namespace mobius::kernels::cuda {

struct AttentionShape {
  int64_t b = 0, t = 0;
  int64_t heads = 0;     // H, query heads
  int64_t kv_heads = 0;  // KV, REQUIRES: H % KV == 0
  int64_t head_dim = 0;  // hd, REQUIRES: <= kAttentionMaxHeadDim
  int64_t window = 0;    // sliding window; 0 = full causal attention
};

inline constexpr int64_t kAttentionMaxHeadDim = 256;

// INVALID_ARGUMENT unless sizes are >= 0, heads, kv_heads, head_dim > 0 for a non-empty shape,
// H % KV == 0 and head_dim <= kAttentionMaxHeadDim.
KernelStatus CheckAttentionShape(const AttentionShape& s);

// q, k, v -> out (all of `type`) and lse fp32 (saved for the backward). REQUIRES: out aliases none
// of q, k, v. Runs attention_mma_fwd where it applies and this GPU passed its check
// (AttentionMmaFwdChecked), else attention_flash_fwd where it applies (AttentionFlashFwdApplies),
// else the reference kernel.
KernelStatus attention_fwd(HalfType type, uint16_t* out, float* lse, const uint16_t* q,
                           const uint16_t* k, const uint16_t* v, const AttentionShape& s,
                           cudaStream_t stream);

// The reference forward (one warp per query row, CUDA cores), for any head_dim <= 256.
KernelStatus attention_fwd_reference(HalfType type, uint16_t* out, float* lse, const uint16_t* q,
                                     const uint16_t* k, const uint16_t* v, const AttentionShape& s,
                                     cudaStream_t stream);

// The tiled forward (attention_flash_fwd.cu): FlashAttention-2's loop on tensor cores (WMMA in
// `type`, fp32 accumulation; 64 query rows x 32 keys per step), P rounded to `type` before P V as
// FlashAttention does. Applies to head_dim 64 or 128, b * heads <= 65535, q, k, v 16-byte aligned
// (either type); UNIMPLEMENTED otherwise.
bool AttentionFlashFwdApplies(const AttentionShape& s, const void* q, const void* k, const void* v);
KernelStatus attention_flash_fwd(HalfType type, uint16_t* out, float* lse, const uint16_t* q,
                                 const uint16_t* k, const uint16_t* v, const AttentionShape& s,
                                 cudaStream_t stream);

// The tiled forward on mma.sync (attention_mma_fwd.cu): FlashAttention-2's loop with the online
// softmax in registers (64 query rows x 64 keys per step), P rounded to `type` before P V. Applies
// as attention_flash_fwd does (head_dim 64 or 128, b * heads <= 65535, q, k, v 16-byte aligned);
// UNIMPLEMENTED otherwise. AttentionMmaFwdChecked: as AttentionFlashBwdChecked below, against
// attention_fwd_reference (out within 2e-2 of its largest magnitude, lse within 1e-4 of its
// largest); attention_fwd falls back to the WMMA kernel where it says no.
bool AttentionMmaFwdApplies(const AttentionShape& s, const void* q, const void* k, const void* v);
KernelStatus attention_mma_fwd(HalfType type, uint16_t* out, float* lse, const uint16_t* q,
                               const uint16_t* k, const uint16_t* v, const AttentionShape& s,
                               cudaStream_t stream);
bool AttentionMmaFwdChecked(HalfType type, int64_t head_dim);
// The same over k, v of `kv_rows` >= T rows per sequence, the first T of them the keys: a KV
// cache's prefill from position 0 (attention_cached_fwd with start 0). lse may be nullptr.
KernelStatus attention_mma_fwd_prefill(HalfType type, uint16_t* out, float* lse,
                                       const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                       const AttentionShape& s, int64_t kv_rows,
                                       cudaStream_t stream);

// dq [B, T, H, hd], dk, dv [B, T, KV, hd] += gradients from dout [B, T, H, hd], all of `type`,
// given the forward's inputs, out and lse. REQUIRES: the gradients alias no input. Runs
// attention_flash_bwd where it applies and this GPU passed its check against the reference
// (AttentionFlashBwdChecked), else attention_bwd_reference.
KernelStatus attention_bwd(HalfType type, uint16_t* dq, uint16_t* dk, uint16_t* dv,
                           const uint16_t* dout, const uint16_t* q, const uint16_t* k,
                           const uint16_t* v, const uint16_t* out, const float* lse,
                           const AttentionShape& s, cudaStream_t stream);

// The reference backward (CUDA cores: a dQ kernel per query row, a dK/dV kernel per key row), for
// any head_dim <= 256.
KernelStatus attention_bwd_reference(HalfType type, uint16_t* dq, uint16_t* dk, uint16_t* dv,
                                     const uint16_t* dout, const uint16_t* q, const uint16_t* k,
                                     const uint16_t* v, const uint16_t* out, const float* lse,
                                     const AttentionShape& s, cudaStream_t stream);

// The tiled backward (attention_flash_bwd.cu): FlashAttention-2's backward on tensor cores
// (mma.sync in `type`, fp32 accumulation), a dQ kernel per 64 query rows and a dK/dV kernel per 64
// key rows, deterministic; P and dS rounded to `type` before their products. Uses B * H * T * 4
// bytes of stream-ordered scratch (cudaMallocAsync, outside the backend's cap). Applies to
// head_dim 64 or 128, b * heads <= 65535, q, k, v, dout 16-byte aligned; UNIMPLEMENTED otherwise.
bool AttentionFlashBwdApplies(const AttentionShape& s, const void* q, const void* k, const void* v,
                              const void* dout);
KernelStatus attention_flash_bwd(HalfType type, uint16_t* dq, uint16_t* dk, uint16_t* dv,
                                 const uint16_t* dout, const uint16_t* q, const uint16_t* k,
                                 const uint16_t* v, const uint16_t* out, const float* lse,
                                 const AttentionShape& s, cudaStream_t stream);

// Whether attention_flash_bwd agrees with attention_bwd_reference on this device for `type` and
// `head_dim` (64 or 128): checked once per (device, type, head_dim) and process on a small GQA
// problem with a window across tiles (its own stream and buffers; a few milliseconds), within 2e-2
// of each gradient's largest magnitude. A disagreement or an error is written to stderr once and
// the answer is false, so attention_bwd falls back to the reference: a kernel that has not run on
// this GPU architecture before cannot silently train wrong.
bool AttentionFlashBwdChecked(HalfType type, int64_t head_dim);

}  // namespace mobius::kernels::cuda

#endif  // MOBIUS_WORKER_KERNELS_CUDA_ATTENTION_CUH_
