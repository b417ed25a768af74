#include "common/jobspec/validate.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/jobspec/utf8.h"
#include "common/run/schedule.h"

namespace mobius::jobspec {
namespace {

// A string value for a message: quoted, escaped, at most ~60 characters.
std::string Quote(const std::string& s) {
  std::string shown = s.size() > 60 ? s.substr(0, 57) + "..." : s;
  return absl::StrCat("\"", absl::CHexEscape(shown), "\"");
}

template <size_t N>
std::string OneOf(const std::array<std::string_view, N>& values) {
  std::string out;
  for (std::string_view v : values) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", absl::string_view(v.data(), v.size()));
  }
  return out;
}

template <size_t N>
bool Contains(const std::array<std::string_view, N>& values, const std::string& s) {
  return std::find(values.begin(), values.end(), std::string_view(s)) != values.end();
}

bool IsUtf8(const std::string& s) { return internal::IsUtf8(s); }

bool HasControl(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7F;
  });
}

std::string ErrnoText(int e) { return std::strerror(e); }

class Checker {
 public:
  explicit Checker(const ValidateOptions& options) : options_(options) {}

  void Add(std::string field, std::string message) {
    errors_.push_back({std::move(field), std::move(message)});
  }
  std::vector<FieldError> Take() { return std::move(errors_); }

  template <typename T>
  bool Range(const std::string& field, T value, T lo, T hi, absl::string_view note = "") {
    if (value >= lo && value <= hi) return true;
    Add(field, absl::StrCat("must be in [", lo, ", ", hi, "]", note, " (got ", value, ")"));
    return false;
  }

  // A finite number with lo <= x (or lo < x when lo_open) and x <= hi (or x < hi when hi_open).
  bool Number(const std::string& field, double x, double lo, bool lo_open, double hi,
              bool hi_open) {
    const bool ok = std::isfinite(x) && (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
    if (ok) return true;
    std::string range;
    if (std::isinf(hi)) {
      range = absl::StrCat(lo_open ? "> " : ">= ", lo);
    } else {
      range = absl::StrCat("in ", lo_open ? "(" : "[", lo, ", ", hi, hi_open ? ")" : "]");
    }
    Add(field, absl::StrCat("must be a finite number ", range, " (got ", x, ")"));
    return false;
  }

  template <size_t N>
  void Enum(const std::string& field, const std::string& value,
            const std::array<std::string_view, N>& allowed) {
    if (Contains(allowed, value)) return;
    Add(field, absl::StrCat("must be one of ", OneOf(allowed), " (got ", Quote(value), ")"));
  }

  // Text that can travel in a proto and be printed: UTF-8 without control characters.
  bool Text(const std::string& field, const std::string& value) {
    if (!IsUtf8(value)) {
      Add(field, absl::StrCat("must be valid UTF-8 (got ", Quote(value), ")"));
      return false;
    }
    if (HasControl(value)) {
      Add(field, absl::StrCat("must not contain control characters (got ", Quote(value), ")"));
      return false;
    }
    return true;
  }

  // A path; true when it is well-formed enough to look at the file system.
  bool Path(const std::string& field, const std::string& path, bool required) {
    if (path.empty()) {
      if (required) Add(field, "required (a path)");
      return false;
    }
    if (path.size() > static_cast<size_t>(kMaxPathLength)) {
      Add(field, absl::StrCat("longer than ", kMaxPathLength, " bytes (got ", path.size(), ")"));
      return false;
    }
    if (!Text(field, path)) return false;
    if (options_.require_absolute_paths && path.front() != '/') {
      Add(field, absl::StrCat("must be an absolute path (got ", Quote(path), ")"));
      return false;
    }
    return true;
  }

  const ValidateOptions& options() const { return options_; }

 private:
  const ValidateOptions& options_;
  std::vector<FieldError> errors_;
};

void CheckName(const JobSpec& s, Checker& c) {
  if (s.name.empty()) return;
  const bool chars_ok = std::all_of(s.name.begin(), s.name.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' ||
           ch == '-';
  });
  if (!chars_ok) {
    c.Add("name", absl::StrCat("may contain only a-z, 0-9, '.', '_' and '-' (got ",
                               Quote(s.name), ")"));
  } else if (s.name.size() > static_cast<size_t>(kMaxNameLength)) {
    c.Add("name", absl::StrCat("longer than ", kMaxNameLength, " characters (got ", s.name.size(),
                               ")"));
  }
}

// A POSIX group name ([A-Za-z_][A-Za-z0-9_.-]*, at most 32) or a numeric gid; whether the
// submitter is in it is checked as the submitter (common/inspect/inspection.h).
void CheckGroupName(const std::string& group, Checker& c) {
  if (group.empty()) return;
  const bool numeric = std::all_of(group.begin(), group.end(),
                                   [](char ch) { return ch >= '0' && ch <= '9'; });
  const bool name_ok =
      (std::isalpha(static_cast<unsigned char>(group[0])) || group[0] == '_') &&
      std::all_of(group.begin(), group.end(), [](char ch) {
        return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.' || ch == '-';
      });
  if (group.size() > 32 || !(numeric || name_ok)) {
    c.Add("checkpoint.group", absl::StrCat("not a group name or gid (got ", Quote(group), ")"));
  }
}

void CheckLabels(const JobSpec& s, Checker& c) {
  if (s.labels.size() > static_cast<size_t>(kMaxLabels)) {
    c.Add("labels", absl::StrCat("at most ", kMaxLabels, " labels (got ", s.labels.size(), ")"));
  }
  for (const auto& [key, value] : s.labels) {
    const std::string field = absl::StrCat("labels.", key);
    const bool key_ok =
        !key.empty() && key.size() <= static_cast<size_t>(kMaxLabelKeyLength) &&
        std::all_of(key.begin(), key.end(), [](char ch) {
          return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                 (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-' || ch == '/';
        });
    if (!key_ok) {
      c.Add(!key.empty() && IsUtf8(key) && !HasControl(key) ? field : "labels",
            absl::StrCat("label keys are 1-", kMaxLabelKeyLength,
                         " characters of A-Z, a-z, 0-9, '.', '_', '-', '/' (got ", Quote(key),
                         ")"));
      continue;
    }
    if (value.size() > static_cast<size_t>(kMaxLabelValueLength)) {
      c.Add(field, absl::StrCat("longer than ", kMaxLabelValueLength, " bytes (got ",
                                value.size(), ")"));
    } else {
      c.Text(field, value);
    }
  }
}

// The file-system checks of the server side (check_files_exist).
void CheckModelDirFiles(const std::string& dir, Checker& c) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    c.Add("model_dir", absl::StrCat("cannot access ", Quote(dir), " (", ErrnoText(errno), ")"));
    return;
  }
  if (!S_ISDIR(st.st_mode)) {
    c.Add("model_dir", absl::StrCat("not a directory (got ", Quote(dir), ")"));
    return;
  }
  const std::string config = dir + "/config.json";
  const int fd = open(config.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    c.Add("model_dir", absl::StrCat("no readable config.json in ", Quote(dir), " (",
                                    ErrnoText(errno), ")"));
    return;
  }
  close(fd);
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    c.Add("model_dir", absl::StrCat("cannot list ", Quote(dir), " (", ErrnoText(errno), ")"));
    return;
  }
  bool weights = false;
  while (dirent* e = readdir(d)) {
    const std::string_view name(e->d_name);
    if (name.size() > 12 && name.substr(name.size() - 12) == ".safetensors") weights = true;
  }
  closedir(d);
  if (!weights) c.Add("model_dir", absl::StrCat("no *.safetensors files in ", Quote(dir)));
}

void CheckDatasetFile(const std::string& field, const std::string& path, const std::string& format,
                      Checker& c) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    c.Add(field, absl::StrCat("cannot read ", Quote(path), " (", ErrnoText(errno), ")"));
    return;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    c.Add(field, absl::StrCat("not a regular file (got ", Quote(path), ")"));
  } else if (format == "tokens") {
    char magic[8] = {};
    if (pread(fd, magic, sizeof(magic), 0) != sizeof(magic) || std::memcmp(magic, "MOBTOKv1", 8)) {
      c.Add(field, absl::StrCat("not a Mobius token file (no MOBTOKv1 header): ", Quote(path),
                                "; for raw text set dataset.format to jsonl, prompt_completion, "
                                "chat or text"));
    }
  }
  close(fd);
}

void CheckTokenizerDir(const std::string& dir, bool defaulted, Checker& c) {
  struct stat st;
  if (stat(dir.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return;  // the file itself
  for (const char* file : {"/tokenizer.json", "/tokenizer.model"}) {
    if (stat((dir + file).c_str(), &st) == 0 && S_ISREG(st.st_mode)) return;
  }
  c.Add("dataset.tokenizer",
        absl::StrCat("no tokenizer.json or tokenizer.model in ", Quote(dir),
                     defaulted ? " (the tokenizer defaults to model_dir)" : ""));
}

// A JSON field name of the dataset's lines: non-empty printable text.
void FieldName(const std::string& field, const std::string& value, Checker& c) {
  if (value.empty()) {
    c.Add(field, "must not be empty (the JSON key to read)");
  } else if (value.size() > static_cast<size_t>(kMaxFieldNameLength)) {
    c.Add(field, absl::StrCat("longer than ", kMaxFieldNameLength, " bytes (got ", value.size(),
                              ")"));
  } else {
    c.Text(field, value);
  }
}

void CheckDataset(const JobSpec& s, Checker& c) {
  const DatasetSpec& ds = s.dataset;
  c.Enum("dataset.format", ds.format, kDatasetFormats);
  const bool text_format = IsTextFormat(ds.format);
  // The files: `path` or `paths`, each well-formed; (field, path) of those worth opening.
  std::vector<std::pair<std::string, std::string>> files;
  if (!ds.path.empty() && !ds.paths.empty()) {
    c.Add("dataset.paths", "set only one of dataset.path and dataset.paths");
  } else if (ds.paths.empty()) {
    if (c.Path("dataset.path", ds.path, /*required=*/true)) files.push_back({"dataset.path", ds.path});
  } else if (ds.paths.size() > static_cast<size_t>(kMaxDatasetFiles)) {
    c.Add("dataset.paths", absl::StrCat("at most ", kMaxDatasetFiles, " files (got ",
                                        ds.paths.size(), ")"));
  } else if (ds.format == "tokens" && ds.paths.size() > 1) {
    c.Add("dataset.paths", absl::StrCat("a token dataset is one file (got ", ds.paths.size(),
                                        "); set dataset.path"));
  } else {
    for (size_t i = 0; i < ds.paths.size(); ++i) {
      const std::string field = absl::StrCat("dataset.paths[", i, "]");
      if (c.Path(field, ds.paths[i], /*required=*/true)) files.push_back({field, ds.paths[i]});
    }
  }
  bool tokenizer_ok = false;
  if (!ds.tokenizer.empty() && !text_format) {
    c.Add("dataset.tokenizer",
          "only for text datasets (jsonl, prompt_completion, chat, text); a token file is already "
          "tokenized");
  } else if (!ds.tokenizer.empty()) {
    tokenizer_ok = c.Path("dataset.tokenizer", ds.tokenizer, false);
  }
  FieldName("dataset.text_field", ds.text_field, c);
  FieldName("dataset.prompt_field", ds.prompt_field, c);
  FieldName("dataset.completion_field", ds.completion_field, c);
  FieldName("dataset.messages_field", ds.messages_field, c);
  if (!Contains(kChatTemplates, ds.chat_template) &&
      !(absl::StartsWith(ds.chat_template, "model:") && ds.chat_template.size() > 6 &&
        c.Text("dataset.chat_template", ds.chat_template))) {
    c.Add("dataset.chat_template",
          absl::StrCat("must be model, model:NAME, chatml or plain, or absent for the model's "
                       "own template (got ", Quote(ds.chat_template), ")"));
  }
  if (!ds.chat_template_kwargs.empty() &&
      (ds.format != "chat" || ds.chat_template == "chatml" || ds.chat_template == "plain")) {
    c.Add("dataset.chat_template_kwargs", "only for a chat dataset with the model's template");
  }
  c.Number("dataset.eval_fraction", ds.eval_fraction, 0, false, 0.5, false);
  if (!c.options().check_files_exist) return;
  if (Contains(kDatasetFormats, ds.format)) {
    for (const auto& [field, path] : files) CheckDatasetFile(field, path, ds.format, c);
  }
  if (tokenizer_ok) {
    CheckTokenizerDir(ds.tokenizer, false, c);
  } else if (text_format && ds.tokenizer.empty() && !s.model_dir.empty()) {
    // model_dir's own problems are reported under model_dir; this names only the tokenizer.
    struct stat st;
    if (stat(s.model_dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      CheckTokenizerDir(s.model_dir, true, c);
    }
  }
}

void CheckTraining(const JobSpec& s, Checker& c) {
  const TrainingSpec& t = s.training;
  if (t.steps < 0) c.Add("training.steps", absl::StrCat("must be >= 0 (got ", t.steps, ")"));
  if (t.epochs < 0) c.Add("training.epochs", absl::StrCat("must be >= 0 (got ", t.epochs, ")"));
  if (t.steps == 0 && t.epochs == 0) {
    c.Add("training.steps", "required: set training.steps or training.epochs (> 0)");
  } else if (t.steps > 0 && t.epochs > 0) {
    c.Add("training.epochs", absl::StrCat("set only one of training.steps and training.epochs (got ",
                                          "steps ", t.steps, ", epochs ", t.epochs, ")"));
  }
  if (t.steps > 0) c.Range("training.steps", t.steps, int64_t{1}, kMaxSteps);
  if (t.epochs > 0) c.Range("training.epochs", t.epochs, int64_t{1}, kMaxEpochs);

  bool batch_ok = false;
  if (t.global_batch == 0) {
    c.Add("training.global_batch", "required (sequences per optimizer step, > 0)");
  } else {
    batch_ok = c.Range("training.global_batch", t.global_batch, int64_t{1}, kMaxGlobalBatch);
  }
  if (t.microbatch != 0 &&
      c.Range("training.microbatch", t.microbatch, int64_t{1}, kMaxGlobalBatch, "; 0 means global_batch") &&
      batch_ok && t.global_batch % t.microbatch != 0) {
    c.Add("training.microbatch", absl::StrCat("must divide training.global_batch ",
                                              t.global_batch, " (got ", t.microbatch, ")"));
  }
  if (t.seq_len == 0) {
    c.Add("training.seq_len", "required (tokens per sequence, > 0)");
  } else {
    c.Range("training.seq_len", t.seq_len, int64_t{1}, kMaxSeqLen);
  }

  const double kInf = INFINITY;
  const bool lr_ok = c.Number("training.lr", t.lr, 0, true, kInf, false);
  if (c.Number("training.min_lr", t.min_lr, 0, false, kInf, false) && lr_ok && t.min_lr > t.lr) {
    c.Add("training.min_lr",
          absl::StrCat("must be <= training.lr ", t.lr, " (got ", t.min_lr, ")"));
  }
  if (c.Range("training.warmup_steps", t.warmup_steps, int64_t{0}, kMaxSteps) && t.steps > 0 &&
      t.warmup_steps > t.steps) {
    c.Add("training.warmup_steps", absl::StrCat("must be <= training.steps ", t.steps, " (got ",
                                                t.warmup_steps, ")"));
  }
  c.Enum("training.lr_schedule", t.lr_schedule, kLrSchedules);
  c.Enum("training.precision", t.precision, kPrecisions);
  const runtime::ScheduleTraits* schedule = runtime::TraitsOfName(s.plan.schedule);
  if (t.precision == "fp16" && schedule != nullptr && !schedule->optimizer_on_host) {
    c.Add("training.precision",
          "fp16 needs plan.schedule mobius or roundrobin (resident updates on the GPU, without a "
          "loss scaler)");
  }
  c.Number("training.weight_decay", t.weight_decay, 0, false, kInf, false);
  c.Number("training.grad_clip", t.grad_clip, 0, false, kInf, false);
  c.Number("training.beta1", t.beta1, 0, false, 1, true);
  c.Number("training.beta2", t.beta2, 0, false, 1, true);
  c.Number("training.eps", t.eps, 0, true, kInf, false);
  if (c.Range("training.optimizer_staleness", t.optimizer_staleness, int64_t{0}, int64_t{1},
              "; 1 overlaps each step's CPU optimizer with the next step") &&
      t.optimizer_staleness == 1 && schedule != nullptr && !schedule->optimizer_on_host) {
    c.Add("training.optimizer_staleness",
          "schedule resident updates on the GPU, synchronously; the staleness is for the host "
          "optimizer (plan.schedule mobius or roundrobin)");
  }
  if (c.Range("training.eval_every", t.eval_every, int64_t{0}, kMaxSteps) && t.eval_every > 0 &&
      s.dataset.eval_fraction == 0) {
    c.Add("training.eval_every",
          absl::StrCat("needs dataset.eval_fraction > 0: there is no eval split (got ",
                       t.eval_every, ")"));
  }
}

void CheckResourcesAndPlan(const JobSpec& s, Checker& c) {
  c.Range("resources.gpus", s.resources.gpus, 0, kMaxGpus, "; 0 means all free GPUs");
  const int64_t mem = s.resources.device_memory_bytes;
  if (mem < 0 || (mem > 0 && mem < (int64_t{1} << 20))) {
    c.Add("resources.device_memory_bytes",
          absl::StrCat("must be 0 (no cap) or at least 1MiB (got ", mem, ")"));
  }
  c.Enum("plan.schedule", s.plan.schedule, kSchedules);
  c.Enum("plan.partitioner", s.plan.partitioner, kPartitioners);
  c.Enum("plan.mapper", s.plan.mapper, kMappers);
  c.Range("plan.stages", s.plan.stages, 0, kMaxStages, "; 0 means the planner chooses");
  c.Enum("plan.dispatch", s.plan.dispatch, kDispatches);
  const runtime::ScheduleTraits* schedule = runtime::TraitsOfName(s.plan.schedule);
  if (s.plan.dispatch == "pool" && schedule != nullptr && !schedule->passes_dispatchable) {
    c.Add("plan.dispatch", absl::StrCat("pool hands the round-robin pass stream to the next free "
                                        "GPU; it needs plan.schedule roundrobin (got ",
                                        s.plan.schedule, ")"));
  }
}

// A PEFT adapter directory to start from (server side): adapter_config.json and
// adapter_model.safetensors, readable. Their contents are the engine's to check.
void CheckAdapterDir(const std::string& dir, Checker& c) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    c.Add("adapter.init_from",
          absl::StrCat("cannot access ", Quote(dir), " (", ErrnoText(errno), ")"));
    return;
  }
  if (!S_ISDIR(st.st_mode)) {
    c.Add("adapter.init_from", absl::StrCat("not a directory (got ", Quote(dir), ")"));
    return;
  }
  for (const char* file : {"adapter_config.json", "adapter_model.safetensors"}) {
    const std::string path = absl::StrCat(dir, "/", file);
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      c.Add("adapter.init_from", absl::StrCat("no readable ", file, " in ", Quote(dir), " (",
                                              ErrnoText(errno), "); a PEFT adapter directory "
                                              "has adapter_config.json and "
                                              "adapter_model.safetensors"));
      return;
    }
    close(fd);
  }
}

// A PEFT target_modules name: the last component of a module path, so letters, digits, '_' and
// '.' (no spaces, slashes or regular expressions).
bool IsModuleName(const std::string& name) {
  return !name.empty() && name.size() <= static_cast<size_t>(kMaxLoraTargetLength) &&
         std::all_of(name.begin(), name.end(), [](char ch) {
           return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.';
         });
}

// The `adapter` section's own rules; those that need the model (the family's module names,
// rank <= the smallest adapted dimension) are model::ValidateLora's, run by jobs::PlanJob.
void CheckAdapter(const JobSpec& s, Checker& c) {
  if (!s.adapter.has_value()) return;
  const AdapterSpec& a = *s.adapter;
  if (a.type.empty()) {
    c.Add("adapter.type", absl::StrCat("required in the adapter section (one of ",
                                       OneOf(kAdapterTypes), ")"));
  } else {
    c.Enum("adapter.type", a.type, kAdapterTypes);
  }
  c.Range("adapter.rank", a.rank, int64_t{1}, kMaxLoraRank);
  c.Number("adapter.alpha", a.alpha, 0, true, INFINITY, false);
  c.Number("adapter.dropout", a.dropout, 0, false, 1, true);
  if (a.target_modules.size() > static_cast<size_t>(kMaxLoraTargets)) {
    c.Add("adapter.target_modules", absl::StrCat("at most ", kMaxLoraTargets, " names (got ",
                                                 a.target_modules.size(), ")"));
  } else {
    for (size_t i = 0; i < a.target_modules.size(); ++i) {
      const std::string field = absl::StrCat("adapter.target_modules[", i, "]");
      const std::string& name = a.target_modules[i];
      if (!IsModuleName(name)) {
        c.Add(field, absl::StrCat("a module name is 1-", kMaxLoraTargetLength,
                                  " characters of A-Z, a-z, 0-9, '_' and '.' (got ", Quote(name),
                                  ")"));
        continue;
      }
      const auto first = std::find(a.target_modules.begin(), a.target_modules.begin() + i, name);
      if (first != a.target_modules.begin() + i) {
        c.Add(field, absl::StrCat(Quote(name), " is listed twice (also adapter.target_modules[",
                                  first - a.target_modules.begin(), "])"));
      }
    }
  }
  if (!a.base_quantization.empty()) {
    c.Enum("adapter.base_quantization", a.base_quantization, kBaseQuantizations);
  }
  if (c.Path("adapter.init_from", a.init_from, /*required=*/false) &&
      c.options().check_files_exist) {
    CheckAdapterDir(a.init_from, c);
  }
  if (const runtime::ScheduleTraits* t = runtime::TraitsOfName(s.plan.schedule);
      t != nullptr && !t->trains_adapters) {
    c.Add("adapter", absl::StrCat("schedule ", s.plan.schedule,
                                  " does not train adapters yet; use mobius or roundrobin"));
  }
  if (s.training.optimizer_staleness != 0) {
    c.Add("training.optimizer_staleness",
          "must be 0 with an adapter (the adapters' update is small: there is nothing to overlap)");
  }
}

}  // namespace

std::vector<FieldError> FindJobSpecErrors(const JobSpec& s, const ValidateOptions& options) {
  Checker c(options);
  CheckName(s, c);
  CheckLabels(s, c);
  c.Range("priority", s.priority, kMinPriority, kMaxPriority);
  if (c.Path("model_dir", s.model_dir, /*required=*/true) && options.check_files_exist) {
    CheckModelDirFiles(s.model_dir, c);
  }
  CheckDataset(s, c);
  CheckTraining(s, c);
  CheckResourcesAndPlan(s, c);
  c.Path("checkpoint.dir", s.checkpoint.dir, /*required=*/false);
  c.Range("checkpoint.every_steps", s.checkpoint.every_steps, int64_t{0}, kMaxSteps,
          "; 0 means only at the end");
  c.Range("checkpoint.keep_last", s.checkpoint.keep_last, 0, kMaxKeepLast, "; 0 keeps all");
  CheckGroupName(s.checkpoint.group, c);
  c.Range("max_restarts", s.max_restarts, 0, kMaxRestarts);
  CheckAdapter(s, c);
  return c.Take();
}

std::string FormatFieldErrors(const std::vector<FieldError>& errors) {
  return absl::StrJoin(errors, "\n", [](std::string* out, const FieldError& e) {
    absl::StrAppend(out, e.field, ": ", e.message);
  });
}

absl::Status ValidateJobSpec(const JobSpec& spec, const ValidateOptions& options) {
  std::vector<FieldError> errors = FindJobSpecErrors(spec, options);
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(FormatFieldErrors(errors));
}

}  // namespace mobius::jobspec
