#include "client/generate_command.h"

#include "absl/strings/str_cat.h"
#include "client/exit_codes.h"
#include "client/worker_child.h"

namespace mobius::cli {
namespace {

// What `mobius-worker generate` prints before its error line (worker/generate/
// generate_command.h; the CLI cannot include the worker's headers).
constexpr absl::string_view kWorkerPrefix = "mobius-worker generate: ";

}  // namespace

int RunGenerate(const GenerateOptions& o, std::ostream& out, std::ostream& err) {
  auto usage = [&](const std::string& what) {
    err << "mobius generate: " << what << "\nusage: " << kGenerateUsage << "\n";
    return kExitUsage;
  };
  if (o.args.size() != 1) return usage("expected one MODEL_DIR");
  if (o.prompt.empty() == o.prompt_ids.empty()) {
    return usage("give exactly one of --prompt TEXT and --prompt_ids 1,2,3");
  }
  if (o.chat && o.prompt.empty()) return usage("--chat needs --prompt (the user's message)");
  if (!o.chat && (!o.system.empty() || !o.chat_template_kwargs.empty())) {
    return usage("--system and --chat_template_kwargs need --chat");
  }
  if (o.max_new_tokens < 1) {
    return usage(absl::StrCat("--max_new_tokens must be >= 1 (got ", o.max_new_tokens, ")"));
  }
  std::vector<std::string> argv = {WorkerBinaryNextToSelf(o.worker_binary),
                                   "generate",
                                   o.args[0],
                                   "--max_new_tokens=" + std::to_string(o.max_new_tokens),
                                   absl::StrCat("--temperature=", o.temperature),
                                   absl::StrCat("--top_p=", o.top_p),
                                   absl::StrCat("--seed=", o.seed),
                                   "--backend=" + o.backend,
                                   absl::StrCat("--threads=", o.threads)};
  argv.push_back(o.prompt.empty() ? "--prompt_ids=" + o.prompt_ids : "--prompt=" + o.prompt);
  if (!o.adapter_dir.empty()) argv.push_back("--adapter=" + o.adapter_dir);
  if (o.lora_base != "bf16") argv.push_back("--lora_base=" + o.lora_base);
  if (o.expert_residency != "auto") argv.push_back("--expert_residency=" + o.expert_residency);
  if (o.expert_cache_bytes > 0) {
    argv.push_back(absl::StrCat("--expert_cache_bytes=", o.expert_cache_bytes));
  }
  if (o.chat) {
    argv.push_back("--chat");
    if (!o.system.empty()) argv.push_back("--system=" + o.system);
    if (!o.chat_template_kwargs.empty()) {
      argv.push_back("--chat_template_kwargs=" + o.chat_template_kwargs);
    }
  }

  absl::StatusOr<WorkerChildResult> r = RunWorkerChild(
      argv, kWorkerPrefix,
      [&](absl::string_view chunk) {
        out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
        out.flush();
      },
      [&](const std::string& warning) { err << "mobius generate: " << warning << "\n"; });
  if (!r.ok()) {
    err << "mobius generate: cannot run " << argv[0] << " (" << r.status().message()
        << "); build mobius-worker next to mobius or pass --worker_binary\n";
    return kExitServerError;
  }
  return FinishWorkerChild(*r, "generate", "the generate process", err);
}

}  // namespace mobius::cli
