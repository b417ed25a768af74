#include "host/planner/sim/machine.h"

#include <map>

#include "absl/strings/str_cat.h"

namespace mobius::planner::sim {

int SimMachine::PositionOf(int topology_gpu) const {
  for (int i = 0; i < num_gpus(); ++i) {
    if (gpus[i].topology_gpu == topology_gpu) return i;
  }
  return -1;
}

std::vector<int> SimMachine::P2pPath(int a, int b) const {
  if (gpus[a].nvlink_out >= 0 && gpus[b].nvlink_in >= 0) {
    return {gpus[a].nvlink_out, gpus[b].nvlink_in};
  }
  // Own links: the source's D2H and the destination's H2D.
  return {gpus[a].own_link + 1, gpus[b].own_link};
}

int SimMachine::AddDuplexLink(const std::string& name, double bytes_per_s) {
  const int down = static_cast<int>(links.size());
  links.push_back({name + ".h2d", bytes_per_s, down + 1});
  links.push_back({name + ".d2h", bytes_per_s, down});
  return down;
}

absl::StatusOr<SimMachine> MakeMachine(const topology::Topology& topology,
                                       const topology::TopologyFacts& facts,
                                       const std::vector<int>& gpus,
                                       const MachineOptions& options) {
  if (gpus.empty()) return absl::InvalidArgumentError("the simulator needs at least one GPU");
  SimMachine m;
  m.duplex_factor = options.duplex_factor;
  m.cpu_optimizer_threads = std::max(1, options.cpu_optimizer_threads);
  const double eff = options.dma_efficiency * 1e9;
  std::map<int, int> members;  // contention group -> job GPUs in it
  for (int g : gpus) {
    if (g < 0 || g >= static_cast<int>(topology.gpus.size()) ||
        g >= static_cast<int>(facts.gpus.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("GPU ", g, " out of range (", topology.gpus.size(), " GPUs)"));
    }
    ++members[facts.gpus[g].contention_group];
  }
  std::map<int, int> uplink_of_group;
  for (int g : gpus) {
    if (m.PositionOf(g) >= 0) return absl::InvalidArgumentError(absl::StrCat("GPU ", g, " twice"));
    const topology::GpuFacts& f = facts.gpus[g];
    const double own = f.host_path_gbytes_per_s > 0 ? f.host_path_gbytes_per_s : f.link_gbytes_per_s;
    if (!(own > 0)) return absl::InvalidArgumentError(absl::StrCat("GPU ", g, " has no link speed"));
    SimGpu s;
    s.topology_gpu = g;
    s.name = topology.gpus[g].name;
    const int own_link = m.AddDuplexLink(absl::StrCat("gpu", g), eff * own);
    s.own_link = own_link;
    int up = -1;
    if (f.contention_group >= 0) {
      const topology::ContentionGroup& cg = facts.contention_groups[f.contention_group];
      const bool shared = members[f.contention_group] > 1 || cg.uplink_pci != topology.gpus[g].pci;
      if (shared && cg.uplink_gbytes_per_s > 0) {
        auto it = uplink_of_group.find(f.contention_group);
        if (it == uplink_of_group.end()) {
          it = uplink_of_group
                   .emplace(f.contention_group,
                            m.AddDuplexLink(absl::StrCat("uplink", f.contention_group),
                                            eff * cg.uplink_gbytes_per_s))
                   .first;
        }
        up = it->second;
      }
    }
    if (up >= 0) {
      s.h2d_path = {up, own_link};
      s.d2h_path = {own_link + 1, up + 1};
    } else {
      s.h2d_path = {own_link};
      s.d2h_path = {own_link + 1};
    }
    double nv = 0;
    for (const topology::NvLink& l : topology.nvlinks) {
      if (l.gpu_a == g || l.gpu_b == g) nv += l.gbytes_per_s;
    }
    if (nv > 0) {
      const int nvl = m.AddDuplexLink(absl::StrCat("gpu", g, ".nvlink"), eff * nv);
      m.links[nvl].reverse = m.links[nvl + 1].reverse = -1;  // NVLink: full duplex
      s.nvlink_in = nvl;
      s.nvlink_out = nvl + 1;
    }
    m.gpus.push_back(std::move(s));
  }
  if (options.host_memory_bytes_per_s > 0) {
    m.host_memory_link = static_cast<int>(m.links.size());
    m.links.push_back({"host.memory", options.host_memory_bytes_per_s, -1});
    for (SimGpu& g : m.gpus) {
      g.h2d_path.push_back(m.host_memory_link);
      g.d2h_path.push_back(m.host_memory_link);
    }
  }
  m.optimizer_bytes_per_s = options.optimizer_bytes_per_s;
  m.optimizer_bytes_per_param = options.optimizer_bytes_per_param;
  const int n = m.num_gpus();
  m.p2p.assign(n, std::vector<bool>(n, false));
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) m.p2p[a][b] = facts.p2p[gpus[a]][gpus[b]];
  }
  return m;
}

}  // namespace mobius::planner::sim
