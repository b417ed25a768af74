// Job store (server/jobs/store/) latency and throughput on a real file: ListJobs page latency at
// 10,000 jobs and CreateJob throughput, each beside a baseline measured in the same run.
//
//  - CreateJob, synchronous FULL and NORMAL, vs a bare prepared INSERT of the same row into the
//    same schema and settings (raw SQLite, autocommit): what the store's transaction, idempotency
//    index and read-back cost on top of the unavoidable commit. Store and raw runs alternate.
//  - ListJobs first page / per-user / queue view / deep page through the keyset token, vs the deep
//    page read with LIMIT/OFFSET in raw SQL (what the keyset cursor avoids). Query kinds
//    alternate round-robin; p50/p99/max over --queries rounds.
//
//   store_bench [--jobs=10000] [--queries=500] [--creates=1000] [--reps=3] [--dir=DIR]
#include <sqlite3.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/common/latency_stats.h"
#include "server/jobs/store/job_store.h"

namespace mobius::jobs {
namespace {

struct Args {
  int jobs = 10000;
  int queries = 500;
  int creates = 1000;
  int reps = 3;
  std::string dir;  // default: a fresh directory under $TMPDIR or /tmp
};

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (key == "--jobs")
      a.jobs = std::atoi(value.c_str());
    else if (key == "--queries")
      a.queries = std::atoi(value.c_str());
    else if (key == "--creates")
      a.creates = std::atoi(value.c_str());
    else if (key == "--reps")
      a.reps = std::atoi(value.c_str());
    else if (key == "--dir")
      a.dir = value;
    else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      std::exit(2);
    }
  }
  return a;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

template <typename T>
T Check(absl::StatusOr<T> v, const char* what) {
  if (!v.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, v.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(v);
}

void Check(const absl::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
    std::exit(1);
  }
}

// A canonical spec of realistic size (~1 KB) and a plan (~2 KB), as the daemon will store them.
std::string SpecJson(int i) {
  return absl::StrCat(
      R"({"checkpoint":{"dir":"/data/ckpt/run-)", i,
      R"(","interval_steps":500},"dataset":{"format":"jsonl_chat","path":"/data/sets/chat-)",
      i % 50,
      R"(.jsonl","eval_fraction":0.01},"gpus":4,"hyperparameters":{"global_batch":64,"grad_clip":1.0,)",
      R"("lr":0.0002,"lr_schedule":{"kind":"cosine","min_lr":0.00002,"warmup_steps":100},)",
      R"("microbatch":1,"seq_len":2048,"steps":10000,"weight_decay":0.1},"labels":{"project":"p)",
      i % 7, R"(","team":"nlp"},"max_restarts":3,"model":{"dir":"/models/llama-2-7b-hf"},)",
      R"("name":"finetune-)", i, R"(","overrides":{"mapper":"cross","partitioner":"exact",)",
      R"("schedule":"mobius"},"priority":)", i % 3, "}", std::string(400, ' '));
}

std::string PlanJson(int i) {
  std::string stages;
  for (int s = 0; s < 16; ++s) {
    absl::StrAppend(&stages, s ? "," : "", R"({"gpu":)", s % 4, R"(,"units":[)", 2 * s, ",",
                    2 * s + 1, R"(],"forward_seconds":0.0123,"backward_seconds":0.0246,)",
                    R"("prefetch":"cross","memory_bytes":12345678901})");
  }
  return absl::StrCat(R"({"job":)", i, R"(,"stages":[)", stages, "]}");
}

JobRecord NewJob(int i, uint32_t uid) {
  JobRecord job;
  job.submission_id = absl::StrCat("bench-", i);
  job.uid = uid;
  job.user = absl::StrCat("user", uid);
  job.name = absl::StrCat("finetune-", i);
  job.priority = i % 3;
  job.spec_json = SpecJson(i);
  job.state_reason = "waiting for 4 GPUs";
  job.created_unix_ms = 1700000000000 + i;
  job.total_steps = 10000;
  return job;
}

using Stats = mobius::bench::LatencyStats;
using mobius::bench::Summarise;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[(v.size() - 1) / 2];
}

// --- CreateJob throughput ---------------------------------------------------------------------

double StoreCreates(const std::string& path, bool full, int n) {
  JobStoreOptions options;
  options.fsync_every_commit = full;
  auto store = Check(JobStore::Open(path, options), "open");
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) Check(store->CreateJob(NewJob(i, 1000 + i % 20)).status(), "create");
  return n / Seconds(start);
}

void RawExec(sqlite3* db, const char* sql) {
  if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
    std::fprintf(stderr, "%s: %s\n", sql, sqlite3_errmsg(db));
    std::exit(1);
  }
}

// The same rows into the same schema (created by JobStore::Open) with a bare prepared INSERT.
double RawCreates(const std::string& path, bool full, int n) {
  JobStoreOptions options;
  options.fsync_every_commit = full;
  Check(JobStore::Open(path, options).status(), "open");  // schema, WAL
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  RawExec(db, full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
  sqlite3_stmt* insert = nullptr;
  sqlite3_prepare_v2(db,
                     "INSERT INTO jobs (submission_id, uid, user, name, priority, spec_json, "
                     "state, state_reason, created_unix_ms, total_steps) VALUES "
                     "(?1, ?2, ?3, ?4, ?5, ?6, 'QUEUED', ?7, ?8, ?9)",
                     -1, &insert, nullptr);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    const JobRecord job = NewJob(i, 1000 + i % 20);
    sqlite3_bind_text(insert, 1, job.submission_id.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(insert, 2, job.uid);
    sqlite3_bind_text(insert, 3, job.user.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(insert, 4, job.name.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(insert, 5, job.priority);
    sqlite3_bind_text(insert, 6, job.spec_json.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(insert, 7, job.state_reason.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(insert, 8, job.created_unix_ms);
    sqlite3_bind_int64(insert, 9, job.total_steps);
    if (sqlite3_step(insert) != SQLITE_DONE) {
      std::fprintf(stderr, "raw insert: %s\n", sqlite3_errmsg(db));
      std::exit(1);
    }
    sqlite3_reset(insert);
  }
  const double rate = n / Seconds(start);
  sqlite3_finalize(insert);
  sqlite3_close(db);
  return rate;
}

void BenchCreates(const Args& args, const std::string& dir) {
  std::printf(
      "\nCreateJob, %d jobs per run (new submission ids), %d reps, store and raw alternating\n\n",
      args.creates, args.reps);
  std::printf(
      "| synchronous | store jobs/s median (min-max) | raw INSERT jobs/s median | store / raw |\n");
  std::printf("|---|---|---|---|\n");
  for (bool full : {true, false}) {
    std::vector<double> ours, raw;
    for (int r = 0; r < args.reps; ++r) {
      const std::string a = absl::StrCat(dir, "/create-", full, "-", r, ".db");
      const std::string b = absl::StrCat(dir, "/raw-", full, "-", r, ".db");
      ours.push_back(StoreCreates(a, full, args.creates));
      raw.push_back(RawCreates(b, full, args.creates));
    }
    const double o = Median(ours), w = Median(raw);
    std::printf("| %s | %.0f (%.0f-%.0f) | %.0f | %.2f |\n", full ? "FULL" : "NORMAL", o,
                *std::min_element(ours.begin(), ours.end()),
                *std::max_element(ours.begin(), ours.end()), w, o / w);
  }
}

// --- ListJobs latency -------------------------------------------------------------------------

// 20 users; 2% running, 5% queued, the rest finished (85% succeeded, 6% failed, 2% cancelled), as
// on a server that has run for a while. Finished and running jobs carry a plan.
void Populate(const std::string& path, int n) {
  JobStoreOptions options;
  options.fsync_every_commit = false;
  auto store = Check(JobStore::Open(path, options), "open");
  for (int i = 0; i < n; ++i) {
    const JobRecord job = Check(store->CreateJob(NewJob(i, 1000 + i % 20)), "create").job;
    const int bucket = i % 100;
    if (bucket < 5) continue;  // queued
    Check(
        store->Transition(job.id, JobState::kRunning, "started", job.created_unix_ms + 1).status(),
        "run");
    Check(store->UpdateRunInfo(job.id, {0, 1, 2, 3}, PlanJson(i)), "plan");
    if (bucket < 7) continue;  // running
    const JobState end = bucket < 92   ? JobState::kSucceeded
                         : bucket < 98 ? JobState::kFailed
                                       : JobState::kCancelled;
    Check(store->Transition(job.id, end, "done", job.created_unix_ms + 2).status(), "finish");
  }
}

// The deep page with OFFSET, reading every column as the store does.
double RawOffsetPage(sqlite3* db, int offset, int* rows) {
  static sqlite3_stmt* stmt = nullptr;
  if (stmt == nullptr) {
    sqlite3_prepare_v2(db,
                       "SELECT seq, submission_id, uid, user, name, priority, spec_json, state, "
                       "state_reason, created_unix_ms, started_unix_ms, finished_unix_ms, "
                       "restarts, gpus, plan_json, checkpoint, checkpoint_step, steps_done, "
                       "total_steps, cancel_requested FROM jobs ORDER BY seq LIMIT 100 OFFSET ?1",
                       -1, &stmt, nullptr);
  }
  const auto start = std::chrono::steady_clock::now();
  sqlite3_bind_int(stmt, 1, offset);
  std::vector<std::string> out;
  *rows = 0;
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    for (int c = 0; c < 20; ++c) {
      const auto* text = static_cast<const char*>(sqlite3_column_blob(stmt, c));
      out.emplace_back(text ? text : "", sqlite3_column_bytes(stmt, c));
    }
    ++*rows;
  }
  sqlite3_reset(stmt);
  return Seconds(start);
}

void BenchList(const Args& args, const std::string& dir) {
  const std::string path = dir + "/list.db";
  const auto populate_start = std::chrono::steady_clock::now();
  Populate(path, args.jobs);
  std::fprintf(stderr, "populated %d jobs in %.1f s (%.1f MB)\n", args.jobs,
               Seconds(populate_start), std::filesystem::file_size(path) / 1e6);
  auto store = Check(JobStore::Open(path), "open");

  // The token of the last page, found by walking (also timed as a whole).
  std::string last_token, token;
  const auto walk_start = std::chrono::steady_clock::now();
  int pages = 0;
  size_t walked = 0;
  do {
    ListJobsPage page = Check(store->ListJobs({}, 100, token), "walk");
    walked += page.jobs.size();
    ++pages;
    if (!page.next_page_token.empty()) last_token = page.next_page_token;
    token = page.next_page_token;
  } while (!token.empty());
  const double walk_seconds = Seconds(walk_start);

  ListJobsFilter by_user;
  by_user.uid = 1003;  // 500 jobs, 100 of them queued
  ListJobsFilter queue;
  queue.states = {JobState::kQueued, JobState::kRunning};
  ListJobsFilter user_active = queue;
  user_active.uid = 1003;
  ListJobsFilter failed;
  failed.states = {JobState::kFailed};
  ListJobsFilter finished;
  finished.states = {JobState::kSucceeded, JobState::kFailed};

  sqlite3* raw = nullptr;
  sqlite3_open(path.c_str(), &raw);
  struct Kind {
    const char* name;
    std::function<size_t()> run;
    std::vector<double> ms;
    size_t rows = 0;
  };
  std::vector<Kind> kinds;
  auto list = [&](ListJobsFilter f, std::string t) {
    return [&store, f, t] { return Check(store->ListJobs(f, 100, t), "list").jobs.size(); };
  };
  kinds.push_back({"first page, no filter", list({}, ""), {}});
  kinds.push_back({"first page, one user (uid)", list(by_user, ""), {}});
  kinds.push_back({"first page, QUEUED+RUNNING (queue view)", list(queue, ""), {}});
  kinds.push_back({"first page, one user + QUEUED+RUNNING", list(user_active, ""), {}});
  kinds.push_back({"first page, FAILED", list(failed, ""), {}});
  kinds.push_back({"first page, SUCCEEDED+FAILED (dense)", list(finished, ""), {}});
  kinds.push_back({"last page via keyset token", list({}, last_token), {}});
  const int deep_offset = static_cast<int>(walked) - 100 > 0 ? static_cast<int>(walked) - 100 : 0;
  kinds.push_back({"baseline: last page via OFFSET (raw SQL)",
                   [&raw, deep_offset] {
                     int rows = 0;
                     RawOffsetPage(raw, deep_offset, &rows);
                     return static_cast<size_t>(rows);
                   },
                   {}});
  const std::string get_id = absl::StrFormat("j-%06d", std::max(1, args.jobs / 2));
  kinds.push_back({"GetJob",
                   [&store, get_id] {
                     Check(store->GetJob(get_id), "get");
                     return size_t{1};
                   },
                   {}});
  for (int q = 0; q < args.queries; ++q) {
    for (Kind& k : kinds) {
      const auto start = std::chrono::steady_clock::now();
      k.rows = k.run();
      k.ms.push_back(1e3 * Seconds(start));
    }
  }
  sqlite3_close(raw);

  std::printf("\nListJobs at %d jobs, page_size 100, %d rounds (kinds alternate)\n\n", args.jobs,
              args.queries);
  std::printf("| query | rows | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|\n");
  for (const Kind& k : kinds) {
    const Stats s = Summarise(k.ms);
    std::printf("| %s | %zu | %.2f | %.2f | %.2f |\n", k.name, k.rows, s.p50, s.p99, s.max);
  }
  std::printf("\nwalk of all %d pages (%zu jobs): %.1f ms\n", pages, walked, 1e3 * walk_seconds);
}

}  // namespace
}  // namespace mobius::jobs

int main(int argc, char** argv) {
  using namespace mobius::jobs;
  Args args = Parse(argc, argv);
  std::string dir = args.dir;
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp ? tmp : "/tmp") + "/store_bench_XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      return 1;
    }
    dir = pattern;
  }
  std::printf("job store benchmark in %s (SQLite %s)\n", dir.c_str(), sqlite3_libversion());
  BenchList(args, dir);
  BenchCreates(args, dir);
  if (args.dir.empty()) std::filesystem::remove_all(dir);
  return 0;
}
