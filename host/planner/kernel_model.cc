#include "host/planner/kernel_model.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/model/family.h"
#include "common/model/unit_workspace.h"

namespace mobius::planner {
namespace {

// Seconds of one GEMM of `flops` that moves `bytes` (operands read once, result written once): the
// slower of the tensor cores and the DRAM.
double Roofline(double flops, double bytes, double flops_per_s, double bytes_per_s) {
  return std::max(flops / flops_per_s, bytes / bytes_per_s);
}

void AddGemms(const std::vector<model::ParamSpec>& params, std::vector<model::ParamSpec>* out) {
  for (const model::ParamSpec& p : params) {
    if (p.role == model::ParamRole::kMatmulWeight && p.shape.size() == 2) out->push_back(p);
  }
}

}  // namespace

UnitSeconds KernelUnitSeconds(const model::ModelDescription& model, int64_t unit, int64_t tokens,
                              int64_t seq_len, const KernelDevice& device,
                              const KernelModel& kernels,
                              const model::ActivationOptions& activations, const LoraLayout* lora) {
  const model::LayerUnit& u = model.units.at(unit);
  const double t = static_cast<double>(tokens);
  const double a = static_cast<double>(activations.activation_bytes);
  const double gemm_rate = device.gemm_peak_flops_per_s * kernels.gemm_efficiency;
  const double fp32_output_rate =
      (device.fp32_output_gemm_peak_flops_per_s > 0 ? device.fp32_output_gemm_peak_flops_per_s
                                                    : device.gemm_peak_flops_per_s) *
      kernels.gemm_efficiency;
  const double attention_rate = device.attention_peak_flops_per_s * kernels.gemm_efficiency;
  const double bw = device.memory_bytes_per_s * kernels.memory_efficiency;

  std::vector<model::ParamSpec> gemms;
  AddGemms(u.params, &gemms);
  AddGemms(u.shared_params, &gemms);
  const model::ParamSpec* mlp_output = model::MlpOutputProjection(model, unit);
  const bool half_backward = device.half_backward && u.kind == model::UnitKind::kDecoderBlock;
  const bool half_head = device.half_backward && u.kind == model::UnitKind::kHead;
  const int64_t inter = model.config.intermediate_size;
  const double mlp_chunks = std::ceil(
      t / static_cast<double>(model::MlpChunkRows(model.config, tokens, /*chunk_tokens=*/0)));
  const double head_chunks = std::ceil(
      t / static_cast<double>(model::HeadChunkRows(model.config, tokens, /*chunk_tokens=*/0)));
  const model::TensorNames& names = model::FamilyOf(model.config.family).tensors;
  const bool fused_qkv = names.block.qkv != nullptr;
  const std::string attention_output =
      absl::StrCat(".", names.block.o != nullptr ? names.block.o : "", ".weight");
  UnitSeconds s;
  const model::MoeConfig& moe = model.config.moe;
  for (const model::ParamSpec& g : gemms) {
    const double n = static_cast<double>(g.shape[0]);
    const double k = static_cast<double>(g.shape[1]);
    // An expert's GEMM runs over the tokens routed to it: k / E of them on average (a balanced
    // router), so its roofline is that of the smaller per-expert matrix.
    const double rows = g.expert < 0 ? t : t * moe.RoutedShare();
    const double flops = 2 * rows * k * n, bytes = a * (rows * k + k * n + rows * n);
    const double fp32_out = Roofline(flops, bytes, fp32_output_rate, bw);
    // The LM head's output is the fp32 logits (fp16 with the fp16 backward).
    const double half_out = Roofline(flops, bytes, gemm_rate, bw);
    const double one = u.kind == model::UnitKind::kHead && !half_head ? fp32_out : half_out;
    s.forward += one;
    if (g.expert >= 0) {  // its own call: forward; backward dX (and dW when trained)
      s.forward += kernels.gemm_call_seconds;
      s.backward += (lora != nullptr ? 1 : 2) * kernels.gemm_call_seconds;
    }
    if (mlp_output != nullptr && g.name == mlp_output->name) s.mlp_output += one;
    // dX = dY W and dW = dY^T X: the same FLOPs and traffic each; a frozen weight has no dW.
    if (half_head && lora == nullptr) {
      // fp16 dX and dW; the dW of each token chunk added into the fp32 gradient block by block
      // (2 + 8 bytes per element beyond the GEMM's write, once per chunk).
      s.backward += 2 * half_out + 10.0 * head_chunks * k * n / bw;
    } else if (half_backward && lora == nullptr) {
      const bool mlp = g.shape[0] == inter || g.shape[1] == inter;
      const bool strided = fused_qkv && !mlp && g.shape[0] != g.shape[1];  // c_attn [C, 3C]
      s.backward += half_out + (strided ? fp32_out : half_out);
      // The fp16 dW read and the fp32 one read and written (the GEMM writes it: its roofline),
      // once per call: an MLP weight's token chunks sum into their fp16 scratch first; each
      // chunk after the first reads it back (2 more bytes per element).
      if (!strided) s.backward += (10.0 + (mlp ? 2.0 * (mlp_chunks - 1) : 0.0)) * k * n / bw;
      // The attention and MLP output projections read the fp32 residual gradient: rounded first.
      const bool output_projection = (mlp_output != nullptr && g.name == mlp_output->name) ||
                                     absl::EndsWith(g.name, attention_output);
      if (output_projection) s.backward += 6.0 * t * n / bw;  // fp32 dy in, fp16 out
    } else {
      s.backward += (lora != nullptr ? 1 : 2) * fp32_out;
    }
  }
  if (lora != nullptr && unit < static_cast<int64_t>(lora->unit_modules.size())) {
    const double r = static_cast<double>(lora->rank);
    for (const model::LoraModule& m : lora->unit_modules[unit]) {
      const double in = static_cast<double>(m.in), out = static_cast<double>(m.out);
      // An expert's adapter sees its routed rows only.
      const double rows = m.routed() ? t * moe.RoutedShare() : t;
      const double adapter =
          Roofline(2 * rows * in * r, a * (rows * in + in * r + rows * r), attention_rate, bw) +
          Roofline(2 * rows * r * out, a * (rows * r + r * out + rows * out), attention_rate, bw);
      s.forward += adapter;
      s.backward += 2 * adapter;
      if (mlp_output != nullptr && m.weight == mlp_output->name) {
        s.mlp_output += Roofline(2 * t * r * out, a * (t * r + r * out + t * out), attention_rate, bw);
      }
    }
  }
  if (u.kind == model::UnitKind::kDecoderBlock && moe.IsMoeLayer(u.layer)) {
    // The permutation: gather (read and write the k copies), combine (read them, write the
    // output); backward: the routed rows' fp32 gradient written and read by the experts and the
    // scatter-add, the 16-bit copies read once more. And one host synchronisation each way.
    const double routed = t * static_cast<double>(moe.experts_per_token);
    const double c = static_cast<double>(model.config.hidden_size);
    s.forward += (3 * a * routed * c + a * t * c) / bw + kernels.host_sync_seconds;
    s.backward += (a * routed * c + 3 * 4 * routed * c + 8 * t * c) / bw +
                  kernels.host_sync_seconds;
  }
  const double attention =
      model::UnitAttentionForwardFlopsPerToken(model, unit, seq_len) * t / attention_rate;
  s.forward += attention;
  s.backward += kernels.attention_backward_factor * attention;

  const model::UnitActivationBytes act = model::UnitActivations(model, unit, activations);
  const double touched =
      static_cast<double>(act.boundary_bytes_per_token + act.SavedBytesPerToken(seq_len)) * t;
  s.forward += kernels.elementwise_passes_forward * touched / bw;
  s.backward += kernels.elementwise_passes_backward * touched / bw;
  // A frozen embedding has no backward: no scatter-add, and nothing before it needs a gradient.
  if (lora != nullptr && u.kind == model::UnitKind::kEmbedding) s.backward = 0;
  return s;
}

}  // namespace mobius::planner
