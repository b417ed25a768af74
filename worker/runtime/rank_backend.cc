#include "worker/runtime/rank_backend.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "worker/backend/backend_registry.h"
#include "worker/backend/cpu/cpu_backend.h"

namespace mobius::runtime {
absl::StatusOr<int> CudaOrdinalOfRank(const RunConfig& run, int rank) {
  if (static_cast<size_t>(rank) < run.rank_device.size()) return run.rank_device[rank];
  const int gpu = static_cast<size_t>(rank) < run.rank_gpu.size() ? run.rank_gpu[rank] : rank;
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible == nullptr) return gpu;
  int position = 0;
  for (absl::string_view entry : absl::StrSplit(visible, ',', absl::SkipWhitespace())) {
    int index = 0;
    if (!absl::SimpleAtoi(entry, &index)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "CUDA_VISIBLE_DEVICES=", visible, " names GPUs by UUID; give the daemon GPU indices "
          "(or set rank_device) so rank ", rank, "'s GPU ", gpu, " can be found"));
    }
    if (index == gpu) return position;
    ++position;
  }
  return absl::FailedPreconditionError(absl::StrCat("rank ", rank, "'s GPU ", gpu,
                                                    " is not in CUDA_VISIBLE_DEVICES=", visible));
}

absl::StatusOr<RankBackend> CreateRankBackend(const RunConfig& run, int rank,
                                              backend::LinkModel* link_model) {
  const std::string& name = run.backend;
  if (name != "auto" && name != "cpu" && name != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("backend must be auto, cpu or cuda (got \"", name, "\")"));
  }
  backend::DeviceBackendRequest request;
  absl::StatusOr<int> ordinal = CudaOrdinalOfRank(run, rank);
  request.capacity_bytes = run.training.device_memory_bytes;
  RankBackend out;
  std::string fallback_reason;
  if (name != "cpu") {
    if (name == "auto" && link_model != nullptr) {
      fallback_reason = "the run emulates PCIe links, which only the CPU backend does";
    } else if (!ordinal.ok()) {
      fallback_reason = std::string(ordinal.status().message());
    } else if (!backend::CudaBackendRegistered()) {
      fallback_reason = "this mobius-worker is built without CUDA";
    } else {
      request.device = *ordinal;
      absl::StatusOr<std::unique_ptr<backend::Backend>> cuda = backend::MakeCudaBackend(request);
      if (cuda.ok()) {
        out.backend = *std::move(cuda);
        out.description = absl::StrCat("rank ", rank, ": CUDA backend on ", out.backend->name());
        if (!run.links.empty()) {
          absl::StrAppend(&out.description, " (link emulation ignored: real links)");
        }
        return out;
      }
      fallback_reason = std::string(cuda.status().message());
    }
    if (name == "cuda") {
      return absl::FailedPreconditionError(
          absl::StrCat("rank ", rank, ": backend cuda requested but unusable: ", fallback_reason));
    }
  }
  backend::CpuBackendOptions bo;
  bo.backend.capacity_bytes = request.capacity_bytes;
  // Link emulation reserves link time per chunk, first come first served: small chunks keep a
  // boundary activation from waiting behind another GPU's whole stage upload.
  bo.backend.copy_chunk_bytes = link_model == nullptr ? uint64_t{64} << 20 : uint64_t{256} << 10;
  bo.backend.link_model = link_model;
  bo.op_threads = run.training.threads;
  MOBIUS_ASSIGN_OR_RETURN(out.backend, backend::CpuBackend::Create(bo));
  out.emulated_links = link_model != nullptr;
  out.description = name == "cpu"
                        ? absl::StrCat("rank ", rank, ": CPU backend")
                        : absl::StrCat("rank ", rank, ": no usable CUDA device (", fallback_reason,
                                       "); falling back to the CPU backend");
  if (out.emulated_links) absl::StrAppend(&out.description, " with emulated PCIe links");
  return out;
}

}  // namespace mobius::runtime
