#include "worker/runtime/nccl_transport.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace mobius::runtime {
namespace {

static_assert(sizeof(ncclUniqueId) <= 128, "the store keeps 128 bytes per channel id");

absl::Status FromNccl(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", ncclGetErrorString(r), " (",
                                          ncclGetLastError(nullptr), ")"));
}

class NcclPeerTransport final : public PeerTransport {
 public:
  struct Channel {
    int peer = 0;
    bool sender = false;
    ncclComm_t comm = nullptr;
  };

  explicit NcclPeerTransport(int device) : device_(device) {}
  ~NcclPeerTransport() override {
    cudaSetDevice(device_);
    for (Channel& c : channels_) {
      if (c.comm != nullptr) ncclCommDestroy(c.comm);
    }
  }

  std::string name() const override { return "nccl"; }

  absl::Status Add(Channel c) {
    channels_.push_back(c);
    return absl::OkStatus();
  }

  absl::Status Send(backend::Queue& queue, const void* src, uint64_t bytes, int peer) override {
    return Enqueue(queue, const_cast<void*>(src), bytes, peer, /*send=*/true);
  }
  absl::Status Recv(backend::Queue& queue, void* dst, uint64_t bytes, int peer) override {
    return Enqueue(queue, dst, bytes, peer, /*send=*/false);
  }

 private:
  absl::Status Enqueue(backend::Queue& queue, void* buf, uint64_t bytes, int peer, bool send) {
    auto stream = static_cast<cudaStream_t>(queue.native_handle());
    if (stream == nullptr) {
      return absl::FailedPreconditionError("transport nccl: the queue is not a CUDA stream");
    }
    for (const Channel& c : channels_) {
      if (c.peer != peer || c.sender != send) continue;
      if (cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) {
        return absl::InternalError(absl::StrCat("cudaSetDevice: ", cudaGetErrorString(e)));
      }
      // In a 2-rank communicator the sender is rank 0 and the receiver rank 1.
      return send ? FromNccl(ncclSend(buf, bytes, ncclUint8, 1, c.comm, stream), "ncclSend")
                  : FromNccl(ncclRecv(buf, bytes, ncclUint8, 0, c.comm, stream), "ncclRecv");
    }
    return absl::InvalidArgumentError(absl::StrCat("transport nccl: no channel ",
                                                   send ? "to" : "from", " rank ", peer));
  }

  int device_;
  std::vector<Channel> channels_;
};

}  // namespace

bool CudaCanAccessPeer(int a, int b) {
  int can = 0;
  if (cudaDeviceCanAccessPeer(&can, a, b) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return can != 0;
}

absl::StatusOr<std::unique_ptr<PeerTransport>> MakeNcclPeerTransport(
    const PeerTransportContext& c) {
  setenv("NCCL_IB_DISABLE", "1", /*overwrite=*/0);
  if (cudaError_t e = cudaSetDevice(c.device); e != cudaSuccess) {
    return absl::FailedPreconditionError(absl::StrCat("cudaSetDevice(", c.device, "): ",
                                                      cudaGetErrorString(e)));
  }
  auto t = std::make_unique<NcclPeerTransport>(c.device);
  const StoreLayout& l = *c.layout;
  for (int ch = 0; ch < l.num_channels(); ++ch) {
    const PeerChannel& pc = l.peer_channels[ch];
    if (pc.from != c.rank && pc.to != c.rank) continue;
    const bool sender = pc.from == c.rank;
    uint8_t* slot = c.store->at<uint8_t>(l.channel_ids + 128 * static_cast<uint64_t>(ch));
    ncclUniqueId id;
    if (sender) {
      if (absl::Status s = FromNccl(ncclGetUniqueId(&id), "ncclGetUniqueId"); !s.ok()) return s;
      std::memcpy(slot, &id, sizeof(id));
      c.store->Publish(l.channel_word(ch, StoreLayout::kChannelIdReady), 1);
    } else {
      if (absl::Status s = c.store->WaitAtLeast(l.channel_word(ch, StoreLayout::kChannelIdReady), 1);
          !s.ok()) {
        return s;
      }
      std::memcpy(&id, slot, sizeof(id));
    }
    NcclPeerTransport::Channel channel;
    channel.peer = sender ? pc.to : pc.from;
    channel.sender = sender;
    if (absl::Status s = FromNccl(ncclCommInitRank(&channel.comm, 2, id, sender ? 0 : 1),
                                  "ncclCommInitRank");
        !s.ok()) {
      return absl::FailedPreconditionError(absl::StrCat("channel ", pc.from, "->", pc.to, ": ",
                                                        s.message()));
    }
    (void)t->Add(channel);
    LOG(INFO) << "rank " << c.rank << ": NCCL channel " << pc.from << "->" << pc.to << " up";
  }
  return std::unique_ptr<PeerTransport>(std::move(t));
}

}  // namespace mobius::runtime
