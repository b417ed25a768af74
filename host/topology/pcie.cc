#include "host/topology/pcie.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace mobius::topology {

double PcieLaneGBytesPerSecond(int generation) {
  switch (generation) {
    case 1: return 2.5 * 8 / 10 / 8;
    case 2: return 5.0 * 8 / 10 / 8;
    case 3: return 8.0 * 128 / 130 / 8;
    case 4: return 16.0 * 128 / 130 / 8;
    case 5: return 32.0 * 128 / 130 / 8;
    case 6: return 64.0 * 242 / 256 / 8;  // FLIT mode, PAM4
    default: return 0;
  }
}

double LinkGBytesPerSecond(const PcieLink& link) {
  double lane = PcieLaneGBytesPerSecond(link.generation);
  if (lane > 0 && link.width > 0) return lane * link.width;
  return link.reported_gbytes_per_s;
}

PcieLink InferGenerationAndWidth(PcieLink link) {
  if ((link.generation > 0 && link.width > 0) || link.reported_gbytes_per_s <= 0) return link;
  for (int width : {16, 8, 4, 2, 1, 32, 12}) {
    for (int gen = 1; gen <= 6; ++gen) {
      double expected = PcieLaneGBytesPerSecond(gen) * width;
      if (std::fabs(expected - link.reported_gbytes_per_s) <= 0.02 * expected) {
        link.generation = gen;
        link.width = width;
        return link;
      }
    }
  }
  return link;
}

std::string DescribeLink(const PcieLink& link) {
  double gbps = LinkGBytesPerSecond(link);
  if (link.generation > 0 && link.width > 0) {
    return absl::StrFormat("PCIe %d.0 x%d (%.1f GB/s)", link.generation, link.width, gbps);
  }
  if (gbps > 0) return absl::StrFormat("PCIe ? (%.1f GB/s)", gbps);
  return "PCIe link unknown";
}

}  // namespace mobius::topology
