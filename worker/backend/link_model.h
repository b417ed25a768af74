// LinkModel: the seam through which every copy chunk passes (architecture.md, seams table).
//
// Backends split each copy into chunks of BackendOptions::copy_chunk_bytes and call
// OnChunk(direction, bytes) on the queue's thread just before moving each chunk. An implementation
// may block to emulate a link's bandwidth (token buckets per emulated PCIe link and the shared uplink
// are a later runtime component); the default is no LinkModel at all (copies run at memcpy speed).
// Only the CPU backend calls it; a real GPU has real links.
//
// Thread-safety: OnChunk is called concurrently from several queues' threads.
#ifndef MOBIUS_WORKER_BACKEND_LINK_MODEL_H_
#define MOBIUS_WORKER_BACKEND_LINK_MODEL_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace mobius::backend {

enum class CopyDirection { kHostToDevice, kDeviceToHost, kDeviceToDevice };
absl::string_view CopyDirectionName(CopyDirection direction);  // "h2d", "d2h", "d2d"

class LinkModel {
 public:
  virtual ~LinkModel() = default;
  // Called once per chunk, before the chunk is copied; may block. `bytes` > 0.
  virtual void OnChunk(CopyDirection direction, uint64_t bytes) = 0;
};

}  // namespace mobius::backend

#endif  // MOBIUS_WORKER_BACKEND_LINK_MODEL_H_
