#include "common/run/schedule.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace mobius::runtime {
namespace {

// In Schedule's order.
constexpr ScheduleTraits kTraits[] = {
    {.name = "mobius", .separate_pass_partitions = false, .weights_resident = false,
     .runs_on_pipeline_runtime = true, .takes_stage_count = true, .optimizer_on_host = true,
     .passes_dispatchable = false, .trains_adapters = true},
    {.name = "roundrobin", .separate_pass_partitions = true, .weights_resident = false,
     .runs_on_pipeline_runtime = true, .takes_stage_count = true, .optimizer_on_host = true,
     .passes_dispatchable = true, .trains_adapters = true},
    {.name = "resident", .separate_pass_partitions = false, .weights_resident = true,
     .runs_on_pipeline_runtime = true, .takes_stage_count = false, .optimizer_on_host = false,
     .passes_dispatchable = false, .trains_adapters = false},
    {.name = "zero", .separate_pass_partitions = false, .weights_resident = false,
     .runs_on_pipeline_runtime = false, .takes_stage_count = false, .optimizer_on_host = true,
     .passes_dispatchable = false, .trains_adapters = false},
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

const ScheduleTraits* TraitsOfName(std::string_view name) {
  for (Schedule s : kAllSchedules) {
    if (name == ScheduleName(s)) return &Traits(s);
  }
  return nullptr;
}

}  // namespace mobius::runtime
