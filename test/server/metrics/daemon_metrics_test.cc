// DaemonMetrics against fake jobs: every catalogue entry (daemon_metrics.h) moves as documented,
// per-job series disappear when the job stops, cumulative link bytes are turned into deltas once,
// concurrent reporters lose nothing, and the exposition passes `promtool check metrics`.
#include "server/metrics/daemon_metrics.h"

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/server/metrics/exposition.h"

namespace mobius {
namespace {

using ::mobius::testing::Exposition;
using ::mobius::testing::Labels;
using ::mobius::testing::ParseExposition;
using ::testing::Optional;
using ::testing::DoubleNear;

constexpr int64_t kGiB = int64_t{1} << 30;

std::unique_ptr<DaemonMetrics> MakeMetrics(const std::string& address = "") {
  MetricsOptions o;
  o.address = address;
  o.version = "1.2.3-test";
  o.gpu_memory_capacity_bytes = {24 * kGiB, 24 * kGiB, 24 * kGiB};
  absl::StatusOr<std::unique_ptr<DaemonMetrics>> m = DaemonMetrics::Create(o);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

Exposition Scrape(const DaemonMetrics& m) {
  Exposition e = ParseExposition(m.Serialize());
  EXPECT_EQ(e.error, "");
  return e;
}

// A two-rank job: rank 0 emulates GPU 2, rank 1 GPU 0; three emulated links.
struct FakeJob {
  runtime::RunConfig run;
  jobs::JobRunInfo info;

  explicit FakeJob(const std::string& id) {
    run.job_id = id;
    run.num_workers = 2;
    run.rank_gpu = {2, 0};
    run.links = {{"gpu0", 1e9}, {"gpu2", 1e9}, {"switch0.uplink", 1e9}};
    info.job_id = id;
    info.run = &run;
    info.predicted_step_seconds = 0.5;
    info.gpu_memory_bytes = {3 * kGiB, 5 * kGiB};
    info.host_store_bytes = 1000;
    info.pinned_bytes = 400;
    info.flops_per_token = 6e6;
    info.peak_flops_per_second = 1e12;
  }
  FakeJob(const FakeJob&) = delete;
};

runtime::WorkerStepReport Rank(int rank, uint64_t h2d, uint64_t d2h, double stall, double compute) {
  runtime::WorkerStepReport r;
  r.rank = rank;
  r.h2d_bytes = h2d;
  r.d2h_bytes = d2h;
  r.stall_seconds = stall;
  r.compute_seconds = compute;
  r.tokens = 128;
  return r;
}

// One step: 128 tokens in 0.25 s; `links` are cumulative {h2d, d2h} per link since the job began.
runtime::StepReport Step(int64_t step, float loss,
                         std::vector<std::pair<uint64_t, uint64_t>> links) {
  runtime::StepReport s;
  s.step = step;
  s.total_steps = 10;
  s.loss = loss;
  s.tokens = 128;
  s.step_seconds = 0.25;
  s.tokens_per_second = 512;
  s.emulated = true;
  s.ranks = {Rank(0, 1000, 10, 0.1, 0.2), Rank(1, 2000, 20, 0.05, 0.15)};
  s.link_bytes = std::move(links);
  return s;
}

TEST(DaemonMetricsTest, FreshDaemonExportsTheStaticSeries) {
  auto m = MakeMetrics();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->port(), 0);  // no address: no HTTP endpoint
  const Exposition e = Scrape(*m);
  EXPECT_THAT(e.Value("mobius_build_info", {{"version", "1.2.3-test"}}), Optional(1.0));
  for (const char* g : {"0", "1", "2"}) {
    EXPECT_THAT(e.Value("mobius_gpu_memory_capacity_bytes", {{"gpu", g}}),
                Optional(double(24 * kGiB)));
    EXPECT_THAT(e.Value("mobius_gpu_memory_used_bytes", {{"gpu", g}}), Optional(0.0));
  }
  EXPECT_THAT(e.Value("mobius_jobs", {{"state", "queued"}}), Optional(0.0));
  EXPECT_THAT(e.Value("mobius_jobs", {{"state", "running"}}), Optional(0.0));
  EXPECT_THAT(e.Value("mobius_train_tokens_total"), Optional(0.0));
  EXPECT_THAT(e.Value("mobius_worker_restarts_total"), Optional(0.0));
  EXPECT_THAT(e.Value("mobius_host_pinned_bytes"), Optional(0.0));
  EXPECT_THAT(e.Value("mobius_host_store_bytes"), Optional(0.0));
  EXPECT_THAT(e.Value("mobius_job_queue_wait_seconds_count"), Optional(0.0));
  EXPECT_THAT(e.Value("mobius_train_step_duration_seconds_count"), Optional(0.0));
  EXPECT_TRUE(e.Matching("mobius_job_tokens_total").empty());
  // Known label values exist from the start at 0 (so rate() sees the first event); families whose
  // labels are not known in advance (RPC methods, links, jobs) appear with their first series.
  for (const char* reason : {"invalid_spec", "never_fits"}) {
    EXPECT_THAT(e.Value("mobius_admission_rejections_total", {{"reason", reason}}), Optional(0.0));
  }
  EXPECT_THAT(e.Value("mobius_stage_swap_bytes_total", {{"gpu", "0"}, {"direction", "h2d"}}),
              Optional(0.0));
  EXPECT_THAT(e.Value("mobius_swap_stall_seconds_total", {{"gpu", "0"}}), Optional(0.0));
  EXPECT_TRUE(e.Matching("mobius_pcie_link_bytes_total").empty());
}

// Every family of the catalogue, with the type daemon_metrics.h documents, once each has a series.
TEST(DaemonMetricsTest, EveryCatalogueFamilyHasItsDocumentedType) {
  auto m = MakeMetrics();
  ASSERT_NE(m, nullptr);
  FakeJob job("j-000001");
  m->JobStarted(job.info, 1);
  m->StepCompleted(job.info, Step(1, 3.5f, {{600, 5}, {800, 10}, {1400, 15}}));
  m->SubmitRejected("never_fits");
  m->ObserveRpc("/grpc.health.v1.Health/Check", 0.0002);
  const Exposition e = Scrape(*m);
  const std::map<std::string, std::string> types = {
      {"mobius_build_info", "gauge"},
      {"mobius_rpc_duration_seconds", "histogram"},
      {"mobius_worker_restarts_total", "counter"},
      {"mobius_jobs", "gauge"},
      {"mobius_job_queue_wait_seconds", "histogram"},
      {"mobius_admission_rejections_total", "counter"},
      {"mobius_gpu_memory_used_bytes", "gauge"},
      {"mobius_gpu_memory_capacity_bytes", "gauge"},
      {"mobius_stage_swap_bytes_total", "counter"},
      {"mobius_swap_stall_seconds_total", "counter"},
      {"mobius_gpu_compute_seconds_total", "counter"},
      {"mobius_pcie_link_bytes_total", "counter"},
      {"mobius_job_step_duration_seconds", "histogram"},
      {"mobius_job_tokens_total", "counter"},
      {"mobius_job_loss", "gauge"},
      {"mobius_job_mfu_ratio", "gauge"},
      {"mobius_job_planned_step_seconds", "gauge"},
      {"mobius_job_measured_step_seconds", "gauge"},
      {"mobius_job_current_step", "gauge"},
      {"mobius_job_total_steps", "gauge"},
      {"mobius_job_progress_ratio", "gauge"},
      {"mobius_job_tokens_per_second", "gauge"},
      {"mobius_train_tokens_total", "counter"},
      {"mobius_train_step_duration_seconds", "histogram"},
      {"mobius_host_pinned_bytes", "gauge"},
      {"mobius_host_store_bytes", "gauge"},
  };
  for (const auto& [name, type] : types) {
    // prometheus-cpp declares counters by their full name (with _total).
    auto it = e.types.find(name);
    ASSERT_NE(it, e.types.end()) << name << " is not declared";
    EXPECT_EQ(it->second, type) << name;
  }
}

TEST(DaemonMetricsTest, JobStartAndStepsMoveEveryPerJobAndPerGpuSeries) {
  auto m = MakeMetrics();
  ASSERT_NE(m, nullptr);
  FakeJob job("j-000001");
  m->JobStarted(job.info, 2.5);
  Exposition e = Scrape(*m);
  const Labels j{{"job", "j-000001"}};
  EXPECT_THAT(e.Value("mobius_job_queue_wait_seconds_count"), Optional(1.0));
  EXPECT_THAT(e.Value("mobius_job_queue_wait_seconds_sum"), Optional(2.5));
  EXPECT_THAT(e.Bucket("mobius_job_queue_wait_seconds", {}, 1), Optional(0.0));
  EXPECT_THAT(e.Bucket("mobius_job_queue_wait_seconds", {}, 5), Optional(1.0));
  EXPECT_THAT(e.Value("mobius_job_planned_step_seconds", j), Optional(0.5));
  EXPECT_THAT(e.Value("mobius_job_tokens_total", j), Optional(0.0));
  EXPECT_THAT(e.Value("mobius_job_step_duration_seconds_count", j), Optional(0.0));
  EXPECT_THAT(e.Value("mobius_job_current_step", j), Optional(0.0));  // no step yet
  EXPECT_THAT(e.Value("mobius_job_progress_ratio", j), Optional(0.0));
  EXPECT_THAT(e.Value("mobius_job_tokens_per_second", j), Optional(0.0));
  // Rank 0 runs on GPU 2, rank 1 on GPU 0; GPU 1 is not the job's.
  EXPECT_THAT(e.Value("mobius_gpu_memory_used_bytes", {{"gpu", "2"}}), Optional(double(3 * kGiB)));
  EXPECT_THAT(e.Value("mobius_gpu_memory_used_bytes", {{"gpu", "0"}}), Optional(double(5 * kGiB)));
  EXPECT_THAT(e.Value("mobius_gpu_memory_used_bytes", {{"gpu", "1"}}), Optional(0.0));
  EXPECT_THAT(e.Value("mobius_host_pinned_bytes"), Optional(400.0));
  EXPECT_THAT(e.Value("mobius_host_store_bytes"), Optional(1000.0));

  m->StepCompleted(job.info, Step(1, 3.5f, {{600, 5}, {800, 10}, {1400, 15}}));
  e = Scrape(*m);
  EXPECT_THAT(e.Value("mobius_job_tokens_total", j), Optional(128.0));
  EXPECT_THAT(e.Value("mobius_train_tokens_total"), Optional(128.0));
  EXPECT_THAT(e.Value("mobius_job_loss", j), Optional(3.5));
  EXPECT_THAT(e.Value("mobius_job_measured_step_seconds", j), Optional(0.25));
  EXPECT_THAT(e.Value("mobius_job_current_step", j), Optional(1.0));
  EXPECT_THAT(e.Value("mobius_job_total_steps", j), Optional(10.0));
  EXPECT_THAT(e.Value("mobius_job_progress_ratio", j), Optional(DoubleNear(0.1, 1e-12)));
  EXPECT_THAT(e.Value("mobius_job_tokens_per_second", j), Optional(512.0));
  EXPECT_THAT(e.Value("mobius_job_step_duration_seconds_count", j), Optional(1.0));
  EXPECT_THAT(e.Value("mobius_job_step_duration_seconds_sum", j), Optional(0.25));
  EXPECT_THAT(e.Bucket("mobius_job_step_duration_seconds", j, 0.1), Optional(0.0));
  EXPECT_THAT(e.Bucket("mobius_job_step_duration_seconds", j, 0.25), Optional(1.0));
  EXPECT_THAT(e.Value("mobius_train_step_duration_seconds_count"), Optional(1.0));
  // MFU = flops/token * tokens / seconds / peak = 6e6 * 128 / 0.25 / 1e12.
  EXPECT_THAT(e.Value("mobius_job_mfu_ratio", j), Optional(DoubleNear(3.072e-3, 1e-12)));
  // Swap bytes, stall and compute go to the GPU each rank runs on.
  EXPECT_THAT(e.Value("mobius_stage_swap_bytes_total", {{"gpu", "2"}, {"direction", "h2d"}}),
              Optional(1000.0));
  EXPECT_THAT(e.Value("mobius_stage_swap_bytes_total", {{"gpu", "2"}, {"direction", "d2h"}}),
              Optional(10.0));
  EXPECT_THAT(e.Value("mobius_stage_swap_bytes_total", {{"gpu", "0"}, {"direction", "h2d"}}),
              Optional(2000.0));
  EXPECT_THAT(e.Value("mobius_stage_swap_bytes_total", {{"gpu", "0"}, {"direction", "d2h"}}),
              Optional(20.0));
  EXPECT_THAT(e.Value("mobius_swap_stall_seconds_total", {{"gpu", "2"}}), Optional(0.1));
  EXPECT_THAT(e.Value("mobius_swap_stall_seconds_total", {{"gpu", "0"}}), Optional(0.05));
  EXPECT_THAT(e.Value("mobius_gpu_compute_seconds_total", {{"gpu", "2"}}), Optional(0.2));
  EXPECT_THAT(e.Value("mobius_gpu_compute_seconds_total", {{"gpu", "0"}}), Optional(0.15));
  // GPU 1 runs no rank of this job: its series stay at 0.
  EXPECT_THAT(e.Value("mobius_stage_swap_bytes_total", {{"gpu", "1"}, {"direction", "h2d"}}),
              Optional(0.0));
  EXPECT_THAT(e.Value("mobius_pcie_link_bytes_total", {{"link", "gpu0"}, {"direction", "h2d"}}),
              Optional(600.0));
  EXPECT_THAT(e.Value("mobius_pcie_link_bytes_total",
                      {{"link", "switch0.uplink"}, {"direction", "d2h"}}),
              Optional(15.0));

  // Step 2: the per-rank bytes are per step (they add up); the link bytes are cumulative.
  m->StepCompleted(job.info, Step(2, 3.0f, {{1000, 9}, {800, 10}, {1800, 19}}));
  e = Scrape(*m);
  EXPECT_THAT(e.Value("mobius_job_tokens_total", j), Optional(256.0));
  EXPECT_THAT(e.Value("mobius_job_loss", j), Optional(3.0));
  EXPECT_THAT(e.Value("mobius_job_current_step", j), Optional(2.0));
  EXPECT_THAT(e.Value("mobius_job_progress_ratio", j), Optional(DoubleNear(0.2, 1e-12)));
  EXPECT_THAT(e.Value("mobius_stage_swap_bytes_total", {{"gpu", "2"}, {"direction", "h2d"}}),
              Optional(2000.0));
  EXPECT_THAT(e.Value("mobius_pcie_link_bytes_total", {{"link", "gpu0"}, {"direction", "h2d"}}),
              Optional(1000.0));
  EXPECT_THAT(e.Value("mobius_pcie_link_bytes_total", {{"link", "gpu0"}, {"direction", "d2h"}}),
              Optional(9.0));
  EXPECT_THAT(e.Value("mobius_pcie_link_bytes_total", {{"link", "gpu2"}, {"direction", "h2d"}}),
              Optional(800.0));  // no traffic in step 2: unchanged
  EXPECT_THAT(e.Value("mobius_pcie_link_bytes_total",
                      {{"link", "switch0.uplink"}, {"direction", "h2d"}}),
              Optional(1800.0));
  // The same cumulative report twice adds nothing.
  m->StepCompleted(job.info, Step(3, 2.9f, {{1000, 9}, {800, 10}, {1800, 19}}));
  e = Scrape(*m);
  EXPECT_THAT(e.Value("mobius_pcie_link_bytes_total",
                      {{"link", "switch0.uplink"}, {"direction", "h2d"}}),
              Optional(1800.0));
  EXPECT_THAT(e.Value("mobius_job_step_duration_seconds_count", j), Optional(3.0));
}

TEST(DaemonMetricsTest, PerJobSeriesDisappearWhenTheJobStops) {
  auto m = MakeMetrics();
  ASSERT_NE(m, nullptr);
  FakeJob a("j-000001"), b("j-000002");
  b.run.rank_gpu = {1};
  b.info.gpu_memory_bytes = {7 * kGiB};
  b.info.pinned_bytes = 50;
  b.info.host_store_bytes = 70;
  m->JobStarted(a.info, 0);
  m->JobStarted(b.info, 1);
  m->StepCompleted(a.info, Step(1, 3.5f, {{600, 5}, {800, 10}, {1400, 15}}));
  Exposition e = Scrape(*m);
  EXPECT_TRUE(e.AnyLabel("job", "j-000001"));
  EXPECT_TRUE(e.AnyLabel("job", "j-000002"));
  EXPECT_THAT(e.Value("mobius_host_pinned_bytes"), Optional(450.0));
  EXPECT_THAT(e.Value("mobius_host_store_bytes"), Optional(1070.0));

  m->JobStopped(a.info);
  e = Scrape(*m);
  EXPECT_FALSE(e.AnyLabel("job", "j-000001")) << m->Serialize();
  for (const char* family : {"mobius_job_tokens_total", "mobius_job_loss", "mobius_job_mfu_ratio",
                             "mobius_job_planned_step_seconds", "mobius_job_measured_step_seconds",
                             "mobius_job_current_step", "mobius_job_total_steps",
                             "mobius_job_progress_ratio", "mobius_job_tokens_per_second",
                             "mobius_job_step_duration_seconds_count"}) {
    EXPECT_EQ(e.Matching(family, {{"job", "j-000002"}}).size(), 1u) << family;
  }
  // Its GPUs are free again, the other job's are not; host memory is the other job's only.
  EXPECT_THAT(e.Value("mobius_gpu_memory_used_bytes", {{"gpu", "2"}}), Optional(0.0));
  EXPECT_THAT(e.Value("mobius_gpu_memory_used_bytes", {{"gpu", "0"}}), Optional(0.0));
  EXPECT_THAT(e.Value("mobius_gpu_memory_used_bytes", {{"gpu", "1"}}), Optional(double(7 * kGiB)));
  EXPECT_THAT(e.Value("mobius_host_pinned_bytes"), Optional(50.0));
  EXPECT_THAT(e.Value("mobius_host_store_bytes"), Optional(70.0));
  // Node-wide counters keep what the job did.
  EXPECT_THAT(e.Value("mobius_train_tokens_total"), Optional(128.0));
  EXPECT_THAT(e.Value("mobius_pcie_link_bytes_total", {{"link", "gpu0"}, {"direction", "h2d"}}),
              Optional(600.0));

  // A late report of the stopped job counts node-wide but brings no per-job series back; a second
  // stop is harmless.
  m->StepCompleted(a.info, Step(2, 3.0f, {{700, 5}, {800, 10}, {1500, 15}}));
  m->JobStopped(a.info);
  e = Scrape(*m);
  EXPECT_FALSE(e.AnyLabel("job", "j-000001"));
  EXPECT_THAT(e.Value("mobius_train_tokens_total"), Optional(256.0));
  EXPECT_THAT(e.Value("mobius_host_pinned_bytes"), Optional(50.0));

  m->JobStopped(b.info);
  e = Scrape(*m);
  EXPECT_FALSE(e.AnyLabel("job", "j-000002"));
  EXPECT_THAT(e.Value("mobius_host_pinned_bytes"), Optional(0.0));
  EXPECT_THAT(e.Value("mobius_host_store_bytes"), Optional(0.0));
}

TEST(DaemonMetricsTest, ARestartedRunCountsItsLinkBytesFromZeroAgain) {
  // A restart is JobStopped + JobStarted with a new run whose cumulative link bytes start at zero:
  // the node-wide counter keeps growing and never counts the first run's bytes twice.
  auto m = MakeMetrics();
  ASSERT_NE(m, nullptr);
  FakeJob job("j-000001");
  m->JobStarted(job.info, 0);
  m->StepCompleted(job.info, Step(1, 3.5f, {{600, 5}, {800, 10}, {1400, 15}}));
  m->JobStopped(job.info);
  m->WorkerRestart();
  m->JobStarted(job.info, 0);
  m->StepCompleted(job.info, Step(2, 3.4f, {{100, 1}, {0, 0}, {100, 1}}));
  const Exposition e = Scrape(*m);
  EXPECT_THAT(e.Value("mobius_pcie_link_bytes_total", {{"link", "gpu0"}, {"direction", "h2d"}}),
              Optional(700.0));
  EXPECT_THAT(e.Value("mobius_pcie_link_bytes_total",
                      {{"link", "switch0.uplink"}, {"direction", "d2h"}}),
              Optional(16.0));
  EXPECT_THAT(e.Value("mobius_worker_restarts_total"), Optional(1.0));
  EXPECT_THAT(e.Value("mobius_job_tokens_total", {{"job", "j-000001"}}), Optional(128.0));
  EXPECT_THAT(e.Value("mobius_train_tokens_total"), Optional(256.0));
}

TEST(DaemonMetricsTest, ReportsOfUnknownRanksAndLinksAreIgnored) {
  auto m = MakeMetrics();
  ASSERT_NE(m, nullptr);
  FakeJob job("j-000001");
  m->JobStarted(job.info, 0);
  runtime::StepReport s = Step(1, 3.5f, {{1, 1}, {2, 2}, {3, 3}, {4, 4}});  // one link too many
  s.ranks.push_back(Rank(7, 99, 99, 1, 1));                              // no such rank
  s.ranks.push_back(Rank(-1, 99, 99, 1, 1));
  m->StepCompleted(job.info, s);
  const Exposition e = Scrape(*m);
  EXPECT_EQ(e.error, "");
  // Only the node's GPUs have series (rank 7 / -1 added none): GPUs x 2 directions.
  EXPECT_EQ(e.Matching("mobius_stage_swap_bytes_total").size(), 6u);  // 3 GPUs x 2 directions
  EXPECT_EQ(e.Matching("mobius_pcie_link_bytes_total").size(), 6u);   // 3 links x 2 directions
}

TEST(DaemonMetricsTest, SchedulerAndDaemonSeries) {
  auto m = MakeMetrics();
  ASSERT_NE(m, nullptr);
  m->JobCounts({{jobs::JobState::kQueued, 3},
                {jobs::JobState::kRunning, 1},
                {jobs::JobState::kSucceeded, 5}});
  m->SubmitRejected("invalid_spec");
  m->SubmitRejected("invalid_spec");
  m->SubmitRejected("never_fits");
  m->WorkerRestart();
  m->ObserveRpc("/mobius.v1.JobService/SubmitJob", 0.003);
  m->ObserveRpc("/mobius.v1.JobService/SubmitJob", 0.2);
  m->ObserveRpc("/mobius.v1.JobService/GetJob", 0.0001);
  Exposition e = Scrape(*m);
  EXPECT_THAT(e.Value("mobius_jobs", {{"state", "queued"}}), Optional(3.0));
  EXPECT_THAT(e.Value("mobius_jobs", {{"state", "running"}}), Optional(1.0));
  EXPECT_EQ(e.Matching("mobius_jobs").size(), 2u);  // only queued and running are exported
  EXPECT_THAT(e.Value("mobius_admission_rejections_total", {{"reason", "invalid_spec"}}),
              Optional(2.0));
  EXPECT_THAT(e.Value("mobius_admission_rejections_total", {{"reason", "never_fits"}}),
              Optional(1.0));
  EXPECT_THAT(e.Value("mobius_worker_restarts_total"), Optional(1.0));
  const Labels submit{{"method", "/mobius.v1.JobService/SubmitJob"}};
  EXPECT_THAT(e.Value("mobius_rpc_duration_seconds_count", submit), Optional(2.0));
  EXPECT_THAT(e.Value("mobius_rpc_duration_seconds_sum", submit), Optional(DoubleNear(0.203, 1e-12)));
  EXPECT_THAT(e.Bucket("mobius_rpc_duration_seconds", submit, 0.0025), Optional(0.0));
  EXPECT_THAT(e.Bucket("mobius_rpc_duration_seconds", submit, 0.005), Optional(1.0));
  EXPECT_THAT(e.Bucket("mobius_rpc_duration_seconds", submit, 0.25), Optional(2.0));
  EXPECT_THAT(e.Bucket("mobius_rpc_duration_seconds", submit, INFINITY), Optional(2.0));
  EXPECT_THAT(e.Bucket("mobius_rpc_duration_seconds", {{"method", "/mobius.v1.JobService/GetJob"}},
                       0.0005),
              Optional(1.0));
  // A later count replaces the earlier one (a gauge, not a counter).
  m->JobCounts({{jobs::JobState::kQueued, 0}, {jobs::JobState::kRunning, 2}});
  e = Scrape(*m);
  EXPECT_THAT(e.Value("mobius_jobs", {{"state", "queued"}}), Optional(0.0));
  EXPECT_THAT(e.Value("mobius_jobs", {{"state", "running"}}), Optional(2.0));
}

TEST(DaemonMetricsTest, ConcurrentReportersAndScrapesLoseNothing) {
  auto m = MakeMetrics();
  ASSERT_NE(m, nullptr);
  constexpr int kJobs = 4, kSteps = 200;
  std::vector<std::unique_ptr<FakeJob>> fakes;
  for (int i = 0; i < kJobs; ++i) {
    fakes.push_back(std::make_unique<FakeJob>("j-" + std::to_string(i)));
  }
  std::atomic<bool> done{false};
  std::thread scraper([&] {
    while (!done.load()) {
      const Exposition e = ParseExposition(m->Serialize());
      ASSERT_EQ(e.error, "");
    }
  });
  std::vector<std::thread> reporters;
  for (int i = 0; i < kJobs; ++i) {
    reporters.emplace_back([&, i] {
      FakeJob& job = *fakes[i];
      m->JobStarted(job.info, 0);
      for (int s = 1; s <= kSteps; ++s) {
        const uint64_t c = 10u * static_cast<uint64_t>(s);
        m->StepCompleted(job.info, Step(s, 1.0f, {{c, c}, {c, c}, {c, c}}));
        m->ObserveRpc("/mobius.v1.JobService/GetJob", 0.001);
      }
      if (i % 2 == 0) m->JobStopped(job.info);
    });
  }
  for (std::thread& t : reporters) t.join();
  done = true;
  scraper.join();
  const Exposition e = Scrape(*m);
  EXPECT_THAT(e.Value("mobius_train_tokens_total"), Optional(double(kJobs * kSteps * 128)));
  EXPECT_THAT(e.Value("mobius_train_step_duration_seconds_count"), Optional(double(kJobs * kSteps)));
  EXPECT_THAT(e.Value("mobius_pcie_link_bytes_total", {{"link", "gpu0"}, {"direction", "h2d"}}),
              Optional(double(kJobs * kSteps * 10)));
  EXPECT_THAT(e.Value("mobius_stage_swap_bytes_total", {{"gpu", "0"}, {"direction", "h2d"}}),
              Optional(double(kJobs * kSteps * 2000)));
  EXPECT_THAT(e.Value("mobius_rpc_duration_seconds_count",
                      {{"method", "/mobius.v1.JobService/GetJob"}}),
              Optional(double(kJobs * kSteps)));
  EXPECT_FALSE(e.AnyLabel("job", "j-0"));
  EXPECT_FALSE(e.AnyLabel("job", "j-2"));
  EXPECT_THAT(e.Value("mobius_job_tokens_total", {{"job", "j-1"}}), Optional(double(kSteps * 128)));
  EXPECT_THAT(e.Value("mobius_job_tokens_total", {{"job", "j-3"}}), Optional(double(kSteps * 128)));
}

// Runs `command`, returning its exit status and combined output.
std::pair<int, std::string> RunShell(const std::string& command) {
  std::string output;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) output.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

TEST(DaemonMetricsTest, ExpositionPassesPromtool) {
  if (RunShell("command -v promtool").first != 0) {
    GTEST_SKIP() << "promtool not installed (Debian package prometheus; deploy/install-deps.sh)";
  }
  auto m = MakeMetrics();
  ASSERT_NE(m, nullptr);
  FakeJob job("j-000001");
  m->JobStarted(job.info, 3);
  m->StepCompleted(job.info, Step(1, 3.5f, {{600, 5}, {800, 10}, {1400, 15}}));
  m->JobCounts({{jobs::JobState::kQueued, 1}, {jobs::JobState::kRunning, 1}});
  m->SubmitRejected("never_fits");
  m->WorkerRestart();
  m->ObserveRpc("/grpc.health.v1.Health/Check", 0.0002);
  char path[] = "/tmp/mobius-metrics-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << m->Serialize();
  const auto [code, output] = RunShell(std::string("promtool check metrics < ") + path);
  unlink(path);
  EXPECT_EQ(code, 0) << output;
  EXPECT_EQ(output, "") << "promtool found problems";
}

}  // namespace
}  // namespace mobius
