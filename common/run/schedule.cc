#include "common/run/schedule.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace mobius::runtime {
namespace {

// In Schedule's order.
constexpr ScheduleTraits kTraits[] = {
    {.name = "mobius", .separate_pass_partitions = false, .weights_resident = false,
     .runs_on_pipeline_runtime = true, .takes_stage_count = true},
    {.name = "roundrobin", .separate_pass_partitions = true, .weights_resident = false,
     .runs_on_pipeline_runtime = true, .takes_stage_count = true},
    {.name = "resident", .separate_pass_partitions = false, .weights_resident = true,
     .runs_on_pipeline_runtime = true, .takes_stage_count = false},
    {.name = "zero", .separate_pass_partitions = false, .weights_resident = false,
     .runs_on_pipeline_runtime = false, .takes_stage_count = false},
};
static_assert(std::size(kTraits) == kAllSchedules.size());

}  // namespace

const ScheduleTraits& Traits(Schedule schedule) { return kTraits[static_cast<int>(schedule)]; }

absl::StatusOr<Schedule> ParseSchedule(std::string_view name) {
  for (Schedule s : kAllSchedules) {
    if (name == ScheduleName(s)) return s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown schedule '", std::string(name), "' (mobius, roundrobin, resident, zero)"));
}

}  // namespace mobius::runtime
