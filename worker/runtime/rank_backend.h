// The compute backend of one pipeline rank: which one (RunConfig::backend) and how it is made.
//
//   "cpu"   CpuBackend: host memory counted against the device cap, queues are threads; the
//           emulated PCIe links (link_emulator.h) apply to its copies.
//   "cuda"  the rank's CUDA device (CudaOrdinalOfRank below), through the CUDA factory of
//           worker/backend/backend_registry.h (registered by mobius-worker when built with CUDA). FAILED_PRECONDITION, naming why, when there is no such
//           device or the build has no CUDA.
//   "auto"  "cuda" when the build has CUDA and the rank's device exists, else "cpu" (also "cpu"
//           when the run emulates links: emulation is the CPU backend's job); the choice
//           and its reason are logged once per rank ("rank 2: CUDA backend on cuda:2 (NVIDIA ...)"
//           or "rank 2: no usable CUDA device (cudaErrorInsufficientDriver: ...); falling back to
//           the CPU backend").
//
// The choice and its fallback are worker/backend/backend_choice.h's ChooseBackend (shared with the
// standalone trainer and the profile verb); this file adds the rank's device and the log line.
// The runtime library itself never links CUDA; CPU-only tests see exactly the CPU path.
#ifndef MOBIUS_WORKER_RUNTIME_RANK_BACKEND_H_
#define MOBIUS_WORKER_RUNTIME_RANK_BACKEND_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/backend/backend.h"
#include "worker/backend/link_model.h"
#include "common/run/run_config.h"

namespace mobius::runtime {

// The CUDA ordinal of `rank`: RunConfig::rank_device[rank] when given (an ordinal as this process
// sees devices); else the node GPU rank_gpu[rank] (else the rank), an index in PCI bus order as the
// topology numbers GPUs, translated through CUDA_VISIBLE_DEVICES when it is set (the daemon's
// allow-list is inherited by the workers): its position in that list. mobius-worker sets
// CUDA_DEVICE_ORDER=PCI_BUS_ID before CUDA starts, so ordinals follow the same order.
// FAILED_PRECONDITION when the GPU is not in CUDA_VISIBLE_DEVICES or the list holds UUIDs.
absl::StatusOr<int> CudaOrdinalOfRank(const RunConfig& run, int rank);

struct RankBackend {
  std::unique_ptr<backend::Backend> backend;
  bool emulated_links = false;  // the CPU backend with link emulation
  std::string description;      // the log line's reason ("CUDA backend on cuda:1 (...)")
};

// The backend for `rank` of `run` as RunConfig::backend says. INVALID_ARGUMENT for an unknown
// backend name; FAILED_PRECONDITION for "cuda" without a usable device.
absl::StatusOr<RankBackend> CreateRankBackend(const RunConfig& run, int rank,
                                              backend::LinkModel* link_model);

}  // namespace mobius::runtime

#endif  // MOBIUS_WORKER_RUNTIME_RANK_BACKEND_H_
