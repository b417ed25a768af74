// The training schedules, as one type shared by the job spec, the planner and its simulator, the
// run config and the pipeline runtime. What differs between schedules is said once, here, as
// traits; code asks a trait (does this schedule keep weights resident?), never compares names.
//
//   mobius      the paper's: one partition for both passes, stage s bound to rank s mod N, each
//               GPU swapping its stages through two weight slots; optimizer on the CPU.
//   roundrobin  RoundPipe's: separate forward and backward partitions, passes dealt round-robin
//               over the GPUs (not bound to ranks).
//   resident    no swapping: one stage per GPU, its weights and optimizer state kept there.
//   zero        ZeRO-3-offload (data parallel), a planner baseline only: the runtime does not run it.
//
// Names are the spec's and the run config's JSON values. Pure; thread-safe.
#ifndef MOBIUS_COMMON_RUN_SCHEDULE_H_
#define MOBIUS_COMMON_RUN_SCHEDULE_H_

#include <array>
#include <string_view>

#include "absl/status/statusor.h"

namespace mobius::runtime {

enum class Schedule { kMobius, kRoundRobin, kResident, kZeroOffload };

inline constexpr std::array<Schedule, 4> kAllSchedules = {
    Schedule::kMobius, Schedule::kRoundRobin, Schedule::kResident, Schedule::kZeroOffload};

struct ScheduleTraits {
  const char* name;  // "mobius", "roundrobin", "resident", "zero"
  // Forward and backward have partitions of their own (RunConfig forward_stages /
  // backward_stages / pass_rank); else one partition (stages / stage_rank) serves both passes.
  bool separate_pass_partitions;
  // Every stage stays on its GPU with its optimizer state (S == number of GPUs, no swapping).
  bool weights_resident;
  // The pipeline runtime (mobius-worker run) executes it; else it is a planner baseline only.
  bool runs_on_pipeline_runtime;
  // A user's stage count (plan.stages) is the planner's to honour; resident and zero have theirs
  // fixed by the GPU count and the layer granularity.
  bool takes_stage_count;
  // The optimizer steps on the host (the CPU AdamW, its staleness and the fp16 loss scaler with
  // it); else on the GPU, synchronously.
  bool optimizer_on_host;
  // Any GPU may run any pass (plan.dispatch pool: the next free GPU); else stages are bound.
  bool passes_dispatchable;
  // LoRA adapters train under it.
  bool trains_adapters;
};

const ScheduleTraits& Traits(Schedule schedule);
inline const char* ScheduleName(Schedule schedule) { return Traits(schedule).name; }

// INVALID_ARGUMENT naming the value and the valid names.
absl::StatusOr<Schedule> ParseSchedule(std::string_view name);

// The traits of a schedule named in a spec, plan options or a flag (validated elsewhere); an
// unknown name ("auto", a typo) has none: nullptr.
const ScheduleTraits* TraitsOfName(std::string_view name);

}  // namespace mobius::runtime

#endif  // MOBIUS_COMMON_RUN_SCHEDULE_H_
