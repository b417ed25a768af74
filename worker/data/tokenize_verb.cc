#include "worker/data/tokenize_verb.h"

#include <sys/prctl.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/data/sp_tokenizer.h"
#include "common/data/tokenize_job.h"
#include "common/subprocess.h"

namespace mobius::data {

int RunTokenizeVerb(const std::vector<std::string>& args) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (args.size() != 3) {
    std::cerr << "usage: " << kTokenizeUsage << "\n";
    return 2;
  }
  auto fail = [](const absl::Status& s) {
    std::cerr << "mobius-worker tokenize: " << s.message() << "\n";
    return absl::IsInvalidArgument(s) || absl::IsNotFound(s) || absl::IsFailedPrecondition(s) ? 2
                                                                                              : 1;
  };
  absl::StatusOr<std::string> text = ReadArgumentText(args[2]);
  if (!text.ok()) return fail(absl::NotFoundError("cannot read request " + args[2]));
  absl::StatusOr<TokenizeRequest> request = TokenizeRequestFromJson(*text);
  if (!request.ok()) return fail(request.status());
  // The cache directory may be missing (its user removed it): made here, as that user.
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(request->output).parent_path(), ec);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = LoadTokenizer(request->tokenizer);
  if (!tokenizer.ok()) return fail(tokenizer.status());
  absl::StatusOr<TokenizeSummary> summary = TokenizeToFile(*request, **tokenizer);
  if (!summary.ok()) return fail(summary.status());
  std::cout << kTokenizedPrefix << TokenizeSummaryToJson(*summary) << std::endl;
  return 0;
}

}  // namespace mobius::data
