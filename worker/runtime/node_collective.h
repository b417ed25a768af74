// NodeCollective: one rank's collectives across the nodes of a multi-node job (RunConfig::nodes,
// docs/multinode.md), on Gloo (Facebook's collective library, Debian's libgloo-dev) over TCP.
//
// Rank k of every node forms one group of `nodes.count` members (group rank = node rank): the
// ranks of different nodes run the same stages in the same order (identical plans, checked at the
// rendezvous), so rank k's gradient all-reduces meet rank k's on every other node. Each rank has
// two Gloo contexts on one TCP device:
//
//   gradients  used only by the rank's optimizer thread: AllReduceSum over a stage's fp32
//              gradients in the host store, in buckets of nodes.bucket_bytes, Gloo's ring
//              algorithm (reduce-scatter, then all-gather): every element is summed in one fixed
//              order determined by the node ranks and the bucket cut, the same in every run, and
//              every node receives the same bits (the all-gather copies the one sum), so the
//              nodes' optimizers stay bit-identical;
//   control    used only by the rank's main thread: small sums and maxima (the step's loss, stop
//              decisions).
//
// Rendezvous: the addresses are exchanged through node 0's rendezvous store
// (common/run/rendezvous.h) under "[<MOBIUS_RENDEZVOUS_TOKEN>/]<job_key>/rank<k>/<channel>/";
// before that every member publishes a fingerprint of its run config (NodeGroupFingerprint) and
// refuses to start if any other node's differs (FAILED_PRECONDITION naming both nodes): a different
// spec or plan on another node would pair unrelated tensors.
//
// Faults: a peer process that dies closes its sockets, so a pending or later collective fails at
// once; a peer that hangs fails it after nodes.timeout_seconds. Either is UNAVAILABLE /
// DEADLINE_EXCEEDED "node N: ..." and the rank aborts the job on its node (the other nodes' ranks
// see the same through their own sockets).
//
// Emulated inter-node link (nodes.link_bytes_per_second > 0, the CPU backend's stand-in for a NIC,
// like the emulated PCIe links): each bucket's all-reduce also reserves the ring's time,
// 2(N-1)/N * B / rate + 2(N-1) * latency, on the node's inter-node link word in the store, FIFO
// with the node's other ranks, and returns no earlier than the reservation's end.
//
// Thread-compatible per channel: one thread per channel (above).
#ifndef MOBIUS_WORKER_RUNTIME_NODE_COLLECTIVE_H_
#define MOBIUS_WORKER_RUNTIME_NODE_COLLECTIVE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/run/host_store.h"
#include "common/run/run_config.h"
#include "common/run/store_layout.h"

namespace mobius::runtime {

// What must be equal on every node: the run config without the node's own fields (nodes.rank,
// the store's descriptor and name, CPU lists, the paths of the model, data, tokenizer and
// checkpoints, which may be each node's own copies), as a short hex digest.
std::string NodeGroupFingerprint(const RunConfig& run);

class NodeCollective {
 public:
  // Connects rank `rank` of this node to rank `rank` of every other node (both channels), or
  // fails within nodes.timeout_seconds. `start_step`: the step this node starts after (resumed
  // runs), which must be every node's. `store`/`layout`: for the emulated link (may be null
  // without one); must outlive the collective.
  static absl::StatusOr<std::unique_ptr<NodeCollective>> Connect(const RunConfig& run, int rank,
                                                                 int64_t start_step,
                                                                 HostStore* store,
                                                                 const StoreLayout* layout);
  ~NodeCollective();

  // Gradients channel: data[0, n) := the sum over nodes, in place, identical on every node.
  absl::Status AllReduceSum(float* data, size_t n);
  // Control channel.
  absl::StatusOr<double> SumDouble(double value);
  absl::StatusOr<uint32_t> MaxUint32(uint32_t value);

  int nodes() const;
  int node() const;
  // Bytes this rank sent for all-reduces so far (the ring's 2(N-1)/N per reduced byte).
  uint64_t sent_bytes() const;

  struct Impl;

 private:
  explicit NodeCollective(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mobius::runtime

#endif  // MOBIUS_WORKER_RUNTIME_NODE_COLLECTIVE_H_
