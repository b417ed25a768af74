#include "common/inspect/launch_checks.h"

#include <sys/stat.h>

#include <cerrno>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/data/loader.h"
#include "common/data/token_file.h"
#include "common/errors.h"
#include "common/model/model_config_parse.h"
#include "common/run/checkpoint_dirs.h"
#include "common/run/store_layout.h"
#include "common/status_macros.h"

namespace mobius::runtime {
namespace {

// NOT_FOUND / PERMISSION_DENIED / ... with the system error, or INVALID_ARGUMENT for a directory
// or device, each naming `field` and `path`.
absl::Status CheckRegularFile(const char* field, const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    return ErrnoError(errno, absl::StrCat(field, ": ", path), __FILE__, __LINE__);
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", path, " is not a regular file"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateLaunch(const RunConfig& run) {
  const train::TrainerOptions& o = run.training;
  MOBIUS_RETURN_IF_ERROR(CheckRegularFile("training.model_dir", o.model_dir + "/config.json"));
  MOBIUS_ASSIGN_OR_RETURN(model::ModelConfig config, model::LoadModelConfig(o.model_dir));
  RunConfig probe = run;
  if (probe.store_path.empty()) probe.store_path.push_back('-');  // any non-empty value
  train::TrainerOptions& po = probe.training;
  po.microbatch = po.EffectiveMicrobatch();
  MOBIUS_ASSIGN_OR_RETURN(StoreLayout layout, MakeStoreLayout(config, probe));
  (void)layout;
  MOBIUS_RETURN_IF_ERROR(CheckRegularFile("training.data_path", o.data_path));
  std::unique_ptr<data::TokenFile> file;
  if (o.data_raw_bytes != 0) {
    MOBIUS_ASSIGN_OR_RETURN(
        file, data::TokenFile::OpenRaw(o.data_path, o.data_raw_bytes, config.vocab_size));
  } else {
    MOBIUS_ASSIGN_OR_RETURN(file, data::TokenFile::Open(o.data_path));
  }
  auto loader = data::TokenLoader::Create(
      std::shared_ptr<const data::TokenFile>(std::move(file)),
      {.seq_len = o.seq, .batch_size = o.batch, .seed = o.seed, .eval_fraction = o.eval_fraction});
  if (!loader.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("training.data_path: ", o.data_path, ": ", loader.status().message()));
  }
  if (o.resume && !checkpoint::LatestCheckpoint(o.checkpoint_dir).ok()) {
    return absl::NotFoundError(
        absl::StrCat("resume: no complete checkpoint in ", o.checkpoint_dir));
  }
  return absl::OkStatus();
}

}  // namespace mobius::runtime
