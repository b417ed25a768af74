#include "worker/data/sp_tokenizer.h"

#include <sentencepiece_processor.h>
#include <sys/stat.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "worker/data/hf_tokenizer.h"
#include "worker/data/regex.h"

namespace mobius::data {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

class SentencePieceTokenizer : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp)
      : sp_(std::move(sp)) {}

  absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text,
                                              bool add_special_tokens) const override {
    if (long bad = FirstInvalidUtf8(text); bad >= 0) {
      return absl::InvalidArgumentError(absl::StrCat("text is not valid UTF-8 at byte offset ", bad));
    }
    std::vector<int> ids;
    auto status = sp_->Encode(std::string(text), &ids);
    if (!status.ok()) return absl::InternalError(absl::StrCat("sentencepiece: ", status.ToString()));
    std::vector<int32_t> out;
    if (add_special_tokens && sp_->bos_id() >= 0) out.push_back(sp_->bos_id());
    out.insert(out.end(), ids.begin(), ids.end());
    return out;
  }

  absl::StatusOr<std::string> Decode(const std::vector<int32_t>& ids,
                                     bool skip_special_tokens) const override {
    std::vector<int> in;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= sp_->GetPieceSize()) {
        return absl::InvalidArgumentError(absl::StrCat("token id ", ids[i], " at position ", i,
                                                       " is outside the vocabulary [0, ",
                                                       sp_->GetPieceSize(), ")"));
      }
      in.push_back(ids[i]);
    }
    std::string text;
    auto status = sp_->Decode(in, &text);
    if (!status.ok()) return absl::InternalError(absl::StrCat("sentencepiece: ", status.ToString()));
    return text;
  }

  int64_t vocab_size() const override { return sp_->GetPieceSize(); }
  int32_t TokenToId(absl::string_view token) const override {
    int id = sp_->PieceToId(std::string(token));
    // PieceToId maps unknown pieces to <unk>; only report real matches.
    return id >= 0 && sp_->IdToPiece(id) == token ? id : -1;
  }

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadSentencePieceTokenizer(const std::string& path) {
  if (!Exists(path)) return absl::NotFoundError(absl::StrCat("tokenizer file ", path, ": not found"));
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  auto status = sp->Load(path);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer ", path,
                                                   ": not a SentencePiece model (", status.ToString(), ")"));
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
