#include "host/topology/render.h"

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "host/topology/pcie.h"

namespace mobius::topology {
namespace {

class Renderer {
 public:
  Renderer(const Topology& t, const TopologyFacts& f) : t_(t), f_(f) {
    for (size_t g = 0; g < t.gpus.size(); ++g) gpu_of_pci_[t.gpus[g].pci] = static_cast<int>(g);
    for (const Nic& n : t.nics) nic_of_pci_[n.pci] = &n;
    for (const Nvme& n : t.nvmes) nvme_of_pci_[n.pci] = &n;
  }

  std::string Render() {
    absl::StrAppend(&out_, "Host ", t_.hostname.empty() ? "(unnamed)" : t_.hostname, "  [",
                    t_.source, "]\n");
    absl::StrAppendFormat(&out_, "%d GPU(s), %d socket(s), %d NUMA node(s), %d root complex(es), "
                                 "%d PCIe switch(es)\n",
                          t_.gpus.size(), t_.packages.size(), t_.numa_nodes.size(),
                          f_.root_complexes.size(), f_.switches.size());
    std::vector<bool> printed(f_.root_complexes.size(), false);
    for (const Package& p : t_.packages) {
      absl::StrAppendFormat(&out_, "Socket %d: %s, %d cores / %d threads\n", p.os_index,
                            p.cpu_model.empty() ? "CPU" : p.cpu_model, p.cores, p.threads);
      for (const NumaNode& n : t_.numa_nodes) {
        if (n.package != p.os_index) continue;
        absl::StrAppendFormat(&out_, "  NUMA node %d: %s, %d CPUs\n", n.os_index,
                              FormatBytes(n.memory_bytes), n.cpus.size());
      }
      for (size_t rc = 0; rc < f_.root_complexes.size(); ++rc) {
        if (f_.root_complexes[rc].package != p.os_index) continue;
        RenderRootComplex(rc, "  ");
        printed[rc] = true;
      }
    }
    for (const NumaNode& n : t_.numa_nodes) {
      if (n.package >= 0) continue;
      absl::StrAppendFormat(&out_, "NUMA node %d: %s, %d CPUs\n", n.os_index,
                            FormatBytes(n.memory_bytes), n.cpus.size());
    }
    for (size_t rc = 0; rc < f_.root_complexes.size(); ++rc) {
      if (!printed[rc]) RenderRootComplex(rc, "");
    }
    RenderGroups();
    RenderMatrix();
    return out_;
  }

 private:
  void RenderRootComplex(size_t rc, const std::string& indent) {
    const RootComplexInfo& info = f_.root_complexes[rc];
    absl::StrAppendFormat(&out_, "%sRoot complex %d (host bridge %s, NUMA node %d): %d GPU(s)\n",
                          indent, rc, t_.pci[info.pci].bus_id, info.numa_node, info.gpus.size());
    for (int c : t_.pci[info.pci].children) RenderNode(c, indent + "  ");
  }

  // Prints bridges only when something interesting (GPU, NIC, NVMe) lies below them.
  bool Interesting(int n) const {
    PciKind k = t_.pci[n].kind;
    if (k == PciKind::kGpu || k == PciKind::kNic || k == PciKind::kNvme) return true;
    for (int c : t_.pci[n].children) {
      if (Interesting(c)) return true;
    }
    return false;
  }

  void RenderNode(int n, const std::string& indent) {
    if (!Interesting(n)) return;
    const PciNode& node = t_.pci[n];
    std::string child_indent = indent + "  ";
    switch (node.kind) {
      case PciKind::kBridge: {
        BridgeRole role = f_.bridge_roles[n];
        if (role == BridgeRole::kSwitchDownstream) {
          child_indent = indent;  // downstream ports add nothing a reader needs
          break;
        }
        absl::StrAppendFormat(&out_, "%s%s %s  %s%s\n", indent,
                              role == BridgeRole::kRootPort ? "Root port" : "PCIe switch",
                              node.bus_id, DescribeLink(node.link),
                              node.device_name.empty() ? "" : "  " + node.device_name);
        break;
      }
      case PciKind::kGpu: {
        int g = gpu_of_pci_.at(n);
        const Gpu& gpu = t_.gpus[g];
        absl::StrAppendFormat(&out_, "%sGPU%d %s  %s, %s  %s%s\n", indent, g, node.bus_id, gpu.name,
                              gpu.memory_bytes ? FormatBytes(gpu.memory_bytes) : "memory unknown",
                              DescribeLink(node.link), f_.gpus[g].consumer_card ? "  (no P2P)" : "");
        break;
      }
      case PciKind::kNic: {
        const Nic* nic = nic_of_pci_.count(n) ? nic_of_pci_.at(n) : nullptr;
        absl::StrAppendFormat(&out_, "%sNIC %s %s  %s  %s\n", indent, node.bus_id,
                              nic && !nic->interface.empty() ? nic->interface : "-",
                              node.device_name, DescribeLink(node.link));
        break;
      }
      case PciKind::kNvme: {
        const Nvme* nvme = nvme_of_pci_.count(n) ? nvme_of_pci_.at(n) : nullptr;
        absl::StrAppendFormat(&out_, "%sNVMe %s %s  %s  %s\n", indent, node.bus_id,
                              nvme && !nvme->block_device.empty() ? nvme->block_device : "-",
                              node.device_name, DescribeLink(node.link));
        break;
      }
      default:
        break;
    }
    for (int c : node.children) RenderNode(c, child_indent);
  }

  void RenderGroups() {
    if (t_.gpus.empty()) {
      absl::StrAppend(&out_, "No GPUs: CPU-only server.\n");
      return;
    }
    absl::StrAppend(&out_, "Contention groups (GPUs whose host traffic shares an uplink):\n");
    for (size_t i = 0; i < f_.contention_groups.size(); ++i) {
      const ContentionGroup& g = f_.contention_groups[i];
      std::vector<std::string> names;
      for (int gpu : g.gpus) names.push_back(absl::StrCat("GPU", gpu));
      absl::StrAppendFormat(&out_, "  group %d: %s  uplink %s %s, %.1f GB/s per GPU when all copy\n",
                            i, absl::StrJoin(names, " "), t_.pci[g.uplink_pci].bus_id,
                            DescribeLink(t_.pci[g.uplink_pci].link),
                            g.uplink_gbytes_per_s / static_cast<double>(g.gpus.size()));
    }
  }

  void RenderMatrix() {
    size_t n = t_.gpus.size();
    if (n < 2) return;
    absl::StrAppend(&out_, "GPU paths (* = peer-to-peer capable):\n      ");
    for (size_t b = 0; b < n; ++b) absl::StrAppendFormat(&out_, "%-6s", absl::StrCat("GPU", b));
    absl::StrAppend(&out_, "\n");
    for (size_t a = 0; a < n; ++a) {
      absl::StrAppendFormat(&out_, "%-6s", absl::StrCat("GPU", a));
      for (size_t b = 0; b < n; ++b) {
        std::string cell = GpuPathName(f_.gpu_paths[a][b]);
        if (f_.p2p[a][b]) cell += "*";
        absl::StrAppendFormat(&out_, "%-6s", cell);
      }
      absl::StrAppend(&out_, "\n");
    }
    absl::StrAppend(&out_,
                    "  NV=NVLink PIX=one PCIe switch PXB=several switches PHB=host bridge "
                    "NODE=same socket SYS=across sockets\n");
  }

  const Topology& t_;
  const TopologyFacts& f_;
  std::map<int, int> gpu_of_pci_;
  std::map<int, const Nic*> nic_of_pci_;
  std::map<int, const Nvme*> nvme_of_pci_;
  std::string out_;
};

}  // namespace

std::string FormatBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? absl::StrCat(bytes, " B") : absl::StrFormat("%.1f %s", v, units[u]);
}

std::string RenderTopology(const Topology& topology, const TopologyFacts& facts) {
  return Renderer(topology, facts).Render();
}

}  // namespace mobius::topology
