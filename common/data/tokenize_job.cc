#include "common/data/tokenize_job.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <sys/stat.h>

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "absl/strings/str_format.h"
#include "common/model/model_config_parse.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace mobius::data {
namespace {

// `text` into `path` through a temporary file in its directory (fsynced, renamed into place,
// no symlink followed at the temporary name).
absl::Status WriteTextAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = absl::StrCat(path, ".tmp-", getpid());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("write ", tmp));
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                  fsync(fd) == 0;
  const int saved = errno;
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    if (ok) errno = saved;
    absl::Status st = MOBIUS_ERRNO_ERROR(absl::StrCat("write ", path));
    unlink(tmp.c_str());
    return st;
  }
  return absl::OkStatus();
}

using json = nlohmann::json;

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Where a chat dataset's model template is looked for: the tokenizer's directory (its own, or the
// one holding its file), then the model directory (eos_source).
std::vector<std::string> TemplateDirs(const TokenizeRequest& r) {
  std::vector<std::string> dirs;
  if (IsDirectory(r.tokenizer)) {
    dirs.push_back(r.tokenizer);
  } else if (size_t slash = r.tokenizer.rfind('/'); slash != std::string::npos) {
    dirs.push_back(r.tokenizer.substr(0, slash));
  } else {
    dirs.push_back(".");
  }
  if (!r.eos_source.empty() && r.eos_source != dirs.front()) dirs.push_back(r.eos_source);
  return dirs;
}

// Reads `key` of `object` into `out` when present; a wrong type is an error naming the key.
template <typename T>
absl::Status Field(const json& object, const char* what, const char* key, T& out) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return absl::OkStatus();
  try {
    out = it->get<T>();
  } catch (const json::exception&) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", key, ": wrong type (got ", it->dump(), ")"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string DatasetFormatName(DatasetFormat format) {
  switch (format) {
    case DatasetFormat::kJsonlText: return "jsonl";
    case DatasetFormat::kJsonlPromptCompletion: return "prompt_completion";
    case DatasetFormat::kJsonlChat: return "chat";
    case DatasetFormat::kPlainText: return "text";
  }
  return "jsonl";
}

absl::StatusOr<int32_t> ResolveEosId(const TokenizeRequest& request, const Tokenizer& tokenizer) {
  int64_t eos = request.eos_id;
  if (eos < 0) {
    const std::string source = !request.eos_source.empty() ? request.eos_source
                               : IsDirectory(request.tokenizer) ? request.tokenizer
                                                                : "";
    if (!source.empty()) {
      absl::StatusOr<model::ModelConfig> config = model::LoadModelConfig(source);
      if (config.ok() && config->eos_token_id >= 0) eos = config->eos_token_id;
    }
  }
  for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "</s>"}) {
    if (eos < 0) eos = tokenizer.TokenToId(name);
  }
  if (eos < 0) {
    return absl::InvalidArgumentError(
        "no end-of-document token: the model's config.json has no eos_token_id and the tokenizer "
        "has none of <|endoftext|>, <|end_of_text|>, </s>; pass an eos id");
  }
  if (eos >= tokenizer.vocab_size()) {
    return absl::InvalidArgumentError(absl::StrCat("end-of-document id ", eos,
                                                   " is outside the tokenizer's vocabulary of ",
                                                   tokenizer.vocab_size()));
  }
  return static_cast<int32_t>(eos);
}

absl::StatusOr<TokenizeSummary> TokenizeToFile(const TokenizeRequest& request,
                                               const Tokenizer& tokenizer) {
  const auto start = std::chrono::steady_clock::now();
  if (request.inputs.empty()) return absl::InvalidArgumentError("tokenize: no input files");
  if (request.output.empty()) return absl::InvalidArgumentError("tokenize: no output file");
  TokenizeSummary summary;
  MOBIUS_ASSIGN_OR_RETURN(summary.eos_id, ResolveEosId(request, tokenizer));
  std::vector<RawDocument> documents;
  for (const std::string& input : request.inputs) {
    DatasetSpec spec = request.dataset;
    spec.path = input;
    if (spec.template_dirs.empty()) spec.template_dirs = TemplateDirs(request);
    spec.render_processes = request.threads;
    MOBIUS_ASSIGN_OR_RETURN(ReadResult read, ReadDocuments(spec));
    summary.skipped_lines += read.skipped_lines;
    summary.skipped_conversations += read.skipped_conversations;
    for (RawDocument& d : read.documents) documents.push_back(std::move(d));
  }
  MOBIUS_ASSIGN_OR_RETURN(std::vector<TokenizedDoc> tokenized,
                          TokenizeDocuments(tokenizer, documents, summary.eos_id, request.threads));
  summary.vocab_size = tokenizer.vocab_size();
  MOBIUS_RETURN_IF_ERROR(WriteTokenFile(request.output, tokenized, summary.vocab_size));
  if (!request.descriptor_file.empty()) {
    MOBIUS_RETURN_IF_ERROR(WriteTextAtomically(request.descriptor_file, request.descriptor));
  }
  summary.documents = static_cast<int64_t>(tokenized.size());
  for (const TokenizedDoc& d : tokenized) summary.tokens += static_cast<int64_t>(d.ids.size());
  summary.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

std::string FormatTokenizeSummary(const std::string& output, const TokenizeSummary& s) {
  return absl::StrFormat(
      "%s: %d documents, %d tokens (vocab %d, eos %d)%s%s in %.2f s", output, s.documents,
      s.tokens, s.vocab_size, s.eos_id,
      s.skipped_lines > 0 ? absl::StrFormat(", %d bad lines skipped", s.skipped_lines) : "",
      s.skipped_conversations > 0
          ? absl::StrFormat(", %d conversations without an assistant turn skipped",
                            s.skipped_conversations)
          : "",
      s.seconds);
}

std::string TokenizeRequestToJson(const TokenizeRequest& r) {
  const DatasetSpec& d = r.dataset;
  json j = {{"inputs", r.inputs},
            {"output", r.output},
            {"tokenizer", r.tokenizer},
            {"format", DatasetFormatName(d.format)},
            {"text_field", d.text_field},
            {"prompt_field", d.prompt_field},
            {"completion_field", d.completion_field},
            {"messages_field", d.messages_field},
            {"chat_template", d.chat_template},
            {"chat_template_kwargs", d.chat_template_kwargs},
            {"template_dirs", d.template_dirs},
            {"skip_bad_lines", d.skip_bad_lines},
            {"eos_id", r.eos_id},
            {"eos_source", r.eos_source},
            {"threads", r.threads},
            {"descriptor", r.descriptor},
            {"descriptor_file", r.descriptor_file}};
  return j.dump();
}

absl::StatusOr<TokenizeRequest> TokenizeRequestFromJson(const std::string& text) {
  constexpr char kWhat[] = "tokenize request";
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return absl::InvalidArgumentError("tokenize request: not a JSON object");
  TokenizeRequest r;
  std::string format = "jsonl";
  DatasetSpec& d = r.dataset;
  MOBIUS_RETURN_IF_ERROR(Field(j, kWhat, "inputs", r.inputs));
  MOBIUS_RETURN_IF_ERROR(Field(j, kWhat, "output", r.output));
  MOBIUS_RETURN_IF_ERROR(Field(j, kWhat, "tokenizer", r.tokenizer));
  MOBIUS_RETURN_IF_ERROR(Field(j, kWhat, "format", format));
  MOBIUS_RETURN_IF_ERROR(Field(j, kWhat, "text_field", d.text_field));
  MOBIUS_RETURN_IF_ERROR(Field(j, kWhat, "prompt_field", d.prompt_field));
  MOBIUS_RETURN_IF_ERROR(Field(j, kWhat, "completion_field", d.completion_field));
  MOBIUS_RETURN_IF_ERROR(Field(j, kWhat, "messages_field", d.messages_field));
  MOBIUS_RETURN_IF_ERROR(Field(j, kWhat, "chat_template", d.chat_template));
  MOBIUS_RETURN_IF_ERROR(Field(j, kWhat, "chat_template_kwargs", d.chat_template_kwargs));
  MOBIUS_RETURN_IF_ERROR(Field(j, kWhat, "template_dirs", d.template_dirs));
  MOBIUS_RETURN_IF_ERROR(Field(j, kWhat, "skip_bad_lines", d.skip_bad_lines));
  MOBIUS_RETURN_IF_ERROR(Field(j, kWhat, "eos_id", r.eos_id));
  MOBIUS_RETURN_IF_ERROR(Field(j, kWhat, "eos_source", r.eos_source));
  MOBIUS_RETURN_IF_ERROR(Field(j, kWhat, "threads", r.threads));
  if (j.contains("descriptor") || j.contains("descriptor_file")) {
    MOBIUS_RETURN_IF_ERROR(Field(j, kWhat, "descriptor", r.descriptor));
    MOBIUS_RETURN_IF_ERROR(Field(j, kWhat, "descriptor_file", r.descriptor_file));
  }
  MOBIUS_ASSIGN_OR_RETURN(d.format, ParseDatasetFormat(format));
  if (r.inputs.empty()) return absl::InvalidArgumentError("tokenize request: inputs: empty");
  if (r.output.empty()) return absl::InvalidArgumentError("tokenize request: output: empty");
  if (r.tokenizer.empty()) return absl::InvalidArgumentError("tokenize request: tokenizer: empty");
  return r;
}

std::string TokenizeSummaryToJson(const TokenizeSummary& s) {
  json j = {{"documents", s.documents},
            {"tokens", s.tokens},
            {"skipped_lines", s.skipped_lines},
            {"skipped_conversations", s.skipped_conversations},
            {"vocab_size", s.vocab_size},
            {"eos_id", s.eos_id},
            {"seconds", s.seconds}};
  return j.dump();
}

absl::StatusOr<TokenizeSummary> TokenizeSummaryFromJson(const std::string& text) {
  constexpr char kWhat[] = "tokenize summary";
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return absl::InvalidArgumentError("tokenize summary: not a JSON object");
  TokenizeSummary s;
  MOBIUS_RETURN_IF_ERROR(Field(j, kWhat, "documents", s.documents));
  MOBIUS_RETURN_IF_ERROR(Field(j, kWhat, "tokens", s.tokens));
  MOBIUS_RETURN_IF_ERROR(Field(j, kWhat, "skipped_lines", s.skipped_lines));
  MOBIUS_RETURN_IF_ERROR(Field(j, kWhat, "skipped_conversations", s.skipped_conversations));
  MOBIUS_RETURN_IF_ERROR(Field(j, kWhat, "vocab_size", s.vocab_size));
  MOBIUS_RETURN_IF_ERROR(Field(j, kWhat, "eos_id", s.eos_id));
  MOBIUS_RETURN_IF_ERROR(Field(j, kWhat, "seconds", s.seconds));
  return s;
}

}  // namespace mobius::data
