// Which node of a multi-node job this `mobius run` is, how many nodes the job has, and where their
// rendezvous is (issue 20, data parallelism across servers). Slurm and Kubernetes start one
// `mobius run` per node; each resolves its place from its flags and environment, in this order:
//
//   1. flags      --nodes N --node-rank R [--rendezvous HOST[:PORT]]
//   2. MOBIUS_*   MOBIUS_NODES, MOBIUS_NODE_RANK, MOBIUS_RENDEZVOUS=HOST[:PORT], MOBIUS_JOB_KEY
//   3. Slurm      a job step (SLURM_JOB_ID with SLURM_NTASKS/SLURM_PROCID): one task per node,
//                 nodes = SLURM_NTASKS, rank = SLURM_PROCID, rendezvous on the step's first host
//                 (SLURM_STEP_NODELIST, else SLURM_JOB_NODELIST, else SLURM_NODELIST) at
//                 MOBIUS_RENDEZVOUS_PORT or kDefaultRendezvousPort; MOBIUS_RENDEZVOUS overrides
//   4. Kubernetes an Indexed Job: JOB_COMPLETION_INDEX is the rank when MOBIUS_NODE_RANK is unset;
//                 MOBIUS_NODES and MOBIUS_RENDEZVOUS (pod 0's name under the headless service)
//                 come from the manifest (deploy/kubernetes/multinode/)
//   5. one node
//
// --rendezvous overrides the rendezvous of every source, MOBIUS_RENDEZVOUS that of Slurm.
// Variables set to "" count as unset. Every error is INVALID_ARGUMENT naming the flag or variable
// and its value. docs/operations.md, "Several nodes", documents the same rules for users.
//
// Pure functions: the environment is passed in (ProcessEnvironment() reads the real one).
// Thread-safe.
#ifndef MOBIUS_CLIENT_NODE_WORLD_H_
#define MOBIUS_CLIENT_NODE_WORLD_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mobius::cli {

struct NodeWorld {
  int nodes = 1;                // world size: nodes in the job, one `mobius run` each
  int node_rank = 0;            // this node, 0..nodes-1; node 0 hosts the rendezvous and writes
                                // the checkpoints
  std::string rendezvous_host;  // empty when nodes == 1
  int rendezvous_port = 0;      // 0 when nodes == 1
  // Names the job in the rendezvous: MOBIUS_JOB_KEY, else "slurm-" + SLURM_JOB_ID, else "" (the
  // caller derives one from the spec).
  std::string job_key;
  std::string source;  // "flags" | "MOBIUS_*" | "slurm" | "kubernetes" | "single": for the log
};

// `mobius run`'s flags; the defaults mean "not given".
struct NodeWorldFlags {
  int nodes = 0;           // --nodes
  int node_rank = -1;      // --node-rank
  std::string rendezvous;  // --rendezvous HOST[:PORT]
};

inline constexpr int kDefaultRendezvousPort = 29560;
inline constexpr int kMaxNodes = 1024;

absl::StatusOr<NodeWorld> ResolveNodeWorld(
    const NodeWorldFlags& flags, const absl::flat_hash_map<std::string, std::string>& env);

// `mobius run --nodes`: one node count (the flag is shared with `mobius plan --nodes`, which also
// takes a list). "" -> 0 (not given).
absl::StatusOr<int> ParseRunNodesFlag(absl::string_view text);

// The first host of a Slurm hostlist expression: "node[01-04,07],gpu5" -> "node01",
// "a-b[3]" -> "a-b3", "n1" -> "n1". The whole expression is checked (INVALID_ARGUMENT for
// malformed text), but not expanded.
absl::StatusOr<std::string> FirstSlurmHost(absl::string_view nodelist);

// Every host of a Slurm hostlist expression, in order: "n[1-3]" -> n1,n2,n3; zero padding as the
// range's first number has it ("n[08-10]" -> n08,n09,n10); several bracket groups are their
// product ("r[1-2]n[3-4]" -> r1n3,r1n4,r2n3,r2n4); text may follow a group ("n[1-2]-ib").
// INVALID_ARGUMENT for malformed text or more than 65536 hosts.
absl::StatusOr<std::vector<std::string>> ExpandSlurmHostlist(absl::string_view nodelist);

// This process's environment (environ), for ResolveNodeWorld.
absl::flat_hash_map<std::string, std::string> ProcessEnvironment();

}  // namespace mobius::cli

#endif  // MOBIUS_CLIENT_NODE_WORLD_H_
