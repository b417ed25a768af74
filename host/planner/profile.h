// Per-unit profile of a model at a job's microbatch shape: what each layer unit costs in time and
// memory on one GPU. The planner's cost model and partitioners consume it; they never look at the
// model description again.
//
// Two sources are planned: ANALYTIC (here: FLOPs from common/model/layer_units.h divided by a
// device's peak FLOP/s times an efficiency factor) and MEASURED (later: a worker in profile mode,
// cached by model, shape and device). Both fill the same UnitProfile.
//
// Conventions: all bytes and seconds are for ONE microbatch of `shape` (microbatch_size sequences
// of seq_len tokens) unless the name says otherwise. bf16 weights (2 bytes/param); gradients in
// the dtype the runtime accumulates and offloads them in: fp32 (4 bytes/param) by default, because
// worker/runtime keeps fp32 gradient buffers on the device and copies them D2H as fp32
// (gradient_bytes_per_parameter below; 2 would model a bf16-gradient runtime).
//
// Link bandwidths come from the topology: they depend on where a GPU sits in the PCIe tree and who
// shares its uplink, so the cost model (cost_model.h) derives them. A measured profile may add
// measured copy rates (`links`); the cost model then uses the slower of the two.
//
// Pure; thread-safe.
#ifndef MOBIUS_HOST_PLANNER_PROFILE_H_
#define MOBIUS_HOST_PLANNER_PROFILE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/layer_units.h"
#include "common/run/measured_profile.h"  // MicrobatchShape
#include "host/planner/kernel_model.h"
#include "host/planner/lora.h"

namespace mobius::planner {

// What one GPU model can do. Peak numbers are dense (no 2:4 sparsity) bf16/fp16 tensor-core FLOP/s
// with fp32 accumulation, which is what our runtime's GEMMs use; GeForce cards run fp16 GEMMs with
// fp16 accumulation (torch.backends.cuda.matmul.allow_fp16_accumulation) at twice that rate.
//
// Two compute models (AnalyticProfile): FLAT, every unit at `efficiency` x peak (the default for
// presets without measurements), and the calibrated KERNEL model (kernel_model.h) when `kernels`
// is set (the RTX 4090 preset: calibrated on RoundPipe's per-layer timings, docs/planner.md).
struct DeviceSpec {
  std::string name;             // "RTX 3090"
  double peak_flops_per_s = 0;  // dense bf16/fp16, fp32 accumulate
  // Dense fp16 with fp16 accumulate; 0: the same as peak_flops_per_s (professional and datacenter
  // cards run both at one rate).
  double peak_fp16_accumulate_flops_per_s = 0;
  double efficiency = 0.5;      // flat model: fraction of peak a transformer layer reaches
  int64_t memory_bytes = 0;     // as CUDA reports totalGlobalMem
  double memory_bytes_per_s = 0;       // nominal DRAM bandwidth; 0 unknown
  // NF4 values one dequantise kernel turns into 16-bit per second (a QLoRA base, lora.h); 0: from
  // memory_bytes_per_s at 2.5 bytes per value. A calibration sets it where the kernel is not
  // bandwidth-bound (the CPU backend: bench/pipeline's calibration measures it).
  double nf4_dequantize_values_per_s = 0;
  std::optional<KernelModel> kernels;  // the calibrated model; needs memory_bytes_per_s
  // Full-duplex degradation of the GPU's host link (sim/engine.h): each direction's rate while
  // the other direction also copies, as a fraction of its rate alone. 1 = ideal full duplex.
  double host_link_duplex_factor = 1.0;

  double effective_flops_per_s() const { return peak_flops_per_s * efficiency; }
  // The GEMM peak for a job's accumulation precision.
  double gemm_peak_flops_per_s(bool fp16_accumulate) const {
    return fp16_accumulate && peak_fp16_accumulate_flops_per_s > 0
               ? peak_fp16_accumulate_flops_per_s
               : peak_flops_per_s;
  }
  bool has_kernel_model() const { return kernels.has_value() && memory_bytes_per_s > 0; }
};

// Presets (sources: NVIDIA architecture whitepapers and datasheets; memory as CUDA reports it,
// matching test/data/topology/README.md):
//   RTX 3090   71 TFLOPS  (GA102 whitepaper, Appendix A: "Peak FP16 Tensor TFLOPS with FP32
//              Accumulate" 71; GeForce runs fp32-accumulate at half the fp16-accumulate rate), 24
//              GB
//   RTX 4090   165.2 TFLOPS (Ada Lovelace whitepaper, Appendix A, FP32 accumulate; 330.3 with FP16
//              accumulate), 24 GB, 1008 GB/s GDDR6X (21 Gbps x 384 bit). The calibrated profile
//              (docs/planner.md, "The calibrated model"): kernel model gemm_efficiency 0.70 (RoundPipe's
//              measured LM-head GEMM, 8192 tokens, fp16 accumulate: 0.700 of 330.3 for Llama-3.1-8B
//              and Qwen3-32B), elementwise passes 1.6 / 6.8 (fitted to RoundPipe's per-layer block
//              timings, worst error 3%); host link duplex factor 0.54 (design/mobius.md section 3:
//              H2D 11-16 GB/s while D2H runs, 24-26 GB/s alone on Gen4 hosts: 13.5 / 25).
//   RTX A6000  154.8 TFLOPS (datasheet: 309.7 with sparsity; professional cards run fp32 accumulate
//              at full rate), 48 GB
//   H100 SXM5  989.4 TFLOPS (H100 datasheet, bf16 dense; 1979 with sparsity), 80 GB
//   H200 SXM   989.4 TFLOPS (same GH100 die and clocks), 141 GB; ~790 measured on large bf16 GEMMs
//              (design/mobius.md section 3), i.e. efficiency <= 0.8 even for pure GEMM.
// Efficiency (flat model) defaults to 0.5 for all (a typical end-to-end model FLOP utilisation for a
// decoder layer with attention, norms and elementwise work); override it per job or from
// measurements. Only the RTX 4090 carries the calibrated kernel model (the others have no
// per-layer measurements to calibrate on).
DeviceSpec Rtx3090Spec();
DeviceSpec Rtx4090Spec();
DeviceSpec RtxA6000Spec();
DeviceSpec H100Spec();
DeviceSpec H200Spec();

// The preset whose model name occurs in a CUDA/NVML GPU name ("NVIDIA GeForce RTX 3090" -> RTX
// 3090), or nullopt. When `memory_bytes` > 0 (what the topology reports) it replaces the preset's.
std::optional<DeviceSpec> DeviceSpecForGpuName(const std::string& gpu_name,
                                               uint64_t memory_bytes = 0);

// One layer unit at one microbatch shape. In LoRA mode (Profile::lora, lora.h) the base is frozen:
// parameter_bytes = bf16 base + 4 x the unit's adapter parameters (fp32 adapters, uploaded with the
// weights), gradient_bytes = 4 x its adapter parameters (no base gradients), and the backward
// computes input gradients only (plus the adapters').
struct UnitProfile {
  double forward_seconds = 0;
  // Backward with full recompute: the unit's forward is run again from the stage's input
  // checkpoint, then its backward (~2x forward FLOPs): ~3x forward in total.
  double backward_seconds = 0;
  int64_t parameter_bytes = 0;  // bf16 copy that must be resident (tied head: + the embedding)
  // Gradients accumulated on the GPU during backward and offloaded once per step (D2H), in the
  // profile's gradient dtype (fp32 by default: parameter elements x 4).
  int64_t gradient_bytes = 0;
  int64_t boundary_bytes =
      0;  // the unit's input (stage-boundary checkpoint if a stage starts here)
  int64_t saved_activation_bytes = 0;  // kept for the unit's backward beyond its input (recomputed)
  int64_t workspace_bytes = 0;  // transient buffers while the unit runs (not summed over units)
};

// An NF4 base (lora.h): the unit's dequantises added to its pass times, one in the forward, one
// (two with recompute) in the backward, at the device's dequantise rate. No-op with a 16-bit base
// or an unknown rate and bandwidth.
void AddNf4Dequantize(const LoraLayout& lora, int64_t unit, const DeviceSpec& device,
                      bool recompute, UnitProfile& up);

// Measured copy rates of the slowest measured device (measured profiles only), bytes/s per
// direction: alone, with the other direction busy (duplex), and while `group_size` devices of a
// contention group copy the same direction at once.
struct LinkProfile {
  double h2d_bytes_per_s = 0, d2h_bytes_per_s = 0;
  double duplex_h2d_bytes_per_s = 0, duplex_d2h_bytes_per_s = 0;
  int group_size = 1;
  double group_h2d_bytes_per_s = 0, group_d2h_bytes_per_s = 0;
};

struct Profile {
  std::string source;  // "analytic" or "measured" (measured_profile.h)
  std::string device;  // DeviceSpec::name, or the measured device ("cpu", "cuda:0 NVIDIA ...")
  // Analytic profiles: "kernel model" (calibrated, kernel_model.h) or "flat 0.50" (efficiency).
  std::string compute_model;
  bool fp16_accumulate = false;  // analytic: the GEMM peak is the fp16-accumulate one
  // Measured profiles: the units' 16-bit format they were measured in (MeasuredProfile::precision);
  // empty for analytic ones (made for the job's own dtype).
  std::string precision;
  MicrobatchShape shape;
  int64_t gradient_bytes_per_parameter = 4;  // 4 = fp32 (the runtime), 2 = bf16
  std::vector<UnitProfile> units;  // one per model unit, in execution order
  std::optional<LinkProfile> links;  // measured profiles with link measurements
  // LoRA (lora.h): the adapters of a frozen base; unset: full fine-tuning. The CPU optimizer then
  // updates lora->parameters, and the host keeps the base once in bf16 (estimator.h).
  std::optional<LoraLayout> lora;

  double ForwardSeconds(int begin, int end) const;  // sum over units [begin, end)
  double BackwardSeconds(int begin, int end) const;
  int64_t ParameterBytes(int begin, int end) const;
  int64_t MaxWorkspaceBytes() const;
};

// How a stage's device memory is counted (cost_model.h, "memory").
enum class MemoryModel {
  kRuntime,  // worker/runtime's allocations: 2 (W + G) + unit inputs; one workspace, reserved
  kTwoSlot,  // 2 x (W + G + every unit's input and saved activations); the published systems
};

struct AnalyticOptions {
  model::ActivationOptions activations;  // bf16 activations, flash attention, fp32 logits
  bool recompute = true;  // backward re-runs the forward (Mobius keeps only checkpoints)
  // Our runtime's recompute leaves out each block's MLP output projection (its output is never
  // read by the backward; worker/model/block_runner.cc): the recompute is charged without it.
  // false: the whole forward again (the published systems' setups, api/published.cc).
  bool recompute_skips_mlp_output = true;
  // Gradient dtype on the GPU and over D2H: 4 = fp32, what worker/runtime does (fp32 gradient
  // buffers, one fp32 D2H copy per stage); 2 = bf16 gradients (the paper's accounting).
  int64_t gradient_bytes_per_parameter = 4;
  int64_t library_workspace_bytes = int64_t{64} << 20;  // cuBLAS/cuDNN workspace
  // GEMMs accumulate in fp16 (fp16 weights; the published GeForce baselines set
  // torch.backends.cuda.matmul.allow_fp16_accumulation): the device's fp16-accumulate peak. Our
  // runtime computes in bf16 with fp32 accumulation (false).
  bool fp16_accumulate = false;
  // With fp16_accumulate: also the GEMMs whose outputs are fp32 in our runtime (every backward
  // GEMM, the LM head's logits) run at the fp16-accumulate peak, as in the published systems,
  // whose GEMMs are all fp16 (true); false: those run at the fp32-accumulate peak (our runtime's
  // fp16 mode, worker/model/linear.h; the flat model charges the backward's FLOPs at it).
  bool fp16_accumulate_fp32_outputs = true;
  // Our runtime's fp16 full fine-tuning (worker/model/linear.h half_backward): the blocks'
  // backward GEMMs write fp16 (at the job's accumulation peak, KernelDevice::half_backward has
  // what else it costs; the flat model charges the backward at the forward's rate) and their
  // workspace is the fp16 backward's (common/model/unit_workspace.h).
  bool half_backward = false;
  // Use the device's calibrated kernel model when it has one (DeviceSpec::kernels); false: the
  // flat efficiency model for every device.
  bool use_kernel_model = true;
  // LoRA (lora.h: MakeLoraLayout): the base frozen, the adapters trained; unset: full fine-tuning.
  std::optional<LoraLayout> lora;
  // kRuntime: workspace_bytes is the runtime's own (common/model/unit_workspace.h: the layout the
  // unit runners use, token-chunked head and MLP, + the adapters' part); kTwoSlot: the older
  // rule of thumb below (the published systems' setups).
  MemoryModel memory_model = MemoryModel::kRuntime;
};

// The ANALYTIC profile. Per unit at B x T tokens, flat model (peak = the job's accumulation
// precision's, DeviceSpec::gemm_peak_flops_per_s):
//   forward  = forward_flops_per_token * B * T / (peak * efficiency)
//   backward = (backward_flops_per_token + recompute ? forward : 0) * B * T / (peak * efficiency)
//              (recompute_skips_mlp_output: the recompute's forward less the MLP output GEMM)
// kernel model (device.has_kernel_model() and options.use_kernel_model): forward and backward of
//   KernelUnitSeconds (kernel_model.h), backward + forward with recompute.
//   parameter bytes = UnitResidentParameterBytes (bf16); gradient bytes = the same elements x
//                      gradient_bytes_per_parameter
//   boundary / saved bytes   = UnitActivations(...) * B * T
//   workspace = library workspace + (kRuntime) model::MakeWorkspaceLayout(...).total, the unit
//               runners' own layout with the default token chunks, + with LoRA per adapted
//               module h [N, r] fp32, one gh, the dropped-out input of the widest module (fp32)
//               and the frozen norms' gradient sink (worker/model/unit_runner_internal.h);
//               (kTwoSlot) 2 * B * T * max(C, I, boundary/token) * activation_bytes
//               (gradient buffers for the widest intermediate; the logits gradient reuses the
//               logits buffer counted in saved bytes)
// With options.lora: FLOPs from LoraUnitFlops (flat) or the kernel model's frozen-base form,
//   parameter bytes LoraWeightBytes, gradient bytes LoraGradientBytes (fp32 adapters whatever
//   gradient_bytes_per_parameter says; lora.h), Profile::lora set. Activations and workspace as
//   in full fine-tuning (an adapter's [T, r] intermediate is not counted: r / C of a hidden state).
// INVALID_ARGUMENT for a non-positive shape, a device without peak FLOP/s, or a gradient size
// other than 2 or 4 bytes.
// The runtime's workspace of unit `unit` at `shape` (the kRuntime workspace above, without the
// library workspace); `lora` may be null.
int64_t RuntimeWorkspaceBytes(const model::ModelDescription& model, int64_t unit,
                              const MicrobatchShape& shape, const LoraLayout* lora,
                              bool half_backward = false);

absl::StatusOr<Profile> AnalyticProfile(const model::ModelDescription& model,
                                        const MicrobatchShape& shape, const DeviceSpec& device,
                                        const AnalyticOptions& options = {});

}  // namespace mobius::planner

#endif  // MOBIUS_HOST_PLANNER_PROFILE_H_
