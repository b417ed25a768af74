#include "host/topology/hwloc_convert.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <tuple>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "host/topology/pcie.h"

namespace mobius::topology::internal {
namespace {

constexpr uint16_t kNvidiaVendorId = 0x10de;

std::string Info(hwloc_obj_t obj, const char* name) {
  const char* v = hwloc_obj_get_info_by_name(obj, name);
  return v ? std::string(v) : std::string();
}

int IntInfo(hwloc_obj_t obj, const char* name) {
  int v = 0;
  return absl::SimpleAtoi(Info(obj, name), &v) ? v : 0;
}

std::string BusId(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p) {
  return absl::StrFormat("%04x:%02x:%02x.%01x", p.domain, p.bus, p.dev, p.func);
}

bool IsPciObject(hwloc_obj_t obj) {
  if (obj->type == HWLOC_OBJ_PCI_DEVICE) return true;
  return obj->type == HWLOC_OBJ_BRIDGE;
}

PciKind KindOf(hwloc_obj_t obj) {
  if (obj->type == HWLOC_OBJ_BRIDGE) {
    return obj->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST ? PciKind::kHostBridge
                                                                   : PciKind::kBridge;
  }
  const auto& p = obj->attr->pcidev;
  uint8_t base_class = p.class_id >> 8;
  if (base_class == 0x03 && p.vendor_id == kNvidiaVendorId) return PciKind::kGpu;
  if (base_class == 0x02) return PciKind::kNic;
  if (p.class_id == 0x0108) return PciKind::kNvme;
  return PciKind::kOther;
}

// The CPU package and NUMA node an I/O object is local to.
void Locality(hwloc_topology_t topo, hwloc_obj_t obj, int* package, int* numa) {
  hwloc_obj_t anchor = hwloc_get_non_io_ancestor_obj(topo, obj);
  *package = -1;
  *numa = -1;
  if (anchor == nullptr) return;
  hwloc_obj_t pkg = anchor->type == HWLOC_OBJ_PACKAGE
                        ? anchor
                        : hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, anchor);
  if (pkg == nullptr && hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE) == 1) {
    pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
  }
  if (pkg != nullptr) *package = static_cast<int>(pkg->os_index);
  if (anchor->nodeset != nullptr && hwloc_bitmap_weight(anchor->nodeset) == 1) {
    *numa = hwloc_bitmap_first(anchor->nodeset);
  }
}

PcieLink LinkOf(hwloc_obj_t obj) {
  PcieLink link;
  link.reported_gbytes_per_s = obj->type == HWLOC_OBJ_BRIDGE
                                   ? obj->attr->bridge.upstream.pci.linkspeed
                                   : obj->attr->pcidev.linkspeed;
  if (obj->type == HWLOC_OBJ_BRIDGE && obj->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {
    link.reported_gbytes_per_s = 0;
  }
  link.generation = IntInfo(obj, "PCIeLinkGen");
  link.width = IntInfo(obj, "PCIeLinkWidth");
  return InferGenerationAndWidth(link);
}

class Converter {
 public:
  Converter(hwloc_topology_t topo, Topology* out) : topo_(topo), out_(out) {}

  void ConvertCpus() {
    int npkg = hwloc_get_nbobjs_by_type(topo_, HWLOC_OBJ_PACKAGE);
    for (int i = 0; i < npkg; ++i) {
      hwloc_obj_t pkg = hwloc_get_obj_by_type(topo_, HWLOC_OBJ_PACKAGE, i);
      Package p;
      p.os_index = static_cast<int>(pkg->os_index);
      p.cpu_model = Info(pkg, "CPUModel");
      p.cores = hwloc_get_nbobjs_inside_cpuset_by_type(topo_, pkg->cpuset, HWLOC_OBJ_CORE);
      p.threads = hwloc_get_nbobjs_inside_cpuset_by_type(topo_, pkg->cpuset, HWLOC_OBJ_PU);
      out_->packages.push_back(p);
    }
    int nnuma = hwloc_get_nbobjs_by_type(topo_, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < nnuma; ++i) {
      hwloc_obj_t node = hwloc_get_obj_by_type(topo_, HWLOC_OBJ_NUMANODE, i);
      NumaNode n;
      n.os_index = static_cast<int>(node->os_index);
      n.memory_bytes = node->attr->numanode.local_memory;
      hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(topo_, HWLOC_OBJ_PACKAGE, node);
      if (pkg == nullptr && npkg == 1) pkg = hwloc_get_obj_by_type(topo_, HWLOC_OBJ_PACKAGE, 0);
      n.package = pkg ? static_cast<int>(pkg->os_index) : -1;
      hwloc_obj_t pu = nullptr;
      while ((pu = hwloc_get_next_obj_inside_cpuset_by_type(topo_, node->cpuset, HWLOC_OBJ_PU,
                                                            pu)) != nullptr) {
        n.cpus.push_back(static_cast<int>(pu->os_index));
      }
      out_->numa_nodes.push_back(n);
    }
  }

  // Depth-first over the whole tree so parents are numbered before their children.
  void Walk(hwloc_obj_t obj, int pci_parent) {
    int self = pci_parent;
    if (IsPciObject(obj)) {
      self = AddPci(obj, pci_parent);
    } else if (obj->type == HWLOC_OBJ_OS_DEVICE && pci_parent >= 0) {
      AddOsDevice(obj, pci_parent);
    }
    for (hwloc_obj_t c = obj->first_child; c; c = c->next_sibling) Walk(c, self);
    for (hwloc_obj_t c = obj->io_first_child; c; c = c->next_sibling) Walk(c, self);
  }

  void ConvertNvLinks() {
    unsigned nr = 0;
    if (hwloc_distances_get_by_name(topo_, "NVLinkBandwidth", &nr, nullptr, 0) != 0 || nr == 0) {
      return;
    }
    std::vector<hwloc_distances_s*> dists(nr);
    if (hwloc_distances_get_by_name(topo_, "NVLinkBandwidth", &nr, dists.data(), 0) != 0) return;
    for (unsigned d = 0; d < nr; ++d) {
      hwloc_distances_s* dist = dists[d];
      for (unsigned i = 0; i < dist->nbobjs; ++i) {
        for (unsigned j = i + 1; j < dist->nbobjs; ++j) {
          int a = GpuOfObject(dist->objs[i]);
          int b = GpuOfObject(dist->objs[j]);
          uint64_t mbps = std::max(dist->values[i * dist->nbobjs + j],
                                   dist->values[j * dist->nbobjs + i]);
          if (a < 0 || b < 0 || a == b || mbps == 0) continue;
          out_->nvlinks.push_back({std::min(a, b), std::max(a, b), mbps / 1000.0});
        }
      }
      hwloc_distances_release(topo_, dist);
    }
    std::sort(out_->nvlinks.begin(), out_->nvlinks.end(),
              [](const NvLink& x, const NvLink& y) {
                return std::tie(x.gpu_a, x.gpu_b) < std::tie(y.gpu_a, y.gpu_b);
              });
  }

  // GPUs, NICs and NVMe drives in bus-id order.
  void CollectEndpoints() {
    std::vector<int> order(out_->pci.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return out_->pci[a].bus_id < out_->pci[b].bus_id; });
    for (int i : order) {
      const PciNode& n = out_->pci[i];
      if (n.kind == PciKind::kGpu) {
        gpu_of_pci_[i] = static_cast<int>(out_->gpus.size());
        Gpu g = gpu_details_[i];
        g.pci = i;
        if (g.name.empty()) g.name = n.device_name;
        out_->gpus.push_back(g);
      } else if (n.kind == PciKind::kNic) {
        Nic nic = nic_details_[i];
        nic.pci = i;
        out_->nics.push_back(nic);
      } else if (n.kind == PciKind::kNvme) {
        Nvme nvme = nvme_details_[i];
        nvme.pci = i;
        out_->nvmes.push_back(nvme);
      }
    }
  }

 private:
  int AddPci(hwloc_obj_t obj, int parent) {
    PciNode n;
    n.kind = KindOf(obj);
    n.parent = parent;
    if (n.kind == PciKind::kHostBridge) {
      const auto& d = obj->attr->bridge.downstream.pci;
      n.bus_id = absl::StrFormat("%04x:[%02x-%02x]", d.domain, d.secondary_bus, d.subordinate_bus);
      n.parent = -1;
    } else {
      const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p =
          obj->type == HWLOC_OBJ_BRIDGE ? obj->attr->bridge.upstream.pci : obj->attr->pcidev;
      n.bus_id = BusId(p);
      n.vendor_id = p.vendor_id;
      n.device_id = p.device_id;
      n.class_id = p.class_id;
      n.vendor_name = Info(obj, "PCIVendor");
      n.device_name = Info(obj, "PCIDevice");
    }
    n.link = LinkOf(obj);
    Locality(topo_, obj, &n.package, &n.numa_node);
    int index = static_cast<int>(out_->pci.size());
    out_->pci.push_back(n);
    if (n.parent >= 0) out_->pci[n.parent].children.push_back(index);
    pci_of_object_[obj] = index;
    return index;
  }

  void AddOsDevice(hwloc_obj_t obj, int pci) {
    PciNode& n = out_->pci[pci];
    if (obj->name != nullptr) n.os_devices.push_back(obj->name);
    pci_of_object_[obj] = pci;
    if (n.kind == PciKind::kGpu) {
      Gpu& g = gpu_details_[pci];
      if (std::string model = Info(obj, "GPUModel"); !model.empty()) g.name = model;
      if (std::string uuid = Info(obj, "NVIDIAUUID"); !uuid.empty()) g.uuid = uuid;
      for (const char* key : {"CUDAGlobalMemorySize", "OpenCLGlobalMemorySize"}) {
        uint64_t kib = 0;
        if (g.memory_bytes == 0 && absl::SimpleAtoi(Info(obj, key), &kib)) g.memory_bytes = kib * 1024;
      }
    } else if (n.kind == PciKind::kNic && obj->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK) {
      Nic& nic = nic_details_[pci];
      if (nic.interface.empty() && obj->name != nullptr) nic.interface = obj->name;
      if (nic.address.empty()) nic.address = Info(obj, "Address");
    } else if (n.kind == PciKind::kNvme && obj->attr->osdev.type == HWLOC_OBJ_OSDEV_BLOCK) {
      Nvme& nvme = nvme_details_[pci];
      if (nvme.block_device.empty() && obj->name != nullptr) nvme.block_device = obj->name;
    }
  }

  int GpuOfObject(hwloc_obj_t obj) {
    auto it = pci_of_object_.find(obj);
    if (it == pci_of_object_.end()) return -1;
    auto g = gpu_of_pci_.find(it->second);
    return g == gpu_of_pci_.end() ? -1 : g->second;
  }

  hwloc_topology_t topo_;
  Topology* out_;
  std::map<hwloc_obj_t, int> pci_of_object_;  // PCI objects and their OS devices -> pci index
  std::map<int, int> gpu_of_pci_;
  std::map<int, Gpu> gpu_details_;
  std::map<int, Nic> nic_details_;
  std::map<int, Nvme> nvme_details_;
};

}  // namespace

absl::StatusOr<Topology> ConvertHwloc(hwloc_topology_t topo, const std::string& source) {
  Topology out;
  out.source = source;
  hwloc_obj_t root = hwloc_get_root_obj(topo);
  out.hostname = Info(root, "HostName");
  Converter c(topo, &out);
  c.ConvertCpus();
  c.Walk(root, -1);
  c.CollectEndpoints();
  c.ConvertNvLinks();
  return out;
}

namespace {

std::string ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

// "16.0 GT/s PCIe" -> 4; 0 when unreadable.
int GenerationFromSysfs(const std::string& speed) {
  double gts = std::strtod(speed.c_str(), nullptr);
  if (gts >= 63) return 6;
  if (gts >= 31) return 5;
  if (gts >= 15) return 4;
  if (gts >= 7) return 3;
  if (gts >= 4.5) return 2;
  if (gts >= 2) return 1;
  return 0;
}

}  // namespace

void AddSysfsLinkInfos(hwloc_topology_t topo, const std::string& sysfs_pci_root) {
  // Idle GPUs train their link down to Gen1 to save power, so the current speed understates what
  // the link delivers under load. The generation is the lower of the device's and its upstream
  // port's maximum; the width is the current one (a x16 card in a x8 slot runs x8).
  auto max_gen = [&](hwloc_obj_t o) {
    const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p =
        o->type == HWLOC_OBJ_BRIDGE ? o->attr->bridge.upstream.pci : o->attr->pcidev;
    return GenerationFromSysfs(ReadLine(sysfs_pci_root + "/" + BusId(p) + "/max_link_speed"));
  };
  for (hwloc_obj_type_t type : {HWLOC_OBJ_PCI_DEVICE, HWLOC_OBJ_BRIDGE}) {
    for (hwloc_obj_t o = hwloc_get_next_obj_by_type(topo, type, nullptr); o;
         o = hwloc_get_next_obj_by_type(topo, type, o)) {
      if (type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_PCI) continue;
      if (hwloc_obj_get_info_by_name(o, "PCIeLinkGen") != nullptr) continue;
      const hwloc_obj_attr_u::hwloc_pcidev_attr_s& p =
          type == HWLOC_OBJ_BRIDGE ? o->attr->bridge.upstream.pci : o->attr->pcidev;
      std::string dir = sysfs_pci_root + "/" + BusId(p);
      int gen = max_gen(o);
      hwloc_obj_t parent = o->parent;
      if (parent != nullptr && parent->type == HWLOC_OBJ_BRIDGE &&
          parent->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI) {
        int parent_gen = max_gen(parent);
        if (parent_gen > 0 && (gen == 0 || parent_gen < gen)) gen = parent_gen;
      }
      int lanes = 0;
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadLine(dir + "/current_link_width")),
                            &lanes) || lanes <= 0) {
        absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadLine(dir + "/max_link_width")), &lanes);
      }
      if (gen == 0 || lanes <= 0) continue;
      hwloc_obj_add_info(o, "PCIeLinkGen", std::to_string(gen).c_str());
      hwloc_obj_add_info(o, "PCIeLinkWidth", std::to_string(lanes).c_str());
    }
  }
}

}  // namespace mobius::topology::internal
