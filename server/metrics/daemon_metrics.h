// DaemonMetrics: every Prometheus metric mobiusd exports, declared in one place (the catalogue
// below), served over HTTP on their own port (--metrics_address) by metrics_http.h.
//
// Naming (../shared/design/users.md): prefix mobius_, base units, _total for counters, no user ids
// as labels; the job label only on per-job series, which are removed when the job stops.
//
//   daemon     mobius_build_info{version}                                   gauge 1
//              mobius_rpc_duration_seconds{method}                          histogram
//              mobius_worker_restarts_total                                 counter
//   scheduler  mobius_jobs{state}                                           gauge (queued, running)
//              mobius_job_queue_wait_seconds                                histogram
//              mobius_admission_rejections_total{reason}                    counter
//   per GPU    mobius_gpu_memory_used_bytes{gpu}                            gauge (plan's estimate)
//              mobius_gpu_memory_capacity_bytes{gpu}                        gauge
//              mobius_stage_swap_bytes_total{gpu,direction}                 counter (h2d | d2h)
//              mobius_swap_stall_seconds_total{gpu}                         counter
//              mobius_gpu_compute_seconds_total{gpu}                        counter
//   per link   mobius_pcie_link_bytes_total{link,direction}                 counter (emulated links)
//   per job    mobius_job_step_duration_seconds{job}                        histogram
//              mobius_job_tokens_total{job}                                 counter
//              mobius_job_loss{job}                                         gauge
//              mobius_job_eval_loss{job}                                    gauge (NaN until the
//                                                                           first eval step)
//              mobius_job_mfu_ratio{job}                                    gauge 0..1
//              mobius_job_planned_step_seconds{job}                         gauge
//              mobius_job_measured_step_seconds{job}                        gauge
//              mobius_job_current_step{job}                                 gauge (last completed)
//              mobius_job_total_steps{job}                                  gauge (0 until known)
//              mobius_job_progress_ratio{job}                               gauge 0..1
//              mobius_job_tokens_per_second{job}                            gauge (last step)
//              mobius_job_loss_scale{job}                                   gauge (fp16: the last
//                                                                           step's; 0 with bf16)
//              mobius_job_skipped_steps_total{job}                          counter (fp16 steps
//                                                                           skipped on overflow)
//   training   mobius_train_tokens_total                                    counter (all jobs)
//              mobius_train_step_duration_seconds                           histogram (all jobs)
//   host       mobius_host_pinned_bytes                                     gauge (running jobs)
//              mobius_host_store_bytes                                      gauge (running jobs)
//   per user   mobius_user_gpu_seconds_total{user}                          counter (accounting:
//              mobius_user_host_memory_gib_seconds_total{user}              counter  GPUs held x
//              mobius_user_tokens_total{user}                               counter  wall time ...)
//              mobius_user_fair_share{user}                                 gauge 0..1 (users with
//                                                                           queued/running jobs)
//   The user label is the user's name: the few people with jobs on one node, not an unbounded
//   value (issue 36 asks for per-user series; ids never appear).
//
// Thread-safety: every method may be called from any thread.
#ifndef MOBIUS_SERVER_METRICS_DAEMON_METRICS_H_
#define MOBIUS_SERVER_METRICS_DAEMON_METRICS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/jobs/service/job_observer.h"

namespace mobius {

struct MetricsOptions {
  std::string address;   // "127.0.0.1:9464"; empty: no HTTP exposer (tests scrape Serialize())
  std::string version;   // mobius_build_info's label
  // Per GPU: display index and memory capacity (topology order).
  std::vector<int64_t> gpu_memory_capacity_bytes;
};

class DaemonMetrics final : public jobs::JobObserver {
 public:
  // UNAVAILABLE when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<DaemonMetrics>> Create(const MetricsOptions& options);
  ~DaemonMetrics() override;

  void ObserveRpc(const std::string& method, double seconds);
  // The text exposition format of everything now (what a scrape returns).
  std::string Serialize() const;
  // The port actually bound (useful with port 0).
  int port() const;

  void JobStarted(const jobs::JobRunInfo& info, double queue_wait_seconds) override;
  void StepCompleted(const jobs::JobRunInfo& info, const runtime::StepReport& step) override;
  void JobStopped(const jobs::JobRunInfo& info) override;
  void JobCounts(const std::map<jobs::JobState, int>& counts) override;
  void SubmitRejected(const std::string& reason) override;
  void WorkerRestart() override;
  void UsageAccrued(const jobs::UsageDelta& delta) override;
  void FairShare(const std::map<uint32_t, double>& factors) override;

  struct State;

 private:
  explicit DaemonMetrics(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

}  // namespace mobius

#endif  // MOBIUS_SERVER_METRICS_DAEMON_METRICS_H_
