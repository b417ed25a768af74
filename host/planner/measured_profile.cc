#include "host/planner/measured_profile.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace mobius::planner {

absl::StatusOr<Profile> MeasuredToProfile(const MeasuredProfile& m,
                                          const model::ModelDescription& model) {
  if (absl::Status s = ValidateMeasuredProfile(m); !s.ok()) return s;
  const std::string hash = ModelConfigHash(model.config);
  if (m.model_hash != hash || m.num_units != model.num_units()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the measured profile is for another model (hash ", m.model_hash, ", ",
                     m.num_units, " units; this model: hash ", hash, ", ", model.num_units(),
                     " units); profile this model (mobius-worker profile --model ...)"));
  }
  Profile p;
  p.source = "measured";
  p.precision = m.precision;
  p.device = m.device;
  p.shape = m.shape;
  int64_t params = 0, grads = 0;
  for (const model::LayerUnit& unit : model.units) {
    const char* kind = model::UnitKindName(unit.kind);
    const UnitKindMeasurement* k = m.Find(kind);
    if (k == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("field units: the measured profile has no \"",
                                                     kind, "\" entry (the model has unit ",
                                                     unit.index, " of that kind)"));
    }
    UnitProfile up;
    up.forward_seconds = k->forward_seconds;
    up.backward_seconds = k->backward_seconds;
    up.parameter_bytes = k->parameter_bytes;
    up.gradient_bytes = k->gradient_bytes;
    up.boundary_bytes = k->boundary_bytes;
    up.saved_activation_bytes = k->saved_activation_bytes;
    up.workspace_bytes = k->workspace_bytes;
    params += k->parameter_bytes;
    grads += k->gradient_bytes;
    p.units.push_back(up);
  }
  // Per bf16 parameter (2 bytes): 4 for fp32 gradients, 2 for bf16.
  p.gradient_bytes_per_parameter = params > 0 ? std::max<int64_t>(1, 2 * grads / params) : 4;
  if (!m.links.empty()) {
    // The slowest measured device: the pipeline runs at its pace.
    const LinkMeasurement* slow = &m.links.front();
    for (const LinkMeasurement& l : m.links) {
      if (l.h2d_bytes_per_s < slow->h2d_bytes_per_s) slow = &l;
    }
    p.links = LinkProfile{
        slow->h2d_bytes_per_s,        slow->d2h_bytes_per_s, slow->duplex_h2d_bytes_per_s,
        slow->duplex_d2h_bytes_per_s, slow->group_size,      slow->group_h2d_bytes_per_s,
        slow->group_d2h_bytes_per_s};
  }
  return p;
}

Profile LoraFromMeasuredProfile(Profile p, const model::ModelDescription& model,
                                const LoraLayout& lora) {
  const int64_t seq = p.shape.seq_len;
  for (int64_t u = 0; u < static_cast<int64_t>(p.units.size()); ++u) {
    UnitProfile& up = p.units[u];
    const model::UnitFlopsPerToken full = model::UnitFlops(model, u, seq);
    const model::UnitFlopsPerToken frozen = LoraUnitFlops(model, u, seq, lora);
    if (full.forward_flops > 0) {
      // The measured backward is the runtime's: its recompute leaves out the MLP output projection.
      up.backward_seconds *=
          (frozen.backward_flops + frozen.forward_flops - MlpOutputForwardFlops(model, u, &lora)) /
          (full.backward_flops + full.forward_flops - MlpOutputForwardFlops(model, u, nullptr));
      up.forward_seconds *= frozen.forward_flops / full.forward_flops;
    } else {
      up.backward_seconds = up.forward_seconds;
    }
    const int64_t adapters = lora.UnitParameters(u);
    up.parameter_bytes = LoraWeightBytes(lora.BaseBytes(u, up.parameter_bytes), adapters);
    up.gradient_bytes = LoraGradientBytes(adapters);
  }
  p.lora = lora;
  return p;
}

}  // namespace mobius::planner
