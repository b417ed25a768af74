// The NCCL PeerTransport (peer_transport.h): one 2-rank NCCL communicator per gradient channel
// (run_config.h DgradChannels), so the sends of one direction never queue behind another's and
// the per-communicator ordering is exactly the channel's. Communicators are created in channel
// order on every rank (sorted (from, to): every rank reaches each channel after all its earlier
// ones completed, so the blocking ncclCommInitRank calls cannot wait on each other in a cycle);
// the sender makes the unique id and hands it to the receiver through the store.
//
// Send/Recv enqueue ncclSend/ncclRecv (bytes as ncclUint8) on the queue's CUDA stream
// (Queue::native_handle). Environment: NCCL_IB_DISABLE=1 unless set (one server); on GPUs without
// P2P the resolver sets NCCL_P2P_DISABLE=1 (peer_transport.cc).
//
// Built only with CUDA and NCCL; registered by mobius-worker (cuda_rank_backend.h).
#ifndef MOBIUS_WORKER_RUNTIME_NCCL_TRANSPORT_H_
#define MOBIUS_WORKER_RUNTIME_NCCL_TRANSPORT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/runtime/peer_transport.h"

namespace mobius::runtime {

// FAILED_PRECONDITION / INTERNAL with NCCL's message when a communicator cannot be made.
absl::StatusOr<std::unique_ptr<PeerTransport>> MakeNcclPeerTransport(
    const PeerTransportContext& context);

// cudaDeviceCanAccessPeer(a, b) (false on error or a == b's absence).
bool CudaCanAccessPeer(int a, int b);

}  // namespace mobius::runtime

#endif  // MOBIUS_WORKER_RUNTIME_NCCL_TRANSPORT_H_
