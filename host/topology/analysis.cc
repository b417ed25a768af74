#include "host/topology/analysis.h"

#include <algorithm>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "host/topology/pcie.h"

namespace mobius::topology {
namespace {

bool IsBridge(const Topology& t, int i) { return i >= 0 && t.pci[i].kind == PciKind::kBridge; }

bool HasBridgeChild(const Topology& t, int i) {
  for (int c : t.pci[i].children) {
    if (IsBridge(t, c)) return true;
  }
  return false;
}

// Roles alternate down the tree: root port -> switch upstream -> switch downstream -> (nested)
// switch upstream -> ...
std::vector<BridgeRole> ComputeBridgeRoles(const Topology& t) {
  std::vector<BridgeRole> roles(t.pci.size(), BridgeRole::kNone);
  // Parents always precede children in Topology::pci only if the source says so; walk explicitly.
  std::vector<int> stack;
  for (size_t i = 0; i < t.pci.size(); ++i) {
    if (t.pci[i].parent < 0) stack.push_back(static_cast<int>(i));
  }
  while (!stack.empty()) {
    int n = stack.back();
    stack.pop_back();
    const PciNode& node = t.pci[n];
    if (node.kind == PciKind::kBridge) {
      BridgeRole parent_role = node.parent >= 0 ? roles[node.parent] : BridgeRole::kNone;
      bool parent_is_host = node.parent >= 0 && t.pci[node.parent].kind == PciKind::kHostBridge;
      if (parent_is_host || node.parent < 0) {
        // A "root port" that fans out to several bridges is a switch whose root port hwloc hid.
        int bridge_children = 0;
        for (int c : node.children) bridge_children += IsBridge(t, c) ? 1 : 0;
        roles[n] = bridge_children > 1 ? BridgeRole::kSwitchUpstream : BridgeRole::kRootPort;
      } else if (parent_role == BridgeRole::kSwitchUpstream) {
        roles[n] = BridgeRole::kSwitchDownstream;
      } else if (HasBridgeChild(t, n)) {
        roles[n] = BridgeRole::kSwitchUpstream;
      } else {
        // A lone bridge below a port with only an endpoint under it (e.g. a PCIe-to-PCI bridge).
        roles[n] = BridgeRole::kSwitchDownstream;
      }
    }
    for (int c : node.children) stack.push_back(c);
  }
  return roles;
}

// Ancestors of a PCI node, nearest first, ending with its host bridge.
std::vector<int> Ancestors(const Topology& t, int n) {
  std::vector<int> out;
  for (int p = t.pci[n].parent; p >= 0; p = t.pci[p].parent) out.push_back(p);
  return out;
}

int HostBridgeOf(const Topology& t, int n) {
  int top = n;
  while (t.pci[top].parent >= 0) top = t.pci[top].parent;
  return t.pci[top].kind == PciKind::kHostBridge ? top : -1;
}

}  // namespace

bool IsConsumerGpuName(const std::string& name) {
  std::string lower = absl::AsciiStrToLower(name);
  return absl::StrContains(lower, "geforce") || absl::StrContains(lower, "titan");
}

const char* GpuPathName(GpuPath path) {
  switch (path) {
    case GpuPath::kSelf: return "X";
    case GpuPath::kNvLink: return "NV";
    case GpuPath::kSwitch: return "PIX";
    case GpuPath::kMultiSwitch: return "PXB";
    case GpuPath::kHostBridge: return "PHB";
    case GpuPath::kNode: return "NODE";
    case GpuPath::kSystem: return "SYS";
  }
  return "?";
}

TopologyFacts Analyze(const Topology& t) {
  TopologyFacts f;
  f.bridge_roles = ComputeBridgeRoles(t);
  const size_t num_gpus = t.gpus.size();

  // Root complexes, in Topology::pci order.
  std::map<int, int> rc_of_host_bridge;
  for (size_t i = 0; i < t.pci.size(); ++i) {
    if (t.pci[i].kind != PciKind::kHostBridge) continue;
    rc_of_host_bridge[static_cast<int>(i)] = static_cast<int>(f.root_complexes.size());
    RootComplexInfo rc;
    rc.pci = static_cast<int>(i);
    rc.package = t.pci[i].package;
    rc.numa_node = t.pci[i].numa_node;
    f.root_complexes.push_back(rc);
  }
  auto rc_index = [&](int pci) {
    int hb = HostBridgeOf(t, pci);
    auto it = rc_of_host_bridge.find(hb);
    return it == rc_of_host_bridge.end() ? -1 : it->second;
  };

  // Switches, in Topology::pci order.
  std::map<int, int> switch_of_pci;
  for (size_t i = 0; i < t.pci.size(); ++i) {
    if (f.bridge_roles[i] != BridgeRole::kSwitchUpstream) continue;
    int idx = static_cast<int>(f.switches.size());
    switch_of_pci[static_cast<int>(i)] = idx;
    SwitchInfo sw;
    sw.pci = static_cast<int>(i);
    sw.root_complex = rc_index(static_cast<int>(i));
    sw.uplink = t.pci[i].link;
    f.switches.push_back(sw);
    if (sw.root_complex >= 0) f.root_complexes[sw.root_complex].switches.push_back(idx);
  }

  // Per-GPU facts and contention groups (keyed by the uplink node).
  std::map<int, int> group_of_uplink;
  f.gpus.resize(num_gpus);
  for (size_t g = 0; g < num_gpus; ++g) {
    const int pci = t.gpus[g].pci;
    GpuFacts& gf = f.gpus[g];
    const PciNode& node = t.pci[pci];
    gf.package = node.package;
    gf.numa_node = node.numa_node;
    gf.root_complex = rc_index(pci);
    gf.consumer_card = IsConsumerGpuName(t.gpus[g].name) || IsConsumerGpuName(node.device_name);
    gf.link_gbytes_per_s = LinkGBytesPerSecond(node.link);
    if (gf.root_complex >= 0) f.root_complexes[gf.root_complex].gpus.push_back(static_cast<int>(g));

    std::vector<int> up = Ancestors(t, pci);
    double narrowest = gf.link_gbytes_per_s;
    int uplink = pci;  // the node just below the host bridge on the GPU's path
    for (int a : up) {
      auto sw = switch_of_pci.find(a);
      if (sw != switch_of_pci.end()) {
        if (gf.switch_index < 0) gf.switch_index = sw->second;
        f.switches[sw->second].gpus.push_back(static_cast<int>(g));
      }
      if (t.pci[a].kind == PciKind::kHostBridge) break;
      uplink = a;
      double bw = LinkGBytesPerSecond(t.pci[a].link);
      if (bw > 0 && (narrowest <= 0 || bw < narrowest)) narrowest = bw;
    }
    gf.host_path_gbytes_per_s = narrowest;
    auto [it, inserted] = group_of_uplink.emplace(uplink, static_cast<int>(f.contention_groups.size()));
    if (inserted) {
      ContentionGroup group;
      group.uplink_pci = uplink;
      group.root_complex = gf.root_complex;
      group.uplink_gbytes_per_s = LinkGBytesPerSecond(t.pci[uplink].link);
      f.contention_groups.push_back(group);
    }
    gf.contention_group = it->second;
    f.contention_groups[it->second].gpus.push_back(static_cast<int>(g));
  }

  // Pairwise paths and P2P.
  std::vector<std::vector<double>> nvlink(num_gpus, std::vector<double>(num_gpus, 0));
  for (const NvLink& l : t.nvlinks) {
    if (l.gpu_a < 0 || l.gpu_b < 0 || l.gpu_a >= static_cast<int>(num_gpus) ||
        l.gpu_b >= static_cast<int>(num_gpus) || l.gpu_a == l.gpu_b) {
      continue;
    }
    nvlink[l.gpu_a][l.gpu_b] += l.gbytes_per_s;
    nvlink[l.gpu_b][l.gpu_a] += l.gbytes_per_s;
  }
  f.gpu_paths.assign(num_gpus, std::vector<GpuPath>(num_gpus, GpuPath::kSelf));
  f.p2p.assign(num_gpus, std::vector<bool>(num_gpus, false));
  for (size_t a = 0; a < num_gpus; ++a) {
    std::vector<int> up_a = Ancestors(t, t.gpus[a].pci);
    for (size_t b = 0; b < num_gpus; ++b) {
      if (a == b) continue;
      GpuPath path;
      std::vector<int> up_b = Ancestors(t, t.gpus[b].pci);
      auto common = std::find_first_of(up_a.begin(), up_a.end(), up_b.begin(), up_b.end());
      if (nvlink[a][b] > 0) {
        path = GpuPath::kNvLink;
      } else if (common == up_a.end()) {
        const GpuFacts& fa = f.gpus[a];
        const GpuFacts& fb = f.gpus[b];
        bool same_socket = fa.package >= 0 && fa.package == fb.package;
        path = same_socket ? GpuPath::kNode : GpuPath::kSystem;
      } else if (t.pci[*common].kind == PciKind::kHostBridge) {
        path = GpuPath::kHostBridge;
      } else {
        // Below a common bridge: one switch if no other switch lies between it and either GPU.
        auto switches_below = [&](const std::vector<int>& up) {
          int n = 0;
          for (int x : up) {
            if (x == *common) break;
            n += f.bridge_roles[x] == BridgeRole::kSwitchUpstream ? 1 : 0;
          }
          return n;
        };
        path = switches_below(up_a) + switches_below(up_b) == 0 ? GpuPath::kSwitch
                                                                : GpuPath::kMultiSwitch;
      }
      f.gpu_paths[a][b] = path;
      bool pcie_p2p = (path == GpuPath::kSwitch || path == GpuPath::kMultiSwitch) &&
                      !f.gpus[a].consumer_card && !f.gpus[b].consumer_card;
      f.p2p[a][b] = path == GpuPath::kNvLink || pcie_p2p;
    }
  }
  return f;
}

}  // namespace mobius::topology
