#include "host/scheduler/node_resources.h"

#include <algorithm>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace mobius::jobs {
namespace {

bool AllDigits(absl::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return absl::ascii_isdigit(c); });
}

// The GPU an allow-list entry names, or INVALID_ARGUMENT with the entry's number and text.
absl::StatusOr<int> ResolveEntry(absl::string_view entry, int number,
                                 const std::vector<GpuResource>& gpus) {
  const std::string where = absl::StrCat("entry ", number, " \"", entry, "\"");
  if (entry.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("entry ", number, " is empty"));
  }
  if (AllDigits(entry)) {
    int index = 0;
    if (!absl::SimpleAtoi(entry, &index) || index >= static_cast<int>(gpus.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": no such GPU, the node has ", gpus.size(),
                       gpus.size() == 1 ? " GPU (index 0)" : " GPUs",
                       gpus.size() > 1 ? absl::StrCat(" (indices 0-", gpus.size() - 1, ")") : ""));
    }
    return index;
  }
  if (absl::StartsWithIgnoreCase(entry, "MIG-")) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": MIG instances are not supported; name whole GPUs"));
  }
  if (!absl::StartsWithIgnoreCase(entry, "GPU-") || entry.size() <= 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": not a GPU index or UUID (\"GPU-...\")"));
  }
  std::vector<int> matches;
  for (const GpuResource& g : gpus) {
    if (absl::StartsWithIgnoreCase(g.uuid, entry)) matches.push_back(g.index);
  }
  if (matches.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": no GPU has this UUID"));
  }
  if (matches.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": ambiguous UUID prefix, matches GPUs ", absl::StrJoin(matches, ",")));
  }
  return matches[0];
}

}  // namespace

std::vector<GpuResource> GpuResourcesFromTopology(const topology::Topology& topology,
                                                  const topology::TopologyFacts& facts) {
  std::vector<GpuResource> out;
  out.reserve(topology.gpus.size());
  for (size_t i = 0; i < topology.gpus.size(); ++i) {
    const topology::Gpu& gpu = topology.gpus[i];
    GpuResource r;
    r.index = static_cast<int>(i);
    r.name = gpu.name;
    r.uuid = gpu.uuid;
    r.memory_bytes = gpu.memory_bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                         ? std::numeric_limits<int64_t>::max()
                         : static_cast<int64_t>(gpu.memory_bytes);
    if (i < facts.gpus.size()) {
      const topology::GpuFacts& f = facts.gpus[i];
      r.switch_index = f.switch_index;
      r.contention_group = f.contention_group;
      r.root_complex = f.root_complex;
      r.package = f.package;
      r.numa_node = f.numa_node;
    }
    out.push_back(std::move(r));
  }
  for (const topology::NvLink& link : topology.nvlinks) {
    const int n = static_cast<int>(out.size());
    if (link.gpu_a < 0 || link.gpu_b < 0 || link.gpu_a >= n || link.gpu_b >= n ||
        link.gpu_a == link.gpu_b) {
      continue;
    }
    out[link.gpu_a].nvlink_peers.push_back(link.gpu_b);
    out[link.gpu_b].nvlink_peers.push_back(link.gpu_a);
  }
  for (GpuResource& r : out) {
    std::sort(r.nvlink_peers.begin(), r.nvlink_peers.end());
    r.nvlink_peers.erase(std::unique(r.nvlink_peers.begin(), r.nvlink_peers.end()),
                         r.nvlink_peers.end());
  }
  return out;
}

absl::StatusOr<std::vector<int>> ParseGpuAllowList(absl::string_view spec,
                                                   const std::vector<GpuResource>& gpus) {
  std::vector<int> out;
  if (absl::StripAsciiWhitespace(spec).empty()) return out;
  std::vector<absl::string_view> entries = absl::StrSplit(spec, ',');
  std::vector<int> entry_of(gpus.size(), 0);  // 1-based entry that named each GPU, 0 = none
  for (size_t e = 0; e < entries.size(); ++e) {
    const int number = static_cast<int>(e) + 1;
    const absl::string_view entry = absl::StripAsciiWhitespace(entries[e]);
    MOBIUS_ASSIGN_OR_RETURN(int index, ResolveEntry(entry, number, gpus));
    if (entry_of[index] != 0) {
      return absl::InvalidArgumentError(absl::StrCat("entry ", number, " \"", entry, "\": GPU ",
                                                     index, " is already entry ", entry_of[index]));
    }
    entry_of[index] = number;
    out.push_back(index);
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<NodeResources> MakeNodeResources(const topology::Topology& topology,
                                                const topology::TopologyFacts& facts,
                                                const NodeConfig& config) {
  if (config.host_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("host_bytes: ", config.host_bytes, " is negative"));
  }
  if (config.pinned_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("pinned_bytes: ", config.pinned_bytes, " is negative"));
  }
  NodeResources node;
  node.gpus = GpuResourcesFromTopology(topology, facts);
  node.host_bytes = config.host_bytes;
  node.pinned_bytes = config.pinned_bytes;
  if (config.gpu_allow_list.has_value()) {
    absl::StatusOr<std::vector<int>> allowed = ParseGpuAllowList(*config.gpu_allow_list, node.gpus);
    if (!allowed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("gpu_allow_list \"", *config.gpu_allow_list,
                                                     "\": ", allowed.status().message()));
    }
    node.allowed_gpus = *std::move(allowed);
  } else {
    for (const GpuResource& g : node.gpus) node.allowed_gpus.push_back(g.index);
  }
  return node;
}

}  // namespace mobius::jobs
