// The calibrated kernel model: how long one layer unit's forward and backward take on a GPU, from
// the unit's GEMM shapes, its attention FLOPs and the activation bytes it touches, instead of one
// flat "fraction of peak" for everything. AnalyticProfile (profile.h) uses it when the device spec
// carries one (DeviceSpec::kernels; the RTX 4090 preset does). docs/planner.md, "The calibrated
// model", gives the derivation and the data.
//
// Per unit, for a microbatch of T tokens (B sequences of S tokens), activation bytes a (2):
//
//   forward  = sum over the unit's GEMMs of roofline(2 T K N,  a (T K + K N + T N))
//            + attention_flops(S) T / (peak_fp32acc x gemm_efficiency)
//            + elementwise_passes_forward x (boundary + saved activation bytes of the unit) T / bw
//   backward = sum over GEMMs of 2 x roofline(...)              (input and weight gradient)
//            + 2.5 x attention_flops(S) T / (peak_fp32acc x gemm_efficiency)
//            + elementwise_passes_backward x (boundary + saved activation bytes) T / bw
//   roofline(f, b) = max(f / (peak x gemm_efficiency), b / bw),   bw = memory_bytes_per_s x
//                    memory_efficiency
//
// GEMMs: every matmul weight the unit reads, [out N, in K] (the tied head's shared embedding
// included), with M = T rows. The roofline is the size dependence of the efficiency: a GEMM does
// T K N / (T K + K N + T N) FLOPs per byte moved over a, so with K, N = 4096 on an RTX 4090 (ridge
// 231 TFLOP/s / 907 GB/s = 255 FLOP/byte) it is memory-bound below ~300 tokens (decode-like
// shapes, tiny microbatches); at the shapes of the published fine-tuning runs (T >= 2048,
// K, N >= 1024) every GEMM is compute-bound and the per-token cost is flat. `peak` is the job's accumulation precision's (fp16 accumulate on GeForce is twice
// fp32 accumulate); attention runs at the fp32-accumulate peak whatever the GEMMs use, because
// FlashAttention-2 accumulates in fp32 (and so do GEMMs with fp32 outputs where the device says so,
// KernelDevice::fp32_output_gemm_peak_flops_per_s). FlashAttention-2's backward runs five matmuls to the
// forward's two (it recomputes the scores): 2.5x the forward's attention FLOPs.
// Elementwise work (norms, RoPE, activation functions, residual adds, the loss) is memory-bound;
// it is charged as passes over the activations the unit keeps for its backward
// (model::UnitActivations: boundary + saved bytes per token).
//
// LoRA (lora.h; `lora` set): the base is frozen, so a GEMM's backward is its input gradient alone
// (1 x roofline instead of 2), the embedding has no backward, and each adapted module of the unit
// adds its two adapter GEMMs, x A^T [T, in] x [in, r] and h B^T [T, r] x [r, out], on the same
// roofline at the fp32-accumulate peak (they are fp32; at the ranks LoRA uses they are
// memory-bound, so the peak hardly matters), and twice that to the backward (dB, dh, dA, dx).
//
// Pure; thread-safe.
#ifndef MOBIUS_HOST_PLANNER_KERNEL_MODEL_H_
#define MOBIUS_HOST_PLANNER_KERNEL_MODEL_H_

#include <cstdint>

#include "common/model/layer_units.h"
#include "host/planner/lora.h"

namespace mobius::planner {

struct KernelModel {
  double gemm_efficiency = 0.70;     // achieved / peak on a large, compute-bound GEMM
  double memory_efficiency = 0.90;   // achieved / nominal DRAM bandwidth, streaming kernels
  double elementwise_passes_forward = 1.6;
  double elementwise_passes_backward = 6.8;
  double attention_backward_factor = 2.5;  // FlashAttention-2 backward / forward FLOPs
  // A mixture of experts as our runtime runs it (worker/model/moe_runner.cc), beyond its GEMMs'
  // rooflines: each expert GEMM is a call of its own over few rows, whose fixed cost (launch and
  // cuBLASLt set-up, a few microseconds on a current GPU; not calibrated) is charged per call;
  // each MoE block's forward and backward wait once for the host to read the experts' row
  // counts (a queue synchronisation: a host round trip plus the idle GPU's restart); the
  // token permutation (gather into expert order, the weighted combine, their backward and the
  // scatter-add) is memory traffic over the N k routed rows.
  double gemm_call_seconds = 5e-6;
  double host_sync_seconds = 20e-6;
};

// What the kernel model needs from a device.
struct KernelDevice {
  double gemm_peak_flops_per_s = 0;       // the job's accumulation precision
  double attention_peak_flops_per_s = 0;  // fp32 accumulate
  double memory_bytes_per_s = 0;          // nominal DRAM bandwidth
  // The GEMMs with fp32 outputs (every backward GEMM and the LM head's, whose logits are fp32)
  // in a runtime whose fp16 mode sums in fp16 only into fp16 outputs (ours, worker/model/
  // linear.h); 0: gemm_peak_flops_per_s for those too (the published systems' all-fp16 GEMMs).
  double fp32_output_gemm_peak_flops_per_s = 0;
  // Our runtime's fp16 backward (worker/model/linear.h half_backward: training.precision fp16,
  // full fine-tuning): a decoder block's backward GEMMs write fp16, so they run at
  // gemm_peak_flops_per_s, and add what the fp16 outputs cost: per weight and call the fp16 dW
  // added into the fp32 one (the GEMM writes 2 bytes per element in its roofline, the add reads
  // them and reads and writes the fp32 gradient: 2 + 8 more; an MLP weight's token chunks,
  // model::MlpChunkRows, sum into its fp16 scratch first, each after the first reading it back:
  // 2 bytes per element per further chunk), and the fp16 copy of an fp32 output gradient for the
  // attention and MLP output projections (4 + 2 bytes per element). A strided weight (GPT-2's
  // fused c_attn) keeps its fp32 dW. The removed roundings of fp32 input gradients are not
  // subtracted (they are inside the calibrated elementwise passes). The head's logits and input
  // gradient are fp16 too (its forward, dX and dW GEMMs at gemm_peak_flops_per_s), its fp16 dW
  // added into the fp32 one once per token chunk (model::HeadChunkRows; 2 + 8 bytes per element,
  // through blocks of vocabulary rows, common/model/unit_workspace.h head_dw_rows).
  bool half_backward = false;
};

struct UnitSeconds {
  double forward = 0;
  double backward = 0;  // without recompute (the caller adds the forward for recompute)
  // The part of `forward` a backward's recompute leaves out in our runtime: the MLP output
  // projection's GEMM (and its adapter's h B^T), whose output the backward never reads.
  double mlp_output = 0;
};

// One unit, one microbatch of `tokens` tokens of sequences of `seq_len`.
// REQUIRES: the device's rates > 0, tokens > 0, 0 <= unit < model.num_units().
UnitSeconds KernelUnitSeconds(const model::ModelDescription& model, int64_t unit, int64_t tokens,
                              int64_t seq_len, const KernelDevice& device,
                              const KernelModel& kernels,
                              const model::ActivationOptions& activations = {},
                              const LoraLayout* lora = nullptr);

}  // namespace mobius::planner

#endif  // MOBIUS_HOST_PLANNER_KERNEL_MODEL_H_
