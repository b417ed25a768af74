#include "host/scheduler/scheduler.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "host/scheduler/fits.h"
#include "host/scheduler/reason_format.h"
#include "host/scheduler/validate.h"

namespace mobius::jobs {
namespace {

// Resources set aside for a job that could not start (policy rule 6 in scheduler.h).
struct Hold {
  std::string job_id;
  int32_t priority = 0;
  double order_score = 0;
  std::vector<int> gpus;
  int64_t host_bytes = 0;
  int64_t pinned_bytes = 0;
};

// An amount of host-side resources and a GPU set, to test "would the job fit in this".
struct Supply {
  std::vector<bool> gpu;  // per GPU index: available to this job (allowed, not busy, ...)
  int64_t host_bytes = 0;
  int64_t pinned_bytes = 0;
};

// Byte sums saturate instead of overflowing: inputs are validated non-negative, not bounded.
int64_t AddBytes(int64_t a, int64_t b) {
  int64_t out;
  if (__builtin_add_overflow(a, b, &out)) {
    return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
  return out;
}

int64_t SubBytes(int64_t a, int64_t b) {
  int64_t out;
  if (__builtin_sub_overflow(a, b, &out)) {
    return b > 0 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
  }
  return out;
}

std::string GpuCount(int n) { return absl::StrCat(n, n == 1 ? " GPU" : " GPUs"); }

// "GPUs 2,3 used by j-000004, GPU 6 used by j-000007" for owner[g] over `gpus`, grouped by owner in
// order of each owner's smallest GPU.
std::vector<std::string> GroupByOwner(const std::vector<int>& gpus,
                                      const std::vector<std::string>& owner,
                                      absl::string_view verb) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (int g : gpus) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& p) { return p.first == owner[g]; });
    if (it == groups.end()) {
      groups.push_back({owner[g], {g}});
    } else {
      it->second.push_back(g);
    }
  }
  std::vector<std::string> out;
  for (const auto& [job, list] : groups) {
    out.push_back(absl::StrCat(FormatGpus(list), " ", verb, " ", job));
  }
  return out;
}

// One scheduling round: the jobs in queue order, each started, held for, or explained.
class Round {
 public:
  Round(const NodeResources& node, const std::vector<RunningJob>& running, const Quotas& quotas,
        const SchedulerOptions& options)
      : node_(node), quotas_(quotas), options_(options) {
    const int n = static_cast<int>(node.gpus.size());
    allowed_.assign(n, false);
    for (int g : node.allowed_gpus) allowed_[g] = true;
    user_of_.assign(n, "");
    held_by_.assign(n, "");
    busy_.assign(n, false);
    free_host_ = node.host_bytes;
    free_pinned_ = node.pinned_bytes;
    for (const RunningJob& r : running) {
      for (int g : r.gpus) {
        user_of_[g] = r.job_id;
        busy_[g] = true;
      }
      free_host_ = SubBytes(free_host_, r.host_bytes);
      free_pinned_ = SubBytes(free_pinned_, r.pinned_bytes);
      ++user_jobs_[r.uid];
      user_gpus_[r.uid] += static_cast<int>(r.gpus.size());
      user_host_[r.uid] = AddBytes(user_host_[r.uid], r.host_bytes);
    }
    unheld_host_ = free_host_;
    unheld_pinned_ = free_pinned_;
    // Preemption candidates in the order they are tried (policy rule 7).
    victims_order_ = running;
    std::sort(victims_order_.begin(), victims_order_.end(),
              [](const RunningJob& a, const RunningJob& b) {
                if (a.preempting != b.preempting) return a.preempting;
                if (a.priority != b.priority) return a.priority < b.priority;
                if (a.submit_seq != b.submit_seq) return a.submit_seq > b.submit_seq;
                return a.job_id < b.job_id;
              });
  }

  void Place(const JobRequest& job, ScheduleResult* out) {
    if (std::optional<std::string> never = NeverFitsReason(node_, job); never.has_value()) {
      Queue(job, PendingCause::kNeverFits, "can never run on this node: " + *never, out);
      return;
    }
    if (node_.draining) {
      Queue(job, PendingCause::kDraining, "node is draining", out);
      return;
    }
    if (std::string quota = QuotaReason(job); !quota.empty()) {
      Queue(job, PendingCause::kQuota, quota, out);
      return;
    }
    const int need = std::max(job.gpus, 1);
    const std::vector<int> candidates = Eligible(job, UnheldSupply());
    if (Fits(job, UnheldSupply())) {
      int k = job.gpus;
      if (k == 0) k = std::min<int64_t>(candidates.size(), QuotaGpusLeft(job.uid));
      Start(job, ChooseGpus(node_.gpus, candidates, k, busy_, job.placement, options_.gpu_choice),
            out);
      return;
    }
    if (!Fits(job, FreeSupply())) {
      std::string reason = ResourceReason(job);
      PendingCause cause = PendingCause::kResources;
      if (options_.preemption && !head_seen_) {
        if (std::string preempt = Preempt(job, out); !preempt.empty()) {
          reason = absl::StrCat(preempt, "; ", reason);
          cause = PendingCause::kPreempting;
        }
      }
      Queue(job, cause, reason, out);
    } else {
      Queue(job, PendingCause::kBehind, BehindReason(job), out);
    }
    head_seen_ = true;
    HoldFor(job, need, candidates);
  }

 private:
  int64_t QuotaGpusLeft(uint32_t uid) const {
    const UserQuota& q = quotas_.For(uid);
    if (q.max_gpus == 0) return std::numeric_limits<int64_t>::max();
    return std::max<int64_t>(0, q.max_gpus - Count(user_gpus_, uid) - Count(held_gpus_, uid));
  }

  static int Count(const std::map<uint32_t, int>& m, uint32_t uid) {
    auto it = m.find(uid);
    return it == m.end() ? 0 : it->second;
  }
  static int64_t Count64(const std::map<uint32_t, int64_t>& m, uint32_t uid) {
    auto it = m.find(uid);
    return it == m.end() ? 0 : it->second;
  }

  std::string QuotaReason(const JobRequest& job) const {
    const UserQuota& q = quotas_.For(job.uid);
    std::vector<std::string> parts;
    const int running = Count(user_jobs_, job.uid);
    const int waiting = Count(held_jobs_, job.uid);
    if (q.max_running_jobs > 0 && running + waiting >= q.max_running_jobs) {
      parts.push_back(waiting == 0
                          ? absl::StrCat("max_running_jobs=", q.max_running_jobs, ": ", running,
                                         " running")
                          : absl::StrCat("max_running_jobs=", q.max_running_jobs, ": ",
                                         running + waiting, " jobs (", running, " running, ",
                                         waiting, " waiting ahead)"));
    }
    if (q.max_gpus > 0) {
      const int held = Count(held_gpus_, job.uid);
      const int used = Count(user_gpus_, job.uid) + held;
      const char* in_use = held == 0 ? " GPUs in use" : " GPUs in use or held for jobs ahead";
      const std::string limit = absl::StrCat("max_gpus=", q.max_gpus, ": ");
      if (job.gpus > q.max_gpus) {
        parts.push_back(absl::StrCat(limit, "the job needs ", GpuCount(job.gpus)));
      } else if (job.gpus > 0 && used + job.gpus > q.max_gpus) {
        parts.push_back(absl::StrCat(limit, used, in_use, ", the job needs ", job.gpus));
      } else if (job.gpus == 0 && used >= q.max_gpus) {
        parts.push_back(absl::StrCat(limit, used, in_use));
      }
    }
    if (q.max_host_bytes > 0) {
      const int64_t held = Count64(held_host_, job.uid);
      const int64_t used = AddBytes(Count64(user_host_, job.uid), held);
      const std::string limit = absl::StrCat("max_host_bytes=", FormatSize(q.max_host_bytes), ": ");
      if (job.host_bytes > q.max_host_bytes) {
        parts.push_back(absl::StrCat(limit, "the job needs ", FormatSize(job.host_bytes)));
      } else if (AddBytes(used, job.host_bytes) > q.max_host_bytes) {
        parts.push_back(absl::StrCat(limit, FormatSize(used),
                                     held == 0 ? " in use" : " in use or held for jobs ahead",
                                     ", the job needs ", FormatSize(job.host_bytes)));
      }
    }
    if (parts.empty()) return "";
    return absl::StrCat("user quota ", absl::StrJoin(parts, "; "));
  }

  // Free GPUs and bytes, whether or not held for jobs ahead.
  Supply FreeSupply() const {
    Supply s;
    s.gpu.resize(busy_.size());
    for (size_t g = 0; g < busy_.size(); ++g) s.gpu[g] = allowed_[g] && !busy_[g];
    s.host_bytes = free_host_;
    s.pinned_bytes = free_pinned_;
    return s;
  }

  // Free and not held for any job ahead.
  Supply UnheldSupply() const {
    Supply s = FreeSupply();
    for (size_t g = 0; g < held_by_.size(); ++g) s.gpu[g] = s.gpu[g] && held_by_[g].empty();
    s.host_bytes = unheld_host_;
    s.pinned_bytes = unheld_pinned_;
    return s;
  }

  std::vector<int> Eligible(const JobRequest& job, const Supply& s) const {
    std::vector<int> out;
    for (size_t g = 0; g < s.gpu.size(); ++g) {
      if (s.gpu[g] && HasMemoryFor(node_.gpus[g], job.per_gpu_bytes)) {
        out.push_back(static_cast<int>(g));
      }
    }
    return out;
  }

  bool Fits(const JobRequest& job, const Supply& s) const {
    return static_cast<int>(Eligible(job, s).size()) >= std::max(job.gpus, 1) &&
           job.host_bytes <= s.host_bytes && job.pinned_bytes <= s.pinned_bytes;
  }

  void Start(const JobRequest& job, const GpuChoice& choice, ScheduleResult* out) {
    StartDecision d;
    d.job_id = job.job_id;
    d.gpus = choice.gpus;
    d.cost = choice.cost;
    for (int g : choice.gpus) {
      user_of_[g] = job.job_id;
      busy_[g] = true;
      if (node_.gpus[g].numa_node >= 0) d.numa_nodes.push_back(node_.gpus[g].numa_node);
    }
    std::sort(d.numa_nodes.begin(), d.numa_nodes.end());
    d.numa_nodes.erase(std::unique(d.numa_nodes.begin(), d.numa_nodes.end()), d.numa_nodes.end());
    free_host_ = SubBytes(free_host_, job.host_bytes);
    free_pinned_ = SubBytes(free_pinned_, job.pinned_bytes);
    unheld_host_ = SubBytes(unheld_host_, job.host_bytes);
    unheld_pinned_ = SubBytes(unheld_pinned_, job.pinned_bytes);
    ++user_jobs_[job.uid];
    user_gpus_[job.uid] += static_cast<int>(choice.gpus.size());
    user_host_[job.uid] = AddBytes(user_host_[job.uid], job.host_bytes);
    out->start.push_back(std::move(d));
  }

  void Queue(const JobRequest& job, PendingCause cause, std::string reason, ScheduleResult* out) {
    QueuedDecision q;
    q.job_id = job.job_id;
    q.position = static_cast<int>(out->queued.size()) + 1;
    q.cause = cause;
    q.reason = std::move(reason);
    out->queued.push_back(std::move(q));
  }

  // Sets aside what the job would use from what nobody ahead holds (policy rule 6).
  void HoldFor(const JobRequest& job, int need, const std::vector<int>& candidates) {
    Hold h;
    h.job_id = job.job_id;
    h.priority = job.priority;
    h.order_score = job.order_score;
    if (static_cast<int>(candidates.size()) <= need) {
      h.gpus = candidates;
    } else {
      h.gpus =
          ChooseGpus(node_.gpus, candidates, need, busy_, job.placement, options_.gpu_choice).gpus;
    }
    h.host_bytes = std::clamp<int64_t>(job.host_bytes, 0, std::max<int64_t>(unheld_host_, 0));
    h.pinned_bytes = std::clamp<int64_t>(job.pinned_bytes, 0, std::max<int64_t>(unheld_pinned_, 0));
    for (int g : h.gpus) held_by_[g] = job.job_id;
    ++held_jobs_[job.uid];
    held_gpus_[job.uid] += need;
    held_host_[job.uid] = AddBytes(held_host_[job.uid], job.host_bytes);
    unheld_host_ = SubBytes(unheld_host_, h.host_bytes);
    unheld_pinned_ = SubBytes(unheld_pinned_, h.pinned_bytes);
    if (!h.gpus.empty() || h.host_bytes > 0 || h.pinned_bytes > 0) holds_.push_back(std::move(h));
  }

  // "waiting for 4 GPUs: 2 free (GPUs 2,3 used by j-000004)"; "host memory: needs 40.0 GiB,
  // 12.0 GiB free"; "pinned memory: ...", for each resource the job lacks among unheld ones.
  std::string ResourceReason(const JobRequest& job) const {
    std::vector<std::string> parts;
    const Supply unheld = UnheldSupply();
    const int need = std::max(job.gpus, 1);
    const int have = static_cast<int>(Eligible(job, unheld).size());
    if (have < need) parts.push_back(GpuReason(job, need, have));
    if (job.host_bytes > unheld.host_bytes) {
      parts.push_back(MemoryReason("host memory", job.host_bytes, unheld.host_bytes,
                                   SubBytes(free_host_, unheld.host_bytes)));
    }
    if (job.pinned_bytes > unheld.pinned_bytes) {
      parts.push_back(MemoryReason("pinned memory", job.pinned_bytes, unheld.pinned_bytes,
                                   SubBytes(free_pinned_, unheld.pinned_bytes)));
    }
    return absl::StrJoin(parts, "; ");
  }

  static std::string MemoryReason(absl::string_view what, int64_t need, int64_t unheld,
                                  int64_t held) {
    return absl::StrCat(
        what, ": needs ", FormatSize(need), ", ", FormatSize(unheld), " free",
        held > 0 ? absl::StrCat(" (", FormatSize(held), " more held for jobs ahead)") : "");
  }

  std::string GpuReason(const JobRequest& job, int need, int have) const {
    std::vector<int> used, held, small;
    for (int g : node_.allowed_gpus) {
      if (busy_[g]) {
        used.push_back(g);
      } else if (!held_by_[g].empty()) {
        held.push_back(g);
      } else if (!HasMemoryFor(node_.gpus[g], job.per_gpu_bytes)) {
        small.push_back(g);
      }
    }
    std::sort(used.begin(), used.end());
    std::sort(held.begin(), held.end());
    std::sort(small.begin(), small.end());
    std::vector<std::string> why = GroupByOwner(used, user_of_, "used by");
    for (std::string& s : GroupByOwner(held, held_by_, "held for")) why.push_back(std::move(s));
    if (!small.empty()) {
      why.push_back(absl::StrCat(FormatGpus(small), " too small for ",
                                 FormatSize(job.per_gpu_bytes), " per GPU"));
    }
    const std::string wanted = job.gpus == 0 ? std::string("a free GPU") : GpuCount(need);
    return absl::StrCat("waiting for ", wanted, ": ", have, " free",
                        why.empty() ? "" : absl::StrCat(" (", absl::StrJoin(why, "; "), ")"));
  }

  // The job fits the free resources but not what is left after the holds: name the first job
  // ahead whose hold makes the difference.
  std::string BehindReason(const JobRequest& job) const {
    Supply s = FreeSupply();
    const Hold* blocker = holds_.empty() ? nullptr : &holds_.back();
    for (const Hold& h : holds_) {
      for (int g : h.gpus) s.gpu[g] = false;
      s.host_bytes = SubBytes(s.host_bytes, h.host_bytes);
      s.pinned_bytes = SubBytes(s.pinned_bytes, h.pinned_bytes);
      if (!Fits(job, s)) {
        blocker = &h;
        break;
      }
    }
    if (blocker == nullptr) return "behind jobs ahead in the queue";  // unreachable by rule 6
    std::vector<std::string> held;
    if (!blocker->gpus.empty()) held.push_back(FormatGpus(blocker->gpus));
    if (blocker->host_bytes > 0) {
      held.push_back(absl::StrCat(FormatSize(blocker->host_bytes), " host memory"));
    }
    if (blocker->pinned_bytes > 0) {
      held.push_back(absl::StrCat(FormatSize(blocker->pinned_bytes), " pinned memory"));
    }
    const bool higher = blocker->priority > job.priority;
    const bool share = !higher && blocker->order_score > job.order_score;
    return absl::StrCat("behind ",
                        higher  ? "higher-priority"
                        : share ? "fair-share-ahead"
                                : "earlier",
                        " job ", blocker->job_id,
                        higher  ? ""
                        : share ? " of the same priority (its user has used less lately)"
                                : " of the same priority",
                        " (held for it: ", absl::StrJoin(held, ", "), ")");
  }

  // Resources of `victims` added to the unheld supply.
  Supply WithVictims(const std::vector<const RunningJob*>& victims) const {
    Supply s = UnheldSupply();
    for (const RunningJob* v : victims) {
      for (int g : v->gpus) s.gpu[g] = allowed_[g];
      s.host_bytes = AddBytes(s.host_bytes, v->host_bytes);
      s.pinned_bytes = AddBytes(s.pinned_bytes, v->pinned_bytes);
    }
    return s;
  }

  // Policy rule 7. Returns the reason prefix, or "" when preempting cannot make the job fit.
  std::string Preempt(const JobRequest& job, ScheduleResult* out) const {
    std::vector<const RunningJob*> victims;
    bool fits = false;
    for (const RunningJob& r : victims_order_) {
      if (r.priority >= job.priority) continue;
      victims.push_back(&r);
      if (Fits(job, WithVictims(victims))) {
        fits = true;
        break;
      }
    }
    if (!fits) return "";
    for (int i = static_cast<int>(victims.size()) - 1; i >= 0; --i) {
      std::vector<const RunningJob*> without = victims;
      without.erase(without.begin() + i);
      if (Fits(job, WithVictims(without))) victims = std::move(without);
    }
    PreemptDecision d;
    d.job_id = job.job_id;
    std::vector<std::string> names;
    for (const RunningJob* v : victims) {
      if (!v->preempting) d.victims.push_back(v->job_id);
      names.push_back(absl::StrCat(v->job_id, " (priority ", v->priority, ", ",
                                   v->gpus.empty() ? "no GPUs" : FormatGpus(v->gpus), ")"));
    }
    if (!d.victims.empty()) out->preempt.push_back(std::move(d));
    return absl::StrCat("preempting lower-priority ", victims.size() == 1 ? "job " : "jobs ",
                        absl::StrJoin(names, ", "), ": waiting for ",
                        victims.size() == 1 ? "it" : "them", " to checkpoint and stop");
  }

  const NodeResources& node_;
  const Quotas& quotas_;
  const SchedulerOptions& options_;
  std::vector<bool> allowed_;
  std::vector<bool> busy_;            // held by a running job or one started this round
  std::vector<std::string> user_of_;  // that job's id
  std::vector<std::string> held_by_;  // waiting job the GPU is held for; "" = none
  int64_t free_host_ = 0;             // node budget - running - started (may be negative)
  int64_t free_pinned_ = 0;
  int64_t unheld_host_ = 0;  // free - held
  int64_t unheld_pinned_ = 0;
  std::map<uint32_t, int> user_jobs_;  // running + started jobs per uid
  std::map<uint32_t, int> user_gpus_;  // their GPUs
  std::map<uint32_t, int> held_jobs_;  // waiting jobs holding resources, per uid
  std::map<uint32_t, int> held_gpus_;  // the GPUs they need (quota held for them)
  std::map<uint32_t, int64_t> user_host_;  // host bytes of running + started jobs per uid
  std::map<uint32_t, int64_t> held_host_;  // host bytes of waiting jobs holding quota
  std::vector<Hold> holds_;            // in queue order
  std::vector<RunningJob> victims_order_;
  bool head_seen_ = false;  // a job ahead already waits for resources
};

}  // namespace

const char* PendingCauseName(PendingCause cause) {
  switch (cause) {
    case PendingCause::kDraining:
      return "draining";
    case PendingCause::kNeverFits:
      return "never_fits";
    case PendingCause::kQuota:
      return "quota";
    case PendingCause::kResources:
      return "resources";
    case PendingCause::kBehind:
      return "behind";
    case PendingCause::kPreempting:
      return "preempting";
  }
  return "unknown";
}

std::string DescribeSchedule(const ScheduleResult& result) {
  std::string out;
  for (const StartDecision& d : result.start) {
    absl::StrAppend(&out, "start ", d.job_id, " on ", FormatGpus(d.gpus));
    if (!d.numa_nodes.empty()) {
      absl::StrAppend(&out, " (NUMA ", absl::StrJoin(d.numa_nodes, ","), ")");
    }
    out += "\n";
  }
  for (const PreemptDecision& p : result.preempt) {
    absl::StrAppend(&out, "preempt ", absl::StrJoin(p.victims, ", "), " for ", p.job_id, "\n");
  }
  for (const QueuedDecision& q : result.queued) {
    absl::StrAppend(&out, "queued ", q.position, " ", q.job_id, " [", PendingCauseName(q.cause),
                    "] ", q.reason, "\n");
  }
  return out;
}

absl::StatusOr<ScheduleResult> Scheduler::Schedule(const NodeResources& node,
                                                   const std::vector<RunningJob>& running,
                                                   const std::vector<JobRequest>& queued,
                                                   const Quotas& quotas) const {
  MOBIUS_RETURN_IF_ERROR(ValidateNode(node));
  MOBIUS_RETURN_IF_ERROR(ValidateJobs(node, running, queued));
  MOBIUS_RETURN_IF_ERROR(ValidateQuotas(quotas));
  std::vector<const JobRequest*> order;
  order.reserve(queued.size());
  for (const JobRequest& j : queued) order.push_back(&j);
  std::sort(order.begin(), order.end(), [](const JobRequest* a, const JobRequest* b) {
    if (a->priority != b->priority) return a->priority > b->priority;
    if (a->order_score != b->order_score) return a->order_score > b->order_score;
    if (a->submit_seq != b->submit_seq) return a->submit_seq < b->submit_seq;
    return a->job_id < b->job_id;
  });
  ScheduleResult result;
  Round round(node, running, quotas, options_);
  for (const JobRequest* job : order) round.Place(*job, &result);
  return result;
}

}  // namespace mobius::jobs
