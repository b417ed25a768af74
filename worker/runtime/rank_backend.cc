#include "worker/runtime/rank_backend.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/backend/cpu/cpu_backend.h"

namespace mobius::runtime {
namespace {

CudaBackendFactory& CudaFactory() {
  static CudaBackendFactory* factory = new CudaBackendFactory();
  return *factory;
}

int DeviceOfRank(const RunConfig& run, int rank) {
  if (static_cast<size_t>(rank) < run.rank_device.size()) return run.rank_device[rank];
  if (static_cast<size_t>(rank) < run.rank_gpu.size()) return run.rank_gpu[rank];
  return rank;
}

}  // namespace

void RegisterCudaRankBackend(CudaBackendFactory factory) { CudaFactory() = std::move(factory); }

absl::StatusOr<RankBackend> CreateRankBackend(const RunConfig& run, int rank,
                                              backend::LinkModel* link_model) {
  const std::string& name = run.backend;
  if (name != "auto" && name != "cpu" && name != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("backend must be auto, cpu or cuda (got \"", name, "\")"));
  }
  RankBackendRequest request;
  request.device = DeviceOfRank(run, rank);
  request.capacity_bytes = run.training.device_memory_bytes;
  request.threads = run.training.threads;
  RankBackend out;
  std::string fallback_reason;
  if (name != "cpu") {
    if (name == "auto" && link_model != nullptr) {
      fallback_reason = "the run emulates PCIe links, which only the CPU backend does";
    } else if (!CudaFactory()) {
      fallback_reason = "this mobius-worker is built without CUDA";
    } else {
      absl::StatusOr<std::unique_ptr<backend::Backend>> cuda = CudaFactory()(request);
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
  bo.op_threads = request.threads;
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
