#include "host/scheduler/reason_format.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "host/topology/render.h"

namespace mobius::jobs {

std::string FormatSize(int64_t bytes) {
  return topology::FormatBytes(bytes < 0 ? 0 : static_cast<uint64_t>(bytes));
}

std::string FormatGpuIndices(const std::vector<int>& gpus) { return absl::StrJoin(gpus, ","); }

std::string FormatGpus(const std::vector<int>& gpus) {
  return absl::StrCat(gpus.size() == 1 ? "GPU " : "GPUs ", FormatGpuIndices(gpus));
}

}  // namespace mobius::jobs
