// Linear layers on Backend::Gemm for the unit runners: y = x W (+ b) in both weight layouts,
// through transposes only. Rows are contiguous ([N, in] and [N, out]); the weight may be a column
// slice of a wider one (GPT-2's fused c_attn [C, 3C]), hence its own row stride `ld`.
//   kInOut (GPT-2 Conv1D): W stored [in, out], row stride ld >= out;
//   kOutIn (nn.Linear):    W stored [out, in], ld == in.
// Internal to worker/model.
#ifndef MOBIUS_WORKER_MODEL_LINEAR_H_
#define MOBIUS_WORKER_MODEL_LINEAR_H_

#include <cstdint>

#include "absl/status/status.h"
#include "worker/backend/backend.h"

namespace mobius::units {

// A LoRA adapter on a linear (adapter.h): y += scale * (x A^T) B^T. A GPT-2 c_attn adapter is one
// module over the fused [C, Q + 2K] weight, read as three column slices: each slice gets its rows
// of B; the first slice computes h = x A^T (shared), the last adds the input gradient through A.
struct LoraTerm {
  const float* a = nullptr;  // [rank, in] fp32; nullptr: no adapter
  const float* b = nullptr;  // [out, rank] fp32: this slice's rows of B
  float* da = nullptr;       // fp32 gradients, A's and this slice's B's layout (backward)
  float* db = nullptr;
  int64_t rank = 0;
  float scale = 0;
  float* h = nullptr;   // [N, rank] fp32 workspace: x A^T, kept from forward to backward
  float* gh = nullptr;  // [N, rank] fp32 scratch: d(loss)/dh, accumulated over the slices
  bool first = true, last = true;
  // Dropout on x (PEFT's lora_dropout) when dropout > 0: the adapter sees xd = mask(x) / (1 - p)
  // in fp32 (backend::DropoutParams: key, row_offset), regenerated in the backward.
  float dropout = 0;
  uint64_t key = 0;
  int64_t row_offset = 0;
  float* xd = nullptr;  // [N, in] fp32 scratch
};

struct LinearWeight {
  bool in_out = false;       // kInOut (Conv1D) when true
  // The 16-bit format of w, bias and the input x (the run's precision: bf16 or fp16).
  backend::DType dtype = backend::DType::kBf16;
  // fp16 only: GEMMs whose output is fp16 sum in fp16 (GemmParams::half_accumulate).
  bool half_accumulate = false;
  // fp16 backward (training.precision fp16 without adapters; PyTorch autocast's order): every
  // backward GEMM reads fp16 operands and writes an fp16 result: an fp32 dy is first rounded into
  // dy_half [N, out]; the weight gradient of this call is computed into dw_half (fp16, the
  // weight's elements, contiguous) and added into the fp32 dw (Cast with accumulate), so each
  // microbatch's (or token chunk's) dW is rounded to fp16 once. A strided weight (a column slice of
  // GPT-2's fused c_attn) or no dw_half keeps the fp32-output dW GEMM. Both scratch buffers are
  // workspace (common/model/unit_workspace.h dy_half, dw_half).
  bool half_backward = false;
  void* dy_half = nullptr;
  void* dw_half = nullptr;
  // > 0 (kOutIn, a call of its own): the fp16 dW a block of this many output rows at a time,
  // dw_half holding dw_block_rows x in elements, each block added into its rows of the fp32 dw:
  // the LM head, whose whole fp16 dW would be vocabulary x hidden. 0: the whole weight at once.
  int64_t dw_block_rows = 0;
  // Token chunks of one call (the MLP's, unit_workspace.h): the fp16 dW of the first chunk is
  // written (beta 0), later chunks add into it in fp16 (beta 1) and the last adds it into the
  // fp32 dw: one rounding into the fp32 gradient per call, as an unchunked GEMM, instead of one
  // per chunk. Both true (the default): a call of its own.
  bool dw_half_first = true, dw_half_last = true;
  const void* w = nullptr;   // dtype device address (an NF4 blob's with nf4_elements > 0)
  int64_t ld = 0;            // row stride in elements
  // QLoRA's NF4 base (adapter base_quantization nf4; frozen, dw null): `w` is the weight's NF4
  // blob (common/numeric/nf4.h) of nf4_elements values in its stored layout, contiguous (ld as
  // for the unquantised weight). Each call that reads W first dequantises it into nf4_scratch
  // (nf4_elements of dtype, workspace) and runs its GEMMs over that: the results are those of the
  // dequantised 16-bit weight, bit for bit. 0: w holds dtype values.
  int64_t nf4_elements = 0;
  void* nf4_scratch = nullptr;
  const void* bias = nullptr;  // [out] dtype or nullptr
  float* dw = nullptr;       // fp32 gradient, same layout and ld as w (backward); nullptr: frozen
  float* dbias = nullptr;    // [out] fp32 or nullptr (backward)
  LoraTerm lora;
};

// y [N, out] (y_type: fp32 or w.dtype) = x [N, in] (w.dtype) * W (+ bias, added to y as it is), then the adapter's
// term added in fp32 and y rounded once more (PEFT's order: base output, + adapter).
absl::Status LinearForward(backend::Backend& be, backend::Queue& q, const LinearWeight& w,
                           const void* x, void* y, backend::DType y_type, int64_t n, int64_t in,
                           int64_t out);

// The adapter's h [N, r] = x A^T (xd A^T with dropout) alone, as LinearForward computes it: what
// the backward reads when a forward re-run for the backward skips the base GEMM itself (the MLP's
// down projection under token chunks, unit_runner.h). No-op without an adapter.
absl::Status LoraProjectInput(backend::Backend& be, backend::Queue& q, const LoraTerm& l,
                              const void* x, backend::DType x_type, int64_t n, int64_t in);

// dx [N, in] dx_type (= when !accumulate_dx, += otherwise; dx may be null: skipped);
// dW += x^T dy (in W's layout; skipped for a frozen W, dw null); dbias += column sums of dy;
// the adapter's: dB += scale dy^T h, dA += gh^T x, dx += gh A (gh = scale dy B); with dropout x
// is xd and the last term goes through the mask. dy [N, out] is dy_type (fp32 or w.dtype); x is
// w.dtype. dx_type is fp32, or (half_backward, no adapter) fp16: then a += sums in fp16 storage,
// as autograd adds the gradients of a tensor used twice.
absl::Status LinearBackward(backend::Backend& be, backend::Queue& q, const LinearWeight& w,
                            const void* x, const void* dy, backend::DType dy_type, void* dx,
                            backend::DType dx_type, bool accumulate_dx, int64_t n, int64_t in,
                            int64_t out);

}  // namespace mobius::units

#endif  // MOBIUS_WORKER_MODEL_LINEAR_H_
