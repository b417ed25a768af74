// tokenizer.json -> HfTokenizerSpec. Every rejection names the JSON path.
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "common/data/hf_tokenizer_spec.h"

namespace mobius::data::internal {
namespace {

using nlohmann::json;

// GPT-2's pre-tokenization pattern (used by the ByteLevel pre-tokenizer with use_regex=true).
constexpr char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

absl::Status Bad(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("field \"", path, "\": ", what));
}

std::string TypeOf(const json& j) {
  if (!j.is_object()) return "";
  auto it = j.find("type");
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

absl::Status ParseNormalizer(const json& j, const std::string& path, HfTokenizerSpec* spec) {
  if (j.is_null()) return absl::OkStatus();
  std::string type = TypeOf(j);
  if (type == "Sequence") {
    auto it = j.find("normalizers");
    if (it == j.end() || !it->is_array()) return Bad(path + ".normalizers", "must be a list");
    for (size_t i = 0; i < it->size(); ++i) {
      absl::Status s = ParseNormalizer((*it)[i], absl::StrCat(path, ".normalizers[", i, "]"), spec);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (type == "NFC") spec->normalizers.push_back(Normalization::kNfc);
  else if (type == "NFKC") spec->normalizers.push_back(Normalization::kNfkc);
  else if (type == "NFD") spec->normalizers.push_back(Normalization::kNfd);
  else if (type == "NFKD") spec->normalizers.push_back(Normalization::kNfkd);
  else return Bad(path + ".type", absl::StrCat("unsupported normalizer \"", type, "\""));
  return absl::OkStatus();
}

absl::Status ParsePreTokenizer(const json& j, const std::string& path, HfTokenizerSpec* spec) {
  if (j.is_null()) return absl::OkStatus();
  std::string type = TypeOf(j);
  if (type == "Sequence") {
    auto it = j.find("pretokenizers");
    if (it == j.end() || !it->is_array()) return Bad(path + ".pretokenizers", "must be a list");
    for (size_t i = 0; i < it->size(); ++i) {
      absl::Status s =
          ParsePreTokenizer((*it)[i], absl::StrCat(path, ".pretokenizers[", i, "]"), spec);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  PreTokenizerStep step;
  if (type == "ByteLevel") {
    step.kind = PreTokenizerStep::Kind::kByteLevel;
    step.add_prefix_space = j.value("add_prefix_space", false);
    if (j.value("use_regex", true)) {
      auto re = Regex::Compile(kGpt2Pattern);
      if (!re.ok()) return re.status();
      step.regex = *re;
    }
  } else if (type == "Split") {
    step.kind = PreTokenizerStep::Kind::kSplit;
    const json* pattern = j.contains("pattern") ? &j["pattern"] : nullptr;
    std::string regex;
    if (pattern != nullptr && pattern->is_object() && pattern->contains("Regex") &&
        (*pattern)["Regex"].is_string()) {
      regex = (*pattern)["Regex"].get<std::string>();
    } else if (pattern != nullptr && pattern->is_object() && pattern->contains("String") &&
               (*pattern)["String"].is_string()) {
      // A literal string: escape it for PCRE2 with \Q...\E.
      regex = absl::StrCat("\\Q", (*pattern)["String"].get<std::string>(), "\\E");
    } else {
      return Bad(path + ".pattern", "must be {\"Regex\": ...} or {\"String\": ...}");
    }
    if (j.value("invert", false)) return Bad(path + ".invert", "true is not supported");
    std::string behavior = j.value("behavior", std::string("Isolated"));
    if (behavior == "Removed") {
      step.remove_matches = true;
    } else if (behavior != "Isolated") {
      return Bad(path + ".behavior", absl::StrCat("unsupported behavior \"", behavior, "\""));
    }
    auto re = Regex::Compile(regex);
    if (!re.ok()) return Bad(path + ".pattern", re.status().message());
    step.regex = *re;
  } else {
    return Bad(path + ".type", absl::StrCat("unsupported pre_tokenizer \"", type,
                                            "\" (SentencePiece-style tokenizers are not supported)"));
  }
  spec->pre_tokenizers.push_back(std::move(step));
  return absl::OkStatus();
}

absl::Status ParseModel(const json& m, HfTokenizerSpec* spec) {
  if (!m.is_object()) return Bad("model", "missing");
  if (TypeOf(m) != "BPE") return Bad("model.type", "only \"BPE\" is supported");
  auto vocab = m.find("vocab");
  if (vocab == m.end() || !vocab->is_object()) return Bad("model.vocab", "must be an object");
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
        it.value().get<int64_t>() > (1 << 24)) {
      return Bad(absl::StrCat("model.vocab[\"", it.key(), "\"]"), "must be an id in [0, 2^24]");
    }
    spec->vocab[it.key()] = it.value().get<int32_t>();
  }
  auto merges = m.find("merges");
  if (merges == m.end() || !merges->is_array()) return Bad("model.merges", "must be a list");
  for (size_t i = 0; i < merges->size(); ++i) {
    const json& e = (*merges)[i];
    std::string a, b;
    if (e.is_string()) {
      std::string s = e.get<std::string>();
      size_t space = s.find(' ');
      if (space == std::string::npos) return Bad(absl::StrCat("model.merges[", i, "]"), "no space");
      a = s.substr(0, space);
      b = s.substr(space + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    } else {
      return Bad(absl::StrCat("model.merges[", i, "]"), "must be \"a b\" or [\"a\", \"b\"]");
    }
    spec->merge_ranks.emplace(a + '\0' + b, static_cast<int32_t>(i));
  }
  spec->ignore_merges = m.value("ignore_merges", false);
  if (m.contains("unk_token") && m["unk_token"].is_string()) {
    auto it = spec->vocab.find(m["unk_token"].get<std::string>());
    if (it != spec->vocab.end()) spec->unk_id = it->second;
  }
  return absl::OkStatus();
}

absl::Status ParseAddedTokens(const json& j, HfTokenizerSpec* spec) {
  if (j.is_null()) return absl::OkStatus();
  if (!j.is_array()) return Bad("added_tokens", "must be a list");
  for (size_t i = 0; i < j.size(); ++i) {
    const json& t = j[i];
    std::string path = absl::StrCat("added_tokens[", i, "]");
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
        !t.contains("content") || !t["content"].is_string() || t["content"].get<std::string>().empty()) {
      return Bad(path, "needs an integer \"id\" and a non-empty \"content\"");
    }
    int64_t id = t["id"].get<int64_t>();
    if (id < 0 || id > (1 << 24)) return Bad(path + ".id", "out of range");
    spec->added_tokens.push_back({static_cast<int32_t>(id), t["content"].get<std::string>(),
                                  t.value("special", false)});
  }
  std::stable_sort(spec->added_tokens.begin(), spec->added_tokens.end(),
                   [](const AddedToken& x, const AddedToken& y) {
                     return x.content.size() > y.content.size();
                   });
  for (size_t i = 0; i < spec->added_tokens.size(); ++i) {
    spec->added_by_id[spec->added_tokens[i].id] = i;
  }
  return absl::OkStatus();
}

absl::Status ParsePostProcessor(const json& j, const std::string& path, HfTokenizerSpec* spec) {
  if (j.is_null()) return absl::OkStatus();
  std::string type = TypeOf(j);
  if (type == "ByteLevel") return absl::OkStatus();
  if (type == "Sequence") {
    auto it = j.find("processors");
    if (it == j.end() || !it->is_array()) return Bad(path + ".processors", "must be a list");
    for (size_t i = 0; i < it->size(); ++i) {
      absl::Status s = ParsePostProcessor((*it)[i], absl::StrCat(path, ".processors[", i, "]"), spec);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (type != "TemplateProcessing") {
    return Bad(path + ".type", absl::StrCat("unsupported post_processor \"", type, "\""));
  }
  auto single = j.find("single");
  auto specials = j.find("special_tokens");
  if (single == j.end() || !single->is_array()) return Bad(path + ".single", "must be a list");
  bool after_sequence = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const json& item = (*single)[i];
    std::string ipath = absl::StrCat(path, ".single[", i, "]");
    if (item.contains("Sequence")) {
      if (after_sequence) return Bad(ipath, "a second sequence is not supported");
      after_sequence = true;
      continue;
    }
    if (!item.contains("SpecialToken") || !item["SpecialToken"].contains("id")) {
      return Bad(ipath, "must be a Sequence or a SpecialToken");
    }
    std::string name = item["SpecialToken"]["id"].get<std::string>();
    if (specials == j.end() || !specials->contains(name) || !(*specials)[name].contains("ids")) {
      return Bad(path + ".special_tokens", absl::StrCat("no entry for \"", name, "\""));
    }
    for (const json& id : (*specials)[name]["ids"]) {
      if (!id.is_number_integer()) return Bad(path + ".special_tokens", "ids must be integers");
      (after_sequence ? spec->suffix_ids : spec->prefix_ids).push_back(id.get<int32_t>());
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseSpec(absl::string_view text, HfTokenizerSpec* spec) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("not a JSON object (is it a tokenizer.json?)");
  }
  for (absl::Status s : {ParseModel(j.value("model", json()), spec),
                         ParseNormalizer(j.value("normalizer", json()), "normalizer", spec),
                         ParsePreTokenizer(j.value("pre_tokenizer", json()), "pre_tokenizer", spec),
                         ParseAddedTokens(j.value("added_tokens", json()), spec),
                         ParsePostProcessor(j.value("post_processor", json()), "post_processor", spec)}) {
    if (!s.ok()) return s;
  }
  const json decoder = j.value("decoder", json());
  if (!decoder.is_null() && TypeOf(decoder) != "ByteLevel") {
    return Bad("decoder.type", absl::StrCat("unsupported decoder \"", TypeOf(decoder), "\""));
  }
  bool byte_level = false;
  for (const auto& p : spec->pre_tokenizers) byte_level |= p.kind == PreTokenizerStep::Kind::kByteLevel;
  if (!byte_level) return Bad("pre_tokenizer", "no ByteLevel step: not a byte-level BPE tokenizer");

  int64_t max_id = -1;
  for (const auto& [tok, id] : spec->vocab) max_id = std::max<int64_t>(max_id, id);
  for (const auto& t : spec->added_tokens) max_id = std::max<int64_t>(max_id, t.id);
  spec->vocab_size = max_id + 1;
  spec->id_to_token.assign(static_cast<size_t>(spec->vocab_size), "");
  for (const auto& [tok, id] : spec->vocab) spec->id_to_token[id] = tok;
  for (int32_t id : spec->prefix_ids) {
    if (id < 0 || id >= spec->vocab_size) return Bad("post_processor", "special id out of range");
  }
  for (int32_t id : spec->suffix_ids) {
    if (id < 0 || id >= spec->vocab_size) return Bad("post_processor", "special id out of range");
  }
  return absl::OkStatus();
}

}  // namespace mobius::data::internal
