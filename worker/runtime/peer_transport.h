// PeerTransport: moves the activation gradients that cross a backward-stage boundary between two
// ranks, device buffer to device buffer (architecture.md, seam `Transport`).
//
// Why only the gradients: a forward boundary activation must reach the host store anyway (it is
// the checkpoint the backward recomputes from), so the consumer reads it from there (the
// "host-staged" path, store_layout.h); sending it GPU to GPU as well would add traffic on the same
// uplink. The fp32 gradient going backward has no other use: host-staged it crosses PCIe twice
// (D2H into the store, H2D out of it), with P2P (NVLink, or PCIe P2P on data-centre GPUs) once.
// On GeForce cards there is no P2P and NCCL would bounce through host memory exactly like the
// host path, so `auto` keeps the host path there.
//
// Semantics (NCCL's). Send and Recv are enqueued on a backend queue and run in its order. Per
// channel (from, to) (run_config.h DgradChannels) the k-th Send of `from` pairs with the k-th Recv
// of `to`; a Send may not complete before its Recv started (rendezvous), so a sender must not
// enqueue a Send on a queue whose later work the receiver needs (the runtime sends from a
// dedicated communication queue, from a ring of staging buffers). `bytes` must match.
//
// Kinds (RunConfig::transport, resolved by every rank alike through the store, ResolveTransport):
//   host      no PeerTransport: everything through the host store (works everywhere);
//   nccl      NcclPeerTransport (nccl_transport.h, CUDA builds): one 2-rank communicator per
//             channel, unique ids handed from sender to receiver through the store;
//   emulated  EmulatedPeerTransport (below): the CPU backend's stand-in with the same rendezvous
//             rule, through a payload slot per channel in the store: CI runs the runtime's
//             device-transport path (ring buffers, comm queue, ordering) bit-exactly on the CPU.
//
// Thread-safety: Send/Recv may be called from one thread per transport (the rank's main thread).
#ifndef MOBIUS_WORKER_RUNTIME_PEER_TRANSPORT_H_
#define MOBIUS_WORKER_RUNTIME_PEER_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/backend/backend.h"
#include "common/run/host_store.h"
#include "common/run/run_config.h"
#include "common/run/store_layout.h"

namespace mobius::runtime {

class PeerTransport {
 public:
  virtual ~PeerTransport() = default;
  virtual std::string name() const = 0;
  // Enqueue on `queue`: send `bytes` at device address `src` to rank `peer` / receive them from
  // `peer` into `dst`. INVALID_ARGUMENT when (this rank, peer) is not a channel.
  virtual absl::Status Send(backend::Queue& queue, const void* src, uint64_t bytes, int peer) = 0;
  virtual absl::Status Recv(backend::Queue& queue, void* dst, uint64_t bytes, int peer) = 0;
};

// What a transport is made from. Everything but `backend` outlives the transport.
struct PeerTransportContext {
  const RunConfig* run = nullptr;
  const StoreLayout* layout = nullptr;
  HostStore* store = nullptr;
  backend::Backend* backend = nullptr;
  int rank = 0;
  int device = 0;  // this rank's CUDA ordinal (nccl)
};

// The NCCL half, registered by mobius-worker when built with CUDA and NCCL (nccl_transport.h).
struct NcclTransportFactory {
  // Whether device a can access device b's memory directly (cudaDeviceCanAccessPeer).
  std::function<bool(int a, int b)> can_access_peer;
  std::function<absl::StatusOr<std::unique_ptr<PeerTransport>>(const PeerTransportContext&)>
      create;
};
void RegisterNcclTransport(NcclTransportFactory factory);

// Decides the transport every rank uses and makes this rank's (nullptr for host). Each rank
// publishes a vote (can it use NCCL: its backend is CUDA, NCCL is registered, and its device has
// P2P to every peer it exchanges gradients with) and waits for all votes, so all ranks agree:
//   host -> nullptr; emulated -> EmulatedPeerTransport (REQUIRES the CPU backend);
//   nccl -> NCCL, FAILED_PRECONDITION naming the ranks that cannot; auto -> nccl iff every rank
//   can, else nullptr. A run without channels (one rank, or every boundary on one rank) gets
//   nullptr for any kind. `device_of(rank)` gives each rank's CUDA ordinal (P2P queries).
absl::StatusOr<std::unique_ptr<PeerTransport>> ResolveTransport(
    const PeerTransportContext& context, const std::function<int(int rank)>& device_of);

// The CPU stand-in (exposed for tests).
absl::StatusOr<std::unique_ptr<PeerTransport>> MakeEmulatedPeerTransport(
    const PeerTransportContext& context);

}  // namespace mobius::runtime

#endif  // MOBIUS_WORKER_RUNTIME_PEER_TRANSPORT_H_
