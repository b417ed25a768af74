#include "worker/checkpoint/init_model_command.h"

#include <filesystem>
#include <iostream>
#include <optional>
#include <system_error>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/init.h"
#include "glog/logging.h"
#include "worker/checkpoint/model_init.h"
#include "worker/checkpoint/worker_flags.h"

namespace mobius::checkpoint {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

int Usage(const std::string& message) {
  std::cerr << "mobius-worker init-model: " << message << "\nusage: " << kInitModelUsage << "\n";
  return kExitUsage;
}

// A size flag: 0 = unset; negative values are a usage error.
bool SizeFlag(const absl::Flag<int64_t>& flag, const char* name, std::optional<int64_t>* out,
              std::string* error) {
  const int64_t v = absl::GetFlag(flag);
  if (v < 0) {
    *error = absl::StrCat("--", name, " must be positive (got ", v, ")");
    return false;
  }
  if (v > 0) *out = v;
  return true;
}

}  // namespace

int RunInitModelCommand(const std::vector<std::string>& args) {
  if (args.size() != 2) return Usage("unexpected positional arguments");
  auto family = ParseFamily(absl::GetFlag(FLAGS_family));
  if (!family.ok()) return Usage(std::string(family.status().message()));
  SizeOverrides o;
  std::string error;
  if (!SizeFlag(FLAGS_layers, "layers", &o.layers, &error) ||
      !SizeFlag(FLAGS_hidden, "hidden", &o.hidden, &error) ||
      !SizeFlag(FLAGS_heads, "heads", &o.heads, &error) ||
      !SizeFlag(FLAGS_kv_heads, "kv_heads", &o.kv_heads, &error) ||
      !SizeFlag(FLAGS_head_dim, "head_dim", &o.head_dim, &error) ||
      !SizeFlag(FLAGS_intermediate, "intermediate", &o.intermediate, &error) ||
      !SizeFlag(FLAGS_vocab, "vocab", &o.vocab, &error) ||
      !SizeFlag(FLAGS_max_positions, "max_positions", &o.max_positions, &error) ||
      !SizeFlag(FLAGS_experts, "experts", &o.experts, &error) ||
      !SizeFlag(FLAGS_experts_per_token, "experts_per_token", &o.experts_per_token, &error) ||
      !SizeFlag(FLAGS_expert_intermediate, "expert_intermediate", &o.expert_intermediate,
                &error)) {
    return Usage(error);
  }
  auto config = PresetConfig(*family, absl::GetFlag(FLAGS_preset), o);
  if (!config.ok()) return Usage(std::string(config.status().message()));
  WriteModelOptions options;
  const std::string dtype = absl::GetFlag(FLAGS_dtype);
  if (dtype == "bf16" || dtype.empty()) {
    options.dtype = io::DType::kBF16;
  } else if (dtype == "fp32") {
    options.dtype = io::DType::kF32;
  } else {
    return Usage(absl::StrCat("--dtype must be bf16 or fp32 (got \"", dtype, "\")"));
  }
  options.generation_config = absl::GetFlag(FLAGS_generation_config);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) return Usage("--out is required");

  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(out, ec)) {
    if (!fs::is_directory(out, ec)) return Usage(absl::StrCat("--out ", out, " is not a directory"));
    if (!fs::is_empty(out, ec) && !absl::GetFlag(FLAGS_force)) {
      return Usage(absl::StrCat("--out ", out, " is not empty (pass --force to overwrite)"));
    }
  } else if (fs::create_directories(out, ec); ec) {
    std::cerr << "mobius-worker init-model: cannot create " << out << ": " << ec.message() << "\n";
    return kExitFailure;
  }
  LOG(INFO) << "init-model configuration:\n" << EffectiveFlags("worker/checkpoint/worker_flags");

  const reference::Parameters params = InitModelParameters(*config, absl::GetFlag(FLAGS_seed));
  if (absl::Status s = WriteModelDirectory(out, *config, params, options); !s.ok()) {
    std::cerr << "mobius-worker init-model: " << s.message() << "\n";
    return kExitFailure;
  }
  int64_t count = 0;
  for (const auto& [name, t] : params.tensors) count += t.numel();
  std::cout << "wrote " << out << ": " << model::FamilyName(*family) << " " << count
            << " parameters, " << (dtype.empty() ? "bf16" : dtype) << ", seed " << absl::GetFlag(FLAGS_seed) << "\n";
  return kExitOk;
}

}  // namespace mobius::checkpoint
