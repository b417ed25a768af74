#include "worker/train/lora_setup.h"

#include <cmath>
#include <filesystem>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/model/family.h"
#include "common/model/lora.h"
#include "common/run/unit_params.h"
#include "common/status_macros.h"
#include "worker/checkpoint/model_init.h"

namespace mobius::train {
namespace {

reference::Parameters Zeros(const checkpoint::TensorShapes& shapes) {
  reference::Parameters p;
  for (const auto& [name, shape] : shapes) {
    reference::Tensor& t = p.tensors[name];
    t.shape = shape;
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    t.data.assign(static_cast<size_t>(n), 0.0f);
  }
  return p;
}

}  // namespace

absl::StatusOr<LoraRun> MakeLoraRun(const TrainerOptions& o, const model::ModelConfig& config) {
  const AdapterOptions& a = o.adapter;
  LoraRun run;
  run.targets = a.target_modules.empty() ? model::DefaultLoraTargets(config) : a.target_modules;
  MOBIUS_RETURN_IF_ERROR(
      model::ValidateLora(config, a.rank, run.targets, "--lora_rank", "--lora_targets"));
  MOBIUS_ASSIGN_OR_RETURN(run.spec.modules, model::LoraModules(config, run.targets));
  run.spec.rank = a.rank;
  run.spec.scale = static_cast<float>(a.alpha / static_cast<double>(a.rank));
  run.spec.dropout = static_cast<float>(a.dropout);
  run.spec.base_nf4 = a.base_nf4();
  if (run.spec.base_nf4) {
    if (absl::StatusOr<std::vector<std::string>> w = units::Nf4BaseWeights(config); !w.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("adapter base nf4: ", w.status().message()));
    }
  }
  run.shapes = checkpoint::AdapterShapes(run.spec.modules, a.rank);
  std::error_code ec;
  run.info = {.rank = a.rank,
              .alpha = a.alpha,
              .dropout = a.dropout,
              .target_modules = run.targets,
              .base_model = std::filesystem::absolute(o.model_dir, ec).string(),
              .fan_in_fan_out = model::FamilyOf(config.family).tensors.in_out_layout,
              .base_quantization = a.base_quantization};
  return run;
}

absl::StatusOr<AdapterStart> LoadAdapterStart(const TrainerOptions& o, const LoraRun& lora,
                                              const std::string& resume_directory,
                                              const std::set<std::string>* only) {
  AdapterStart s;
  checkpoint::TensorShapes shapes;  // the wanted ones
  for (const auto& entry : lora.shapes) {
    if (only == nullptr || only->count(entry.first) > 0) shapes.insert(shapes.end(), entry);
  }

  if (!resume_directory.empty()) {
    MOBIUS_ASSIGN_OR_RETURN(checkpoint::LoadedAdapterCheckpoint c,
                            checkpoint::LoadAdapterCheckpoint(resume_directory, lora.spec.rank,
                                                              lora.targets, lora.shapes, only));
    s.master = std::move(c.master);
    s.adam_m = c.adam_m.tensors.empty() ? Zeros(shapes) : std::move(c.adam_m);
    s.adam_v = c.adam_v.tensors.empty() ? Zeros(shapes) : std::move(c.adam_v);
    return s;
  }
  if (!o.adapter.init_dir.empty()) {
    auto read = checkpoint::ReadPeftAdapter(o.adapter.init_dir, lora.spec.rank, lora.targets,
                                            lora.shapes, only);
    if (!read.ok()) {
      return absl::Status(read.status().code(),
                          absl::StrCat("--lora_init: ", read.status().message()));
    }
    s.master = *std::move(read);
  } else {
    s.master = Zeros(shapes);
    for (const model::LoraModule& m : lora.spec.modules) {
      if (only != nullptr && only->count(m.a_name()) == 0) continue;
      reference::Tensor& a = s.master.tensors[m.a_name()];
      std::mt19937_64 engine(checkpoint::TensorSeed(o.seed, m.a_name()));
      const double bound = 1.0 / std::sqrt(static_cast<double>(m.in));
      for (float& x : a.data) {
        const double u = static_cast<double>(engine() >> 11) * 0x1.0p-53;  // [0, 1)
        x = static_cast<float>((2.0 * u - 1.0) * bound);
      }
    }
  }
  s.adam_m = Zeros(shapes);
  s.adam_v = Zeros(shapes);
  return s;
}

}  // namespace mobius::train
