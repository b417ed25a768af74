// ListJobs latency through the daemon: a real mobiusd holding 10,000 jobs, called over its real
// unix socket (and, with --tls_dir, over its TLS TCP port with a bearer token), with the store-level
// ListJobs on the same SQLite file measured side by side in the same run.
//
// The state directory is populated through the job store library before the daemon starts (as a
// server that has run for a while: 20 users, 7% QUEUED, the rest SUCCEEDED / FAILED / CANCELLED,
// each job with a real ~0.7 KB canonical spec, finished ones with the daemon's ~0.4 KB plan
// summary). The queued jobs
// reference a real model config so the daemon can plan them at start-up; a per-user quota of one
// GPU (the jobs need two) keeps them queued, with a pending reason, instead of running.
//
// Query kinds alternate round-robin (RPC and store interleaved), --queries rounds; every RPC uses
// the server's default page size (page_size 0 = 100) and a 10 s deadline.
//
//   rpc_bench --mobiusd=BIN --topology=XML --model_config=config.json [--tls_dir=DIR]
//             [--jobs=10000] [--queries=300] [--dir=DIR]
// --tls_dir holds ca.pem, server.pem, server.key (bench/rpc/run.sh makes them with openssl).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/common/latency_stats.h"
#include "common/jobspec/json.h"
#include "common/jobspec/yaml.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "mobius/v1/job.grpc.pb.h"
#include "server/jobs/store/job_store.h"

namespace mobius {
namespace {

constexpr int kUsers = 20;
constexpr uint32_t kFirstUid = 1000;
constexpr uint32_t kProbeUid = 1003;  // the user of the filtered variants and of the TCP token
constexpr char kToken[] = "rpc-bench-token-0123456789abcdef";

struct Args {
  std::string mobiusd, topology, model_config, tls_dir, dir;
  int jobs = 10000;
  int queries = 300;
};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "rpc_bench: %s\n", what.c_str());
  std::exit(1);
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (key == "--mobiusd") a.mobiusd = value;
    else if (key == "--topology") a.topology = value;
    else if (key == "--model_config") a.model_config = value;
    else if (key == "--tls_dir") a.tls_dir = value;
    else if (key == "--dir") a.dir = value;
    else if (key == "--jobs") a.jobs = std::atoi(value.c_str());
    else if (key == "--queries") a.queries = std::atoi(value.c_str());
    else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      std::exit(2);
    }
  }
  if (a.mobiusd.empty() || a.topology.empty() || a.model_config.empty()) {
    std::fprintf(stderr, "usage: rpc_bench --mobiusd=BIN --topology=XML --model_config=JSON "
                         "[--tls_dir=DIR] [--jobs=N] [--queries=N] [--dir=DIR]\n");
    std::exit(2);
  }
  return a;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

template <typename T>
T Check(absl::StatusOr<T> v, const char* what) {
  if (!v.ok()) Die(absl::StrCat(what, ": ", v.status().ToString()));
  return *std::move(v);
}

void Check(const absl::Status& s, const char* what) {
  if (!s.ok()) Die(absl::StrCat(what, ": ", s.ToString()));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// --- population ---------------------------------------------------------------------------------

// The canonical JSON of a realistic spec, varied per job (name, priority, labels, checkpoint dir).
std::string SpecJson(int i, const std::string& dir) {
  static const jobspec::JobSpec base = [&] {
    const std::string yaml = absl::StrCat(
        "name: finetune\nmodel_dir: ", dir, "/model\ndataset:\n  path: ", dir,
        "/data.tok\ntraining:\n  steps: 10000\n  global_batch: 64\n  microbatch: 1\n"
        "  seq_len: 1024\n  lr: 2e-4\n  weight_decay: 0.1\nresources:\n  gpus: 2\n"
        "checkpoint:\n  every_steps: 500\nmax_restarts: 3\n");
    return Check(jobspec::ParseJobSpec(yaml, jobspec::YamlOptions{}), "spec");
  }();
  jobspec::JobSpec spec = base;
  spec.name = absl::StrCat("finetune-", i);
  spec.priority = i % 3;
  spec.labels = {{"project", absl::StrCat("p", i % 7)}, {"team", "nlp"}};
  spec.checkpoint.dir = absl::StrCat(dir, "/ckpt/run-", i);
  return jobspec::JobSpecToJson(spec);
}

// What the daemon stores for a run (PlanSummaryJson in server/jobs/service/job_supervisor.cc):
// 16 stages on 2 GPUs, ~0.4 KB.
std::string PlanJson(int i) {
  std::string stages;
  for (int s = 0; s < 16; ++s) absl::StrAppend(&stages, s ? "," : "", "[", s, ",", s + 1, "]");
  return absl::StrCat(R"({"device":"NVIDIA GeForce RTX 3090","emulated_links":false,)",
                      R"("gpu_order":[0,1],"host_bytes":)", 2000000000 + i,
                      R"(,"link_scale":1.0,"mapper":"cross","max_gpu_bytes":)", 900000000 + i,
                      R"(,"num_microbatches":64,"partitioner":"exact","pinned_bytes":)",
                      1000000000 + i, R"(,"predicted_step_seconds":1.25,"schedule":"mobius",)",
                      R"("stages":[)", stages, "]}");
}

void Populate(const std::string& db, const std::string& dir, int n) {
  jobs::JobStoreOptions options;
  options.fsync_every_commit = false;
  auto store = Check(jobs::JobStore::Open(db, options), "open store");
  for (int u = 0; u < kUsers; ++u) Check(store->SetQuota({.uid = kFirstUid + u, .max_gpus = 1}), "quota");
  for (int i = 0; i < n; ++i) {
    jobs::JobRecord job;
    job.submission_id = absl::StrCat("bench-", i);
    job.uid = kFirstUid + i % kUsers;
    job.user = absl::StrCat("user", job.uid);
    job.name = absl::StrCat("finetune-", i);
    job.priority = i % 3;
    job.spec_json = SpecJson(i, dir);
    job.state_reason = "submitted";
    job.created_unix_ms = 1700000000000 + i;
    job.total_steps = 10000;
    job = Check(store->CreateJob(job), "create").job;
    const int bucket = i % 100;
    if (bucket < 7) continue;  // queued
    Check(store->Transition(job.id, jobs::JobState::kRunning, "started on GPUs 0,1",
                            job.created_unix_ms + 1)
              .status(),
          "run");
    Check(store->UpdateRunInfo(job.id, {0, 1}, PlanJson(i)), "plan");
    const jobs::JobState end = bucket < 92   ? jobs::JobState::kSucceeded
                               : bucket < 98 ? jobs::JobState::kFailed
                                             : jobs::JobState::kCancelled;
    Check(store->Transition(job.id, end, "done", job.created_unix_ms + 2).status(), "finish");
  }
}

// --- the daemon ---------------------------------------------------------------------------------

struct Daemon {
  pid_t pid = -1;
  std::string log;
  int tcp_port = 0;
};

Daemon StartDaemon(const Args& a, const std::string& dir) {
  Daemon d;
  d.log = dir + "/daemon.log";
  std::vector<std::string> argv = {a.mobiusd,
                                   "--socket=" + dir + "/d.sock",
                                   "--state_dir=" + dir + "/state",
                                   "--topology_file=" + a.topology,
                                   "--metrics_address="};
  if (!a.tls_dir.empty()) {
    const std::string tokens = dir + "/tokens";
    std::ofstream(tokens) << kToken << " " << kProbeUid << "\n";
    chmod(tokens.c_str(), 0600);
    argv.push_back("--listen_tcp=127.0.0.1:0");
    argv.push_back("--tls_cert=" + a.tls_dir + "/server.pem");
    argv.push_back("--tls_key=" + a.tls_dir + "/server.key");
    argv.push_back("--token_file=" + tokens);
  }
  d.pid = fork();
  if (d.pid < 0) Die("fork");
  if (d.pid == 0) {
    const int fd = open(d.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> cargv;
    for (std::string& s : argv) cargv.push_back(s.data());
    cargv.push_back(nullptr);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  const std::regex unix_ready("serving gRPC \\(");
  const std::regex tcp_ready("serving gRPC over TLS on tcp:\\S+:(\\d+) ");
  const auto start = std::chrono::steady_clock::now();
  while (Seconds(start) < 600) {
    int status = 0;
    if (waitpid(d.pid, &status, WNOHANG) == d.pid) {
      Die("mobiusd exited during start-up:\n" + ReadFile(d.log));
    }
    const std::string text = ReadFile(d.log);
    std::smatch m;
    if (std::regex_search(text, unix_ready) &&
        (a.tls_dir.empty() || std::regex_search(text, m, tcp_ready))) {
      if (!a.tls_dir.empty()) d.tcp_port = std::atoi(m[1].str().c_str());
      std::fprintf(stderr, "mobiusd serving after %.1f s\n", Seconds(start));
      return d;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  Die("mobiusd not serving after 600 s");
}

void StopDaemon(const Daemon& d) {
  kill(d.pid, SIGTERM);
  int status = 0;
  waitpid(d.pid, &status, 0);
}

// --- measurement --------------------------------------------------------------------------------

using Stats = mobius::bench::LatencyStats;
using mobius::bench::Summarise;

struct Kind {
  std::string name;
  std::function<size_t()> rpc;    // returns the rows
  std::function<size_t()> store;  // the same query on the store (same file)
  std::vector<double> rpc_ms, store_ms;
  size_t rpc_rows = 0, store_rows = 0, bytes = 0;
};

size_t CallList(v1::JobService::Stub* stub, const v1::ListJobsRequest& req, size_t* bytes) {
  v1::ListJobsResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Status st = stub->ListJobs(&ctx, req, &resp);
  if (!st.ok()) Die(absl::StrCat("ListJobs: ", st.error_message()));
  *bytes = resp.ByteSizeLong();
  return resp.jobs_size();
}

void Run(const Args& a, const std::string& dir) {
  std::filesystem::create_directories(dir + "/state");
  std::filesystem::create_directories(dir + "/model");
  std::filesystem::copy_file(a.model_config, dir + "/model/config.json",
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(dir + "/data.tok") << "";
  const std::string db = dir + "/state/jobs.db";
  const auto populate_start = std::chrono::steady_clock::now();
  Populate(db, dir, a.jobs);
  std::fprintf(stderr, "populated %d jobs in %.1f s (%.1f MB)\n", a.jobs, Seconds(populate_start),
               std::filesystem::file_size(db) / 1e6);

  Daemon d = StartDaemon(a, dir);
  auto unix_channel =
      grpc::CreateChannel("unix:" + dir + "/d.sock", grpc::InsecureChannelCredentials());
  auto unix_stub = v1::JobService::NewStub(unix_channel);
  std::unique_ptr<v1::JobService::Stub> tcp_stub;
  if (d.tcp_port != 0) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadFile(a.tls_dir + "/ca.pem");
    auto creds = grpc::CompositeChannelCredentials(grpc::SslCredentials(ssl),
                                                   grpc::AccessTokenCredentials(kToken));
    tcp_stub = v1::JobService::NewStub(
        grpc::CreateChannel(absl::StrCat("localhost:", d.tcp_port), creds));
  }
  // The daemon plans the queued jobs in its first scheduling pass; measure after it (their pending
  // reasons are set then).
  {
    const auto start = std::chrono::steady_clock::now();
    v1::ListJobsRequest queued;
    queued.add_states(v1::JOB_STATE_QUEUED);
    for (;;) {
      v1::ListJobsResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      grpc::Status st = unix_stub->ListJobs(&ctx, queued, &resp);
      if (st.ok() && resp.jobs_size() > 0 && !resp.jobs(0).pending_reason().empty()) {
        std::fprintf(stderr, "first scheduling pass done after %.1f s: %s\n", Seconds(start),
                     resp.jobs(0).pending_reason().c_str());
        break;
      }
      if (Seconds(start) > 600) Die("queued jobs have no pending reason after 600 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  auto store = Check(jobs::JobStore::Open(db), "open store (side by side)");

  std::vector<Kind> kinds;
  auto add = [&](std::string name, v1::ListJobsRequest req, jobs::ListJobsFilter filter,
                 v1::JobService::Stub* stub) {
    const size_t index = kinds.size();
    kinds.emplace_back();
    Kind& k = kinds.back();
    k.name = std::move(name);
    k.rpc = [stub, req, index, &kinds] { return CallList(stub, req, &kinds[index].bytes); };
    k.store = [&store, filter] { return Check(store->ListJobs(filter, 0, ""), "list").jobs.size(); };
  };
  v1::ListJobsRequest all;
  add("no filter (admin: all 10,000 jobs)", all, {}, unix_stub.get());
  v1::ListJobsRequest by_uid;
  by_uid.set_uid(kProbeUid);
  jobs::ListJobsFilter uid_filter;
  uid_filter.uid = kProbeUid;
  add("one user (uid filter)", by_uid, uid_filter, unix_stub.get());
  v1::ListJobsRequest queue;
  queue.add_states(v1::JOB_STATE_QUEUED);
  queue.add_states(v1::JOB_STATE_RUNNING);
  jobs::ListJobsFilter queue_filter;
  queue_filter.states = {jobs::JobState::kQueued, jobs::JobState::kRunning};
  add("QUEUED+RUNNING (queue view)", queue, queue_filter, unix_stub.get());
  v1::ListJobsRequest user_queued = by_uid;
  user_queued.add_states(v1::JOB_STATE_QUEUED);
  jobs::ListJobsFilter user_queued_filter = uid_filter;
  user_queued_filter.states = {jobs::JobState::kQueued};
  add("one user + QUEUED", user_queued, user_queued_filter, unix_stub.get());
  v1::ListJobsRequest failed;
  failed.add_states(v1::JOB_STATE_FAILED);
  jobs::ListJobsFilter failed_filter;
  failed_filter.states = {jobs::JobState::kFailed};
  add("FAILED", failed, failed_filter, unix_stub.get());
  if (tcp_stub != nullptr) {
    add("TCP+TLS, bearer token of uid 1003 (non-admin: own jobs)", all, uid_filter,
        tcp_stub.get());
  }
  {  // The floor: one job by id, what any call costs through gRPC on this machine.
    const std::string id = absl::StrFormat("j-%06d", std::max(1, a.jobs / 2));
    const size_t index = kinds.size();
    kinds.emplace_back();
    kinds.back().name = "baseline: GetJob (1 job), unix socket";
    v1::JobService::Stub* stub = unix_stub.get();
    kinds.back().rpc = [stub, index, &kinds, id] {
      v1::GetJobRequest req;
      req.set_id(id);
      v1::Job resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      grpc::Status st = stub->GetJob(&ctx, req, &resp);
      if (!st.ok()) Die(absl::StrCat("GetJob: ", st.error_message()));
      kinds[index].bytes = resp.ByteSizeLong();
      return size_t{1};
    };
    kinds.back().store = [&store, id] {
      Check(store->GetJob(id), "get");
      return size_t{1};
    };
  }

  for (Kind& k : kinds) {  // warm-up: connections, statement caches, page cache
    for (int i = 0; i < 10; ++i) {
      k.rpc();
      k.store();
    }
  }
  for (int q = 0; q < a.queries; ++q) {
    for (Kind& k : kinds) {
      auto t = std::chrono::steady_clock::now();
      k.rpc_rows = k.rpc();
      k.rpc_ms.push_back(1e3 * Seconds(t));
      t = std::chrono::steady_clock::now();
      k.store_rows = k.store();
      k.store_ms.push_back(1e3 * Seconds(t));
    }
  }
  StopDaemon(d);

  std::printf("\nListJobs at %d jobs, default page size (100), %d rounds, kinds and RPC/store "
              "alternating\n\n",
              a.jobs, a.queries);
  std::printf("| query | rows | reply KB | RPC p50 ms | RPC p99 ms | RPC max ms | store p50 ms | "
              "store p99 ms | RPC - store p50 ms |\n|---|---|---|---|---|---|---|---|---|\n");
  for (const Kind& k : kinds) {
    const Stats r = Summarise(k.rpc_ms), s = Summarise(k.store_ms);
    std::printf("| %s | %zu | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", k.name.c_str(),
                k.rpc_rows, k.bytes / 1024.0, r.p50, r.p99, r.max, s.p50, s.p99, r.p50 - s.p50);
    if (k.rpc_rows != k.store_rows) {
      std::printf("  (!) RPC returned %zu rows, the store %zu\n", k.rpc_rows, k.store_rows);
    }
  }
}

}  // namespace
}  // namespace mobius

int main(int argc, char** argv) {
  mobius::Args args = mobius::Parse(argc, argv);
  std::string dir = args.dir;
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp ? tmp : "/tmp") + "/rpc_bench_XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      return 1;
    }
    dir = pattern;
  }
  std::printf("mobiusd ListJobs benchmark in %s (%s)\n", dir.c_str(),
              args.tls_dir.empty() ? "unix socket" : "unix socket and TCP+TLS");
  mobius::Run(args, dir);
  if (args.dir.empty()) std::filesystem::remove_all(dir);
  return 0;
}
