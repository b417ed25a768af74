// Where a job's files live: its directory under the state directory (run configs, the default
// checkpoints) and its checkpoint directory. The one place that decides these paths: the
// supervisor runs the job there and the manager looks there for its completion record at start-up
// (job_manager.h), so the two cannot drift apart.
//
// Thread-safety: pure functions.
#ifndef MOBIUS_SERVER_JOBS_SERVICE_JOB_DIRS_H_
#define MOBIUS_SERVER_JOBS_SERVICE_JOB_DIRS_H_

#include <string>

#include "common/jobspec/spec.h"
#include "server/jobs/service/job_manager.h"
#include "server/jobs/store/job_types.h"

namespace mobius::jobs {

// STATE_DIR/jobs/<id>: the daemon's record of the job's runs (run-<restarts>/).
std::string JobDir(const JobManagerOptions& options, const JobRecord& job);

// The job's checkpoint directory: the spec's checkpoint.dir, or the default in its user's part of
// the state directory (state_dirs.h, DefaultCheckpointDir) when the spec names none. The
// completion record (common/run/completion_record.h) is written there too.
std::string JobCheckpointDir(const JobManagerOptions& options, const JobRecord& job,
                             const jobspec::JobSpec& spec);

}  // namespace mobius::jobs

#endif  // MOBIUS_SERVER_JOBS_SERVICE_JOB_DIRS_H_
