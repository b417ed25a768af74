#include "host/planner/api/choose_config.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/run/schedule.h"

namespace mobius::planner {

std::string ConfigCandidate::Label() const {
  return absl::StrCat(runtime::ScheduleName(schedule),
                      runtime::Traits(schedule).passes_dispatchable ? ", " + dispatch : "",
                      ", staleness ",
                      optimizer_staleness, ", microbatch ", microbatch, ", ", precision);
}

std::vector<int64_t> DefaultMicrobatches(int64_t global_batch, int64_t seq_len) {
  std::vector<int64_t> out;
  int64_t smallest = 0;
  for (int64_t mb = 1; mb <= global_batch; ++mb) {
    if (global_batch % mb != 0) continue;
    if (smallest == 0) smallest = mb;
    const int64_t tokens = mb * seq_len;
    if (tokens >= 1024 && tokens <= 32768) out.push_back(mb);
  }
  if (out.empty()) out.push_back(seq_len >= 1024 ? smallest : global_batch);
  return out;
}

absl::StatusOr<ConfigChoice> ChooseConfiguration(const model::ModelDescription& model,
                                                 const topology::Topology& topology,
                                                 const topology::TopologyFacts& facts,
                                                 const JobShape& job, const PlanOptions& options,
                                                 const ConfigSpace& space, int threads) {
  const bool lora = options.lora.enabled();
  const std::vector<runtime::Schedule> schedules =
      space.schedules.empty()
          ? std::vector<runtime::Schedule>{runtime::Schedule::kMobius,
                                           runtime::Schedule::kRoundRobin,
                                           runtime::Schedule::kResident}
          : space.schedules;
  std::vector<ConfigCandidate> all;
  for (const runtime::Schedule schedule : schedules) {
    const runtime::ScheduleTraits* traits = &runtime::Traits(schedule);
    // Pool dispatch only where asked for (its prediction is not validated: choose_config.h).
    std::vector<std::string> dispatches =
        space.dispatches.empty() ? std::vector<std::string>{"static"} : space.dispatches;
    std::vector<int> staleness = space.staleness.empty() ? std::vector<int>{0, 1} : space.staleness;
    if (space.staleness.empty() && (lora || !traits->optimizer_on_host)) {
      staleness = {0};  // adapters' updates are small; a GPU optimizer has no staleness
    }
    const std::vector<int64_t> microbatches =
        space.microbatches.empty() ? DefaultMicrobatches(job.global_batch, job.seq_len)
                                   : space.microbatches;
    const std::vector<std::string> precisions =
        space.precisions.empty() ? std::vector<std::string>{"bf16", "fp16"} : space.precisions;
    for (const std::string& dispatch : dispatches) {
      for (int s : staleness) {
        for (int64_t mb : microbatches) {
          for (const std::string& precision : precisions) {
            all.push_back({.schedule = schedule, .dispatch = dispatch, .optimizer_staleness = s,
                           .microbatch = mb, .precision = precision});
          }
        }
      }
    }
  }
  auto configure = [&](const ConfigCandidate& c, JobShape* j, PlanOptions* o) {
    *j = job;
    j->microbatch = c.microbatch;
    j->dtype = c.precision;
    j->fp16_accumulate = c.precision == "fp16";
    *o = options;
    o->schedule = c.schedule;
    o->dispatch = c.dispatch;
    o->optimizer_staleness = c.optimizer_staleness;
  };
  std::vector<absl::Status> errors(all.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < all.size(); i = next++) {
      JobShape j;
      PlanOptions o;
      configure(all[i], &j, &o);
      o.compare = false;
      o.trace = false;
      absl::StatusOr<PlanReport> r = MakePlan(model, topology, facts, j, o);
      if (r.ok()) {
        all[i].planned = true;
        all[i].step_seconds = r->step_seconds;
        all[i].tokens_per_second = r->tokens_per_second;
      } else {
        errors[i] = r.status();
        all[i].refusal = std::string(r.status().message());
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::max(threads, 1); ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();

  // Invalid combinations (pool without roundrobin, staleness with LoRA, ...) are not candidates;
  // an error that is neither a misfit nor a combination rule is the job's and comes back.
  std::vector<ConfigCandidate> kept;
  absl::Status first_misfit, first_invalid;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].planned) {
      kept.push_back(all[i]);
    } else if (absl::IsFailedPrecondition(errors[i])) {
      if (first_misfit.ok()) first_misfit = errors[i];
      kept.push_back(all[i]);
    } else if (first_invalid.ok()) {
      first_invalid = errors[i];
    }
  }
  std::stable_sort(kept.begin(), kept.end(), [](const ConfigCandidate& a, const ConfigCandidate& b) {
    if (a.planned != b.planned) return a.planned;
    return a.planned && a.tokens_per_second > b.tokens_per_second;
  });
  if (kept.empty() || !kept.front().planned) {
    if (!first_misfit.ok()) return first_misfit;
    return first_invalid.ok() ? absl::InvalidArgumentError("no configuration to choose from")
                              : first_invalid;
  }
  ConfigChoice choice;
  configure(kept.front(), &choice.job, &choice.options);
  absl::StatusOr<PlanReport> winner = MakePlan(model, topology, facts, choice.job, choice.options);
  if (!winner.ok()) return winner.status();
  choice.report = *std::move(winner);
  choice.candidates = std::move(kept);
  return choice;
}

}  // namespace mobius::planner
