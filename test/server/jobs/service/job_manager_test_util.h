// Helpers for the job manager tests: a state directory, a tiny model and token file, the paper
// testbed's topology (8 emulated GPUs, workers on the CPU backend), a spec over them, an observer
// that runs a hook on every step, and polling for a job's state.
#ifndef MOBIUS_TEST_SERVER_JOBS_SERVICE_JOB_MANAGER_TEST_UTIL_H_
#define MOBIUS_TEST_SERVER_JOBS_SERVICE_JOB_MANAGER_TEST_UTIL_H_

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/data/token_file.h"
#include "common/jobspec/spec.h"
#include "gtest/gtest.h"
#include "host/scheduler/node_resources.h"
#include "server/jobs/service/job_manager.h"
#include "server/jobs/service/job_observer.h"
#include "host/topology/analysis.h"
#include "host/topology/hwloc_source.h"
#include "test/testing/paths.h"
#include "worker/checkpoint/model_init.h"

namespace mobius::jobs::testing {

// Calls `on_step` (when set) after each step the manager records; the rest is ignored.
class HookObserver : public JobObserver {
 public:
  void SetOnStep(std::function<void(const runtime::StepReport&)> f) {
    std::lock_guard<std::mutex> lock(mu_);
    on_step_ = std::move(f);
  }
  void JobStarted(const JobRunInfo&, double) override {}
  void StepCompleted(const JobRunInfo&, const runtime::StepReport& step) override {
    std::function<void(const runtime::StepReport&)> f;
    {
      std::lock_guard<std::mutex> lock(mu_);
      f = on_step_;
    }
    if (f) f(step);
  }
  void JobStopped(const JobRunInfo&) override {}
  void JobCounts(const std::map<JobState, int>&) override {}
  void SubmitRejected(const std::string&) override {}
  void WorkerRestart() override {}

 private:
  std::mutex mu_;
  std::function<void(const runtime::StepReport&)> on_step_;
};

class JobManagerFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            absl::StrCat("job-manager-test-", getpid(), "-",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    state_dir_ = (root_ / "state").string();
    std::filesystem::create_directories(state_dir_);
    WriteModel((root_ / "model").string());
    WriteTokens((root_ / "data.tok").string());
    auto loaded = topology::MakeHwlocXmlFileSource(
                      mobius::testing::TopologyFixture("paper_testbed_2s_2sw_8x3090.xml"))
                      ->Load();
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    topology_ = loaded->topology;
    facts_ = topology::Analyze(topology_);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }

  static void WriteModel(const std::string& dir) {
    std::filesystem::create_directories(dir);
    auto family = checkpoint::ParseFamily("llama");
    ASSERT_TRUE(family.ok());
    auto config = checkpoint::PresetConfig(*family, "tiny", {.layers = 4, .vocab = 256});
    ASSERT_TRUE(config.ok()) << config.status();
    absl::Status s = checkpoint::WriteModelDirectory(
        dir, *config, checkpoint::InitModelParameters(*config, 3), {});
    ASSERT_TRUE(s.ok()) << s;
  }
  static void WriteTokens(const std::string& path) {
    std::vector<data::TokenizedDoc> docs(24);
    for (size_t d = 0; d < docs.size(); ++d) {
      for (int i = 0; i < 70; ++i) docs[d].ids.push_back(static_cast<int32_t>((d * 7 + i) % 256));
    }
    absl::Status s = data::WriteTokenFile(path, docs, 256);
    ASSERT_TRUE(s.ok()) << s;
  }

  JobManagerOptions Options() {
    JobManagerOptions o;
    o.state_dir = state_dir_;
    o.worker_binary = mobius::testing::BinaryPath("bin/mobius-worker");
    o.topology = topology_;
    o.facts = facts_;
    NodeConfig node;
    node.host_bytes = int64_t{64} << 30;
    node.pinned_bytes = int64_t{8} << 30;
    auto resources = MakeNodeResources(topology_, facts_, node);
    EXPECT_TRUE(resources.ok()) << resources.status();
    if (resources.ok()) o.node = *resources;
    o.emulate_links = false;  // fast: plain CPU backend
    o.devices_in_host_memory = true;
    o.kill_grace = absl::Seconds(2);
    o.checkpoint_grace = absl::Seconds(20);
    o.store_retry_initial = absl::Milliseconds(20);
    o.store_retry_max = absl::Milliseconds(200);
    o.observer = &observer_;
    return o;
  }

  std::unique_ptr<JobManager> Create(JobManagerOptions o) {
    absl::StatusOr<std::unique_ptr<JobManager>> m = JobManager::Create(std::move(o));
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *std::move(m) : nullptr;
  }
  std::unique_ptr<JobManager> Create() { return Create(Options()); }

  jobspec::JobSpec Spec(const std::string& name, int64_t steps, int64_t checkpoint_every = 2) {
    jobspec::JobSpec s;
    s.name = name;
    s.model_dir = (root_ / "model").string();
    s.dataset.path = (root_ / "data.tok").string();
    s.training.steps = steps;
    s.training.global_batch = 4;
    s.training.microbatch = 2;
    s.training.seq_len = 32;
    s.training.lr = 1e-3;
    s.resources.gpus = 2;
    s.plan.stages = 4;
    s.checkpoint.every_steps = checkpoint_every;
    return s;
  }

  // Polls Get until `done` holds; the last view (a failure is recorded after `seconds`).
  JobView WaitFor(JobManager& m, const std::string& id,
                  const std::function<bool(const JobView&)>& done, double seconds = 120) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    JobView last;
    while (std::chrono::steady_clock::now() < deadline) {
      absl::StatusOr<JobView> v = m.Get(admin_, id);
      if (v.ok()) {
        last = *v;
        if (done(last)) return last;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "job " << id << " still " << JobStateName(last.record.state) << " ("
                  << last.record.state_reason << ") after " << seconds << " s";
    return last;
  }
  JobView WaitTerminal(JobManager& m, const std::string& id) {
    return WaitFor(m, id, [](const JobView& v) { return IsTerminal(v.record.state); });
  }

  // Polls `f` until true; false after `seconds`.
  static bool Eventually(const std::function<bool()>& f, double seconds = 30) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      if (f()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return f();
  }

  std::filesystem::path root_;
  std::string state_dir_;
  topology::Topology topology_;
  topology::TopologyFacts facts_;
  HookObserver observer_;
  Caller admin_{.uid = static_cast<uid_t>(getuid()), .user = "tester", .admin = true};
};

}  // namespace mobius::jobs::testing

#endif  // MOBIUS_TEST_SERVER_JOBS_SERVICE_JOB_MANAGER_TEST_UTIL_H_
