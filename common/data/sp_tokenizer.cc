#include "common/data/sp_tokenizer.h"

#include <sys/stat.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/data/hf_tokenizer.h"
#include "common/data/regex.h"
#include "common/data/sp_processor.h"

namespace mobius::data {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

class SentencePieceTokenizer : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(std::unique_ptr<internal::SpProcessor> sp) : sp_(std::move(sp)) {}

  absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text,
                                              bool add_special_tokens) const override {
    if (long bad = FirstInvalidUtf8(text); bad >= 0) {
      return absl::InvalidArgumentError(absl::StrCat("text is not valid UTF-8 at byte offset ", bad));
    }
    std::vector<int> ids;
    std::string error;
    if (!sp_->Encode(std::string(text), &ids, &error)) {
      return absl::InternalError(absl::StrCat("sentencepiece: ", error));
    }
    std::vector<int32_t> out;
    if (add_special_tokens && sp_->bos_id() >= 0) out.push_back(sp_->bos_id());
    out.insert(out.end(), ids.begin(), ids.end());
    return out;
  }

  absl::StatusOr<std::string> Decode(const std::vector<int32_t>& ids,
                                     bool skip_special_tokens) const override {
    std::vector<int> in;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= sp_->vocab_size()) {
        return absl::InvalidArgumentError(absl::StrCat("token id ", ids[i], " at position ", i,
                                                       " is outside the vocabulary [0, ",
                                                       sp_->vocab_size(), ")"));
      }
      in.push_back(ids[i]);
    }
    std::string text, error;
    if (!sp_->Decode(in, &text, &error)) {
      return absl::InternalError(absl::StrCat("sentencepiece: ", error));
    }
    return text;
  }

  int64_t vocab_size() const override { return sp_->vocab_size(); }
  int32_t TokenToId(absl::string_view token) const override {
    return sp_->PieceToId(std::string(token));
  }

 private:
  std::unique_ptr<internal::SpProcessor> sp_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadSentencePieceTokenizer(const std::string& path) {
  if (!Exists(path)) return absl::NotFoundError(absl::StrCat("tokenizer file ", path, ": not found"));
  std::string error;
  auto sp = internal::SpProcessor::Load(path, &error);
  if (sp == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer ", path, ": not a SentencePiece model (", error, ")"));
  }
  return std::unique_ptr<Tokenizer>(new SentencePieceTokenizer(std::move(sp)));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path) {
  if (absl::EndsWith(path, ".model")) return LoadSentencePieceTokenizer(path);
  if (absl::EndsWith(path, ".json")) return LoadHfTokenizer(path);
  const std::string json = path + "/tokenizer.json", model = path + "/tokenizer.model";
  if (Exists(json)) {
    auto hf = LoadHfTokenizer(json);
    if (hf.ok() || !Exists(model)) return hf;
  }
  if (Exists(model)) return LoadSentencePieceTokenizer(model);
  return absl::NotFoundError(
      absl::StrCat("no tokenizer in ", path, " (expected tokenizer.json or tokenizer.model)"));
}

}  // namespace mobius::data
