// `mobius tokenize IN [IN...] OUT --tokenizer DIR`: tokenizes a dataset once into the flat token
// file (common/data/token_file.h) that training jobs memory-map. Runs locally, no daemon. (Jobs
// may also name the text files directly: the daemon tokenizes them, host/launch/dataset_prep.h.)
//
// Tokenizers: Hugging Face tokenizer.json (byte-level BPE) in this process; SentencePiece
// (tokenizer.model: Llama 2, Mistral) in `mobius-worker tokenize`, because Debian's
// libsentencepiece cannot share a process with gRPC's protobuf. A directory with both prefers
// tokenizer.json.
// EOS after each document: --eos_id when given, else the model directory's config.json
// eos_token_id, else the tokenizer's <|endoftext|> / <|end_of_text|> / </s>; none is an error.
#ifndef MOBIUS_CLIENT_TOKENIZE_COMMAND_H_
#define MOBIUS_CLIENT_TOKENIZE_COMMAND_H_

#include <ostream>
#include <string>
#include <vector>

namespace mobius::cli {

struct TokenizeOptions {
  std::vector<std::string> inputs;  // read in order, one dataset
  std::string output;
  std::string tokenizer_dir;       // model directory or tokenizer.json
  std::string format = "jsonl";    // jsonl | prompt_completion | chat | text
  std::string text_field = "text";
  std::string prompt_field = "prompt";
  std::string completion_field = "completion";
  std::string messages_field = "messages";  // chat
  std::string chat_template;                // chat: "" (the model's) | model:NAME | chatml | plain
  std::string chat_template_kwargs;         // chat, model template: NAME=VALUE,...
  bool skip_bad_lines = false;
  int eos_id = -1;
  int threads = 0;                 // 0: all cores
  std::string worker_binary;       // for SentencePiece; empty: mobius-worker next to mobius
};

int RunTokenize(const TokenizeOptions& options, std::ostream& out, std::ostream& err);

}  // namespace mobius::cli

#endif  // MOBIUS_CLIENT_TOKENIZE_COMMAND_H_
