// `mobius export --merge ADAPTER_DIR OUT [--base DIR] [--dtype bf16|fp32|auto]`: merges a PEFT
// LoRA adapter (a LoRA checkpoint's, or any PEFT save_pretrained directory) into its base model and
// writes OUT, a Hugging Face model directory that transformers loads without PEFT: config.json,
// model.safetensors (or shards + index), generation_config.json, the tokenizer files.
//
// No daemon. The merge runs in a `mobius-worker merge-adapter` child (the CLI links none of the
// worker's code: docs/architecture.md), the one next to `mobius` unless --worker_binary names
// another; its summary is printed, its warnings and its error line are relayed ("mobius export:
// <the worker's message>"). What the merge does and checks: worker/checkpoint/merge_adapter.h.
//
// Exit codes (client/exit_codes.h): 0 written; 2 bad usage or input (no --merge, not two
// arguments, a bad --dtype, a bad adapter or base, OUT exists and is not empty); 4 the merge
// failed otherwise (I/O, the worker missing or killed).
//
// Blocks until the child exits. Thread-compatible.
#ifndef MOBIUS_CLIENT_EXPORT_COMMAND_H_
#define MOBIUS_CLIENT_EXPORT_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

namespace mobius::cli {

inline constexpr char kExportUsage[] =
    "mobius export --merge ADAPTER_DIR OUT [--base DIR] [--dtype bf16|fp32|auto]";

struct ExportOptions {
  bool merge = false;             // --merge (the only export today)
  std::vector<std::string> args;  // positional: ADAPTER_DIR OUT
  std::string base_dir;           // empty: adapter_config.json's base_model_name_or_path
  std::string dtype = "auto";     // bf16 | fp32 | auto
  std::string worker_binary;      // empty: mobius-worker next to this executable
};

int RunExport(const ExportOptions& options, std::ostream& out, std::ostream& err);

}  // namespace mobius::cli

#endif  // MOBIUS_CLIENT_EXPORT_COMMAND_H_
