#include "worker/runtime/peer_transport.h"

#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"
#include "worker/backend/cpu/cpu_backend.h"

namespace mobius::runtime {
namespace {

NcclTransportFactory& NcclFactory() {
  static NcclTransportFactory* factory = new NcclTransportFactory();
  return *factory;
}

int ChannelIndex(const StoreLayout& layout, int from, int to) {
  for (int c = 0; c < layout.num_channels(); ++c) {
    if (layout.peer_channels[c].from == from && layout.peer_channels[c].to == to) return c;
  }
  return -1;
}

// Rendezvous send/recv through one payload slot per channel in the store, run as tasks on the
// CPU backend's queues (see peer_transport.h).
class EmulatedPeerTransport final : public PeerTransport {
 public:
  EmulatedPeerTransport(const PeerTransportContext& c, backend::CpuBackend* cpu)
      : c_(c), cpu_(cpu), sends_(c.layout->num_channels(), 0), recvs_(sends_) {}

  std::string name() const override { return "emulated"; }

  absl::Status Send(backend::Queue& queue, const void* src, uint64_t bytes, int peer) override {
    const int ch = ChannelIndex(*c_.layout, c_.rank, peer);
    if (absl::Status s = Check(ch, bytes, peer); !s.ok()) return s;
    const uint32_t seq = ++sends_[ch];
    HostStore* store = c_.store;
    const StoreLayout* l = c_.layout;
    uint8_t* slot = store->at<uint8_t>(l->channel_payload + ch * l->channel_payload_stride);
    return cpu_->Enqueue(queue, [=]() -> absl::Status {
      // The receiver's seq-th Recv has started, so its previous one has taken the slot.
      if (absl::Status s = store->WaitAtLeast(l->channel_word(ch, StoreLayout::kChannelPosted), seq);
          !s.ok()) {
        return s;
      }
      std::memcpy(slot, src, bytes);
      store->Publish(l->channel_word(ch, StoreLayout::kChannelSent), seq);
      return absl::OkStatus();
    });
  }

  absl::Status Recv(backend::Queue& queue, void* dst, uint64_t bytes, int peer) override {
    const int ch = ChannelIndex(*c_.layout, peer, c_.rank);
    if (absl::Status s = Check(ch, bytes, peer); !s.ok()) return s;
    const uint32_t seq = ++recvs_[ch];
    HostStore* store = c_.store;
    const StoreLayout* l = c_.layout;
    const uint8_t* slot = store->at<uint8_t>(l->channel_payload + ch * l->channel_payload_stride);
    return cpu_->Enqueue(queue, [=]() -> absl::Status {
      store->Publish(l->channel_word(ch, StoreLayout::kChannelPosted), seq);
      if (absl::Status s = store->WaitAtLeast(l->channel_word(ch, StoreLayout::kChannelSent), seq);
          !s.ok()) {
        return s;
      }
      std::memcpy(dst, slot, bytes);
      store->Publish(l->channel_word(ch, StoreLayout::kChannelTaken), seq);
      return absl::OkStatus();
    });
  }

 private:
  absl::Status Check(int ch, uint64_t bytes, int peer) const {
    if (ch < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", c_.rank, " has no gradient channel with rank ", peer));
    }
    if (bytes > c_.layout->channel_payload_stride) {
      return absl::InvalidArgumentError(absl::StrCat("transport: ", bytes, " bytes exceed the ",
                                                     c_.layout->channel_payload_stride,
                                                     "-byte channel slot"));
    }
    return absl::OkStatus();
  }

  PeerTransportContext c_;
  backend::CpuBackend* cpu_;
  std::vector<uint32_t> sends_, recvs_;  // per channel: enqueued so far (main thread)
};

enum Vote : uint32_t { kCanP2p = 1, kCannot = 2, kCanWithoutP2p = 3 };

}  // namespace

void RegisterNcclTransport(NcclTransportFactory factory) { NcclFactory() = std::move(factory); }

absl::StatusOr<std::unique_ptr<PeerTransport>> MakeEmulatedPeerTransport(
    const PeerTransportContext& context) {
  auto* cpu = dynamic_cast<backend::CpuBackend*>(context.backend);
  if (cpu == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "transport emulated needs the CPU backend (rank ", context.rank, " runs on ",
        context.backend->name(), ")"));
  }
  if (context.layout->channel_payload_stride == 0) {
    return absl::FailedPreconditionError("the store has no channel slots (transport is not emulated)");
  }
  return std::unique_ptr<PeerTransport>(new EmulatedPeerTransport(context, cpu));
}

absl::StatusOr<std::unique_ptr<PeerTransport>> ResolveTransport(
    const PeerTransportContext& c, const std::function<int(int rank)>& device_of) {
  const std::string& kind = c.run->transport;
  if (c.layout->num_channels() == 0 || kind == "host") return nullptr;
  if (kind == "emulated") return MakeEmulatedPeerTransport(c);

  // nccl / auto: every rank votes, so that all ranks choose alike.
  const NcclTransportFactory& nccl = NcclFactory();
  Vote vote = kCannot;
  std::string why;
  if (!nccl.create) {
    why = "this mobius-worker is built without NCCL";
  } else if (c.backend->name().rfind("cuda", 0) != 0) {
    why = absl::StrCat("its backend is ", c.backend->name());
  } else {
    vote = kCanP2p;
    for (const PeerChannel& ch : c.layout->peer_channels) {
      if (ch.from != c.rank && ch.to != c.rank) continue;
      const int peer = ch.from == c.rank ? ch.to : ch.from;
      if (!nccl.can_access_peer(device_of(c.rank), device_of(peer))) {
        vote = kCanWithoutP2p;
        why = absl::StrCat("no P2P between cuda:", device_of(c.rank), " and cuda:", device_of(peer));
      }
    }
  }
  c.store->Publish(c.layout->transport_vote_word(c.rank), vote);
  std::vector<int> cannot, no_p2p;
  for (int r = 0; r < c.run->num_workers; ++r) {
    if (absl::Status s = c.store->WaitAtLeast(c.layout->transport_vote_word(r), 1); !s.ok()) {
      return s;
    }
    const uint32_t v = c.store->Load(c.layout->transport_vote_word(r));
    if (v == kCannot) cannot.push_back(r);
    if (v == kCanWithoutP2p) no_p2p.push_back(r);
  }
  if (kind == "auto") {
    if (!cannot.empty() || !no_p2p.empty()) {
      LOG(INFO) << "rank " << c.rank << ": boundary gradients host-staged (transport auto: "
                << (why.empty() ? absl::StrCat("ranks ", absl::StrJoin(cannot, ","),
                                               absl::StrJoin(no_p2p, ","), " cannot use P2P")
                                : why)
                << ")";
      return nullptr;
    }
  } else if (!cannot.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "transport nccl: rank(s) ", absl::StrJoin(cannot, ", "),
        " cannot use NCCL (this rank: ", why.empty() ? "can" : why, ")"));
  } else if (!no_p2p.empty()) {
    // Requested on GPUs without P2P (GeForce): NCCL must not try P2P (it can hang there); it
    // goes through host memory like the host path.
    setenv("NCCL_P2P_DISABLE", "1", 1);
    LOG(WARNING) << "rank " << c.rank << ": transport nccl without P2P (ranks "
                 << absl::StrJoin(no_p2p, ", ") << "): NCCL_P2P_DISABLE=1";
  }
  absl::StatusOr<std::unique_ptr<PeerTransport>> t = nccl.create(c);
  if (t.ok()) LOG(INFO) << "rank " << c.rank << ": boundary gradients over " << (*t)->name();
  return t;
}

}  // namespace mobius::runtime
