#include "host/topology/topology_convert.h"

#include "absl/strings/str_cat.h"
#include "host/topology/pcie.h"

namespace mobius {
namespace {

using topology::PciKind;

v1::PciKind KindToProto(PciKind k) {
  switch (k) {
    case PciKind::kHostBridge: return v1::PCI_KIND_HOST_BRIDGE;
    case PciKind::kBridge: return v1::PCI_KIND_BRIDGE;
    case PciKind::kGpu: return v1::PCI_KIND_GPU;
    case PciKind::kNic: return v1::PCI_KIND_NIC;
    case PciKind::kNvme: return v1::PCI_KIND_NVME;
    case PciKind::kOther: return v1::PCI_KIND_OTHER;
  }
  return v1::PCI_KIND_UNSPECIFIED;
}

PciKind KindFromProto(v1::PciKind k) {
  switch (k) {
    case v1::PCI_KIND_HOST_BRIDGE: return PciKind::kHostBridge;
    case v1::PCI_KIND_BRIDGE: return PciKind::kBridge;
    case v1::PCI_KIND_GPU: return PciKind::kGpu;
    case v1::PCI_KIND_NIC: return PciKind::kNic;
    case v1::PCI_KIND_NVME: return PciKind::kNvme;
    default: return PciKind::kOther;
  }
}

void LinkToProto(const topology::PcieLink& l, v1::PcieLink* p) {
  p->set_generation(l.generation);
  p->set_width(l.width);
  p->set_reported_gbytes_per_s(l.reported_gbytes_per_s);
  p->set_theoretical_gbytes_per_s(topology::LinkGBytesPerSecond(l));
}

topology::PcieLink LinkFromProto(const v1::PcieLink& p) {
  return {p.generation(), p.width(), p.reported_gbytes_per_s()};
}

v1::BridgeRole RoleToProto(topology::BridgeRole r) {
  switch (r) {
    case topology::BridgeRole::kRootPort: return v1::BRIDGE_ROLE_ROOT_PORT;
    case topology::BridgeRole::kSwitchUpstream: return v1::BRIDGE_ROLE_SWITCH_UPSTREAM;
    case topology::BridgeRole::kSwitchDownstream: return v1::BRIDGE_ROLE_SWITCH_DOWNSTREAM;
    default: return v1::BRIDGE_ROLE_NONE;
  }
}

v1::GpuPath PathToProto(topology::GpuPath p) {
  return static_cast<v1::GpuPath>(static_cast<int>(p));
}

}  // namespace

v1::Topology TopologyToProto(const topology::Topology& t, const topology::TopologyFacts& f) {
  v1::Topology p;
  p.set_hostname(t.hostname);
  p.set_source(t.source);
  for (const auto& pkg : t.packages) {
    auto* q = p.add_packages();
    q->set_os_index(pkg.os_index);
    q->set_cpu_model(pkg.cpu_model);
    q->set_cores(pkg.cores);
    q->set_threads(pkg.threads);
  }
  for (const auto& n : t.numa_nodes) {
    auto* q = p.add_numa_nodes();
    q->set_os_index(n.os_index);
    q->set_package(n.package);
    q->set_memory_bytes(n.memory_bytes);
    for (int c : n.cpus) q->add_cpus(c);
  }
  for (size_t i = 0; i < t.pci.size(); ++i) {
    const auto& n = t.pci[i];
    auto* q = p.add_pci();
    q->set_index(static_cast<int>(i));
    q->set_parent(n.parent);
    for (int c : n.children) q->add_children(c);
    q->set_kind(KindToProto(n.kind));
    q->set_bus_id(n.bus_id);
    q->set_vendor_id(n.vendor_id);
    q->set_device_id(n.device_id);
    q->set_class_id(n.class_id);
    q->set_vendor_name(n.vendor_name);
    q->set_device_name(n.device_name);
    LinkToProto(n.link, q->mutable_link());
    q->set_package(n.package);
    q->set_numa_node(n.numa_node);
    for (const auto& d : n.os_devices) q->add_os_devices(d);
    if (i < f.bridge_roles.size()) q->set_bridge_role(RoleToProto(f.bridge_roles[i]));
  }
  for (size_t g = 0; g < t.gpus.size(); ++g) {
    const auto& gpu = t.gpus[g];
    auto* q = p.add_gpus();
    q->set_index(static_cast<int>(g));
    q->set_pci(gpu.pci);
    q->set_bus_id(t.pci[gpu.pci].bus_id);
    q->set_name(gpu.name);
    q->set_memory_bytes(gpu.memory_bytes);
    q->set_uuid(gpu.uuid);
    if (g < f.gpus.size()) {
      const auto& gf = f.gpus[g];
      q->set_root_complex(gf.root_complex);
      q->set_switch_index(gf.switch_index);
      q->set_package(gf.package);
      q->set_numa_node(gf.numa_node);
      q->set_contention_group(gf.contention_group);
      q->set_consumer_card(gf.consumer_card);
      q->set_link_gbytes_per_s(gf.link_gbytes_per_s);
      q->set_host_path_gbytes_per_s(gf.host_path_gbytes_per_s);
    }
  }
  for (const auto& n : t.nics) {
    auto* q = p.add_nics();
    q->set_pci(n.pci);
    q->set_interface(n.interface);
    q->set_address(n.address);
  }
  for (const auto& n : t.nvmes) {
    auto* q = p.add_nvmes();
    q->set_pci(n.pci);
    q->set_block_device(n.block_device);
  }
  for (const auto& l : t.nvlinks) {
    auto* q = p.add_nvlinks();
    q->set_gpu_a(l.gpu_a);
    q->set_gpu_b(l.gpu_b);
    q->set_gbytes_per_s(l.gbytes_per_s);
  }
  for (const auto& s : f.switches) {
    auto* q = p.add_switches();
    q->set_pci(s.pci);
    q->set_root_complex(s.root_complex);
    LinkToProto(s.uplink, q->mutable_uplink());
    for (int g : s.gpus) q->add_gpus(g);
  }
  for (const auto& rc : f.root_complexes) {
    auto* q = p.add_root_complexes();
    q->set_pci(rc.pci);
    q->set_package(rc.package);
    q->set_numa_node(rc.numa_node);
    for (int g : rc.gpus) q->add_gpus(g);
    for (int s : rc.switches) q->add_switches(s);
  }
  for (const auto& cg : f.contention_groups) {
    auto* q = p.add_contention_groups();
    q->set_uplink_pci(cg.uplink_pci);
    q->set_root_complex(cg.root_complex);
    q->set_uplink_gbytes_per_s(cg.uplink_gbytes_per_s);
    for (int g : cg.gpus) q->add_gpus(g);
  }
  for (size_t a = 0; a < f.gpu_paths.size(); ++a) {
    auto* row = p.add_gpu_paths();
    for (size_t b = 0; b < f.gpu_paths[a].size(); ++b) {
      row->add_path(PathToProto(f.gpu_paths[a][b]));
      row->add_p2p(f.p2p[a][b]);
    }
  }
  return p;
}

absl::StatusOr<topology::Topology> TopologyFromProto(const v1::Topology& p) {
  topology::Topology t;
  t.hostname = p.hostname();
  t.source = p.source();
  const int npci = p.pci_size();
  auto check = [&](int index, int limit, const std::string& field) -> absl::Status {
    if (index < -1 || index >= limit) {
      return absl::InvalidArgumentError(
          absl::StrCat("topology.", field, ": index ", index, " out of range [0, ", limit, ")"));
    }
    return absl::OkStatus();
  };
  for (const auto& q : p.packages()) {
    t.packages.push_back({q.os_index(), q.cpu_model(), q.cores(), q.threads()});
  }
  for (const auto& q : p.numa_nodes()) {
    t.numa_nodes.push_back(
        {q.os_index(), q.package(), q.memory_bytes(), {q.cpus().begin(), q.cpus().end()}});
  }
  for (int i = 0; i < npci; ++i) {
    const auto& q = p.pci(i);
    if (auto s = check(q.parent(), npci, absl::StrCat("pci[", i, "].parent")); !s.ok()) return s;
    topology::PciNode n;
    n.kind = KindFromProto(q.kind());
    n.parent = q.parent();
    for (int c : q.children()) {
      if (auto s = check(c, npci, absl::StrCat("pci[", i, "].children")); !s.ok()) return s;
      n.children.push_back(c);
    }
    n.bus_id = q.bus_id();
    n.vendor_id = static_cast<uint16_t>(q.vendor_id());
    n.device_id = static_cast<uint16_t>(q.device_id());
    n.class_id = static_cast<uint16_t>(q.class_id());
    n.vendor_name = q.vendor_name();
    n.device_name = q.device_name();
    n.link = LinkFromProto(q.link());
    n.package = q.package();
    n.numa_node = q.numa_node();
    n.os_devices.assign(q.os_devices().begin(), q.os_devices().end());
    t.pci.push_back(std::move(n));
  }
  for (int g = 0; g < p.gpus_size(); ++g) {
    const auto& q = p.gpus(g);
    if (q.pci() < 0 || q.pci() >= npci) {
      return absl::InvalidArgumentError(absl::StrCat("topology.gpus[", g, "].pci out of range"));
    }
    t.gpus.push_back({q.pci(), q.name(), q.memory_bytes(), q.uuid()});
  }
  for (const auto& q : p.nics()) {
    if (auto s = check(q.pci(), npci, "nics.pci"); !s.ok()) return s;
    t.nics.push_back({q.pci(), q.interface(), q.address()});
  }
  for (const auto& q : p.nvmes()) {
    if (auto s = check(q.pci(), npci, "nvmes.pci"); !s.ok()) return s;
    t.nvmes.push_back({q.pci(), q.block_device()});
  }
  for (const auto& q : p.nvlinks()) {
    if (auto s = check(q.gpu_a(), p.gpus_size(), "nvlinks.gpu_a"); !s.ok()) return s;
    if (auto s = check(q.gpu_b(), p.gpus_size(), "nvlinks.gpu_b"); !s.ok()) return s;
    t.nvlinks.push_back({q.gpu_a(), q.gpu_b(), q.gbytes_per_s()});
  }
  return t;
}

}  // namespace mobius
