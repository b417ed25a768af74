#include "host/planner/profile.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/model/unit_workspace.h"

namespace mobius::planner {
namespace {

constexpr int64_t kKiB = 1024;
constexpr double kTera = 1e12;

DeviceSpec Spec(std::string name, double tflops, int64_t memory_bytes) {
  DeviceSpec d;
  d.name = std::move(name);
  d.peak_flops_per_s = tflops * kTera;
  d.memory_bytes = memory_bytes;
  return d;
}

}  // namespace

// Memory sizes: cudaDeviceProp.totalGlobalMem as in the topology fixtures (KiB figures), H200 as
// nvidia-smi reports it (143771 MiB).
DeviceSpec Rtx3090Spec() {
  DeviceSpec d = Spec("RTX 3090", 71.0, 24850752 * kKiB);
  d.peak_fp16_accumulate_flops_per_s = 142.0 * kTera;  // GA102 whitepaper, fp16 accumulate
  return d;
}
DeviceSpec Rtx4090Spec() {
  DeviceSpec d = Spec("RTX 4090", 165.2, 24791360 * kKiB);
  d.peak_fp16_accumulate_flops_per_s = 330.3 * kTera;
  d.memory_bytes_per_s = 1008e9;
  d.kernels = KernelModel{};  // the calibrated defaults (kernel_model.h, docs/planner.md)
  d.host_link_duplex_factor = 0.54;
  return d;
}
DeviceSpec RtxA6000Spec() { return Spec("RTX A6000", 154.8, 49853760 * kKiB); }
DeviceSpec H100Spec() { return Spec("H100", 989.4, 83025152 * kKiB); }
DeviceSpec H200Spec() { return Spec("H200", 989.4, int64_t{143771} << 20); }

std::optional<DeviceSpec> DeviceSpecForGpuName(const std::string& gpu_name, uint64_t memory_bytes) {
  // Longest names first so that "RTX A6000" is not taken for something shorter.
  const DeviceSpec presets[] = {RtxA6000Spec(), Rtx3090Spec(), Rtx4090Spec(), H200Spec(),
                                H100Spec()};
  const std::string lower = absl::AsciiStrToLower(gpu_name);
  for (const DeviceSpec& p : presets) {
    if (lower.find(absl::AsciiStrToLower(p.name)) == std::string::npos) continue;
    DeviceSpec d = p;
    if (memory_bytes > 0) d.memory_bytes = static_cast<int64_t>(memory_bytes);
    return d;
  }
  return std::nullopt;
}

double Profile::ForwardSeconds(int begin, int end) const {
  double s = 0;
  for (int u = begin; u < end; ++u) s += units[u].forward_seconds;
  return s;
}

double Profile::BackwardSeconds(int begin, int end) const {
  double s = 0;
  for (int u = begin; u < end; ++u) s += units[u].backward_seconds;
  return s;
}

int64_t Profile::ParameterBytes(int begin, int end) const {
  int64_t b = 0;
  for (int u = begin; u < end; ++u) b += units[u].parameter_bytes;
  return b;
}

int64_t Profile::MaxWorkspaceBytes() const {
  int64_t w = 0;
  for (const UnitProfile& u : units) w = std::max(w, u.workspace_bytes);
  return w;
}

void AddNf4Dequantize(const LoraLayout& lora, int64_t unit, const DeviceSpec& device,
                      bool recompute, UnitProfile& up) {
  const int64_t values = lora.Nf4Elements(unit);
  const double once =
      device.nf4_dequantize_values_per_s > 0
          ? static_cast<double>(values) / device.nf4_dequantize_values_per_s
          : Nf4DequantizeSeconds(values, device.memory_bytes_per_s);
  up.forward_seconds += once;
  up.backward_seconds += once * (recompute ? 2 : 1);
}

int64_t RuntimeWorkspaceBytes(const model::ModelDescription& model, int64_t unit,
                              const MicrobatchShape& shape, const LoraLayout* lora,
                              bool half_backward) {
  const model::ModelConfig& c = model.config;
  const model::WorkspaceLayout ws =
      model::MakeWorkspaceLayout(c, model.units[unit].kind, shape.microbatch_size, shape.seq_len,
                                 /*chunk_tokens=*/0, half_backward && lora == nullptr);
  int64_t bytes = static_cast<int64_t>(ws.total);
  if (lora == nullptr) return bytes;
  const int64_t n = shape.tokens();
  const std::vector<model::LoraModule>& modules = lora->unit_modules[unit];
  int64_t widest = 0;  // the dropped-out input, should the job set a dropout
  for (const model::LoraModule& m : modules) {
    const bool mlp = m.in_mlp() && ws.mlp_rows > 0;
    widest = std::max(widest, (mlp ? ws.mlp_rows : n) * m.in);
  }
  if (!modules.empty()) {
    const model::LoraStateSlots slots =
        model::AssignLoraStateSlots(modules, c.moe.experts_per_token);
    bytes += 4 * n * lora->rank * (slots.count + slots.scratch) + 4 * widest;
  }
  bytes += 8 * std::max(c.hidden_size, c.head_dim);  // the frozen norms' gradient sink
  // An NF4 base: the unit's largest weight dequantised to 16 bits (64-byte aligned).
  const int64_t largest = unit < static_cast<int64_t>(lora->unit_nf4_largest.size())
                              ? lora->unit_nf4_largest[unit]
                              : 0;
  if (largest > 0) bytes = (bytes + 63) / 64 * 64 + (2 * largest + 63) / 64 * 64;
  return bytes;
}

absl::StatusOr<Profile> AnalyticProfile(const model::ModelDescription& model,
                                        const MicrobatchShape& shape, const DeviceSpec& device,
                                        const AnalyticOptions& options) {
  if (shape.microbatch_size <= 0 || shape.seq_len <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("microbatch shape must be positive (got microbatch_size ",
                     shape.microbatch_size, ", seq_len ", shape.seq_len, ")"));
  }
  if (!(device.effective_flops_per_s() > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("device spec '", device.name, "' needs positive peak FLOP/s and efficiency"));
  }
  if (options.gradient_bytes_per_parameter != 2 && options.gradient_bytes_per_parameter != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("gradient_bytes_per_parameter must be 2 (bf16) or 4 (fp32) (got ",
                     options.gradient_bytes_per_parameter, ")"));
  }
  const double tokens = static_cast<double>(shape.tokens());
  const double rate =
      device.gemm_peak_flops_per_s(options.fp16_accumulate) * device.efficiency;
  const bool kernel_model = options.use_kernel_model && device.has_kernel_model();
  KernelDevice kd;
  kd.gemm_peak_flops_per_s = device.gemm_peak_flops_per_s(options.fp16_accumulate);
  kd.attention_peak_flops_per_s = device.peak_flops_per_s;
  if (!options.fp16_accumulate_fp32_outputs) {
    kd.fp32_output_gemm_peak_flops_per_s = device.gemm_peak_flops_per_s(false);
  }
  kd.half_backward = options.half_backward;
  const double backward_rate =
      options.fp16_accumulate_fp32_outputs || options.half_backward
          ? rate
          : device.gemm_peak_flops_per_s(false) * device.efficiency;
  kd.memory_bytes_per_s = device.memory_bytes_per_s;
  const model::ModelConfig& c = model.config;
  const int64_t widest = std::max(c.hidden_size, c.intermediate_size);

  Profile p;
  p.source = "analytic";
  p.device = device.name;
  p.shape = shape;
  p.gradient_bytes_per_parameter = options.gradient_bytes_per_parameter;
  p.fp16_accumulate = options.fp16_accumulate;
  p.compute_model =
      kernel_model ? "kernel model" : absl::StrFormat("flat %.2f", device.efficiency);
  p.lora = options.lora;
  p.units.reserve(model.units.size());
  for (int64_t u = 0; u < model.num_units(); ++u) {
    const model::LayerUnit& unit = model.units[u];
    const model::UnitFlopsPerToken flops =
        options.lora ? LoraUnitFlops(model, u, shape.seq_len, *options.lora)
                     : model::UnitFlops(model, u, shape.seq_len);
    const model::UnitActivationBytes act = model::UnitActivations(model, u, options.activations);
    UnitProfile up;
    if (kernel_model) {
      const UnitSeconds k =
          KernelUnitSeconds(model, u, shape.tokens(), shape.seq_len, kd, *device.kernels,
                            options.activations, options.lora ? &*options.lora : nullptr);
      up.forward_seconds = k.forward;
      up.backward_seconds =
          k.backward + (options.recompute ? k.forward - (options.recompute_skips_mlp_output
                                                             ? k.mlp_output
                                                             : 0.0)
                                          : 0.0);
    } else {
      up.forward_seconds = flops.forward_flops * tokens / rate;
      const double skipped =
          options.recompute_skips_mlp_output
              ? MlpOutputForwardFlops(model, u, options.lora ? &*options.lora : nullptr)
              : 0.0;
      const double recompute_flops = options.recompute ? flops.forward_flops - skipped : 0.0;
      up.backward_seconds =
          backward_rate == rate
              ? (flops.backward_flops + recompute_flops) * tokens / rate
              : flops.backward_flops * tokens / backward_rate + recompute_flops * tokens / rate;
    }
    up.parameter_bytes = model::UnitResidentParameterBytes(unit);
    up.gradient_bytes =
        model::UnitResidentParameterBytes(unit, options.gradient_bytes_per_parameter);
    if (options.lora) {
      const int64_t adapters = options.lora->UnitParameters(u);
      up.parameter_bytes =
          LoraWeightBytes(options.lora->BaseBytes(u, up.parameter_bytes), adapters);
      up.gradient_bytes = LoraGradientBytes(adapters);
      AddNf4Dequantize(*options.lora, u, device, options.recompute, up);
    }
    up.boundary_bytes = act.boundary_bytes_per_token * shape.tokens();
    up.saved_activation_bytes = act.SavedBytesPerToken(shape.seq_len) * shape.tokens();
    if (options.memory_model == MemoryModel::kRuntime) {
      up.workspace_bytes = options.library_workspace_bytes +
                           RuntimeWorkspaceBytes(model, u, shape,
                                                 options.lora ? &*options.lora : nullptr,
                                                 options.half_backward);
    } else {
      const int64_t width =
          std::max(widest * options.activations.activation_bytes, act.boundary_bytes_per_token);
      up.workspace_bytes = options.library_workspace_bytes + 2 * shape.tokens() * width;
    }
    p.units.push_back(up);
  }
  return p;
}

}  // namespace mobius::planner
