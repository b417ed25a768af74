// `mobius tokenize IN OUT --tokenizer DIR`: tokenizes a dataset once into the flat token file
// (worker/data/token_file.h) that training jobs memory-map. Runs locally, no daemon.
//
// Tokenizers: Hugging Face tokenizer.json (byte-level BPE). SentencePiece tokenizer.model files are
// not supported here (Debian's libsentencepiece cannot share a process with gRPC's protobuf).
// EOS after each document: --eos_id when given, else the model directory's config.json
// eos_token_id, else the tokenizer's <|endoftext|> / <|end_of_text|> / </s>; none is an error.
#ifndef MOBIUS_CLIENT_TOKENIZE_COMMAND_H_
#define MOBIUS_CLIENT_TOKENIZE_COMMAND_H_

#include <ostream>
#include <string>

namespace mobius::cli {

struct TokenizeOptions {
  std::string input;
  std::string output;
  std::string tokenizer_dir;       // model directory or tokenizer.json
  std::string format = "jsonl";    // jsonl | prompt_completion | chat | text
  std::string text_field = "text";
  std::string prompt_field = "prompt";
  std::string completion_field = "completion";
  bool skip_bad_lines = false;
  int eos_id = -1;
  int threads = 0;                 // 0: all cores
};

int RunTokenize(const TokenizeOptions& options, std::ostream& out, std::ostream& err);

}  // namespace mobius::cli

#endif  // MOBIUS_CLIENT_TOKENIZE_COMMAND_H_
