// Topology-aware GPU choice: which k of the free GPUs a job gets.
//
// Host traffic of a GPU crosses its contention group's uplink (the link into the root complex,
// analysis.h): on the paper testbed four GPUs share one PCIe 3.0 x16 uplink per switch. Mobius
// streams every stage's weights and gradients over that uplink, so the cost of a choice is counted
// in GPU pairs that share an uplink. For a candidate set S, with
//   s_g = GPUs of S in contention group g,  n_g = busy GPUs in g (held by running jobs, or by jobs
//   started earlier in the same scheduling round); a GPU without a group is a group of its own:
//
//   self_pairs         = sum_g s_g (s_g - 1) / 2   the job's own GPU pairs on one uplink
//   interference_pairs = sum_g s_g n_g             (job GPU, other job's GPU) pairs on one uplink
//   uplink_pairs       = self_pairs + interference_pairs
//                      = the growth of sum_g C(load_g, 2): lower means better balanced uplinks
//   distance           = sum over pairs {a, b} of S of d(a, b), with d = 0 NVLink peers, 1 same
//                        PCIe switch, 2 same root complex, 3 same socket (or NUMA node when the
//                        socket is unknown), 4 otherwise
//                        (nvidia-smi's NV < PIX/PXB < PHB < NODE < SYS)
//
// Keys, compared lexicographically (smaller wins), then the smallest index set (lexicographic):
//   kSpread (Mobius, cross-mapped stages): (uplink_pairs, interference_pairs, distance). Spreads
//     the job over the least-loaded uplinks; between equally balanced choices, it shares with
//     itself rather than with other jobs, then stays close (one socket before two).
//   kPack (GPU-to-GPU traffic): (interference_pairs, distance). Keeps away from running jobs'
//     uplinks, then fills whole switches (NVLink, one switch, one root complex, one socket).
// Examples on the paper testbed (2 switches x 4 GPUs, one uplink each), empty node: a 4-GPU spread
// job gets GPUs 0,1,4,5, a 4-GPU pack job GPUs 0-3; next to a job on 0-3 a 2-GPU job gets 4,5.
//
// Search: every k-subset of the candidates when there are at most
// GpuChoiceOptions::max_exhaustive_subsets of them (C(8,4) = 70, C(16,8) = 12870); otherwise a
// greedy construction (add the GPU that gives the smallest key, ties to the smallest index), which
// balances uplinks optimally for kSpread (the load terms are convex) and is a heuristic for kPack.
// Uplink bandwidths are not weighted: the fixtures' groups have equal uplinks within one machine.
//
// Pure; thread-safe.
#ifndef MOBIUS_HOST_SCHEDULER_GPU_CHOICE_H_
#define MOBIUS_HOST_SCHEDULER_GPU_CHOICE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "host/scheduler/resources.h"

namespace mobius::jobs {

struct PlacementCost {
  int64_t uplink_pairs = 0;
  int64_t interference_pairs = 0;
  int64_t self_pairs = 0;
  int64_t distance = 0;

  friend bool operator==(const PlacementCost&, const PlacementCost&) = default;
};

struct GpuChoiceOptions {
  int64_t max_exhaustive_subsets = 100000;
};

struct GpuChoice {
  std::vector<int> gpus;  // ascending
  PlacementCost cost;
  bool exhaustive = true;  // false: greedy (too many subsets)
};

// d(a, b) above; 0 for a == b.
int GpuDistance(const GpuResource& a, const GpuResource& b);

// The cost terms of `chosen` with `busy[i]` = GPU i is held by another job.
// REQUIRES: indices valid for `gpus`, distinct; busy.size() == gpus.size().
PlacementCost ScorePlacement(const std::vector<GpuResource>& gpus, const std::vector<int>& chosen,
                             const std::vector<bool>& busy);

// The best k of `candidates` for `placement` (see above).
// REQUIRES: 1 <= k <= candidates.size(); candidates distinct, valid for `gpus`, not busy;
// busy.size() == gpus.size().
GpuChoice ChooseGpus(const std::vector<GpuResource>& gpus, std::vector<int> candidates, int k,
                     const std::vector<bool>& busy, Placement placement,
                     const GpuChoiceOptions& options = {});

// "uplink_pairs=1 interference_pairs=0 self_pairs=1 distance=1" (logs, test messages).
std::string PlacementCostString(const PlacementCost& cost);

}  // namespace mobius::jobs

#endif  // MOBIUS_HOST_SCHEDULER_GPU_CHOICE_H_
