#include "worker/profile/profile_command.h"

#include <iostream>
#include <memory>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/model/model_config_parse.h"
#include "common/run/profile_cache.h"
#include "common/run/profile_json.h"
#include "common/errors.h"
#include "worker/backend/backend_choice.h"
#include "common/device/device_probe.h"
#include "worker/checkpoint/worker_flags.h"
#include "worker/profile/profile_flags.h"
#include "worker/profile/unit_profiler.h"

namespace mobius::profile {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

int Usage(const std::string& message) {
  std::cerr << "mobius-worker profile: " << message << "\nusage: " << kProfileUsage << "\n";
  return kExitUsage;
}

int Fail(const absl::Status& s) {
  std::cerr << "mobius-worker profile: " << s.message() << "\n";
  return kExitFailure;
}

// Device d's backend of the chosen kind (backend_choice.h); device 0's, made while choosing, is
// handed out first instead of being made twice.
BackendFactory ChosenFactory(std::shared_ptr<backend::ChosenBackend> first,
                             uint64_t capacity_bytes, backend::ChooseBackendOptions options) {
  return [first, capacity_bytes,
          options](int device) -> absl::StatusOr<std::unique_ptr<backend::Backend>> {
    if (device == 0 && first->backend != nullptr) return std::move(first->backend);
    absl::StatusOr<backend::ChosenBackend> b = backend::ChooseBackend(
        backend::BackendKindName(first->kind),
        {.device = device, .capacity_bytes = capacity_bytes}, options);
    if (!b.ok()) return b.status();
    return std::move(b->backend);
  };
}

}  // namespace

int RunProfileCommand(const std::vector<std::string>& args) {
  if (args.size() != 2) return Usage("unexpected positional arguments");
  const std::string model_path = absl::GetFlag(FLAGS_model);
  if (model_path.empty()) return Usage("--model DIR|config.json is required");
  const int64_t microbatch = std::max<int64_t>(absl::GetFlag(FLAGS_microbatch), 1);
  const int64_t seq = absl::GetFlag(FLAGS_seq);
  if (seq < 1) return Usage(absl::StrCat("--seq must be >= 1 (got ", seq, ")"));
  ProfilerOptions o;
  o.warmup = absl::GetFlag(FLAGS_profile_warmup);
  o.repetitions = absl::GetFlag(FLAGS_profile_repetitions);
  o.num_devices = absl::GetFlag(FLAGS_devices);
  o.measure_links = absl::GetFlag(FLAGS_links);
  const std::string precision = absl::GetFlag(FLAGS_precision);
  if (precision != "bf16" && precision != "fp16") {
    return Usage(absl::StrCat("--precision must be bf16 or fp16 (got \"", precision, "\")"));
  }
  o.precision = precision == "fp16" ? backend::DType::kF16 : backend::DType::kBf16;
  const int64_t copy_mib = absl::GetFlag(FLAGS_copy_mib);
  if (o.warmup < 0 || o.repetitions < 1 || o.num_devices < 1 || copy_mib < 1) {
    return Usage(
        "--profile_warmup >= 0, --profile_repetitions >= 1, --devices >= 1 and "
        "--copy_mib >= 1 are required");
  }
  o.copy_bytes = static_cast<uint64_t>(copy_mib) << 20;
  const std::string backend_flag = absl::GetFlag(FLAGS_backend);
  if (absl::Status s = backend::ValidateBackendName(backend_flag); !s.ok()) {
    return Usage(absl::StrCat("--", s.message()));
  }
  int threads = absl::GetFlag(FLAGS_threads);
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());

  absl::StatusOr<model::ModelConfig> config = model::LoadModelConfig(model_path);
  if (!config.ok()) return Usage(std::string(config.status().message()));
  absl::StatusOr<model::ModelDescription> model = model::DescribeModel(*config);
  if (!model.ok()) return Usage(std::string(model.status().message()));
  if (seq > config->max_position_embeddings) {
    return Usage(absl::StrCat("--seq ", seq, " exceeds the model's max_position_embeddings ",
                              config->max_position_embeddings));
  }
  const planner::MicrobatchShape shape{microbatch, seq};
  const uint64_t capacity_bytes = absl::GetFlag(FLAGS_device_memory_bytes);
  backend::ChooseBackendOptions choose;
  choose.cpu.backend.capacity_bytes = capacity_bytes;
  choose.cpu.blas_threads = threads;
  choose.cpu.op_threads = threads;
  absl::StatusOr<backend::ChosenBackend> chosen =
      backend::ChooseBackend(backend_flag, {.device = 0, .capacity_bytes = capacity_bytes}, choose);
  if (!chosen.ok()) {
    if (backend_flag == "cuda") {
      const DeviceProbe probe = ProbeDevices();
      if (probe.cuda_devices.empty()) {
        return Fail(absl::FailedPreconditionError(
            absl::StrCat("--backend cuda: ", DescribeBackendChoice(probe))));
      }
    }
    return Fail(Annotate(chosen.status(), "--backend"));
  }
  const std::string backend_name = backend::BackendKindName(chosen->kind);
  auto first = std::make_shared<backend::ChosenBackend>(*std::move(chosen));
  std::string device_name = "cpu";
  if (backend_name == "cuda") {
    const DeviceProbe probe = ProbeDevices();
    if (probe.cuda_devices.empty()) {
      return Fail(absl::FailedPreconditionError(
          absl::StrCat("--backend cuda: ", DescribeBackendChoice(probe))));
    }
    device_name = probe.cuda_devices.front().name;  // the cache key names the GPU model
  }
  absl::StatusOr<std::string> dir = planner::ResolveProfileCacheDir(absl::GetFlag(FLAGS_cache_dir));
  if (!dir.ok()) return Fail(dir.status());
  const std::string key = planner::ProfileCacheKey(
      planner::ModelConfigHash(*config), shape, backend_name, device_name, planner::BuildVersion(),
      precision);
  const std::string path = planner::ProfileCachePath(*dir, key);

  std::optional<planner::MeasuredProfile> profile;
  bool cached = false;
  if (!absl::GetFlag(FLAGS_refresh)) {
    absl::StatusOr<std::optional<planner::MeasuredProfile>> hit =
        planner::LookupCachedProfile(*dir, key);
    if (!hit.ok()) return Fail(hit.status());
    profile = *std::move(hit);
    cached = profile.has_value();
  }
  if (!profile.has_value()) {
    absl::StatusOr<planner::MeasuredProfile> m =
        MeasureProfile(*model, shape,
                       ChosenFactory(first, capacity_bytes, choose),
                       backend_name, device_name, planner::BuildVersion(), o);
    if (!m.ok()) return Fail(m.status());
    if (absl::Status s = planner::WriteProfileFile(path, *m); !s.ok()) return Fail(s);
    profile = *std::move(m);
  }
  const std::string out = absl::GetFlag(FLAGS_out);
  if (!out.empty()) {
    if (absl::Status s = planner::WriteProfileFile(out, *profile); !s.ok()) return Fail(s);
  }
  std::cout << "profile: " << path << " (" << (cached ? "cached" : "measured") << ")\n";
  return kExitOk;
}

}  // namespace mobius::profile
