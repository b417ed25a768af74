// What the host contributes to a training step: its DRAM bandwidth, which every GPU's DMA (both
// directions) and the CPU optimizer draw from, and the CPU AdamW rate. The planner charges the CPU
// optimizer with it and the simulator (sim/machine.h) models the DRAM as one shared link.
//
//   optimizer params/s = min(threads x optimizer_params_per_s_per_thread,
//                            memory_bytes_per_s / optimizer_bytes_per_param)
//
// Sources (docs/planner.md, "The calibrated model"):
//   - optimizer_params_per_s_per_thread 4e8: our CpuAdamW (worker/optim/adamw.h) measured 400 M
//     params/s on one thread of the shared dev VM (docs/benchmarks.md, "CPU AdamW"; AVX2, 30
//     bytes/param: fp32 master, grad, m, v read; master, m, v and the bf16 copy written);
//   - DRAM: channels x transfer rate x 8 bytes per socket, times memory_efficiency 0.7 (an
//     assumption: the STREAM-class fraction of the nominal rate a two-socket server sustains; no
//     fixture box was measured). Presets by CPU model for the CPUs of test/data/topology/.
//   - optimizer_threads 8 (configurable): 8 x 400 M = 3.2 G params/s = 0.31 s per billion
//     parameters, design/mobius.md section 3's anchor measured on a server CPU (~0.3 s per
//     billion, CostOptions' default when the host is unknown), and what RoundPipe's artifact
//     implies: its synchronous-optimizer rows take 6.2 s (Llama-3.1-8B) and 15.4 s (Qwen3-32B)
//     per step more than the asynchronous ones, ~0.3 s per billion beyond the pipeline's drain
//     and refill (docs/planner.md). All cores of a two-socket server would be DRAM-bound instead
//     (32 x 12 GB/s > the DRAM), which neither figure shows.
//
// Pure; thread-safe.
#ifndef MOBIUS_HOST_PLANNER_HOST_SPEC_H_
#define MOBIUS_HOST_PLANNER_HOST_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>

#include "host/topology/topology.h"

namespace mobius::planner {

struct HostSpec {
  std::string name;                 // "2x AMD EPYC 7313"
  double memory_bytes_per_s = 0;    // sustained DRAM bandwidth, all sockets together; 0 unknown
  double optimizer_params_per_s_per_thread = 4e8;
  double optimizer_bytes_per_param = 30;
  int optimizer_threads = 8;

  // CPU AdamW throughput with every optimizer thread on one stage's parameters, alone on the
  // DRAM.
  double OptimizerParamsPerSecond() const;
  double OptimizerSeconds(int64_t parameters) const;
  // Bytes/s one optimizer task may draw when not limited by the DRAM (threads x per-thread rate).
  double OptimizerThreadBytesPerSecond() const;
};

inline constexpr double kHostMemoryEfficiency = 0.7;

// The preset for a CPU model name as hwloc reports it ("AMD EPYC 7313 16-Core Processor") with
// `sockets` packages, or nullopt when the model is unknown.
std::optional<HostSpec> HostSpecForCpu(const std::string& cpu_model, int sockets);

// The topology's host: its packages' CPU model (the first package's) and socket count.
std::optional<HostSpec> HostSpecForTopology(const topology::Topology& topology);

}  // namespace mobius::planner

#endif  // MOBIUS_HOST_PLANNER_HOST_SPEC_H_
