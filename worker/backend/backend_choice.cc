#include "worker/backend/backend_choice.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace mobius::backend {

const char* BackendKindName(BackendKind kind) {
  return kind == BackendKind::kCuda ? "cuda" : "cpu";
}

std::string FallbackDescription(absl::string_view reason) {
  return absl::StrCat("no usable CUDA device (", reason, "); falling back to the CPU backend");
}

absl::Status ValidateBackendName(absl::string_view name) {
  if (name == "auto" || name == "cpu" || name == "cuda") return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("backend must be auto, cpu or cuda (got \"", name, "\")"));
}

absl::StatusOr<ChosenBackend> ChooseBackend(absl::string_view name,
                                            const DeviceBackendRequest& device,
                                            const ChooseBackendOptions& options) {
  if (absl::Status s = ValidateBackendName(name); !s.ok()) return s;
  ChosenBackend out;
  std::string reason;
  if (name != "cpu") {
    if (name == "auto" && !options.cpu_only_reason.empty()) {
      reason = options.cpu_only_reason;
    } else if (!options.cuda_unavailable_reason.empty()) {
      reason = options.cuda_unavailable_reason;
    } else if (!CudaBackendRegistered() && !options.without_cuda_reason.empty()) {
      reason = options.without_cuda_reason;
    } else {
      absl::StatusOr<std::unique_ptr<Backend>> cuda = MakeCudaBackend(device);
      if (cuda.ok()) {
        out.backend = *std::move(cuda);
        out.kind = BackendKind::kCuda;
        return out;
      }
      reason = std::string(cuda.status().message());
    }
    if (name == "cuda") {
      return absl::FailedPreconditionError(
          absl::StrCat("backend cuda requested but unusable: ", reason));
    }
    out.fallback_reason = std::move(reason);
  }
  absl::StatusOr<std::unique_ptr<CpuBackend>> cpu = CpuBackend::Create(options.cpu);
  if (!cpu.ok()) return cpu.status();
  out.backend = *std::move(cpu);
  out.kind = BackendKind::kCpu;
  return out;
}

}  // namespace mobius::backend
