// Concurrency and crash safety on real files: many threads and processes submitting with duplicated
// submission ids get exactly one job per id; a process SIGKILLed mid-stream leaves a file that
// opens with every job it had committed.
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "server/jobs/store/job_store.h"
#include "test/server/jobs/store/store_test_util.h"

namespace mobius::jobs {
namespace {

using testing::NewJob;
using testing::TempDir;

constexpr int kDistinctSubmissions = 100;

JobRecord Submission(int k) {
  // The spec depends only on k, so every duplicate is an identical retry.
  return NewJob(1000, "sub-" + std::to_string(k), R"({"k":)" + std::to_string(k) + "}");
}

TEST(JobStoreConcurrencyTest, FiftyThreadsTwentySubmitsEachExactlyOneJobPerSubmissionId) {
  TempDir dir;
  constexpr int kThreads = 50, kPerThread = 20, kConnections = 5;
  std::vector<std::unique_ptr<JobStore>> stores;
  for (int i = 0; i < kConnections; ++i) {
    auto store = JobStore::Open(dir.File("jobs.db"));
    ASSERT_TRUE(store.ok()) << store.status();
    stores.push_back(*std::move(store));
  }

  absl::Mutex mu;
  std::map<std::string, std::set<std::string>> ids_by_submission;  // guarded by mu
  std::vector<std::string> errors;                                 // guarded by mu
  std::atomic<int> created{0}, existed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      JobStore& store = *stores[t % kConnections];
      for (int j = 0; j < kPerThread; ++j) {
        const int k = (t * 7 + j * 13) % kDistinctSubmissions;
        auto result = store.CreateJob(Submission(k));
        absl::MutexLock lock(&mu);
        if (!result.ok()) {
          errors.push_back(result.status().ToString());
          continue;
        }
        (result->existed ? existed : created)++;
        ids_by_submission[result->job.submission_id].insert(result->job.id);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  EXPECT_TRUE(errors.empty()) << errors.size() << " errors, first: " << errors.front();
  EXPECT_EQ(created.load(), kDistinctSubmissions);
  EXPECT_EQ(existed.load(), kThreads * kPerThread - kDistinctSubmissions);
  EXPECT_EQ(ids_by_submission.size(), static_cast<size_t>(kDistinctSubmissions));
  for (const auto& [submission, ids] : ids_by_submission) {
    EXPECT_EQ(ids.size(), 1u) << submission << " got several jobs";
  }
  auto all = stores[0]->JobsInStates(JobStateSet::All());
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), static_cast<size_t>(kDistinctSubmissions));
}

// Runs `body` in a forked child and returns its exit status. The child never returns into gtest.
template <typename Body>
pid_t Fork(Body body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  return pid;
}

TEST(JobStoreConcurrencyTest, ProcessesSubmittingTheSameIdsGetOneJobEach) {
  TempDir dir;
  const std::string path = dir.File("jobs.db");
  constexpr int kProcesses = 4;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    children.push_back(Fork([&path, p] {
      // Each process opens the file itself (racing to create the schema) and submits every id
      // in its own order.
      auto store = JobStore::Open(path);
      if (!store.ok()) {
        std::fprintf(stderr, "child %d: %s\n", p, store.status().ToString().c_str());
        return 10;
      }
      std::vector<int> order(kDistinctSubmissions);
      for (int k = 0; k < kDistinctSubmissions; ++k) order[k] = k;
      std::shuffle(order.begin(), order.end(), std::mt19937(p));
      for (int k : order) {
        auto created = (*store)->CreateJob(Submission(k));
        if (!created.ok()) {
          std::fprintf(stderr, "child %d: %s\n", p, created.status().ToString().c_str());
          return 11;
        }
      }
      return 0;
    }));
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  }
  auto store = JobStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto all = (*store)->JobsInStates(JobStateSet::All());
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), static_cast<size_t>(kDistinctSubmissions));
}

// The child reports each job id on a pipe right after CreateJob returned, i.e. after the commit.
TEST(JobStoreConcurrencyTest, SigkilledWriterLosesNothingItCommitted) {
  TempDir dir;
  const std::string path = dir.File("jobs.db");
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = Fork([&path, fds] {
    close(fds[0]);
    // synchronous=NORMAL: the documented claim is that commits survive a process kill without
    // fsync (they are in the page cache); FULL only adds power-loss safety.
    JobStoreOptions options;
    options.fsync_every_commit = false;
    auto store = JobStore::Open(path, options);
    if (!store.ok()) return 10;
    for (int i = 0;; ++i) {
      auto created = (*store)->CreateJob(
          NewJob(2000, "kill-" + std::to_string(i), std::string(300, 'x') + std::to_string(i)));
      if (!created.ok()) return 11;
      (void)(*store)->AppendLogs(created->job.id, {LogLine{0, i, "w", "log " + std::to_string(i)}});
      char record[16] = {};
      std::snprintf(record, sizeof(record), "%s", created->job.id.c_str());
      if (write(fds[1], record, sizeof(record)) != sizeof(record)) return 12;
    }
  });
  close(fds[1]);

  std::vector<std::string> reported;
  char record[16];
  constexpr size_t kKillAfter = 300;
  bool killed = false;
  while (true) {
    const ssize_t n = read(fds[0], record, sizeof(record));
    if (n == 0) break;  // the child is gone and the pipe drained
    ASSERT_EQ(n, static_cast<ssize_t>(sizeof(record)));
    reported.emplace_back(record);
    if (!killed && reported.size() == kKillAfter) {
      ASSERT_EQ(kill(child, SIGKILL), 0);
      killed = true;
    }
  }
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  ASSERT_GE(reported.size(), kKillAfter);

  auto store = JobStore::Open(path);  // recovers the WAL left behind
  ASSERT_TRUE(store.ok()) << store.status();
  for (size_t i = 0; i < reported.size(); ++i) {
    auto job = (*store)->GetJob(reported[i]);
    ASSERT_TRUE(job.ok()) << reported[i] << ": " << job.status();
    EXPECT_EQ(job->submission_id, "kill-" + std::to_string(i));
    EXPECT_EQ(job->spec_json, std::string(300, 'x') + std::to_string(i));
  }
  // At most one job (or its log line) committed after the last report.
  auto all = (*store)->JobsInStates(JobStateSet::All());
  ASSERT_TRUE(all.ok());
  EXPECT_GE(all->size(), reported.size());
  EXPECT_LE(all->size(), reported.size() + 1);
  for (size_t i = 0; i + 1 < reported.size(); ++i) {  // the last job's log may not have landed
    auto logs = (*store)->ReadLogs(reported[i], 1, 10);
    ASSERT_TRUE(logs.ok());
    ASSERT_EQ(logs->size(), 1u) << reported[i];
  }
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  sqlite3_stmt* check = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(raw, "PRAGMA integrity_check", -1, &check, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(check), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(check, 0)), "ok");
  sqlite3_finalize(check);
  sqlite3_close(raw);
}

}  // namespace
}  // namespace mobius::jobs
