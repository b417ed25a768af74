#include "host/planner/lora.h"

#include <algorithm>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/numeric/nf4.h"
#include "common/run/unit_params.h"

namespace mobius::planner {
namespace {

// The store's grad-norm chunk (common/run/store_layout.h, kGradNormChunkElements); the planner
// does not link the runtime's layout, so the constant is repeated here.
constexpr int64_t kNormChunkElements = int64_t{1} << 16;

int64_t Chunks(int64_t elements) {
  return (elements + kNormChunkElements - 1) / kNormChunkElements;
}

// The matmul weights one token computes with: k / E of a mixture of experts' expert weights.
double MatmulElements(const model::ModelConfig& c, const model::LayerUnit& u) {
  double n = 0;
  for (const std::vector<model::ParamSpec>* list : {&u.params, &u.shared_params}) {
    for (const model::ParamSpec& p : *list) {
      if (p.role != model::ParamRole::kMatmulWeight) continue;
      n += static_cast<double>(p.num_elements) * (p.expert < 0 ? 1.0 : c.moe.RoutedShare());
    }
  }
  return n;
}

}  // namespace

int64_t LoraLayout::UnitParameters(int64_t unit) const {
  if (unit < 0 || unit >= static_cast<int64_t>(unit_modules.size())) return 0;
  return model::LoraParameters(unit_modules[unit], rank);
}

int64_t LoraLayout::Nf4Elements(int64_t unit) const {
  if (unit < 0 || unit >= static_cast<int64_t>(unit_nf4_elements.size())) return 0;
  return unit_nf4_elements[unit];
}

int64_t LoraLayout::BaseBytes(int64_t unit, int64_t base16_bytes) const {
  if (unit < 0 || unit >= static_cast<int64_t>(unit_nf4_elements.size())) return base16_bytes;
  return base16_bytes - 2 * unit_nf4_elements[unit] + unit_nf4_bytes[unit];
}

double Nf4DequantizeSeconds(int64_t elements, double memory_bytes_per_s) {
  if (!(memory_bytes_per_s > 0) || elements <= 0) return 0;
  return 2.5 * static_cast<double>(elements) / memory_bytes_per_s;
}


absl::StatusOr<LoraLayout> MakeLoraLayout(const model::ModelDescription& model,
                                          const LoraOptions& options) {
  LoraLayout l;
  l.rank = options.rank;
  l.target_modules = options.target_modules.empty() ? model::DefaultLoraTargets(model.config)
                                                    : options.target_modules;
  if (absl::Status s = model::ValidateLora(model.config, l.rank, l.target_modules, "lora.rank",
                                           "lora.target_modules");
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::vector<model::LoraModule>> modules =
      model::LoraModules(model.config, l.target_modules, "lora.target_modules");
  if (!modules.ok()) return modules.status();
  l.unit_modules.resize(model.units.size());
  for (model::LoraModule& m : *modules) {
    l.parameters += l.rank * (m.in + m.out);
    l.norm_chunks += Chunks(l.rank * m.in) + Chunks(m.out * l.rank);
    l.unit_modules.at(m.layer + 1).push_back(std::move(m));
  }
  if (options.base_nf4) {
    absl::StatusOr<std::vector<std::string>> names = units::Nf4BaseWeights(model.config);
    if (!names.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("lora.base: ", names.status().message()));
    }
    const std::set<std::string> nf4(names->begin(), names->end());
    l.base_nf4 = true;
    const size_t units = model.units.size();
    l.unit_nf4_elements.assign(units, 0);
    l.unit_nf4_bytes.assign(units, 0);
    l.unit_nf4_largest.assign(units, 0);
    for (size_t u = 0; u < units; ++u) {
      for (const model::ParamSpec& p : model.units[u].params) {
        if (nf4.count(p.name) == 0) continue;
        l.unit_nf4_elements[u] += p.num_elements;
        l.unit_nf4_bytes[u] += numeric::Nf4Bytes(p.num_elements);
        l.unit_nf4_largest[u] = std::max(l.unit_nf4_largest[u], p.num_elements);
      }
    }
  }
  return l;
}

model::UnitFlopsPerToken LoraUnitFlops(const model::ModelDescription& model, int64_t unit,
                                       int64_t seq_len, const LoraLayout& lora) {
  model::UnitFlopsPerToken out;
  const model::LayerUnit& u = model.units.at(unit);
  if (u.kind == model::UnitKind::kEmbedding) return out;  // a lookup; frozen: no scatter-add
  double adapters = 0;
  if (unit < static_cast<int64_t>(lora.unit_modules.size())) {
    for (const model::LoraModule& m : lora.unit_modules[unit]) {
      adapters += 2.0 * static_cast<double>(lora.rank * (m.in + m.out)) *
                  (m.routed() ? model.config.moe.RoutedShare() : 1.0);
    }
  }
  const double gemms = 2.0 * MatmulElements(model.config, u);
  const double attention = model::UnitAttentionForwardFlopsPerToken(model, unit, seq_len);
  out.forward_flops = gemms + attention + adapters;
  out.backward_flops = gemms + 2 * attention + 2 * adapters;
  return out;
}

double MlpOutputForwardFlops(const model::ModelDescription& model, int64_t unit,
                             const LoraLayout* lora) {
  const model::ParamSpec* out = model::MlpOutputProjection(model, unit);
  if (out == nullptr) return 0;
  double flops = 2.0 * static_cast<double>(out->num_elements);
  if (lora != nullptr && unit < static_cast<int64_t>(lora->unit_modules.size())) {
    for (const model::LoraModule& m : lora->unit_modules[unit]) {
      if (m.weight == out->name) flops += 2.0 * static_cast<double>(lora->rank * m.out);
    }
  }
  return flops;
}

int64_t LoraWeightBytes(int64_t base_parameter_bytes, int64_t adapter_parameters) {
  return base_parameter_bytes + 4 * adapter_parameters;
}

int64_t LoraGradientBytes(int64_t adapter_parameters) { return 4 * adapter_parameters; }

}  // namespace mobius::planner
