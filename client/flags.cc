#include "client/flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, socket, "",
          "mobiusd's unix socket (default: $MOBIUS_SOCKET, else /run/mobius/mobiusd.sock).");
ABSL_FLAG(double, timeout_seconds, 10, "Deadline of each call to the daemon, in seconds.");
ABSL_FLAG(bool, json, false, "Print machine-readable JSON instead of text.");
ABSL_FLAG(bool, xml, false, "topo: print the topology as hwloc XML (lstopo --input can read it).");
ABSL_FLAG(std::string, topology_file, "",
          "topo: read this hwloc XML file instead of asking the daemon.");
ABSL_FLAG(std::string, tokenizer, "", "tokenize: model directory or tokenizer.json to use.");
ABSL_FLAG(std::string, format, "jsonl", "tokenize: jsonl | prompt_completion | chat | text.");
ABSL_FLAG(std::string, text_field, "text", "tokenize: JSON field holding a document.");
ABSL_FLAG(std::string, prompt_field, "prompt", "tokenize: JSON field of the prompt.");
ABSL_FLAG(std::string, completion_field, "completion", "tokenize: JSON field of the completion.");
ABSL_FLAG(bool, skip_bad_lines, false, "tokenize: skip (and count) malformed lines.");
ABSL_FLAG(int, eos_id, -1, "tokenize: end-of-document token id (default: from the model).");
ABSL_FLAG(int, threads, 0, "tokenize: threads (0: all cores).");
