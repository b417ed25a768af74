#include "client/tokenize_command.h"

#include <chrono>

#include "absl/strings/str_format.h"
#include "client/exit_codes.h"
#include "common/model/model_config_parse.h"
#include "worker/data/documents.h"
#include "worker/data/hf_tokenizer.h"
#include "worker/data/token_file.h"

namespace mobius::cli {

int RunTokenize(const TokenizeOptions& o, std::ostream& out, std::ostream& err) {
  auto fail = [&](const absl::Status& s) {
    err << "mobius tokenize: " << s.message() << "\n";
    return ExitCodeFor(s);
  };
  if (o.input.empty() || o.output.empty() || o.tokenizer_dir.empty()) {
    err << "usage: mobius tokenize IN OUT --tokenizer DIR [--format jsonl|prompt_completion|chat|text]\n";
    return kExitUsage;
  }
  auto start = std::chrono::steady_clock::now();
  auto format = data::ParseDatasetFormat(o.format);
  if (!format.ok()) return fail(format.status());
  // SentencePiece (tokenizer.model) cannot be loaded in this process: see worker/data/CMakeLists.
  auto tokenizer = data::LoadHfTokenizer(o.tokenizer_dir);
  if (!tokenizer.ok()) return fail(tokenizer.status());

  int32_t eos = o.eos_id;
  if (eos < 0) {
    auto config = model::LoadModelConfig(o.tokenizer_dir);
    if (config.ok() && config->eos_token_id >= 0) eos = static_cast<int32_t>(config->eos_token_id);
  }
  for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "</s>"}) {
    if (eos < 0) eos = (*tokenizer)->TokenToId(name);
  }
  if (eos < 0 || eos >= (*tokenizer)->vocab_size()) {
    err << "mobius tokenize: no end-of-document token: pass --eos_id\n";
    return kExitUsage;
  }

  data::DatasetSpec spec{o.input, *format, o.text_field, o.prompt_field, o.completion_field,
                         o.skip_bad_lines};
  auto docs = data::ReadDocuments(spec);
  if (!docs.ok()) return fail(docs.status());
  auto tokenized = data::TokenizeDocuments(**tokenizer, docs->documents, eos, o.threads);
  if (!tokenized.ok()) return fail(tokenized.status());
  absl::Status written = data::WriteTokenFile(o.output, *tokenized, (*tokenizer)->vocab_size());
  if (!written.ok()) return fail(written);

  int64_t tokens = 0;
  for (const auto& d : *tokenized) tokens += static_cast<int64_t>(d.ids.size());
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out << absl::StrFormat("%s: %d documents, %d tokens (vocab %d, eos %d)%s in %.2f s\n", o.output,
                         tokenized->size(), tokens, (*tokenizer)->vocab_size(), eos,
                         docs->skipped_lines > 0
                             ? absl::StrFormat(", %d bad lines skipped", docs->skipped_lines)
                             : "",
                         seconds);
  return kExitOk;
}

}  // namespace mobius::cli
