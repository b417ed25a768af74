// NodeRun: what `mobius run` does beyond one node's run when a job spans several nodes
// (docs/multinode.md). Each node runs its own `mobius run` (Slurm: one task per node; Kubernetes:
// one pod per index); the daemon takes no part.
//
//   - node 0 hosts the job's rendezvous store (common/run/rendezvous.h) on the rendezvous port,
//     for the whole run: every worker of every node exchanges its Gloo addresses and its run
//     config's fingerprint there (worker/runtime/node_collective.h);
//   - every node watches the store for another node's failure ("<job_key>/failed": the first
//     failing node writes its error there) and for node 0's disappearance (the store's connection
//     closes), and then stops its own workers: `on_peer_failure` is called once, from a watcher
//     thread, with a message naming the node;
//   - every node's watcher also beats once a second ("<job_key>/launch/beat/<node>"), so that a
//     failing node can tell a node that died (silent, no outcome) from one that merely stopped;
//   - Finish() publishes this node's outcome; node 0 keeps the store up until every node has
//     published its own (or `timeout` passed), so that a node still finishing its last step does
//     not see the store vanish.
//
// The workers themselves detect a dead peer in their collectives (a closed socket, or the
// collective timeout); the watcher makes the other nodes' error say which node failed first and
// stops the ranks that were not in a collective at the time.
#ifndef MOBIUS_CLIENT_NODE_RUN_H_
#define MOBIUS_CLIENT_NODE_RUN_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace mobius::cli {

struct NodeRunOptions {
  int nodes = 1;
  int node_rank = 0;
  std::string rendezvous_host;  // node 0 listens on every interface at rendezvous_port
  int rendezvous_port = 0;
  std::string job_key;
  std::string token;  // MOBIUS_RENDEZVOUS_TOKEN (common/run/rendezvous.h); empty: none
  absl::Duration timeout = absl::Seconds(300);  // connecting to node 0; node 0 waiting at the end
};

class NodeRun {
 public:
  // Node 0: starts the store (UNAVAILABLE naming the port when it is taken); every node: connects
  // to it (DEADLINE_EXCEEDED after `timeout`) and starts the watcher.
  static absl::StatusOr<std::unique_ptr<NodeRun>> Start(
      const NodeRunOptions& options, std::function<void(const std::string&)> on_peer_failure);
  ~NodeRun();

  // This node's outcome (OK or its error). After an error it first looks for nodes that went
  // silent (no heartbeat for kSilenceWindow and no outcome: a node that died) and names them in
  // the published failure; returns that sentence ("" when none or on success). Node 0 then waits
  // for every node's outcome.
  std::string Finish(const absl::Status& outcome);
  static constexpr absl::Duration kSilenceWindow = absl::Milliseconds(2500);
  // The port node 0's store listens on (0 on other nodes).
  int port() const;

  struct Impl;

 private:
  explicit NodeRun(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mobius::cli

#endif  // MOBIUS_CLIENT_NODE_RUN_H_
