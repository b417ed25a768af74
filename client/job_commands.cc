#include "client/job_commands.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "client/daemon_channel.h"
#include "client/daemon_client.h"
#include "client/exit_codes.h"
#include "client/job_connection.h"
#include "client/usage_command.h"
#include "client/stream_watchdog.h"
#include "common/jobspec/byte_size.h"
#include "common/jobspec/yaml.h"
#include "common/rpc/grpc_status.h"
#include "common/rpc/jobspec_convert.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "mobius/v1/job.grpc.pb.h"
#include "mobius/v1/node.grpc.pb.h"

namespace mobius::cli {
namespace {



std::string StateName(v1::JobState s) {
  std::string n = v1::JobState_Name(s);
  absl::string_view v = n;
  if (absl::ConsumePrefix(&v, "JOB_STATE_")) return std::string(v);
  return n;
}

bool Terminal(v1::JobState s) {
  return s == v1::JOB_STATE_SUCCEEDED || s == v1::JOB_STATE_FAILED ||
         s == v1::JOB_STATE_CANCELLED;
}


std::string Bytes(int64_t b) {
  if (b >= (int64_t{1} << 30)) return absl::StrFormat("%.1f GiB", b / 1073741824.0);
  if (b >= (int64_t{1} << 20)) return absl::StrFormat("%.1f MiB", b / 1048576.0);
  if (b >= 1024) return absl::StrFormat("%.1f KiB", b / 1024.0);
  return absl::StrCat(b, " B");
}

std::string Duration(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "?";
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, (s / 60) % 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%ds", s);
}

std::string RandomId() {
  unsigned char b[16] = {};
  const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    (void)!read(fd, b, sizeof(b));
    close(fd);
  }
  std::string s;
  for (unsigned char c : b) absl::StrAppendFormat(&s, "%02x", c);
  return s;
}

std::string Line(const v1::Job& j, bool queue_only) {
  std::string step = j.total_steps() > 0 ? absl::StrCat(j.steps_done(), "/", j.total_steps()) : "-";
  std::string loss = j.has_last_step() ? absl::StrFormat("%.4f", j.last_step().loss()) : "-";
  std::string why = j.state() == v1::JOB_STATE_QUEUED
                        ? absl::StrCat("#", j.queue_position(), " ", j.pending_reason())
                        : j.state_reason();
  std::string line = absl::StrFormat("%-10s %-16s %-10s %-10s %-11s %-8s ", j.id(),
                                     j.name().empty() ? "-" : j.name(), j.user(),
                                     StateName(j.state()), step, loss);
  if (queue_only) {  // the owner's fair-share factor, for queued jobs
    absl::StrAppendFormat(&line, "%-6s ",
                          j.state() == v1::JOB_STATE_QUEUED
                              ? absl::StrFormat("%.2f", j.fair_share())
                              : "-");
  }
  return line + why;
}

// ---- progress ------------------------------------------------------------------------------------

std::atomic<bool> g_detach{false};
void OnSigint(int) { g_detach = true; }

struct Progress {
  bool tty = isatty(2);
  double first_loss = NAN, last_loss = NAN;
  double tokens_per_second_sum = 0;
  int steps = 0;
  int64_t h2d = 0, d2h = 0;
  bool emulated = false;
  // Step times after the first report (whose step includes the start-up), for the summary.
  double timed_seconds = 0;
  int timed_steps = 0;
  int64_t first_timed_step = 0, last_step = 0;

  void Step(std::ostream& err, const v1::StepReport& r) {
    if (std::isnan(first_loss)) first_loss = r.loss();
    last_loss = r.loss();
    if (steps > 0) {
      if (timed_steps == 0) first_timed_step = r.step();
      timed_seconds += r.step_seconds();
      ++timed_steps;
    }
    last_step = r.step();
    ++steps;
    tokens_per_second_sum += r.tokens_per_second();
    h2d += r.h2d_bytes();
    d2h += r.d2h_bytes();
    emulated = emulated || r.emulated();
    const int width = 24;
    const double frac = r.total_steps() > 0 ? static_cast<double>(r.step()) / r.total_steps() : 0;
    const int filled = static_cast<int>(frac * width);
    const double eta = r.step_seconds() * static_cast<double>(r.total_steps() - r.step());
    std::string bar = std::string(filled, '=') + (filled < width ? ">" : "") +
                      std::string(std::max(0, width - filled - 1), ' ');
    std::string line = absl::StrFormat(
        "[%s] step %d/%d | loss %.4f | tok/s %.0f | %.2f s/step | ETA %s", bar, r.step(),
        r.total_steps(), r.loss(), r.tokens_per_second(), r.step_seconds(), Duration(eta));
    if (r.has_eval_loss()) {
      line += absl::StrFormat(" | eval %.4f", r.eval_loss());
      if (tty) err << "\r\033[K" << line << "\n";  // keep eval lines on screen
    }
    if (tty) {
      err << "\r\033[K" << line << std::flush;
    } else {
      err << line << "\n";
    }
  }
  void EndLine(std::ostream& err) {
    if (tty && steps > 0) err << "\n";
  }
};

// Streams WatchJob until the job is terminal (or Ctrl-C). Returns the exit code.
int WatchUntilDone(Connection& c, const std::string& id, std::ostream& out, std::ostream& err) {
  struct sigaction sa {};
  sa.sa_handler = OnSigint;
  sigaction(SIGINT, &sa, nullptr);
  grpc::ClientContext ctx;
  v1::WatchJobRequest req;
  req.set_id(id);
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader = c.jobs->WatchJob(&ctx, req);
  // Ctrl-C: stop watching, leave the job running. A daemon silent past the limit: fail.
  auto dog = std::make_unique<StreamWatchdog>(&ctx, c.stream_idle, [] { return g_detach.load(); });
  Progress p;
  v1::JobEvent e;
  v1::JobState final_state = v1::JOB_STATE_UNSPECIFIED;
  std::string final_reason;
  v1::Job job;
  while (reader->Read(&e)) {
    dog->Alive();
    if (e.has_job()) {  // the first event, and the daemon's heartbeat
      job = e.job();
    } else if (e.has_step()) {
      p.Step(err, e.step());
    } else if (e.has_queue()) {
      p.EndLine(err);
      err << id << ": queued #" << e.queue().queue_position() << ": "
          << e.queue().pending_reason() << "\n";
    } else if (e.has_state_change()) {
      const auto& s = e.state_change();
      if (s.state() != v1::JOB_STATE_QUEUED || s.reason() != "submitted") {
        p.EndLine(err);
        err << id << ": " << StateName(s.state()) << " (" << s.reason() << ")\n";
      }
      if (Terminal(s.state())) {
        final_state = s.state();
        final_reason = s.reason();
      }
    }
  }
  grpc::Status st = reader->Finish();
  const bool silent = dog->fired();
  const absl::Status explained = c.ExplainStream(
      st, *dog, absl::StrCat("the job may still be running (mobius describe ", id, ")"));
  dog.reset();
  signal(SIGINT, SIG_DFL);
  p.EndLine(err);
  if (g_detach) {
    err << "detached; " << id << " keeps running (mobius watch " << id << ", mobius logs -f " << id
        << ", mobius cancel " << id << ")\n";
    return kExitOk;
  }
  if ((!st.ok() || silent) && final_state == v1::JOB_STATE_UNSPECIFIED) {
    return Fail(err, "watch", explained);
  }
  // Summary.
  grpc::ClientContext gctx;
  c.Deadline(&gctx);
  v1::GetJobRequest g;
  g.set_id(id);
  if (c.jobs->GetJob(&gctx, g, &job).ok()) {
    out << "job " << id << " " << StateName(job.state()) << ": " << job.state_reason() << "\n";
    if (p.steps > 0) {
      out << absl::StrFormat("  loss %.4f -> %.4f over %d steps, %.0f tokens/s on average\n",
                             p.first_loss, p.last_loss, p.steps,
                             p.tokens_per_second_sum / p.steps);
      out << "  host->device " << Bytes(p.h2d) << ", device->host " << Bytes(p.d2h)
          << (p.emulated ? " (CPU backend, emulated PCIe links)" : "") << "\n";
    }
    if (job.has_last_step()) {
      const std::string measured =
          p.timed_steps > 0
              ? absl::StrFormat("%.3f s per step (mean of steps %d-%d)",
                                p.timed_seconds / p.timed_steps, p.first_timed_step, p.last_step)
              : absl::StrFormat("%.3f s (step %d)", job.last_step().step_seconds(),
                                job.last_step().step());
      if (!p.emulated) {
        out << "  step time: measured " << measured;
        if (job.predicted_step_seconds() > 0) {
          out << absl::StrFormat(", planner predicted %.3f s", job.predicted_step_seconds());
        }
        out << "\n";
      } else {
        // The job's plan is for the topology's real GPUs and links; this run computed on the CPU
        // backend over scaled emulated links, so the two numbers are not comparable.
        out << "  step time: measured " << measured
            << " on the CPU backend with emulated PCIe links\n";
        if (job.predicted_step_seconds() > 0) {
          out << absl::StrFormat(
              "  the job's plan predicts %.3f s per step for the topology's real GPUs, not for "
              "this emulated run; the prediction for this run: mobius plan JOB.yaml "
              "--emulated-gpus --profile measured --link-scale S (the daemon's --link-scale)\n",
              job.predicted_step_seconds());
        }
      }
    }
    if (!job.checkpoint().empty() && job.spec().has_adapter()) {
      out << "  checkpoint: " << job.checkpoint()
          << " (a PEFT adapter: PeftModel.from_pretrained loads it over the base model; "
             "mobius generate MODEL_DIR --adapter it; mobius export --merge it OUT)\n";
    } else if (!job.checkpoint().empty()) {
      out << "  checkpoint: " << job.checkpoint()
          << " (a Hugging Face model directory: transformers' from_pretrained loads it)\n";
    }
  }
  return final_state == v1::JOB_STATE_SUCCEEDED ? kExitOk : kExitJobFailed;
}

// ---- verbs ---------------------------------------------------------------------------------------

int Submit(Connection& c, const std::string& path, const JobCommandOptions& o, std::ostream& out,
           std::ostream& err) {
  jobspec::YamlOptions yo;
  absl::StatusOr<jobspec::JobSpec> spec = jobspec::ParseJobSpecFile(path, yo);
  if (!spec.ok()) return Fail(err, "submit", spec.status());
  if (absl::Status s = c.Check(); !s.ok()) return Fail(err, "submit", s);
  v1::SubmitJobRequest req;
  req.set_submission_id(o.submission_id.empty() ? RandomId() : o.submission_id);
  *req.mutable_spec() = JobSpecToProto(*spec);
  v1::Job job;
  grpc::ClientContext ctx;
  c.Deadline(&ctx);
  if (absl::Status s = c.Explain(c.jobs->SubmitJob(&ctx, req, &job)); !s.ok()) {
    return Fail(err, "submit", s);
  }
  if (o.json && !o.wait) {
    out << ToJson(job) << "\n";
    return kExitOk;
  }
  err << "submitted " << job.id() << " (" << StateName(job.state());
  if (job.state() == v1::JOB_STATE_QUEUED && job.queue_position() > 0) {
    err << " #" << job.queue_position() << ": " << job.pending_reason();
  }
  err << ")\n";
  if (!o.wait) {
    out << job.id() << "\n";
    return kExitOk;
  }
  return WatchUntilDone(c, job.id(), out, err);
}

int Get(Connection& c, const std::string& id, bool json, std::ostream& out, std::ostream& err) {
  if (absl::Status s = c.Check(); !s.ok()) return Fail(err, "describe", s);
  v1::GetJobRequest req;
  req.set_id(id);
  v1::Job j;
  grpc::ClientContext ctx;
  c.Deadline(&ctx);
  if (absl::Status s = c.Explain(c.jobs->GetJob(&ctx, req, &j)); !s.ok()) {
    return Fail(err, "describe", s);
  }
  if (json) {
    out << ToJson(j) << "\n";
    return kExitOk;
  }
  out << "id:          " << j.id() << "\n"
      << "name:        " << (j.name().empty() ? "-" : j.name()) << "\n"
      << "user:        " << j.user() << " (uid " << j.uid() << ")\n"
      << "state:       " << StateName(j.state()) << "  " << j.state_reason() << "\n";
  if (j.state() == v1::JOB_STATE_QUEUED) {
    out << "queue:       #" << j.queue_position() << "  " << j.pending_reason() << "\n";
  }
  out << "model:       " << j.spec().model_dir() << "\n"
      << "dataset:     " << j.spec().dataset().path() << "\n"
      << "steps:       " << j.steps_done() << "/" << j.total_steps() << "\n"
      << "gpus:        " << absl::StrJoin(j.gpus(), ",") << "\n"
      << "restarts:    " << j.restarts() << "/" << j.spec().max_restarts() << "\n";
  if (j.has_last_step()) {
    const auto& s = j.last_step();
    out << absl::StrFormat(
        "last step:   %d: loss %.4f, lr %.2e, grad_norm %.3f, %.0f tok/s, %.3f s (stall %.3f s, "
        "optimizer %.3f s), h2d %s, d2h %s%s%s\n",
        s.step(), s.loss(), s.lr(), s.grad_norm(), s.tokens_per_second(), s.step_seconds(),
        s.stall_seconds(), s.optimizer_seconds(), Bytes(s.h2d_bytes()), Bytes(s.d2h_bytes()),
        s.skipped()          ? absl::StrFormat(", skipped (fp16 overflow at loss scale %g)",
                                               s.loss_scale())
        : s.loss_scale() > 0 ? absl::StrFormat(", loss scale %g", s.loss_scale())
                             : std::string(),
        s.emulated() ? " [emulated links]" : "");
  }
  if (j.has_last_eval()) {
    out << absl::StrFormat("eval loss:   %.4f (step %d)\n", j.last_eval().eval_loss(),
                           j.last_eval().step());
  }
  if (j.predicted_step_seconds() > 0) {
    out << absl::StrFormat("predicted:   %.3f s/step (planner)\n", j.predicted_step_seconds());
  }
  out << "checkpoint:  " << (j.checkpoint().empty() ? "-" : j.checkpoint()) << "\n";
  return kExitOk;
}

int List(Connection& c, const JobCommandOptions& o, bool queue_only, std::ostream& out,
         std::ostream& err) {
  const std::string verb = queue_only ? "queue" : "ls";
  if (absl::Status s = c.Check(); !s.ok()) return Fail(err, verb, s);
  v1::ListJobsRequest req;
  if (queue_only) {
    req.add_states(v1::JOB_STATE_RUNNING);
    req.add_states(v1::JOB_STATE_QUEUED);
  } else if (!o.state.empty()) {
    v1::JobState s;
    if (!v1::JobState_Parse("JOB_STATE_" + absl::AsciiStrToUpper(o.state), &s)) {
      return Fail(err, verb, absl::InvalidArgumentError(absl::StrCat(
                                 "--state: unknown state \"", o.state,
                                 "\" (queued, running, succeeded, failed, cancelled)")));
    }
    req.add_states(s);
  }
  v1::ListJobsResponse all;
  for (;;) {
    v1::ListJobsResponse page;
    grpc::ClientContext ctx;
    c.Deadline(&ctx);
    if (absl::Status s = c.Explain(c.jobs->ListJobs(&ctx, req, &page)); !s.ok()) {
      return Fail(err, verb, s);
    }
    for (const v1::Job& j : page.jobs()) *all.add_jobs() = j;
    if (page.next_page_token().empty()) break;
    req.set_page_token(page.next_page_token());
  }
  if (o.json) {
    out << ToJson(all) << "\n";
    return kExitOk;
  }
  out << absl::StrFormat("%-10s %-16s %-10s %-10s %-11s %-8s ", "ID", "NAME", "USER", "STATE",
                         "STEP", "LOSS")
      << (queue_only ? absl::StrFormat("%-6s WHY\n", "SHARE") : "REASON\n");
  for (const v1::Job& j : all.jobs()) out << Line(j, queue_only) << "\n";
  return kExitOk;
}

int Logs(Connection& c, const std::string& id, bool follow, std::ostream& out, std::ostream& err) {
  if (absl::Status s = c.Check(); !s.ok()) return Fail(err, "logs", s);
  grpc::ClientContext ctx;
  v1::StreamLogsRequest req;
  req.set_id(id);
  req.set_follow(follow);
  auto reader = c.jobs->StreamLogs(&ctx, req);
  StreamWatchdog dog(&ctx, c.stream_idle);
  v1::LogLine line;
  while (reader->Read(&line)) {
    dog.Alive();
    if (line.seq() == 0) continue;  // the daemon's heartbeat, no line
    out << line.source() << " | " << line.text() << "\n" << std::flush;
  }
  const grpc::Status st = reader->Finish();
  if (dog.fired() || !st.ok()) {
    return Fail(err, "logs", c.ExplainStream(st, dog, "the log may be incomplete"));
  }
  return kExitOk;
}

int Cancel(Connection& c, const std::string& id, bool json, std::ostream& out, std::ostream& err) {
  if (absl::Status s = c.Check(); !s.ok()) return Fail(err, "cancel", s);
  v1::CancelJobRequest req;
  req.set_id(id);
  v1::Job j;
  grpc::ClientContext ctx;
  c.Deadline(&ctx);
  if (absl::Status s = c.Explain(c.jobs->CancelJob(&ctx, req, &j)); !s.ok()) {
    return Fail(err, "cancel", s);
  }
  if (json) {
    out << ToJson(j) << "\n";
  } else {
    out << j.id() << " " << StateName(j.state())
        << (j.state() == v1::JOB_STATE_RUNNING ? " (stopping its workers)" : "") << "\n";
  }
  return kExitOk;
}

int Node(Connection& c, bool json, std::ostream& out, std::ostream& err) {
  if (absl::Status s = c.Check(); !s.ok()) return Fail(err, "node", s);
  v1::GetNodeStatusResponse r;
  grpc::ClientContext ctx;
  c.Deadline(&ctx);
  if (absl::Status s = c.Explain(c.node->GetNodeStatus(&ctx, {}, &r)); !s.ok()) {
    return Fail(err, "node", s);
  }
  if (json) {
    out << ToJson(r) << "\n";
    return kExitOk;
  }
  out << "GPU  NAME                          MEMORY     STATUS\n";
  for (const v1::GpuStatus& g : r.gpus()) {
    out << absl::StrFormat("%-4d %-29s %-10s %s\n", g.index(), g.name(), Bytes(g.memory_bytes()),
                           !g.allowed()          ? "not allowed"
                           : g.job_id().empty() ? "free"
                                                : "used by " + g.job_id());
  }
  out << "host memory:   " << Bytes(r.host_memory_available_bytes()) << " free of "
      << Bytes(r.host_memory_total_bytes()) << "\n"
      << "pinned budget: " << Bytes(r.pinned_used_bytes()) << " used of "
      << Bytes(r.pinned_budget_bytes()) << "\n"
      << "draining:      " << (r.draining() ? "yes" : "no") << "\n";
  for (const v1::JobStateCount& n : r.jobs()) {
    out << absl::AsciiStrToLower(StateName(n.state())) << ": " << n.count() << "\n";
  }
  return kExitOk;
}

int Admin(Connection& c, const std::vector<std::string>& args, const JobCommandOptions& o,
          std::ostream& out, std::ostream& err) {
  const std::string& verb = args[0];
  if (absl::Status s = c.Check(); !s.ok()) return Fail(err, verb, s);
  grpc::ClientContext ctx;
  c.Deadline(&ctx);
  if (verb == "drain") {
    v1::DrainResponse r;
    if (absl::Status s = c.Explain(c.admin->Drain(&ctx, {}, &r)); !s.ok()) return Fail(err, verb, s);
    out << "draining: " << r.running_jobs() << " running job(s) continue, " << r.queued_jobs()
        << " queued job(s) wait\n";
    return kExitOk;
  }
  if (verb == "undrain") {
    v1::UndrainResponse r;
    if (absl::Status s = c.Explain(c.admin->Undrain(&ctx, {}, &r)); !s.ok()) {
      return Fail(err, verb, s);
    }
    out << "not draining\n";
    return kExitOk;
  }
  // quota
  if (args.size() == 2 && args[1] == "ls") {
    v1::GetQuotasResponse r;
    if (absl::Status s = c.Explain(c.admin->GetQuotas(&ctx, {}, &r)); !s.ok()) {
      return Fail(err, "quota", s);
    }
    if (o.json) {
      out << ToJson(r) << "\n";
      return kExitOk;
    }
    out << "UID     USER         MAX_GPUS  MAX_RUNNING_JOBS  MAX_QUEUED_JOBS  MAX_HOST_MEMORY\n";
    for (const v1::Quota& q : r.quotas()) {
      out << absl::StrFormat("%-7d %-12s %-9d %-17d %-16d %s\n", q.uid(), q.user(), q.max_gpus(),
                             q.max_running_jobs(), q.max_queued_jobs(),
                             q.max_host_bytes() > 0 ? Bytes(q.max_host_bytes()) : "-");
    }
    return kExitOk;
  }
  uint32_t uid = 0;
  if (args.size() != 3 || args[1] != "set" || !absl::SimpleAtoi(args[2], &uid)) {
    err << "usage: mobius quota set UID [--max-gpus N] [--max-running-jobs N] "
           "[--max-queued-jobs N] [--max-host-memory SIZE] | mobius quota ls\n";
    return kExitUsage;
  }
  v1::SetQuotaRequest req;
  req.set_uid(uid);
  req.set_max_gpus(o.max_gpus);
  req.set_max_running_jobs(o.max_running_jobs);
  req.set_max_queued_jobs(o.max_queued_jobs);
  if (!o.max_host_memory.empty()) {
    absl::StatusOr<int64_t> bytes = jobspec::ParseByteSize(o.max_host_memory);
    if (!bytes.ok()) {
      return Fail(err, "quota", absl::InvalidArgumentError(absl::StrCat(
                                    "--max-host-memory: ", bytes.status().message())));
    }
    req.set_max_host_bytes(*bytes);
  }
  v1::Quota q;
  if (absl::Status s = c.Explain(c.admin->SetQuota(&ctx, req, &q)); !s.ok()) {
    return Fail(err, "quota", s);
  }
  out << "quota for " << q.user() << " (uid " << q.uid() << "): max_gpus " << q.max_gpus()
      << ", max_running_jobs " << q.max_running_jobs() << ", max_queued_jobs "
      << q.max_queued_jobs() << ", max_host_memory "
      << (q.max_host_bytes() > 0 ? Bytes(q.max_host_bytes()) : "none") << "\n";
  return kExitOk;
}

}  // namespace

bool IsJobVerb(const std::string& v) {
  for (const char* known : {"submit", "ls", "describe", "logs", "watch", "cancel", "queue", "node",
                            "drain", "undrain", "quota", "usage"}) {
    if (v == known) return true;
  }
  return false;
}

int RunJobCommand(const std::vector<std::string>& args, const JobCommandOptions& o,
                  std::ostream& out, std::ostream& err) {
  const std::string& verb = args.empty() ? std::string() : args[0];
  auto need = [&](size_t n, const char* usage) {
    if (args.size() == n) return true;
    err << "usage: mobius " << usage << "\n";
    return false;
  };
  Connection c(o);
  if (verb == "submit") return need(2, "submit JOB.yaml [--wait]") ? Submit(c, args[1], o, out, err) : kExitUsage;
  if (verb == "ls") return need(1, "ls [--state S] [--json]") ? List(c, o, false, out, err) : kExitUsage;
  if (verb == "queue") return need(1, "queue [--json]") ? List(c, o, true, out, err) : kExitUsage;
  if (verb == "describe") return need(2, "describe JOB [--json]") ? Get(c, args[1], o.json, out, err) : kExitUsage;
  if (verb == "logs") return need(2, "logs [-f] JOB") ? Logs(c, args[1], o.follow, out, err) : kExitUsage;
  if (verb == "watch") {
    if (!need(2, "watch JOB")) return kExitUsage;
    if (absl::Status s = c.Check(); !s.ok()) return Fail(err, "watch", s);
    return WatchUntilDone(c, args[1], out, err);
  }
  if (verb == "cancel") return need(2, "cancel JOB") ? Cancel(c, args[1], o.json, out, err) : kExitUsage;
  if (verb == "node") return need(1, "node [--json]") ? Node(c, o.json, out, err) : kExitUsage;
  if (verb == "drain" || verb == "undrain" || verb == "quota") return Admin(c, args, o, out, err);
  if (verb == "usage") {
    if (!need(1, "usage [--user U] [--since WHEN] [--runs] [--json]")) return kExitUsage;
    if (absl::Status s = c.Check(); !s.ok()) return Fail(err, "usage", s);
    return RunUsage(c, o, out, err);
  }
  err << "mobius: unknown command '" << verb << "'\n";
  return kExitUsage;
}

}  // namespace mobius::cli
