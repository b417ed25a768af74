#include "host/planner/host_spec.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace mobius::planner {
namespace {

struct CpuMemory {
  const char* model;   // substring of the hwloc CPU model name
  int channels;        // DRAM channels per socket
  double mega_transfers;  // MT/s of the supported DIMMs
};

// Vendor product pages: memory channels and DDR speed per socket.
constexpr CpuMemory kCpus[] = {
    {"EPYC 7313", 8, 3200},          // AMD EPYC 7003: 8 x DDR4-3200
    {"5955WX", 8, 3200},             // Threadripper PRO 5000WX: 8 x DDR4-3200
    {"Gold 6130", 6, 2666},          // Xeon Scalable 1st gen: 6 x DDR4-2666
    {"Silver 4314", 8, 2666},        // Xeon Scalable 3rd gen Silver: 8 x DDR4-2666
    {"Platinum 8480C", 8, 4800},     // Xeon Scalable 4th gen: 8 x DDR5-4800
};

}  // namespace

double HostSpec::OptimizerThreadBytesPerSecond() const {
  return std::max(1, optimizer_threads) * optimizer_params_per_s_per_thread *
         optimizer_bytes_per_param;
}

double HostSpec::OptimizerParamsPerSecond() const {
  double rate = std::max(1, optimizer_threads) * optimizer_params_per_s_per_thread;
  if (memory_bytes_per_s > 0) rate = std::min(rate, memory_bytes_per_s / optimizer_bytes_per_param);
  return rate;
}

double HostSpec::OptimizerSeconds(int64_t parameters) const {
  return static_cast<double>(parameters) / OptimizerParamsPerSecond();
}

std::optional<HostSpec> HostSpecForCpu(const std::string& cpu_model, int sockets) {
  for (const CpuMemory& c : kCpus) {
    if (cpu_model.find(c.model) == std::string::npos) continue;
    HostSpec h;
    h.name = absl::StrCat(std::max(sockets, 1), "x ", cpu_model);
    h.memory_bytes_per_s = kHostMemoryEfficiency * std::max(sockets, 1) * c.channels *
                           c.mega_transfers * 1e6 * 8;
    return h;
  }
  return std::nullopt;
}

std::optional<HostSpec> HostSpecForTopology(const topology::Topology& topology) {
  if (topology.packages.empty()) return std::nullopt;
  return HostSpecForCpu(topology.packages.front().cpu_model,
                        static_cast<int>(topology.packages.size()));
}

}  // namespace mobius::planner
