// A PEFT adapter of test/reference/golden_lora/<name> for a golden model's config: its LoRA spec
// (rank, alpha / rank, the target modules) and its tensors, as the generate tests load it.
#ifndef MOBIUS_TEST_WORKER_GENERATE_GOLDEN_ADAPTER_H_
#define MOBIUS_TEST_WORKER_GENERATE_GOLDEN_ADAPTER_H_

#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/lora.h"
#include "nlohmann/json.hpp"
#include "test/testing/paths.h"
#include "test/worker/reference/tensor_compare.h"
#include "worker/model/adapter.h"

namespace mobius::generate::testing {

struct GoldenAdapter {
  units::LoraSpec spec;
  reference::Parameters tensors;
};

inline absl::StatusOr<GoldenAdapter> LoadGoldenAdapter(const model::ModelConfig& config,
                                                       const std::string& name) {
  const std::string dir = mobius::testing::SourcePath("test/reference/golden_lora/" + name);
  std::ifstream in(dir + "/adapter_config.json");
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (!j.is_object()) return absl::NotFoundError(dir + "/adapter_config.json: not read");
  GoldenAdapter a;
  a.spec.rank = j.at("r").get<int64_t>();
  a.spec.scale = j.at("lora_alpha").get<float>() / a.spec.rank;
  absl::StatusOr<std::vector<model::LoraModule>> modules =
      model::LoraModules(config, j.at("target_modules").get<std::vector<std::string>>());
  if (!modules.ok()) return modules.status();
  a.spec.modules = *std::move(modules);
  absl::StatusOr<reference::Parameters> tensors =
      reference::testing::LoadSafetensors(dir + "/adapter_model.safetensors");
  if (!tensors.ok()) return tensors.status();
  a.tensors = *std::move(tensors);
  return a;
}

}  // namespace mobius::generate::testing

#endif  // MOBIUS_TEST_WORKER_GENERATE_GOLDEN_ADAPTER_H_
