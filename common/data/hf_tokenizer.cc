#include "common/data/hf_tokenizer.h"

#include <sys/stat.h>
#include <utf8proc.h>

#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/data/byte_level.h"
#include "common/data/hf_tokenizer_spec.h"

namespace mobius::data {
namespace internal {
absl::Status ParseSpec(absl::string_view text, HfTokenizerSpec* spec);
}  // namespace internal

namespace {

using internal::HfTokenizerSpec;
using internal::Normalization;
using internal::PreTokenizerStep;

std::string Normalize(std::string text, Normalization form) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case Normalization::kNfc: options |= UTF8PROC_COMPOSE; break;
    case Normalization::kNfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case Normalization::kNfd: options |= UTF8PROC_DECOMPOSE; break;
    case Normalization::kNfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* out = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                    static_cast<utf8proc_ssize_t>(text.size()), &out,
                                    static_cast<utf8proc_option_t>(options));
  if (n < 0) return text;  // input was validated as UTF-8 before; keep it unchanged
  std::string result(reinterpret_cast<char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

class HfTokenizer : public Tokenizer {
 public:
  explicit HfTokenizer(HfTokenizerSpec spec) : spec_(std::move(spec)) {}

  absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text,
                                              bool add_special_tokens) const override {
    if (long bad = FirstInvalidUtf8(text); bad >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("text is not valid UTF-8 at byte offset ", bad));
    }
    std::vector<int32_t> ids;
    if (add_special_tokens) ids = spec_.prefix_ids;
    std::unordered_map<std::string, std::vector<int32_t>> cache;
    size_t segment_start = 0;
    for (size_t i = 0; i <= text.size();) {
      const internal::AddedToken* hit = i < text.size() ? MatchAdded(text, i) : nullptr;
      if (hit == nullptr && i < text.size()) {
        ++i;
        continue;
      }
      if (i > segment_start) {
        absl::Status s = EncodeSegment(text.substr(segment_start, i - segment_start), &cache, &ids);
        if (!s.ok()) return s;
      }
      if (hit == nullptr) break;
      ids.push_back(hit->id);
      i += hit->content.size();
      segment_start = i;
    }
    if (add_special_tokens) ids.insert(ids.end(), spec_.suffix_ids.begin(), spec_.suffix_ids.end());
    return ids;
  }

  absl::StatusOr<std::string> Decode(const std::vector<int32_t>& ids,
                                     bool skip_special_tokens) const override {
    std::string out, pending;  // pending: byte-level characters not yet turned into bytes
    auto flush = [&]() -> bool {
      bool ok = ByteLevelToBytes(pending, &out);
      pending.clear();
      return ok;
    };
    for (size_t i = 0; i < ids.size(); ++i) {
      int32_t id = ids[i];
      if (id < 0 || id >= spec_.vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat("token id ", id, " at position ", i,
                                                       " is outside the vocabulary [0, ",
                                                       spec_.vocab_size, ")"));
      }
      auto added = spec_.added_by_id.find(id);
      if (added != spec_.added_by_id.end()) {
        const internal::AddedToken& t = spec_.added_tokens[added->second];
        if (!flush()) return BadToken(ids[i - 1], i - 1);
        if (!(skip_special_tokens && t.special)) out += t.content;
        continue;
      }
      if (spec_.id_to_token[id].empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("token id ", id, " at position ", i, " has no token in the vocabulary"));
      }
      pending += spec_.id_to_token[id];
    }
    if (!flush()) return BadToken(ids.back(), ids.size() - 1);
    return out;
  }

  int64_t vocab_size() const override { return spec_.vocab_size; }
  bool MatchesSpecialTokensInText() const override { return true; }

  int32_t TokenToId(absl::string_view token) const override {
    for (const auto& t : spec_.added_tokens) {
      if (t.content == token) return t.id;
    }
    auto it = spec_.vocab.find(std::string(token));
    return it == spec_.vocab.end() ? -1 : it->second;
  }

 private:
  static absl::Status BadToken(int32_t id, size_t pos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token id ", id, " near position ", pos, " is not a byte-level token"));
  }

  const internal::AddedToken* MatchAdded(absl::string_view text, size_t pos) const {
    for (const auto& t : spec_.added_tokens) {  // longest first
      if (text.compare(pos, t.content.size(), t.content) == 0) return &t;
    }
    return nullptr;
  }

  // Normalise, pre-tokenise and BPE one stretch of text between added tokens.
  absl::Status EncodeSegment(absl::string_view raw,
                             std::unordered_map<std::string, std::vector<int32_t>>* cache,
                             std::vector<int32_t>* ids) const {
    std::string text(raw);
    for (Normalization n : spec_.normalizers) text = Normalize(std::move(text), n);
    std::vector<std::string> pieces = {std::move(text)};
    bool mapped = false;
    for (const PreTokenizerStep& step : spec_.pre_tokenizers) {
      std::vector<std::string> next;
      for (std::string& piece : pieces) {
        if (step.kind == PreTokenizerStep::Kind::kByteLevel && step.add_prefix_space &&
            &piece == &pieces.front() && !piece.empty() && piece[0] != ' ' && !mapped) {
          piece.insert(piece.begin(), ' ');
        }
        if (step.regex == nullptr) {
          next.push_back(std::move(piece));
          continue;
        }
        size_t last = 0;
        for (auto [b, e] : step.regex->FindAll(piece)) {
          if (b > last) next.push_back(piece.substr(last, b - last));
          if (!step.remove_matches) next.push_back(piece.substr(b, e - b));
          last = e;
        }
        if (last < piece.size()) next.push_back(piece.substr(last));
      }
      pieces = std::move(next);
      if (step.kind == PreTokenizerStep::Kind::kByteLevel && !mapped) {
        for (std::string& p : pieces) p = BytesToByteLevel(p);
        mapped = true;
      }
    }
    for (const std::string& piece : pieces) {
      auto it = cache->find(piece);
      if (it == cache->end()) {
        std::vector<int32_t> word;
        absl::Status s = Bpe(piece, &word);
        if (!s.ok()) return s;
        it = cache->emplace(piece, std::move(word)).first;
      }
      ids->insert(ids->end(), it->second.begin(), it->second.end());
    }
    return absl::OkStatus();
  }

  // Classic BPE: repeatedly merge every occurrence of the lowest-ranked adjacent pair.
  absl::Status Bpe(const std::string& word, std::vector<int32_t>* out) const {
    if (word.empty()) return absl::OkStatus();
    if (spec_.ignore_merges) {
      auto whole = spec_.vocab.find(word);
      if (whole != spec_.vocab.end()) {
        out->push_back(whole->second);
        return absl::OkStatus();
      }
    }
    std::vector<std::string> syms;
    for (size_t i = 0; i < word.size();) {
      size_t len = 1;
      while (i + len < word.size() && (static_cast<unsigned char>(word[i + len]) & 0xC0) == 0x80) ++len;
      syms.push_back(word.substr(i, len));
      i += len;
    }
    std::string key;
    while (syms.size() > 1) {
      int32_t best = std::numeric_limits<int32_t>::max();
      size_t best_i = 0;
      for (size_t i = 0; i + 1 < syms.size(); ++i) {
        key.assign(syms[i]).push_back('\0');
        key += syms[i + 1];
        auto r = spec_.merge_ranks.find(key);
        if (r != spec_.merge_ranks.end() && r->second < best) {
          best = r->second;
          best_i = i;
        }
      }
      if (best == std::numeric_limits<int32_t>::max()) break;
      const std::string a = syms[best_i], b = syms[best_i + 1];
      std::vector<std::string> merged;
      merged.reserve(syms.size());
      for (size_t i = 0; i < syms.size(); ++i) {
        if (i + 1 < syms.size() && syms[i] == a && syms[i + 1] == b) {
          merged.push_back(a + b);
          ++i;
        } else {
          merged.push_back(std::move(syms[i]));
        }
      }
      syms = std::move(merged);
    }
    for (const std::string& s : syms) {
      auto it = spec_.vocab.find(s);
      if (it != spec_.vocab.end()) {
        out->push_back(it->second);
      } else if (spec_.unk_id >= 0) {
        out->push_back(spec_.unk_id);
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("symbol \"", s, "\" is not in the vocabulary and there is no unk_token"));
      }
    }
    return absl::OkStatus();
  }

  HfTokenizerSpec spec_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> ParseHfTokenizer(absl::string_view json_text,
                                                            absl::string_view origin) {
  HfTokenizerSpec spec;
  absl::Status s = internal::ParseSpec(json_text, &spec);
  if (!s.ok()) return Annotate(s, absl::StrCat("tokenizer ", origin));
  return std::unique_ptr<Tokenizer>(new HfTokenizer(std::move(spec)));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadHfTokenizer(const std::string& path) {
  std::string file = path;
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    file += "/tokenizer.json";
    if (stat(file.c_str(), &st) != 0) {
      std::string sp = path + "/tokenizer.model";
      bool has_sp = stat(sp.c_str(), &st) == 0;
      return absl::NotFoundError(absl::StrCat(
          "no tokenizer.json in ", path,
          has_sp ? " (it has a SentencePiece tokenizer.model, which this program cannot load)" : ""));
    }
  }
  std::ifstream in(file, std::ios::binary);
  if (!in.good()) return MOBIUS_ERRNO_ERROR(absl::StrCat("tokenizer file ", file));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseHfTokenizer(ss.str(), file);
}

}  // namespace mobius::data
