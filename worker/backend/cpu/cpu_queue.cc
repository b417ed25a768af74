#include "worker/backend/cpu/cpu_queue.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace mobius::backend {

uint64_t CpuEventState::NextGeneration() {
  std::lock_guard<std::mutex> lock(mu_);
  return ++recorded_;
}

uint64_t CpuEventState::recorded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return recorded_;
}

void CpuEventState::Complete(uint64_t generation, const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  // Records on one queue complete in order; across queues the latest generation wins (CUDA: a
  // re-record replaces the previous one).
  if (generation >= completed_) {
    completed_ = generation;
    status_ = status;
  }
  cv_.notify_all();
}

absl::Status CpuEventState::Await(uint64_t generation) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return completed_ >= generation; });
  return generation == 0 ? absl::OkStatus() : status_;
}

CpuQueue::CpuQueue(QueueKind kind, int priority)
    : Queue(kind, priority), thread_([this] { Loop(); }) {}

CpuQueue::~CpuQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  thread_.join();  // Loop() returns only once items_ is empty: pending work drains
}

void CpuQueue::Push(Item item) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    items_.push_back(std::move(item));
    ++enqueued_;
  }
  work_cv_.notify_one();
}

void CpuQueue::Enqueue(CpuTask task) {
  Push({[task = std::move(task)](const absl::Status&) mutable { return task(); }, false});
}

void CpuQueue::EnqueueRecord(std::shared_ptr<CpuEventState> event, uint64_t generation) {
  Push({[event = std::move(event), generation](const absl::Status& queue_error) {
          event->Complete(generation, queue_error);
          return absl::OkStatus();
        },
        true});
}

void CpuQueue::EnqueueWait(std::shared_ptr<CpuEventState> event, uint64_t generation) {
  Push({[event = std::move(event), generation](const absl::Status&) {
          absl::Status status = event->Await(generation);
          if (status.ok()) return status;
          return absl::Status(status.code(), absl::StrCat("dependency failed: ", status.message()));
        },
        true});
}

absl::Status CpuQueue::Synchronize() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = enqueued_;
  idle_cv_.wait(lock, [&] { return finished_ >= target; });
  return std::exchange(error_, absl::OkStatus());
}

void CpuQueue::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_cv_.wait(lock, [&] { return stop_ || !items_.empty(); });
    if (items_.empty()) return;  // stop_ and drained
    Item item = std::move(items_.front());
    items_.pop_front();
    const absl::Status queue_error = error_;
    lock.unlock();
    absl::Status status = absl::OkStatus();
    if (item.control || queue_error.ok()) status = item.fn(queue_error);
    lock.lock();
    if (!status.ok() && error_.ok()) error_ = std::move(status);
    ++finished_;
    idle_cv_.notify_all();
  }
}

}  // namespace mobius::backend
