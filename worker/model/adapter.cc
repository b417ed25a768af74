#include "worker/model/adapter.h"

namespace mobius::units {

const UnitAdapter::Module* UnitAdapter::Find(const std::string& weight) const {
  for (const Module& m : modules) {
    if (m.module.weight == weight) return &m;
  }
  return nullptr;
}

UnitAdapter MakeUnitAdapter(const LoraSpec& lora, int64_t unit) {
  UnitAdapter u;
  u.rank = lora.rank;
  u.scale = lora.scale;
  u.dropout = lora.dropout;
  for (size_t i = 0; i < lora.modules.size(); ++i) {
    const model::LoraModule& m = lora.modules[i];
    if (m.layer + 1 != unit) continue;
    UnitAdapter::Module um{m, u.num_elements, u.num_elements + lora.rank * m.in,
                           static_cast<int64_t>(i)};
    u.num_elements = um.b + m.out * lora.rank;
    u.modules.push_back(std::move(um));
  }
  return u;
}

}  // namespace mobius::units
