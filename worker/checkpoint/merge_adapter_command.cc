#include "worker/checkpoint/merge_adapter_command.h"

#include <sys/prctl.h>

#include <csignal>
#include <iostream>
#include <nlohmann/json.hpp>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/init.h"
#include "glog/logging.h"
#include "worker/checkpoint/merge_adapter.h"
#include "worker/checkpoint/worker_flags.h"

namespace mobius::checkpoint {
namespace {

constexpr char kPrefix[] = "mobius-worker merge-adapter: ";

int Fail(const absl::Status& s) {
  std::cerr << kPrefix << s.message() << std::endl;
  const bool bad_input = absl::IsInvalidArgument(s) || absl::IsNotFound(s) ||
                         absl::IsAlreadyExists(s) || absl::IsPermissionDenied(s) ||
                         absl::IsFailedPrecondition(s);
  return bad_input ? 2 : 1;
}

}  // namespace

int RunMergeAdapterCommand(const std::vector<std::string>& args) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (args.size() != 2) {
    std::cerr << kPrefix << "unexpected positional arguments\nusage: " << kMergeAdapterUsage
              << std::endl;
    return 2;
  }
  MergeAdapterOptions o;
  o.adapter_dir = absl::GetFlag(FLAGS_adapter);
  o.out_dir = absl::GetFlag(FLAGS_out);
  o.base_dir = absl::GetFlag(FLAGS_base);
  o.max_shard_bytes = absl::GetFlag(FLAGS_max_shard_bytes);
  if (o.adapter_dir.empty() || o.out_dir.empty()) {
    std::cerr << kPrefix << "--adapter and --out are required\nusage: " << kMergeAdapterUsage
              << std::endl;
    return 2;
  }
  if (o.max_shard_bytes < 1) {
    return Fail(absl::InvalidArgumentError("--max_shard_bytes must be positive"));
  }
  const std::string dtype = absl::GetFlag(FLAGS_dtype);
  absl::StatusOr<std::optional<io::DType>> parsed = ParseMergeDType(dtype.empty() ? "auto" : dtype);
  if (!parsed.ok()) return Fail(parsed.status());
  o.dtype = *parsed;
  LOG(INFO) << "merge-adapter configuration:\n" << EffectiveFlags("worker/checkpoint/worker_flags");

  absl::StatusOr<MergeAdapterSummary> summary = MergeAdapter(o);
  if (!summary.ok()) return Fail(summary.status());
  for (const std::string& w : summary->warnings)
    std::cerr << kPrefix << "warning: " << w << std::endl;
  const nlohmann::json line = {{"out", o.out_dir},
                               {"base", summary->base_dir},
                               {"tensors", summary->tensors},
                               {"merged_modules", summary->merged_modules},
                               {"scaling", summary->scaling},
                               {"dtype", dtype.empty() ? "auto" : dtype},
                               {"files", summary->files},
                               {"largest_buffer_bytes", summary->largest_buffer_bytes}};
  std::cout << kMergedPrefix << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
            << std::endl;
  return 0;
}

}  // namespace mobius::checkpoint
