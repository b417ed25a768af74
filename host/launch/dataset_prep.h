// Text datasets -> token files before a run: the daemon's supervisor and `mobius run` call
// PrepareDataset for every spec whose dataset.format is not "tokens".
//
// The work runs in `mobius-worker tokenize fd:3` as the job's user (worker/data/tokenize_verb.h), a child
// process: SentencePiece cannot share a process with gRPC's protobuf, and a tokenizer crash must
// not take the daemon down. The result is cached in `cache_dir` under a key of everything that
// determines it (each input's path, size, mtime and inode; the tokenizer files' and the model
// config's; the format and fields; the cache version): resubmitting a job, restarting it, or
// another job on the same files reuses the token file. A changed input gets a new key (old
// entries stay until someone removes them; nothing reads a half-written entry: the token file
// is renamed into place, and the descriptor written after it is what makes an entry count).
//
// The end-of-document token is the model's (model_dir's config.json eos_token_id), else the
// tokenizer's own.
//
// Thread-safe: concurrent calls for the same dataset both tokenize and write the same bytes.
#ifndef MOBIUS_HOST_LAUNCH_DATASET_PREP_H_
#define MOBIUS_HOST_LAUNCH_DATASET_PREP_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/jobspec/spec.h"
#include "common/os/identity.h"
#include "common/data/tokenize_job.h"

namespace mobius::launch {

struct DatasetPrepOptions {
  std::string worker_binary;  // mobius-worker
  std::string cache_dir;      // created (0700) when missing, unless `identity` is given
  // The tokenizer runs as this user (the job's submitter) with this umask; unset: as this process.
  std::optional<Identity> identity;
  int umask = 077;
  // From the job's check child (common/inspect/inspection.h), run as its user: the dataset's
  // descriptor and the cached token file it found ("" : none). With a descriptor this process
  // reads none of the dataset's files, nor the cache; with an identity the cache directory must
  // exist (the daemon makes it, owned by the user: state_dirs.h).
  std::string descriptor;
  std::string cached_token_file;
  int threads = 0;            // tokenizer threads; 0: all cores
  // Progress and the tokenizer's stderr lines (called on the calling thread).
  std::function<void(const std::string&)> on_log;
  // Polled every ~100 ms while the tokenizer runs; a non-OK status kills it and is returned
  // (e.g. CANCELLED for a cancelled job, ABORTED for a daemon shutdown).
  std::function<absl::Status()> interrupted;
};

struct PreparedDataset {
  std::string token_file;
  bool reused = false;            // found in the cache; `summary` is then empty
  data::TokenizeSummary summary;  // when tokenized now
};

// For format "tokens": the spec's path as is. Otherwise the cached or freshly written token file.
// Errors: INVALID_ARGUMENT with the tokenizer's message (bad lines with file:line, bad tokenizer,
// no EOS), NOT_FOUND for missing files, INTERNAL when the tokenizer process cannot run or dies,
// or what `interrupted` returned.
absl::StatusOr<PreparedDataset> PrepareDataset(const jobspec::JobSpec& spec,
                                               const DatasetPrepOptions& options);

// Runs one request in `mobius-worker tokenize fd:3` (the request in a sealed memory file), as
// options.identity. Errors as PrepareDataset's.
absl::StatusOr<data::TokenizeSummary> RunTokenizeProcess(const data::TokenizeRequest& request,
                                                         const DatasetPrepOptions& options);

// `spec` training on `token_file` instead of its text dataset (format "tokens"; the text fields
// reset to their defaults; eval_fraction kept).
jobspec::JobSpec WithTokenFile(jobspec::JobSpec spec, const std::string& token_file);

}  // namespace mobius::launch

#endif  // MOBIUS_HOST_LAUNCH_DATASET_PREP_H_
