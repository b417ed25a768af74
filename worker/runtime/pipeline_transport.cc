// The boundary-gradient transport of one rank (pipeline_state.h, peer_transport.h): a ring of
// staging buffers on the device and a communication queue, so that a send waiting for its
// receiver (NCCL's rendezvous) never holds up the compute queue.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "worker/runtime/pipeline_state.h"
#include "worker/runtime/rank_backend.h"

namespace mobius::runtime {

using State = PipelineWorker::State;

absl::Status SetUpTransport(State& s) {
  const RunConfig& run = s.run;
  auto device_of = [&run](int rank) {  // as rank_backend.cc picks the device (-1: none)
    absl::StatusOr<int> ordinal = CudaOrdinalOfRank(run, rank);
    return ordinal.ok() ? *ordinal : -1;
  };
  PeerTransportContext context{.run = &s.run, .layout = &s.layout, .store = s.store.get(),
                               .backend = s.backend.get(), .rank = s.rank,
                               .device = device_of(s.rank)};
  MOBIUS_ASSIGN_OR_RETURN(std::unique_ptr<PeerTransport> peer,
                          ResolveTransport(context, device_of));
  if (peer == nullptr) return absl::OkStatus();
  bool sends = false;
  for (const PeerChannel& c : s.layout.peer_channels) sends = sends || c.from == s.rank;
  auto t = std::make_unique<TransportState>();
  t->peer = std::move(peer);
  if (sends) {
    // Activation gradients outrank the bulk weight copies (priority 1, like compute).
    MOBIUS_ASSIGN_OR_RETURN(t->comm, s.backend->CreateQueue(backend::QueueKind::kDeviceToHost, 1));
    const uint64_t bytes = 4 * s.layout.boundary_elements;
    const int want = std::min(s.layout.num_microbatches, kTransportRingSlots);
    for (int k = 0; k < want; ++k) {
      absl::StatusOr<backend::DeviceBuffer> buf = s.backend->Allocate(bytes, "dgrad.send_ring");
      if (!buf.ok()) {
        if (k > 0 && absl::IsResourceExhausted(buf.status())) break;  // fewer slots: still works
        return absl::ResourceExhaustedError(absl::StrCat(
            "rank ", s.rank, ": no device memory for one gradient send buffer: ",
            buf.status().message()));
      }
      t->ring.push_back(*std::move(buf));
      MOBIUS_ASSIGN_OR_RETURN(std::unique_ptr<backend::Event> ready, s.backend->CreateEvent());
      MOBIUS_ASSIGN_OR_RETURN(std::unique_ptr<backend::Event> sent, s.backend->CreateEvent());
      t->ready.push_back(std::move(ready));
      t->sent.push_back(std::move(sent));
    }
  }
  LOG(INFO) << "rank " << s.rank << ": activation gradients to other ranks over "
            << t->peer->name() << " (" << t->ring.size() << " send buffers)";
  s.transport = std::move(t);
  return absl::OkStatus();
}

bool GradientOverTransport(const State& s, int from_stage, int to_stage, uint32_t r) {
  return s.transport != nullptr &&
         BackwardRank(s.run, from_stage, r) != BackwardRank(s.run, to_stage, r);
}

absl::Status SendGradient(State& s, int b, uint32_t r, const backend::DeviceBuffer& src) {
  TransportState& t = *s.transport;
  const uint64_t bytes = 4 * s.layout.boundary_elements;
  const size_t k = t.next++ % t.ring.size();
  // The slot's previous send must be done before the copy overwrites it.
  MOBIUS_RETURN_IF_ERROR(s.backend->Wait(*s.compute, *t.sent[k]));
  MOBIUS_RETURN_IF_ERROR(s.backend->CopyDeviceToDevice(*s.compute, src, 0, t.ring[k], 0, bytes));
  MOBIUS_RETURN_IF_ERROR(s.backend->Record(*s.compute, *t.ready[k]));
  MOBIUS_RETURN_IF_ERROR(s.backend->Wait(*t.comm, *t.ready[k]));
  MOBIUS_RETURN_IF_ERROR(
      t.peer->Send(*t.comm, t.ring[k].data(), bytes, BackwardRank(s.run, b - 1, r)));
  MOBIUS_RETURN_IF_ERROR(s.backend->Record(*t.comm, *t.sent[k]));
  s.peer_bytes += bytes;
  return absl::OkStatus();
}

absl::Status ReceiveGradient(State& s, int b, uint32_t r, const backend::DeviceBuffer& dst) {
  const uint64_t bytes = 4 * s.layout.boundary_elements;
  s.peer_bytes += bytes;
  return s.transport->peer->Recv(*s.compute, dst.data(), bytes, BackwardRank(s.run, b + 1, r));
}

absl::Status DrainTransport(State& s) {
  if (s.transport == nullptr || s.transport->comm == nullptr) return absl::OkStatus();
  const Clock::time_point t0 = Clock::now();
  absl::Status st = s.backend->Synchronize(*s.transport->comm);
  s.stall += Since(t0);
  return st;
}

}  // namespace mobius::runtime
