// CpuBackend queues, events, error reporting, chunked copies through the LinkModel, destruction.
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/backend/cpu/cpu_backend.h"

namespace mobius::backend {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

std::unique_ptr<CpuBackend> MakeBackend(LinkModel* link = nullptr, uint64_t chunk = 0) {
  CpuBackendOptions options;
  options.backend.capacity_bytes = uint64_t{256} << 20;
  options.backend.copy_chunk_bytes = chunk;
  options.backend.link_model = link;
  auto backend = CpuBackend::Create(options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  return std::move(backend).value();
}

std::unique_ptr<Queue> MakeQueue(Backend& backend, QueueKind kind) {
  auto queue = backend.CreateQueue(kind, 0);
  EXPECT_TRUE(queue.ok());
  return std::move(queue).value();
}

std::unique_ptr<Event> MakeEvent(Backend& backend) {
  auto event = backend.CreateEvent();
  EXPECT_TRUE(event.ok());
  return std::move(event).value();
}

void SleepMicros(int us) { std::this_thread::sleep_for(std::chrono::microseconds(us)); }

// Records every chunk; optionally slow, like an emulated link.
class RecordingLink : public LinkModel {
 public:
  void OnChunk(CopyDirection direction, uint64_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    chunks_.emplace_back(direction, bytes);
  }
  std::vector<std::pair<CopyDirection, uint64_t>> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(chunks_, {});
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<CopyDirection, uint64_t>> chunks_;
};

// H2D copy -> compute (x += 1, after a random sleep) -> D2H copy, three queues chained by events.
// Every round's host result must show the compute result, never the stale input.
TEST(CpuBackendQueueTest, EventsOrderWorkAcrossQueuesUnderRandomDelays) {
  auto backend = MakeBackend();
  auto h2d = MakeQueue(*backend, QueueKind::kHostToDevice);
  auto compute = MakeQueue(*backend, QueueKind::kCompute);
  auto d2h = MakeQueue(*backend, QueueKind::kDeviceToHost);
  constexpr int kRounds = 200, kInts = 1024;
  std::vector<std::vector<int>> in(kRounds, std::vector<int>(kInts)), out = in;
  std::vector<DeviceBuffer> device;
  std::vector<std::unique_ptr<Event>> uploaded, computed;
  std::mt19937 rng(1);
  for (int r = 0; r < kRounds; ++r) {
    for (int i = 0; i < kInts; ++i) in[r][i] = r * kInts + i;
    auto buffer = backend->Allocate(kInts * sizeof(int), "round");
    ASSERT_TRUE(buffer.ok());
    device.push_back(std::move(*buffer));
    uploaded.push_back(MakeEvent(*backend));
    computed.push_back(MakeEvent(*backend));
  }
  for (int r = 0; r < kRounds; ++r) {
    const int sleep_copy = static_cast<int>(rng() % 200), sleep_compute = static_cast<int>(rng() % 200);
    ASSERT_TRUE(backend->Enqueue(*h2d, [=] { SleepMicros(sleep_copy); return absl::OkStatus(); }).ok());
    ASSERT_TRUE(backend->CopyToDevice(*h2d, in[r].data(), device[r], 0, kInts * sizeof(int)).ok());
    ASSERT_TRUE(backend->Record(*h2d, *uploaded[r]).ok());
    ASSERT_TRUE(backend->Wait(*compute, *uploaded[r]).ok());
    int* data = static_cast<int*>(device[r].data());
    ASSERT_TRUE(backend->Enqueue(*compute, [=] {
      SleepMicros(sleep_compute);
      for (int i = 0; i < kInts; ++i) data[i] += 1;
      return absl::OkStatus();
    }).ok());
    ASSERT_TRUE(backend->Record(*compute, *computed[r]).ok());
    ASSERT_TRUE(backend->Wait(*d2h, *computed[r]).ok());
    ASSERT_TRUE(backend->CopyToHost(*d2h, device[r], 0, out[r].data(), kInts * sizeof(int)).ok());
  }
  ASSERT_TRUE(backend->Synchronize(*d2h).ok());
  for (int r = 0; r < kRounds; ++r) {
    for (int i = 0; i < kInts; ++i) ASSERT_EQ(out[r][i], r * kInts + i + 1) << "round " << r;
  }
  EXPECT_TRUE(backend->Synchronize(*h2d).ok());
  EXPECT_TRUE(backend->Synchronize(*compute).ok());
}

TEST(CpuBackendQueueTest, SynchronizeEventWaitsForRecordedWorkAndUnrecordedIsComplete) {
  auto backend = MakeBackend();
  auto queue = MakeQueue(*backend, QueueKind::kCompute);
  auto event = MakeEvent(*backend);
  EXPECT_TRUE(backend->Synchronize(*event).ok());  // never recorded
  EXPECT_TRUE(backend->Wait(*queue, *event).ok());  // no-op
  std::atomic<bool> done{false};
  ASSERT_TRUE(backend->Enqueue(*queue, [&] {
    SleepMicros(20000);
    done = true;
    return absl::OkStatus();
  }).ok());
  ASSERT_TRUE(backend->Record(*queue, *event).ok());
  EXPECT_TRUE(backend->Synchronize(*event).ok());
  EXPECT_TRUE(done);
}

TEST(CpuBackendQueueTest, SynchronizeReportsFirstErrorOnceAndSkipsLaterWork) {
  auto backend = MakeBackend();
  auto queue = MakeQueue(*backend, QueueKind::kCompute);
  std::atomic<int> ran{0};
  auto count = [&] { ++ran; return absl::OkStatus(); };
  ASSERT_TRUE(backend->Enqueue(*queue, count).ok());
  ASSERT_TRUE(backend->Enqueue(*queue, [] { return absl::InternalError("kernel exploded"); }).ok());
  ASSERT_TRUE(backend->Enqueue(*queue, [] { return absl::DataLossError("second"); }).ok());
  ASSERT_TRUE(backend->Enqueue(*queue, count).ok());
  absl::Status status = backend->Synchronize(*queue);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);  // first error wins
  EXPECT_THAT(status.message(), HasSubstr("kernel exploded"));
  EXPECT_EQ(ran, 1);  // work after the error was skipped
  EXPECT_TRUE(backend->Synchronize(*queue).ok());  // reported once
  ASSERT_TRUE(backend->Enqueue(*queue, count).ok());  // usable again
  EXPECT_TRUE(backend->Synchronize(*queue).ok());
  EXPECT_EQ(ran, 2);
}

TEST(CpuBackendQueueTest, ErrorFlowsThroughEventsToWaitingQueue) {
  auto backend = MakeBackend();
  auto compute = MakeQueue(*backend, QueueKind::kCompute);
  auto d2h = MakeQueue(*backend, QueueKind::kDeviceToHost);
  auto event = MakeEvent(*backend);
  ASSERT_TRUE(backend->Enqueue(*compute, [] { return absl::InternalError("nan in logits"); }).ok());
  ASSERT_TRUE(backend->Record(*compute, *event).ok());
  ASSERT_TRUE(backend->Wait(*d2h, *event).ok());
  bool copied = false;
  ASSERT_TRUE(backend->Enqueue(*d2h, [&] { copied = true; return absl::OkStatus(); }).ok());
  EXPECT_EQ(backend->Synchronize(*event).code(), absl::StatusCode::kInternal);
  absl::Status waiter = backend->Synchronize(*d2h);
  EXPECT_EQ(waiter.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(waiter.message(), HasSubstr("dependency failed: nan in logits"));
  EXPECT_FALSE(copied);
  EXPECT_EQ(backend->Synchronize(*compute).code(), absl::StatusCode::kInternal);
}

TEST(CpuBackendQueueTest, ChunkedCopiesCallLinkModelWithBytesAndDirection) {
  RecordingLink link;
  auto backend = MakeBackend(&link, /*chunk=*/4000);
  auto queue = MakeQueue(*backend, QueueKind::kHostToDevice);
  std::vector<uint8_t> host(10000), back(10000, 0);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint8_t>(i * 7);
  auto a = backend->Allocate(10000, "a");
  auto b = backend->Allocate(20000, "b");
  ASSERT_TRUE(a.ok() && b.ok());

  ASSERT_TRUE(backend->CopyToDevice(*queue, host.data(), *a, 0, 10000).ok());
  ASSERT_TRUE(backend->Synchronize(*queue).ok());
  EXPECT_THAT(link.Take(), ElementsAre(Pair(CopyDirection::kHostToDevice, 4000),
                                       Pair(CopyDirection::kHostToDevice, 4000),
                                       Pair(CopyDirection::kHostToDevice, 2000)));
  ASSERT_TRUE(backend->CopyDeviceToDevice(*queue, *a, 1000, *b, 15000, 5000).ok());
  ASSERT_TRUE(backend->CopyToHost(*queue, *b, 15000, back.data(), 5000).ok());
  ASSERT_TRUE(backend->CopyToDevice(*queue, host.data(), *a, 0, 0).ok());  // empty: no chunks
  ASSERT_TRUE(backend->Synchronize(*queue).ok());
  EXPECT_THAT(link.Take(), ElementsAre(Pair(CopyDirection::kDeviceToDevice, 4000),
                                       Pair(CopyDirection::kDeviceToDevice, 1000),
                                       Pair(CopyDirection::kDeviceToHost, 4000),
                                       Pair(CopyDirection::kDeviceToHost, 1000)));
  EXPECT_EQ(std::memcmp(back.data(), host.data() + 1000, 5000), 0);
  EXPECT_EQ(CopyDirectionName(CopyDirection::kDeviceToHost), "d2h");
}

TEST(CpuBackendQueueTest, CopyOutOfRangeIsRejectedAtEnqueue) {
  auto backend = MakeBackend();
  auto queue = MakeQueue(*backend, QueueKind::kHostToDevice);
  auto a = backend->Allocate(100, "acts");
  ASSERT_TRUE(a.ok());
  std::vector<char> host(200);
  absl::Status s = backend->CopyToDevice(*queue, host.data(), *a, 50, 51);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr("'acts' of 100 bytes"));
  EXPECT_EQ(backend->CopyToHost(*queue, *a, 101, host.data(), 0).code(), absl::StatusCode::kOk);
  EXPECT_EQ(backend->CopyToHost(*queue, *a, ~uint64_t{0}, host.data(), 2).code(),
            absl::StatusCode::kOutOfRange);  // offset + bytes overflows
  EXPECT_EQ(backend->CopyDeviceToDevice(*queue, *a, 0, *a, 60, 50).code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(backend->Synchronize(*queue).ok());
}

TEST(CpuBackendQueueTest, ForeignQueueOrEventIsInvalidArgument) {
  class ForeignQueue : public Queue {
   public:
    ForeignQueue() : Queue(QueueKind::kCompute, 0) {}
  };
  class ForeignEvent : public Event {};
  auto backend = MakeBackend();
  ForeignQueue queue;
  ForeignEvent event;
  EXPECT_EQ(backend->Synchronize(queue).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend->Synchronize(event).code(), absl::StatusCode::kInvalidArgument);
}

// Documented behaviour: destroying a queue DRAINS it (every pending item runs), including items
// waiting on another queue's event; nothing hangs.
TEST(CpuBackendQueueTest, DestroyingQueuesWithPendingWorkDrains) {
  auto backend = MakeBackend();
  std::atomic<int> ran{0};
  auto compute = MakeQueue(*backend, QueueKind::kCompute);
  auto d2h = MakeQueue(*backend, QueueKind::kDeviceToHost);
  auto event = MakeEvent(*backend);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(backend->Enqueue(*compute, [&] { SleepMicros(1000); ++ran; return absl::OkStatus(); }).ok());
  }
  ASSERT_TRUE(backend->Record(*compute, *event).ok());
  ASSERT_TRUE(backend->Wait(*d2h, *event).ok());
  ASSERT_TRUE(backend->Enqueue(*d2h, [&] { ++ran; return absl::OkStatus(); }).ok());
  event.reset();  // the event's state outlives the handle while records are in flight
  d2h.reset();    // blocks until compute's record completed, then runs the last task
  EXPECT_EQ(ran, 21);
  compute.reset();
  EXPECT_EQ(ran, 21);
}

TEST(CpuBackendQueueTest, QueueKeepsKindAndPriority) {
  auto backend = MakeBackend();
  auto queue = backend->CreateQueue(QueueKind::kDeviceToHost, -3);
  ASSERT_TRUE(queue.ok());
  EXPECT_EQ((*queue)->kind(), QueueKind::kDeviceToHost);
  EXPECT_EQ((*queue)->priority(), -3);
  EXPECT_EQ(QueueKindName((*queue)->kind()), "d2h");
}

}  // namespace
}  // namespace mobius::backend
