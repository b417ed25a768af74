#include "server/topology/topology.h"

namespace mobius::topology {

const char* PciKindName(PciKind kind) {
  switch (kind) {
    case PciKind::kHostBridge: return "host bridge";
    case PciKind::kBridge: return "bridge";
    case PciKind::kGpu: return "GPU";
    case PciKind::kNic: return "NIC";
    case PciKind::kNvme: return "NVMe";
    case PciKind::kOther: return "device";
  }
  return "?";
}

}  // namespace mobius::topology
