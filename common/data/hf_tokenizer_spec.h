// Internal to the HF tokenizer: the parsed form of a tokenizer.json (hf_tokenizer_parse.cc fills
// it, hf_tokenizer.cc runs it). Immutable after parsing, shared by all encoding threads.
#ifndef MOBIUS_COMMON_DATA_HF_TOKENIZER_SPEC_H_
#define MOBIUS_COMMON_DATA_HF_TOKENIZER_SPEC_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/data/regex.h"

namespace mobius::data::internal {

enum class Normalization { kNfc, kNfkc, kNfd, kNfkd };

struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevel } kind = Kind::kSplit;
  std::shared_ptr<const Regex> regex;   // kSplit, or kByteLevel with use_regex
  bool remove_matches = false;          // Split behavior "Removed"
  bool add_prefix_space = false;        // kByteLevel
};

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
};

struct HfTokenizerSpec {
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::string> id_to_token;              // "" for unused ids
  std::unordered_map<std::string, int32_t> merge_ranks;  // key: a + '\0' + b
  bool ignore_merges = false;
  int32_t unk_id = -1;
  std::vector<Normalization> normalizers;
  std::vector<PreTokenizerStep> pre_tokenizers;
  std::vector<AddedToken> added_tokens;              // longest content first
  std::unordered_map<int32_t, size_t> added_by_id;   // id -> index into added_tokens
  std::vector<int32_t> prefix_ids;                   // post-processor, before the sequence
  std::vector<int32_t> suffix_ids;                   // post-processor, after the sequence
  int64_t vocab_size = 0;
};

}  // namespace mobius::data::internal

#endif  // MOBIUS_COMMON_DATA_HF_TOKENIZER_SPEC_H_
