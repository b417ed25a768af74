// One tokenization job: dataset file(s) in a text format -> one flat token file
// (common/data/token_file.h). Shared by `mobius tokenize`, `mobius-worker tokenize` (which the
// daemon and `mobius run` spawn to prepare text datasets) and tests.
//
// The request also travels as JSON (TokenizeRequestToJson / TokenizeRequestFromJson): the
// daemon and the CLI link gRPC's protobuf, Debian's SentencePiece embeds another protobuf, so
// SentencePiece tokenizers run in `mobius-worker tokenize REQUEST.json`, which links no gRPC.
//
// Thread-safe: pure functions over their arguments (TokenizeToFile writes `output`).
#ifndef MOBIUS_COMMON_DATA_TOKENIZE_JOB_H_
#define MOBIUS_COMMON_DATA_TOKENIZE_JOB_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data/documents.h"
#include "common/data/tokenizer.h"

namespace mobius::data {

// `mobius-worker tokenize` prints this prefix + TokenizeSummaryToJson as its result line.
inline constexpr char kTokenizedPrefix[] = "@tokenized ";

struct TokenizeRequest {
  std::vector<std::string> inputs;  // read in order; their documents form one dataset
  std::string output;               // the token file (written atomically)
  std::string tokenizer;            // model directory, tokenizer.json or tokenizer.model
  DatasetSpec dataset;              // format and fields; dataset.path is ignored (inputs);
                                    // dataset.template_dirs empty: the tokenizer's directory,
                                    // then eos_source
  int32_t eos_id = -1;              // -1: from `eos_source`'s config.json, else the tokenizer's
                                    // <|endoftext|> / <|end_of_text|> / </s>
  std::string eos_source;           // directory whose config.json names eos_token_id; empty:
                                    // `tokenizer` when it is a directory
  int threads = 0;                  // 0: all cores
  // A cache entry's descriptor (common/inspect/dataset_descriptor.h), written to
  // `descriptor_file` atomically after the token file, by the process that wrote it (the job's
  // user); both empty: none.
  std::string descriptor;
  std::string descriptor_file;
};

struct TokenizeSummary {
  int64_t documents = 0;
  int64_t tokens = 0;
  int64_t skipped_lines = 0;
  int64_t skipped_conversations = 0;  // chat with the model's template: no assistant turn
  int64_t vocab_size = 0;
  int32_t eos_id = -1;
  double seconds = 0;
};

// The end-of-document id for `request` with `tokenizer`; INVALID_ARGUMENT when there is none or
// it is outside the vocabulary.
absl::StatusOr<int32_t> ResolveEosId(const TokenizeRequest& request, const Tokenizer& tokenizer);

// Reads, tokenizes (request.threads) and writes request.output. Errors name the input file and
// line (bad JSON lines unless dataset.skip_bad_lines), or the output file.
absl::StatusOr<TokenizeSummary> TokenizeToFile(const TokenizeRequest& request,
                                               const Tokenizer& tokenizer);

// "OUT: 12 documents, 3456 tokens (vocab 32000, eos 2), 1 bad line skipped, 2 conversations
// without an assistant turn skipped in 0.12 s"
std::string FormatTokenizeSummary(const std::string& output, const TokenizeSummary& summary);

// JSON round trip; FromJson errors name the field ("tokenize request: inputs: ...").
std::string TokenizeRequestToJson(const TokenizeRequest& request);
absl::StatusOr<TokenizeRequest> TokenizeRequestFromJson(const std::string& text);
std::string TokenizeSummaryToJson(const TokenizeSummary& summary);
absl::StatusOr<TokenizeSummary> TokenizeSummaryFromJson(const std::string& text);

// "jsonl" / "prompt_completion" / "chat" / "text" and back (the job spec's names).
std::string DatasetFormatName(DatasetFormat format);

}  // namespace mobius::data

#endif  // MOBIUS_COMMON_DATA_TOKENIZE_JOB_H_
