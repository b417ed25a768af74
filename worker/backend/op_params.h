// Arguments of the transformer ops other than GEMM, shared by every backend (one struct per op and
// direction, validated by one function each so that every backend rejects the same arguments).
//
// Conventions (those of worker/kernels/cpu/, which the CPU backend runs):
//   - Pointers are device addresses (DeviceBuffer::at(offset)) that stay valid until the op ran.
//   - Activations and weights are 16-bit, bf16 unless the op's `dtype` says fp16 (raw bits,
//     common/numeric/bf16.h, f16.h; a job's training.precision), typed `void*` here so that no
//     numeric header leaks into backend.h; statistics, lse, losses and parameter gradients fp32.
//     "bf16" below means "the op's `dtype`" (kBf16 or kF16; anything else is INVALID_ARGUMENT).
//     Arithmetic is fp32 in both; each 16-bit output is rounded once (nearest even; fp16 values
//     beyond 65504 become +-inf, which the loss scaler of a fp16 job detects).
//   - "+=" marks an output that is accumulated into: the caller zeroes it first (ZeroParams).
//   - Shapes are row-major; N is a row count (B * T for token rows).
// Data-dependent preconditions (token and target ids in range) cannot be checked when enqueueing;
// a backend reports them as the op's error (Synchronize), never reads out of bounds.
#ifndef MOBIUS_WORKER_BACKEND_OP_PARAMS_H_
#define MOBIUS_WORKER_BACKEND_OP_PARAMS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "worker/backend/gemm_params.h"

namespace mobius::backend {

inline constexpr int32_t kIgnoreIndex = -100;  // cross-entropy targets to skip (PyTorch's default)

// dst[0 .. bytes) = 0.
struct ZeroParams {
  void* dst = nullptr;
  uint64_t bytes = 0;
};

// dst[i] = src[i] converted (to a 16-bit type: rounded to nearest even; bf16 <-> fp16 through
// fp32); src and dst must not overlap. With `accumulate` (REQUIRES an fp32 dst): dst[i] += src[i]
// in fp32 (a 16-bit source converts exactly): an fp16 per-microbatch weight gradient added into
// the fp32 one, as PyTorch's autocast does.
struct CastParams {
  int64_t n = 0;
  DType src_type = DType::kFp32, dst_type = DType::kBf16;
  const void* src = nullptr;
  void* dst = nullptr;
  bool accumulate = false;
};

// out [B, T, C] bf16 = wte[tokens] (+ wpe[t]); tokens [B, T] int32 in [0, vocab); wte [vocab, C];
// wpe [positions, C] or nullptr (RoPE models), REQUIRES t <= positions when set.
struct EmbeddingParams {
  DType dtype = DType::kBf16;  // the 16-bit tensors' format
  int64_t b = 0, t = 0, c = 0, vocab = 0, positions = 0;
  const int32_t* tokens = nullptr;
  const void* wte = nullptr;
  const void* wpe = nullptr;
  void* out = nullptr;
};

// dwte [vocab, C] fp32 += scatter of dout [B, T, C] bf16 by tokens; dwpe [positions, C] fp32 +=
// (nullptr: none).
struct EmbeddingBackwardParams {
  DType dtype = DType::kBf16;  // the 16-bit tensors' format
  int64_t b = 0, t = 0, c = 0, vocab = 0, positions = 0;
  const int32_t* tokens = nullptr;
  const void* dout = nullptr;
  float* dwte = nullptr;
  float* dwpe = nullptr;
};

enum class NormOp { kLayerNorm, kRmsNorm };

// out, inp [N, C] bf16; weight, bias [C] bf16 (bias: LayerNorm only, may be null);
// mean [N] fp32 (LayerNorm only), rstd [N] fp32, saved for the backward. out may alias inp.
struct NormParams {
  DType dtype = DType::kBf16;  // the 16-bit tensors' format
  NormOp op = NormOp::kLayerNorm;
  int64_t n = 0, c = 0;
  float eps = 1e-5f;
  const void* inp = nullptr;
  const void* weight = nullptr;
  const void* bias = nullptr;
  void* out = nullptr;
  float* mean = nullptr;
  float* rstd = nullptr;
};

// dinp [N, C] (dinp_type: fp32 or `dtype`) +=; dweight, dbias [C] fp32 += (dbias may be null).
struct NormBackwardParams {
  DType dtype = DType::kBf16;  // the 16-bit tensors' format
  NormOp op = NormOp::kLayerNorm;
  int64_t n = 0, c = 0;
  const void* dout = nullptr;  // [N, C] bf16
  const void* inp = nullptr;
  const void* weight = nullptr;
  const float* mean = nullptr;  // LayerNorm only
  const float* rstd = nullptr;
  DType dinp_type = DType::kBf16;
  void* dinp = nullptr;
  float* dweight = nullptr;
  float* dbias = nullptr;
};

// GELU (tanh): out [N] = gelu(inp [N]), bf16; out may alias inp.
struct GeluParams {
  DType dtype = DType::kBf16;  // the 16-bit tensors' format
  int64_t n = 0;
  const void* inp = nullptr;
  void* out = nullptr;
};
// dinp [N] bf16 += gelu'(inp) * dout.
struct GeluBackwardParams {
  DType dtype = DType::kBf16;  // the 16-bit tensors' format
  int64_t n = 0;
  const void* dout = nullptr;
  const void* inp = nullptr;
  void* dinp = nullptr;
};

// out [N] = silu(gate) * up, bf16.
struct SwiGluParams {
  DType dtype = DType::kBf16;  // the 16-bit tensors' format
  int64_t n = 0;
  const void* gate = nullptr;
  const void* up = nullptr;
  void* out = nullptr;
};
// dgate, dup [N] bf16 +=.
struct SwiGluBackwardParams {
  DType dtype = DType::kBf16;  // the 16-bit tensors' format
  int64_t n = 0;
  const void* dout = nullptr;
  const void* gate = nullptr;
  const void* up = nullptr;
  void* dgate = nullptr;
  void* dup = nullptr;
};

// gpt-oss's expert activation over interleaved pairs (gate at even columns, up at odd):
// gate_up [N, 2W] bf16 -> out [N, W] bf16 = (u + 1) * g * sigmoid(alpha * g) with
// g = min(gate, limit), u = clamp(up, -limit, limit) (transformers' GptOssExperts).
struct ClampedSwiGluParams {
  DType dtype = DType::kBf16;  // the 16-bit tensors' format
  int64_t n = 0, width = 0;    // rows N, output width W
  float alpha = 1.702f, limit = 7.0f;
  const void* gate_up = nullptr;
  void* out = nullptr;
};
// dgate_up [N, 2W] bf16 = (written, not accumulated) the gradient from dout [N, W] bf16; zero
// where a clamp holds the value (gate > limit; |up| > limit), as torch's clamp backward.
struct ClampedSwiGluBackwardParams {
  DType dtype = DType::kBf16;
  int64_t n = 0, width = 0;
  float alpha = 1.702f, limit = 7.0f;
  const void* dout = nullptr;
  const void* gate_up = nullptr;
  void* dgate_up = nullptr;
};

// Attention sinks (gpt-oss): one learned logit per head joins every row's softmax and carries no
// value. Applied after AttentionForward / CachedAttentionForward on their out and lse: lse
// [B, H, T] fp32 becomes logaddexp(lse, sinks[h]) and out [B, T, H, hd] bf16 is scaled by
// exp(lse_before - lse_after) (one rounding). AttentionBackward then takes both as they are: its
// probabilities exp(s - lse) are the sink softmax's and D = rowsum(dout * out) the sink model's.
// sinks [H] in `dtype` (the unit's weights).
struct AttentionSinkParams {
  DType dtype = DType::kBf16;
  int64_t b = 0, t = 0, heads = 0, head_dim = 0;
  const void* sinks = nullptr;
  void* out = nullptr;
  float* lse = nullptr;
};
// dsinks [H] fp32 += -sum over b, t of exp(sinks[h] - lse[b, h, t]) * sum_d dout * out, from the
// sink-adjusted out and lse; dout, out [B, T, H, hd] bf16. Deterministic (a fixed order of sums).
struct AttentionSinkBackwardParams {
  DType dtype = DType::kBf16;
  int64_t b = 0, t = 0, heads = 0, head_dim = 0;
  const void* sinks = nullptr;
  const void* out = nullptr;
  const void* dout = nullptr;
  const float* lse = nullptr;
  float* dsinks = nullptr;
};

// cos, sin [T, half] fp32 for positions 0 .. T-1 from inv_freq [half] fp32 (device memory), each
// multiplied by `scale` (YaRN's attention factor; 1 otherwise).
struct RopeTablesParams {
  int64_t t = 0, half = 0;
  float scale = 1.0f;
  const float* inv_freq = nullptr;
  float* cos = nullptr;
  float* sin = nullptr;
};

// out, inp [B, T, NH, head_dim] bf16 (out may alias inp); cos, sin [T, head_dim / 2] fp32.
struct RopeParams {
  DType dtype = DType::kBf16;  // the 16-bit tensors' format
  int64_t b = 0, t = 0, nh = 0, head_dim = 0;
  const float* cos = nullptr;
  const float* sin = nullptr;
  const void* inp = nullptr;
  void* out = nullptr;
};
// dinp [B, T, NH, head_dim] bf16 += R^T dout.
struct RopeBackwardParams {
  DType dtype = DType::kBf16;  // the 16-bit tensors' format
  int64_t b = 0, t = 0, nh = 0, head_dim = 0;
  const float* cos = nullptr;
  const float* sin = nullptr;
  const void* dout = nullptr;
  void* dinp = nullptr;
};

// Causal GQA attention (worker/kernels/cpu/attention.h): q [B, T, H, hd], k, v [B, T, KV, hd],
// out [B, T, H, hd] bf16; lse [B, H, T] fp32 (saved). REQUIRES: H % KV == 0; window 0 = full.
struct AttentionShapeParams {
  int64_t b = 0, t = 0, heads = 0, kv_heads = 0, head_dim = 0, window = 0;
};
struct AttentionParams {
  DType dtype = DType::kBf16;  // the 16-bit tensors' format
  AttentionShapeParams shape;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  float* lse = nullptr;
};
// Attention of new queries over a key/value cache (incremental decoding): q [B, T, H, hd] are
// positions [start, start + T) of their sequences; k, v [B, capacity, KV, hd] hold positions
// [0, start + T) (the new rows already written); out [B, T, H, hd] bf16; lse [B, H, T] fp32 or
// nullptr. Causal (and windowed) by absolute position, as AttentionParams. With start = 0 and
// capacity = T it computes what AttentionParams does, and on the CPU backend every row is bitwise
// the row AttentionForward gives for the same position over the same keys (window 0; with a
// window the key tiles start elsewhere). REQUIRES: start + T <= capacity; out aliases no input.
struct CachedAttentionParams {
  DType dtype = DType::kBf16;  // the 16-bit tensors' format
  AttentionShapeParams shape;  // t: the new queries
  int64_t start = 0, capacity = 0;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  float* lse = nullptr;
};
// dq, dk, dv bf16 += from dout, given the forward's inputs, out and lse.
struct AttentionBackwardParams {
  DType dtype = DType::kBf16;  // the 16-bit tensors' format
  AttentionShapeParams shape;
  const void* dout = nullptr;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* out = nullptr;
  const float* lse = nullptr;
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
};

// Which rows the mean and the backward's count cover. Unchunked (total_rows 0): the call's own N
// rows. Chunked (the LM head a chunk of tokens at a time, so that logits exist for one chunk
// only): the call computes rows [row0, row0 + N) of a microbatch of total_rows rows; its targets,
// losses and lse point at row row0 of the microbatch's arrays, which are readable from
// `targets - row0` for total_rows rows (losses too, for the mean).
struct CrossEntropyRows {
  int64_t row0 = 0;
  int64_t total_rows = 0;  // 0: unchunked; else REQUIRES row0 + N <= total_rows
};

// Softmax cross-entropy, mean over non-ignored rows: logits [N, V] (logits_type: fp32, bf16 or
// fp16), targets [N]
// int32 in [0, V) or kIgnoreIndex; losses [N], lse [N] fp32 (saved); mean_loss [1] fp32 (0 when
// every row is ignored) over the rows `rows` names, or nullptr (no mean: a chunk that is not the
// last; the last chunk's mean reads every earlier chunk's losses).
struct CrossEntropyParams {
  int64_t n = 0, v = 0;
  DType logits_type = DType::kFp32;
  const void* logits = nullptr;
  const int32_t* targets = nullptr;
  float* losses = nullptr;
  float* lse = nullptr;
  float* mean_loss = nullptr;
  CrossEntropyRows rows;
};
// dlogits [N, V] (logits_type) = (softmax - onehot) * dloss / count, written (not accumulated);
// may alias logits. count: the non-ignored rows among those `rows` names.
struct CrossEntropyBackwardParams {
  int64_t n = 0, v = 0;
  DType logits_type = DType::kFp32;
  const void* logits = nullptr;
  const float* lse = nullptr;
  const int32_t* targets = nullptr;
  float dloss = 1.0f;
  void* dlogits = nullptr;
  CrossEntropyRows rows;
};

// out [N] = a + b, bf16 (out may alias a or b).
struct ResidualParams {
  DType dtype = DType::kBf16;  // the 16-bit tensors' format
  int64_t n = 0;
  const void* a = nullptr;
  const void* b = nullptr;
  void* out = nullptr;
};

// out [N, C] = inp + bias [C], bf16 (out may alias inp); with fp32_rows, inp and out are fp32 (a
// GEMM's fp32 output: gpt-oss's router logits) and the bias `dtype`.
struct BiasAddParams {
  DType dtype = DType::kBf16;  // the 16-bit tensors' format
  int64_t n = 0, c = 0;
  bool fp32_rows = false;
  const void* inp = nullptr;
  const void* bias = nullptr;
  void* out = nullptr;
};
// dbias [C] fp32 += column sums of dout [N, C] (dout_type: fp32, bf16 or fp16).
struct BiasBackwardParams {
  int64_t n = 0, c = 0;
  DType dout_type = DType::kBf16;
  const void* dout = nullptr;
  float* dbias = nullptr;
};

// The optimizer ops (the `resident` schedule keeps fp32 master weights, Adam moments and gradients
// in device memory and updates them there).
//
// AdamW over one tensor of n elements, step `step` (1-based), with worker/optim/adamw.h's
// semantics (PyTorch's torch.optim.AdamW): g = grad * grad_scale; p *= 1 - lr * weight_decay
// (`decay` false: no decay); m, v updated; p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 -
// beta2^t) + eps); bf16_out = p rounded to out_type (bf16 or fp16; the name is historical) unless
// null. The per-step scalars are computed on the host
// in double and rounded to float once, as worker/optim does, so every backend gives the CPU
// optimizer's fused result bit for bit. master, m, v fp32 read and written; grad fp32; buffers must
// not overlap.
struct AdamWParams {
  int64_t n = 0;
  int64_t step = 1;
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  bool decay = true;
  float grad_scale = 1.0f;
  float* master = nullptr;
  float* m = nullptr;
  float* v = nullptr;
  const float* grad = nullptr;
  void* bf16_out = nullptr;
  DType out_type = DType::kBf16;
};

// Sums of squares of x fp32 [n] in double, for the global gradient norm. chunk == 0: *out (one
// double, device memory) += sum of x[i]^2 over [0, n). chunk > 0: per chunk, out[j] += sum over
// [j * chunk, min((j + 1) * chunk, n)) for j in [0, ceil(n / chunk)) (one op for a whole tensor's
// norm partials). The order within a sum is the backend's (double accumulators: backends differ
// only by double rounding, ~1e-16 relative); with chunks each chunk is summed by itself, so the
// CPU backend's chunk sums equal the CPU optimizer's and CUDA's are deterministic run to run.
struct SumSquaresParams {
  int64_t n = 0;
  const float* x = nullptr;
  double* out = nullptr;
  int64_t chunk = 0;
};

// LoRA dropout on [N, C] rows (worker/kernels/dropout_mask.h): element (row, col) is kept iff
// DropoutKeep(key, row_offset + row, col, p), and a kept one is scaled by 1 / (1 - p).
//   accumulate false (forward):  out [N, C] fp32 = kept ? inp * scale : 0; inp bf16, fp16, fp32
//   accumulate true (backward):  out [N, C] fp32 += kept ? inp * scale : 0 (the input gradient
//                                through the same mask); inp fp32
// REQUIRES 0 <= p < 1; inp and out do not overlap.
struct DropoutParams {
  int64_t n = 0, c = 0;
  DType inp_type = DType::kBf16;
  const void* inp = nullptr;
  float* out = nullptr;
  bool accumulate = false;
  float p = 0;
  uint64_t key = 0;
  int64_t row_offset = 0;
};

// A QLoRA base weight dequantised before its GEMM: out [n] (dst_type: bf16 or fp16) = the n
// values of the NF4 blob `src` (common/numeric/nf4.h: Nf4Bytes(n) bytes, 4-byte aligned, its
// fp32 parts in host byte order), each computed in fp32 exactly as numeric::DequantizeNf4 does
// and rounded once to nearest even. src and out do not overlap.
struct DequantizeNf4Params {
  int64_t n = 0;
  const void* src = nullptr;
  DType dst_type = DType::kBf16;
  void* out = nullptr;
};

// Each returns INVALID_ARGUMENT naming the op and the field unless the sizes are >= 0 (heads,
// head_dim, C and V > 0 where they divide or index), the pointers an op reads or writes for a
// non-empty shape are non-null, and the shape rules above hold.
absl::Status ValidateZero(const ZeroParams& p);
absl::Status ValidateCast(const CastParams& p);
absl::Status ValidateEmbedding(const EmbeddingParams& p);
absl::Status ValidateEmbeddingBackward(const EmbeddingBackwardParams& p);
absl::Status ValidateNorm(const NormParams& p);
absl::Status ValidateNormBackward(const NormBackwardParams& p);
absl::Status ValidateGelu(const GeluParams& p);
absl::Status ValidateGeluBackward(const GeluBackwardParams& p);
absl::Status ValidateSwiGlu(const SwiGluParams& p);
absl::Status ValidateSwiGluBackward(const SwiGluBackwardParams& p);
absl::Status ValidateClampedSwiGlu(const ClampedSwiGluParams& p);
absl::Status ValidateClampedSwiGluBackward(const ClampedSwiGluBackwardParams& p);
absl::Status ValidateAttentionSink(const AttentionSinkParams& p);
absl::Status ValidateAttentionSinkBackward(const AttentionSinkBackwardParams& p);
absl::Status ValidateRopeTables(const RopeTablesParams& p);
absl::Status ValidateRope(const RopeParams& p);
absl::Status ValidateRopeBackward(const RopeBackwardParams& p);
absl::Status ValidateAttention(const AttentionParams& p);
absl::Status ValidateCachedAttention(const CachedAttentionParams& p);
absl::Status ValidateAttentionBackward(const AttentionBackwardParams& p);
absl::Status ValidateCrossEntropy(const CrossEntropyParams& p);
absl::Status ValidateCrossEntropyBackward(const CrossEntropyBackwardParams& p);
absl::Status ValidateResidual(const ResidualParams& p);
absl::Status ValidateBiasAdd(const BiasAddParams& p);
absl::Status ValidateBiasBackward(const BiasBackwardParams& p);
// Also: step >= 1, finite lr >= 0, 0 <= beta < 1, eps > 0, weight_decay >= 0, finite grad_scale.
absl::Status ValidateAdamW(const AdamWParams& p);
absl::Status ValidateSumSquares(const SumSquaresParams& p);
absl::Status ValidateDropout(const DropoutParams& p);
absl::Status ValidateDequantizeNf4(const DequantizeNf4Params& p);

}  // namespace mobius::backend

#endif  // MOBIUS_WORKER_BACKEND_OP_PARAMS_H_
