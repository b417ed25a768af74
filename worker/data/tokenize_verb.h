// `mobius-worker tokenize REQUEST.json`: runs one TokenizeRequest (common/data/tokenize_job.h)
// with any tokenizer we support, SentencePiece included (this binary links no gRPC protobuf).
// Spawned by the daemon and by `mobius run` / `mobius tokenize` (host/launch/dataset_prep.h).
//
// stdout: "@tokenized " + TokenizeSummaryToJson on success (one line). stderr: the error, one
// line. Exit codes: 0 done; 2 bad input (request, tokenizer, dataset lines, ids); 1 other
// failures (I/O). The process dies with its parent (PR_SET_PDEATHSIG).
#ifndef MOBIUS_WORKER_DATA_TOKENIZE_VERB_H_
#define MOBIUS_WORKER_DATA_TOKENIZE_VERB_H_

#include <string>
#include <vector>

namespace mobius::data {

inline constexpr char kTokenizeUsage[] = "mobius-worker tokenize REQUEST.json";

// `args`: positional arguments, argv[0] first ("tokenize" second). Returns the exit code.
int RunTokenizeVerb(const std::vector<std::string>& args);

}  // namespace mobius::data

#endif  // MOBIUS_WORKER_DATA_TOKENIZE_VERB_H_
