#include "client/tokenize_command.h"

#include <sys/stat.h>

#include <filesystem>
#include <memory>

#include "absl/strings/match.h"
#include "client/exit_codes.h"
#include "host/launch/dataset_prep.h"
#include "common/data/chat_template.h"
#include "common/data/hf_tokenizer.h"
#include "common/data/tokenize_job.h"

namespace mobius::cli {
namespace {

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A tokenizer only `mobius-worker tokenize` can load: a tokenizer.model, or a directory whose
// tokenizer.json is missing (or not a byte-level BPE we support) next to a tokenizer.model.
bool NeedsSentencePiece(const std::string& path, const absl::Status& hf_status) {
  if (absl::EndsWith(path, ".model")) return true;
  if (absl::EndsWith(path, ".json")) return false;
  return !hf_status.ok() && IsFile(path + "/tokenizer.model");
}

}  // namespace

int RunTokenize(const TokenizeOptions& o, std::ostream& out, std::ostream& err) {
  auto fail = [&](const absl::Status& s) {
    err << "mobius tokenize: " << s.message() << "\n";
    return ExitCodeFor(s);
  };
  if (o.inputs.empty() || o.output.empty() || o.tokenizer_dir.empty()) {
    err << "usage: mobius tokenize IN [IN...] OUT --tokenizer DIR [--format jsonl|"
           "prompt_completion|chat|text]\n";
    return kExitUsage;
  }
  data::TokenizeRequest request;
  request.inputs = o.inputs;
  request.output = o.output;
  request.tokenizer = o.tokenizer_dir;
  request.eos_id = o.eos_id;
  request.threads = o.threads;
  absl::StatusOr<data::DatasetFormat> format = data::ParseDatasetFormat(o.format);
  if (!format.ok()) return fail(format.status());
  request.dataset.format = *format;
  request.dataset.text_field = o.text_field;
  request.dataset.prompt_field = o.prompt_field;
  request.dataset.completion_field = o.completion_field;
  request.dataset.messages_field = o.messages_field;
  request.dataset.chat_template = o.chat_template;
  absl::StatusOr<std::map<std::string, std::string>> kwargs =
      data::ParseChatTemplateKwargs(o.chat_template_kwargs);
  if (!kwargs.ok()) return fail(kwargs.status());
  request.dataset.chat_template_kwargs = data::ChatTemplateKwargsJson(*kwargs);
  request.dataset.skip_bad_lines = o.skip_bad_lines;

  absl::StatusOr<std::unique_ptr<data::Tokenizer>> hf =
      absl::EndsWith(o.tokenizer_dir, ".model")
          ? absl::StatusOr<std::unique_ptr<data::Tokenizer>>(
                absl::UnimplementedError("SentencePiece"))
          : data::LoadHfTokenizer(o.tokenizer_dir);
  absl::StatusOr<data::TokenizeSummary> summary;
  if (hf.ok()) {
    summary = data::TokenizeToFile(request, **hf);
  } else if (NeedsSentencePiece(o.tokenizer_dir, hf.status())) {
    // SentencePiece cannot be loaded in this process (common/data/CMakeLists.txt): run it in
    // mobius-worker, which links no gRPC.
    launch::DatasetPrepOptions po;
    po.worker_binary = o.worker_binary;
    if (po.worker_binary.empty()) {
      std::error_code ec;
      po.worker_binary =
          (std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "mobius-worker")
              .string();
    }
    po.on_log = [&](const std::string& line) {
      if (!absl::StartsWith(line, "mobius-worker tokenize: ")) err << line << "\n";
    };
    summary = launch::RunTokenizeProcess(request, po);
  } else {
    return fail(hf.status());
  }
  if (!summary.ok()) return fail(summary.status());
  out << data::FormatTokenizeSummary(o.output, *summary) << "\n";
  return kExitOk;
}

}  // namespace mobius::cli
