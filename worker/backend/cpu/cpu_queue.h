// The CPU backend's queues and events: one worker thread per queue, events on a mutex/condvar.
//
// CpuQueue runs its items in FIFO order on its own thread. An item is either a task (skipped while
// the queue holds an unreported error) or a control item (Record/Wait: always runs, sees the
// queue's error). The first error a task returns is kept until Synchronize() reports it.
//
// Destruction DRAINS: ~CpuQueue lets every pending item run (a blocked Wait finishes when its event
// completes, which always happens: an event's record is enqueued before any Wait can observe it, so
// waits cannot form a cycle), then joins the thread. Nothing is cancelled, so no enqueued copy or
// op is half-done when a queue disappears; a queue in error skips its tasks, so draining it is quick.
//
// CpuEventState is shared (shared_ptr) between the Event handle and the queued items that complete
// or await it, so destroying an Event with records in flight is safe.
//
// Thread-safety: all methods are thread-safe.
#ifndef MOBIUS_WORKER_BACKEND_CPU_CPU_QUEUE_H_
#define MOBIUS_WORKER_BACKEND_CPU_CPU_QUEUE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "worker/backend/backend.h"

namespace mobius::backend {

// Work run on a queue's thread. Returning an error puts the queue in error (first error wins).
using CpuTask = absl::AnyInvocable<absl::Status()>;

class CpuEventState {
 public:
  // Host side, at Record(): the generation the queued completion will carry.
  uint64_t NextGeneration();
  // The generation of the latest Record() so far (0: never recorded).
  uint64_t recorded() const;
  // Queue side: the work before Record(gen) finished with `status`.
  void Complete(uint64_t generation, const absl::Status& status);
  // Blocks until Record(generation) completed; returns its status. generation 0 returns OK.
  absl::Status Await(uint64_t generation);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t recorded_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t completed_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status status_ ABSL_GUARDED_BY(mu_);  // of the latest completed generation
};

class CpuEvent : public Event {
 public:
  CpuEvent() : state_(std::make_shared<CpuEventState>()) {}
  const std::shared_ptr<CpuEventState>& state() const { return state_; }

 private:
  std::shared_ptr<CpuEventState> state_;
};

class CpuQueue : public Queue {
 public:
  CpuQueue(QueueKind kind, int priority);
  ~CpuQueue() override;  // drains (see above), then joins

  void Enqueue(CpuTask task);
  // Completes `event` (with the queue's error, if any) when the items before it have run.
  void EnqueueRecord(std::shared_ptr<CpuEventState> event, uint64_t generation);
  // Later items start after `event` reached `generation`; its error becomes the queue's.
  void EnqueueWait(std::shared_ptr<CpuEventState> event, uint64_t generation);

  // Blocks until every item enqueued before the call has run; returns and clears the first error.
  absl::Status Synchronize();

 private:
  struct Item {
    // Gets the queue's current error; control items run even when it is not OK.
    absl::AnyInvocable<absl::Status(const absl::Status& queue_error)> fn;
    bool control = false;
  };
  void Push(Item item);
  void Loop();

  std::mutex mu_;
  std::condition_variable work_cv_;  // an item arrived, or stop
  std::condition_variable idle_cv_;  // an item finished
  std::deque<Item> items_ ABSL_GUARDED_BY(mu_);
  uint64_t enqueued_ ABSL_GUARDED_BY(mu_) = 0;  // items ever pushed
  uint64_t finished_ ABSL_GUARDED_BY(mu_) = 0;  // items ever finished
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started after the members above exist
};

}  // namespace mobius::backend

#endif  // MOBIUS_WORKER_BACKEND_CPU_CPU_QUEUE_H_
