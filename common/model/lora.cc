#include "common/model/lora.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/model/family.h"

namespace mobius::model {
namespace {

// The last component of a module path ("self_attn.q_proj" -> "q_proj").
std::string LastComponent(const char* path) {
  const std::string p(path);
  const size_t dot = p.rfind('.');
  return dot == std::string::npos ? p : p.substr(dot + 1);
}

struct ModuleSpec {
  std::string path;  // relative to the block
  int64_t in, out;
  int64_t expert = -1;
};

std::string LastComponent(const std::string& path) { return LastComponent(path.c_str()); }

// Block `layer`'s linear modules in block order, with their features. A block with experts has its
// experts' modules instead of the dense MLP's (expert by expert, HF's order); layer -1: the modules
// of any block, each name once.
std::vector<ModuleSpec> BlockModules(const ModelConfig& c, int64_t layer) {
  const BlockTensorNames& n = FamilyOf(c.family).tensors.block;
  const int64_t C = c.hidden_size, I = c.intermediate_size;
  const int64_t Q = c.num_heads * c.head_dim, K = c.num_kv_heads * c.head_dim;
  std::vector<ModuleSpec> out;
  auto add = [&](const char* path, int64_t in, int64_t o) {
    if (path != nullptr) out.push_back({path, in, o});
  };
  bool experts = false;
  for (int64_t l = layer < 0 ? 0 : layer; l < (layer < 0 ? c.num_layers : layer + 1); ++l) {
    experts = experts || c.moe.IsMoeLayer(l);
  }
  add(n.qkv, C, Q + 2 * K);
  add(n.q, C, Q);
  add(n.k, C, K);
  add(n.v, C, K);
  add(n.o, Q, C);
  bool dense = !c.moe.enabled();
  for (int64_t l = layer < 0 ? 0 : layer; l < (layer < 0 ? c.num_layers : layer + 1); ++l) {
    dense = dense || !c.moe.IsMoeLayer(l);
  }
  if (dense) {
    add(n.fc, C, I);
    add(n.proj, I, C);
    add(n.gate, C, I);
    add(n.up, C, I);
    add(n.down, I, C);
  }
  // gpt-oss's experts are fused [E, ...] tensors in Hugging Face, which PEFT adapts only as
  // target_parameters (adapter tensors Mobius does not write): not LoRA modules here.
  if (!experts || c.moe.expert_mlp == MoeConfig::ExpertMlp::kClampedSwiGlu) return out;
  const int64_t Ie = c.moe.expert_intermediate_size;
  for (int64_t e = 0; e < (layer < 0 ? 1 : c.moe.num_experts); ++e) {
    const std::string x = absl::StrCat(n.moe_experts, ".", e, ".");
    out.push_back({x + n.moe_gate, C, Ie, e});
    out.push_back({x + n.moe_up, C, Ie, e});
    out.push_back({x + n.moe_down, Ie, C, e});
  }
  return out;
}

}  // namespace

std::string LoraModule::a_name() const {
  return absl::StrCat("base_model.model.", path, ".lora_A.weight");
}
std::string LoraModule::b_name() const {
  return absl::StrCat("base_model.model.", path, ".lora_B.weight");
}

bool LoraModule::in_mlp() const { return !routed() && absl::StrContains(path, ".mlp."); }

std::vector<std::string> LoraTargetNames(const ModelConfig& config) {
  std::vector<std::string> names;
  for (const ModuleSpec& m : BlockModules(config, -1)) {
    const std::string name = LastComponent(m.path);
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

std::vector<std::string> DefaultLoraTargets(const ModelConfig& config) {
  if (FamilyOf(config.family).tensors.block.qkv != nullptr) {
    return {LastComponent(FamilyOf(config.family).tensors.block.qkv)};
  }
  return {"q_proj", "v_proj"};
}

absl::StatusOr<std::vector<LoraModule>> LoraModules(const ModelConfig& config,
                                                    const std::vector<std::string>& targets,
                                                    const std::string& field) {
  const std::vector<std::string> known = LoraTargetNames(config);
  const char* router = FamilyOf(config.family).tensors.block.moe_router;
  for (size_t i = 0; i < targets.size(); ++i) {
    if (config.moe.enabled() && router != nullptr && targets[i] == LastComponent(router)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, "[", i, "]: \"", targets[i], "\" is the experts' router (", router,
                       "), which stays frozen; adapt ", absl::StrJoin(known, ", ")));
    }
    const char* gate_up = FamilyOf(config.family).tensors.block.moe_gate_up;
    if (gate_up != nullptr && (targets[i] == gate_up || targets[i] == "down_proj")) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, "[", i, "]: \"", targets[i], "\": ", FamilyName(config.family),
          "'s experts are fused tensors (all experts in one), which LoRA does not adapt here; "
          "adapt ", absl::StrJoin(known, ", ")));
    }
    if (std::find(known.begin(), known.end(), targets[i]) == known.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, "[", i, "]: \"", targets[i], "\" is not a linear module of ",
          FamilyName(config.family), " models (they have ", absl::StrJoin(known, ", "), ")"));
    }
    if (std::find(targets.begin(), targets.begin() + i, targets[i]) != targets.begin() + i) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, "[", i, "]: \"", targets[i], "\" is listed twice"));
    }
  }
  if (targets.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": empty (name at least one of ",
                                                   absl::StrJoin(known, ", "), ")"));
  }
  const TensorNames& t = FamilyOf(config.family).tensors;
  std::vector<LoraModule> out;
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    for (const ModuleSpec& m : BlockModules(config, layer)) {
      const std::string name = LastComponent(m.path);
      if (std::find(targets.begin(), targets.end(), name) == targets.end()) continue;
      LoraModule lm;
      lm.target = name;
      lm.layer = layer;
      lm.path = absl::StrCat(t.layer_prefix, layer, ".", m.path);
      lm.weight = lm.path + ".weight";
      lm.in = m.in;
      lm.out = m.out;
      lm.in_out = t.in_out_layout;
      lm.expert = m.expert;
      out.push_back(std::move(lm));
    }
  }
  return out;
}

absl::Status ValidateLora(const ModelConfig& config, int64_t rank,
                          const std::vector<std::string>& targets, const std::string& rank_field,
                          const std::string& targets_field) {
  auto modules = LoraModules(config, targets, targets_field);
  if (!modules.ok()) return modules.status();
  int64_t limit = INT64_MAX;
  std::string limiting;
  for (const LoraModule& m : *modules) {
    if (std::min(m.in, m.out) < limit) {
      limit = std::min(m.in, m.out);
      limiting = m.target;
    }
  }
  if (rank < 1 || rank > limit) {
    return absl::InvalidArgumentError(absl::StrCat(
        rank_field, ": must be in [1, ", limit, "] (the smallest adapted dimension, ", limiting,
        "'s) (got ", rank, ")"));
  }
  return absl::OkStatus();
}

LoraStateSlots AssignLoraStateSlots(const std::vector<LoraModule>& unit_modules,
                                    int64_t experts_per_token) {
  LoraStateSlots s;
  std::vector<std::pair<std::string, int64_t>> shared;  // expert target -> its first slot
  bool routed = false;
  for (const LoraModule& m : unit_modules) {
    if (!m.routed()) {
      s.first.push_back(s.count++);
      continue;
    }
    routed = true;
    auto it = std::find_if(shared.begin(), shared.end(),
                           [&](const auto& p) { return p.first == m.target; });
    if (it == shared.end()) {
      shared.emplace_back(m.target, s.count);
      s.count += experts_per_token;
      it = shared.end() - 1;
    }
    s.first.push_back(it->second);
  }
  if (!unit_modules.empty()) s.scratch = routed ? std::max<int64_t>(1, experts_per_token) : 1;
  return s;
}

int64_t LoraParameters(const std::vector<LoraModule>& modules, int64_t rank) {
  int64_t n = 0;
  for (const LoraModule& m : modules) n += rank * (m.in + m.out);
  return n;
}

}  // namespace mobius::model
