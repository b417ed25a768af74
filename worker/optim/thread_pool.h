// A small fixed-size pool for data-parallel loops on the host (the optimizer's chunks).
//
// ParallelFor(n, fn) runs fn(0) .. fn(n-1), each exactly once, on the pool's threads and on the
// calling thread, and returns when all have finished. Indices are handed out one at a time from an
// atomic counter, so uneven chunks balance themselves.
//
// Thread-safety: one ParallelFor at a time per pool (callers serialise; CpuAdamW owns its pool).
// `fn` is called concurrently from several threads and must not throw.
#ifndef MOBIUS_WORKER_OPTIM_THREAD_POOL_H_
#define MOBIUS_WORKER_OPTIM_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mobius::optim {

class ThreadPool {
 public:
  // `num_threads` >= 1 counts the caller: num_threads - 1 threads are started.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();  // joins the threads

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  void ParallelFor(size_t n, const std::function<void(size_t)>& fn);

 private:
  void WorkerLoop();
  void RunTasks();  // takes indices until none are left

  std::vector<std::thread> workers_;

  std::mutex mu_;
  std::condition_variable start_cv_;  // a new loop or shutdown
  std::condition_variable done_cv_;   // a worker left the current loop
  uint64_t generation_ = 0;           // guarded by mu_: bumped once per ParallelFor
  int active_workers_ = 0;            // guarded by mu_: workers still inside the current loop
  bool shutdown_ = false;             // guarded by mu_

  // The current loop; written by ParallelFor before it bumps generation_ under mu_.
  const std::function<void(size_t)>* fn_ = nullptr;
  size_t n_ = 0;
  std::atomic<size_t> next_{0};
};

}  // namespace mobius::optim

#endif  // MOBIUS_WORKER_OPTIM_THREAD_POOL_H_
