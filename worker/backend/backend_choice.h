// The one place that turns a backend name ("cpu" | "cuda" | "auto") into a Backend, with the
// fallback rule of "auto". Used by the pipeline ranks (worker/runtime/rank_backend.h), the
// standalone trainer and the profile verb.
//
//   "cpu"   a CpuBackend made from ChooseBackendOptions::cpu.
//   "cuda"  the CUDA factory of backend_registry.h on `device`; FAILED_PRECONDITION
//           "backend cuda requested but unusable: <reason>" when it cannot be had (no factory
//           registered: "this binary is built without CUDA" or the caller's without_cuda_reason;
//           the factory fails; or the caller's cuda_unavailable_reason is set).
//   "auto"  "cuda" when it can be had, else "cpu"; ChosenBackend::fallback_reason says why not
//           and FallbackDescription() is the log line ("no usable CUDA device (<reason>);
//           falling back to the CPU backend"). The caller's cpu_only_reason forces "cpu" without
//           trying CUDA (e.g. link emulation, which only the CPU backend does).
// Anything else is INVALID_ARGUMENT naming the value:
//   backend must be auto, cpu or cuda (got "tpu")
//
// Thread-safety: as backend_registry.h (register factories before choosing).
#ifndef MOBIUS_WORKER_BACKEND_BACKEND_CHOICE_H_
#define MOBIUS_WORKER_BACKEND_BACKEND_CHOICE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/backend/backend.h"
#include "worker/backend/backend_registry.h"
#include "worker/backend/cpu/cpu_backend.h"

namespace mobius::backend {

enum class BackendKind { kCpu, kCuda };
const char* BackendKindName(BackendKind kind);  // "cpu", "cuda"

struct ChooseBackendOptions {
  CpuBackendOptions cpu;  // for the CPU backend (chosen or fallen back to)
  // Non-empty: "auto" does not try CUDA and falls back with this reason; "cuda" ignores it.
  std::string cpu_only_reason;
  // Non-empty: CUDA cannot be had for this reason (e.g. the rank's GPU is not visible); both
  // "auto" (falls back) and "cuda" (refused) see it.
  std::string cuda_unavailable_reason;
  // The reason given when no CUDA factory is registered; empty: the registry's own message.
  std::string without_cuda_reason;
};

struct ChosenBackend {
  std::unique_ptr<Backend> backend;
  BackendKind kind = BackendKind::kCpu;
  std::string fallback_reason;  // "auto" that fell back to the CPU: why; else empty
  bool fell_back() const { return !fallback_reason.empty(); }
};

// "no usable CUDA device (<reason>); falling back to the CPU backend"
std::string FallbackDescription(absl::string_view reason);

// INVALID_ARGUMENT unless `name` is auto, cpu or cuda (the message names the value).
absl::Status ValidateBackendName(absl::string_view name);

// See the header comment. `device` is used for CUDA only.
absl::StatusOr<ChosenBackend> ChooseBackend(absl::string_view name,
                                            const DeviceBackendRequest& device,
                                            const ChooseBackendOptions& options);

}  // namespace mobius::backend

#endif  // MOBIUS_WORKER_BACKEND_BACKEND_CHOICE_H_
