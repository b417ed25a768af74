#include "common/run/checkpoint_dirs.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace mobius::checkpoint {
namespace {

namespace fs = std::filesystem;

constexpr char kDirPrefix[] = "checkpoint-";

// The step of a checkpoint directory name ("checkpoint-<digits>"), or -1.
int64_t StepOfName(const std::string& name) {
  if (name.rfind(kDirPrefix, 0) != 0) return -1;
  const std::string digits = name.substr(sizeof(kDirPrefix) - 1);
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return -1;
  int64_t step = 0;
  return absl::SimpleAtoi(digits, &step) ? step : -1;
}

}  // namespace

std::string CheckpointDirName(int64_t step) { return absl::StrFormat("%s%08d", kDirPrefix, step); }

std::vector<std::pair<int64_t, std::string>> CompleteCheckpoints(const std::string& root) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(root, ec)) {
    const int64_t step = StepOfName(entry.path().filename().string());
    if (step < 0 || !entry.is_directory(ec)) continue;
    if (access((entry.path() / "DONE").c_str(), F_OK) != 0) continue;
    found.emplace_back(step, entry.path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

absl::StatusOr<std::string> LatestCheckpoint(const std::string& root) {
  auto complete = CompleteCheckpoints(root);
  if (complete.empty()) {
    return absl::NotFoundError(absl::StrCat("no complete checkpoint under ", root));
  }
  return complete.back().second;
}

}  // namespace mobius::checkpoint
