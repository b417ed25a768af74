#include "worker/model/adapter.h"

namespace mobius::units {

const UnitAdapter::Module* UnitAdapter::Find(const std::string& weight) const {
  auto it = by_weight.find(weight);
  return it == by_weight.end() ? nullptr : &modules[it->second];
}

UnitAdapter MakeUnitAdapter(const LoraSpec& lora, int64_t unit, int64_t experts_per_token) {
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
    u.by_weight[m.weight] = static_cast<int64_t>(u.modules.size());
    u.modules.push_back(std::move(um));
  }
  std::vector<model::LoraModule> modules;
  for (const UnitAdapter::Module& m : u.modules) modules.push_back(m.module);
  const model::LoraStateSlots slots = model::AssignLoraStateSlots(modules, experts_per_token);
  for (size_t i = 0; i < u.modules.size(); ++i) u.modules[i].h_slot = slots.first[i];
  u.h_slots = slots.count;
  u.gh_slots = slots.scratch;
  return u;
}

}  // namespace mobius::units
