// Internal: a std-only wrapper around sentencepiece::SentencePieceProcessor. SentencePiece's public
// header declares its own `absl::string_view` shim, which clashes with the real Abseil, so it is
// included only by sp_processor.cc, which includes no Abseil header.
#ifndef MOBIUS_COMMON_DATA_SP_PROCESSOR_H_
#define MOBIUS_COMMON_DATA_SP_PROCESSOR_H_

#include <memory>
#include <string>
#include <vector>

namespace mobius::data::internal {

class SpProcessor {
 public:
  // Returns nullptr and sets *error when `path` is not a SentencePiece model.
  static std::unique_ptr<SpProcessor> Load(const std::string& path, std::string* error);
  ~SpProcessor();

  bool Encode(const std::string& text, std::vector<int>* ids, std::string* error) const;
  bool Decode(const std::vector<int>& ids, std::string* text, std::string* error) const;
  int vocab_size() const;
  int bos_id() const;
  int PieceToId(const std::string& piece) const;  // -1 when `piece` is not in the vocabulary

 private:
  SpProcessor();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mobius::data::internal

#endif  // MOBIUS_COMMON_DATA_SP_PROCESSOR_H_
