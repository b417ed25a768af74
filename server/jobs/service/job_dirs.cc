#include "server/jobs/service/job_dirs.h"

#include "absl/strings/str_cat.h"
#include "server/jobs/service/state_dirs.h"

namespace mobius::jobs {

std::string JobDir(const JobManagerOptions& options, const JobRecord& job) {
  return absl::StrCat(options.state_dir, "/jobs/", job.id);
}

std::string JobCheckpointDir(const JobManagerOptions& options, const JobRecord& job,
                             const jobspec::JobSpec& spec) {
  if (!spec.checkpoint.dir.empty()) return spec.checkpoint.dir;
  return DefaultCheckpointDir(options.state_dir, job.uid, job.id);
}

}  // namespace mobius::jobs
