#include "common/run/unit_params.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/model/lora.h"
#include "common/numeric/nf4.h"
#include "common/status_macros.h"

namespace mobius::units {

const UnitParam* UnitParamLayout::Find(const std::string& name) const {
  for (const UnitParam& p : params) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

absl::StatusOr<std::vector<std::string>> Nf4BaseWeights(const model::ModelConfig& config) {
  MOBIUS_ASSIGN_OR_RETURN(std::vector<model::LoraModule> modules,
                          model::LoraModules(config, model::LoraTargetNames(config)));
  std::vector<std::string> names;
  for (const model::LoraModule& m : modules) {
    if (m.in_out) {
      return absl::InvalidArgumentError(absl::StrCat(
          "an NF4 base needs nn.Linear weights [out, in]; ", m.weight,
          " is a Conv1D weight [in, out] (model family of GPT-2): use a bf16 base"));
    }
    names.push_back(m.weight);
  }
  return names;
}

absl::StatusOr<UnitParamLayout> MakeUnitParamLayout(const model::ModelDescription& model,
                                                    int64_t unit_index, bool nf4_base) {
  if (unit_index < 0 || unit_index >= model.num_units()) {
    return absl::InvalidArgumentError(absl::StrCat("unit index ", unit_index, " outside [0, ",
                                                   model.num_units(), ")"));
  }
  std::set<std::string> nf4;
  if (nf4_base) {
    MOBIUS_ASSIGN_OR_RETURN(std::vector<std::string> names, Nf4BaseWeights(model.config));
    nf4.insert(names.begin(), names.end());
  }
  constexpr int64_t kAlignElements = 32;
  const model::LayerUnit& unit = model.units[unit_index];
  UnitParamLayout layout;
  layout.unit_index = unit_index;
  auto add = [&](const model::ParamSpec& spec, bool shared) {
    layout.total_elements = (layout.total_elements + kAlignElements - 1) / kAlignElements *
                            kAlignElements;
    const bool q = nf4.count(spec.name) > 0;
    const int64_t slots = q ? (numeric::Nf4Bytes(spec.num_elements) + 1) / 2 : spec.num_elements;
    layout.params.push_back(
        {spec.name, spec.shape, spec.num_elements, layout.total_elements, shared, q, slots});
    layout.total_elements += slots;
    if (q) layout.nf4_scratch_elements = std::max(layout.nf4_scratch_elements, spec.num_elements);
  };
  for (const model::ParamSpec& spec : unit.params) add(spec, false);
  for (const model::ParamSpec& spec : unit.shared_params) add(spec, true);
  return layout;
}

}  // namespace mobius::units
