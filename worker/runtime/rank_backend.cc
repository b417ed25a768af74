#include "worker/runtime/rank_backend.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "common/errors.h"
#include "worker/backend/backend_choice.h"

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
  MOBIUS_RETURN_IF_ERROR(backend::ValidateBackendName(name));
  absl::StatusOr<int> ordinal = CudaOrdinalOfRank(run, rank);
  backend::DeviceBackendRequest request;
  request.device = ordinal.ok() ? *ordinal : 0;
  request.capacity_bytes = run.training.device_memory_bytes;
  backend::ChooseBackendOptions options;
  if (link_model != nullptr) {
    options.cpu_only_reason = "the run emulates PCIe links, which only the CPU backend does";
  }
  if (!ordinal.ok()) options.cuda_unavailable_reason = std::string(ordinal.status().message());
  options.without_cuda_reason = "this mobius-worker is built without CUDA";
  options.cpu.backend.capacity_bytes = request.capacity_bytes;
  // Link emulation reserves link time per chunk, first come first served: small chunks keep a
  // boundary activation from waiting behind another GPU's whole stage upload. 32 KiB: with 256
  // KiB the roundrobin schedule with the asynchronous optimizer (uploads, offloads and activations
  // of two steps at once) ran 1.53x its simulated step on the 8x4090 fixture at link scale 5e-4,
  // with 32 KiB 1.17x (docs/benchmarks.md); at 8 KiB the per-chunk sleep overhead shows.
  options.cpu.backend.copy_chunk_bytes =
      link_model == nullptr ? uint64_t{64} << 20 : uint64_t{32} << 10;
  options.cpu.backend.link_model = link_model;
  options.cpu.op_threads = run.training.threads;
  absl::StatusOr<backend::ChosenBackend> chosen = backend::ChooseBackend(name, request, options);
  if (!chosen.ok()) return Annotate(chosen.status(), absl::StrCat("rank ", rank));
  RankBackend out;
  out.backend = std::move(chosen->backend);
  if (chosen->kind == backend::BackendKind::kCuda) {
    out.description = absl::StrCat("rank ", rank, ": CUDA backend on ", out.backend->name());
    if (!run.links.empty()) {
      absl::StrAppend(&out.description, " (link emulation ignored: real links)");
    }
    return out;
  }
  out.emulated_links = link_model != nullptr;
  out.description = chosen->fell_back()
                        ? absl::StrCat("rank ", rank, ": ",
                                       backend::FallbackDescription(chosen->fallback_reason))
                        : absl::StrCat("rank ", rank, ": CPU backend");
  if (out.emulated_links) absl::StrAppend(&out.description, " with emulated PCIe links");
  return out;
}

}  // namespace mobius::runtime
