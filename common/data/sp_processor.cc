#include "common/data/sp_processor.h"

#include <sentencepiece_processor.h>

namespace mobius::data::internal {

struct SpProcessor::Impl {
  sentencepiece::SentencePieceProcessor sp;
};

SpProcessor::SpProcessor() : impl_(new Impl()) {}
SpProcessor::~SpProcessor() = default;

std::unique_ptr<SpProcessor> SpProcessor::Load(const std::string& path, std::string* error) {
  std::unique_ptr<SpProcessor> p(new SpProcessor());
  auto status = p->impl_->sp.Load(path);
  if (!status.ok()) {
    *error = status.ToString();
    return nullptr;
  }
  return p;
}

bool SpProcessor::Encode(const std::string& text, std::vector<int>* ids, std::string* error) const {
  auto status = impl_->sp.Encode(text, ids);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

bool SpProcessor::Decode(const std::vector<int>& ids, std::string* text, std::string* error) const {
  auto status = impl_->sp.Decode(ids, text);
  if (!status.ok()) *error = status.ToString();
  return status.ok();
}

int SpProcessor::vocab_size() const { return impl_->sp.GetPieceSize(); }
int SpProcessor::bos_id() const { return impl_->sp.bos_id(); }

int SpProcessor::PieceToId(const std::string& piece) const {
  int id = impl_->sp.PieceToId(piece);
  // PieceToId maps unknown pieces to <unk>; only report real matches.
  return id >= 0 && impl_->sp.IdToPiece(id) == piece ? id : -1;
}

}  // namespace mobius::data::internal
