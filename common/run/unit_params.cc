#include "common/run/unit_params.h"

#include "absl/strings/str_cat.h"

namespace mobius::units {

const UnitParam* UnitParamLayout::Find(const std::string& name) const {
  for (const UnitParam& p : params) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

absl::StatusOr<UnitParamLayout> MakeUnitParamLayout(const model::ModelDescription& model,
                                                    int64_t unit_index) {
  if (unit_index < 0 || unit_index >= model.num_units()) {
    return absl::InvalidArgumentError(absl::StrCat("unit index ", unit_index, " outside [0, ",
                                                   model.num_units(), ")"));
  }
  constexpr int64_t kAlignElements = 32;
  const model::LayerUnit& unit = model.units[unit_index];
  UnitParamLayout layout;
  layout.unit_index = unit_index;
  auto add = [&](const model::ParamSpec& spec, bool shared) {
    layout.total_elements = (layout.total_elements + kAlignElements - 1) / kAlignElements *
                            kAlignElements;
    layout.params.push_back(
        {spec.name, spec.shape, spec.num_elements, layout.total_elements, shared});
    layout.total_elements += spec.num_elements;
  };
  for (const model::ParamSpec& spec : unit.params) add(spec, false);
  for (const model::ParamSpec& spec : unit.shared_params) add(spec, true);
  return layout;
}

}  // namespace mobius::units
