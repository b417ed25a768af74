#include "common/data/loader.h"

#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace mobius::data {
namespace {

// splitmix64: a portable seed mixer (std:: distributions are implementation-defined).
uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

TokenLoader::TokenLoader(std::shared_ptr<const TokenFile> file, const LoaderOptions& o)
    : file_(std::move(file)), options_(o) {
  num_sequences_ = file_->num_tokens() > 0 ? (file_->num_tokens() - 1) / o.seq_len : 0;
  int64_t eval = static_cast<int64_t>(std::ceil(o.eval_fraction * static_cast<double>(num_sequences_)));
  num_train_ = num_sequences_ - eval;
}

absl::StatusOr<std::unique_ptr<TokenLoader>> TokenLoader::Create(
    std::shared_ptr<const TokenFile> file, const LoaderOptions& o) {
  if (o.seq_len <= 0 || o.batch_size <= 0) {
    return absl::InvalidArgumentError("seq_len and batch_size must be positive");
  }
  if (o.world <= 0 || o.rank < 0 || o.rank >= o.world) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", o.rank, " of world ", o.world, " is invalid"));
  }
  if (!(o.eval_fraction >= 0 && o.eval_fraction <= 0.5)) {
    return absl::InvalidArgumentError("eval_fraction must be in [0, 0.5]");
  }
  std::unique_ptr<TokenLoader> l(new TokenLoader(std::move(file), o));
  const int64_t needed = o.batch_size * o.world;
  if (l->num_train_ < needed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the token file holds ", l->num_train_, " training sequences of ", o.seq_len,
        " tokens, fewer than one batch needs (", o.batch_size, " per rank x ", o.world,
        " ranks); use more data, a shorter sequence or a smaller batch"));
  }
  return l;
}

int64_t TokenLoader::batches_per_epoch() const {
  return (num_train_ / options_.world) / options_.batch_size;
}

const std::vector<int64_t>& TokenLoader::EpochOrder(int64_t epoch) {
  if (epoch == cached_epoch_) return order_;
  std::vector<int64_t> perm(static_cast<size_t>(num_train_));
  std::iota(perm.begin(), perm.end(), 0);
  uint64_t state = Mix(options_.seed ^ Mix(static_cast<uint64_t>(epoch)));
  for (int64_t i = num_train_ - 1; i > 0; --i) {
    state = Mix(state);
    int64_t j = static_cast<int64_t>(state % static_cast<uint64_t>(i + 1));
    std::swap(perm[i], perm[j]);
  }
  order_.clear();
  for (int64_t i = options_.rank; i < num_train_; i += options_.world) order_.push_back(perm[i]);
  cached_epoch_ = epoch;
  return order_;
}

absl::Status TokenLoader::FillSequence(int64_t seq, int64_t row, Batch* batch) const {
  const int64_t t = options_.seq_len;
  const int64_t start = seq * t;
  for (int64_t i = 0; i <= t; ++i) {
    const int64_t pos = start + i;
    uint32_t id = file_->token(pos);
    if (id >= static_cast<uint64_t>(file_->vocab_size())) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", id, " at token position ", pos,
                                                     " is outside the vocabulary [0, ",
                                                     file_->vocab_size(), ")"));
    }
    if (i < t) batch->tokens[row * t + i] = static_cast<int32_t>(id);
    if (i > 0) {
      batch->targets[row * t + i - 1] =
          file_->is_target(pos) ? static_cast<int32_t>(id) : kIgnoreIndex;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Batch> TokenLoader::NextTrainBatch() {
  if (position_.batch_in_epoch >= batches_per_epoch()) {
    ++position_.epoch;
    position_.batch_in_epoch = 0;
  }
  const std::vector<int64_t>& order = EpochOrder(position_.epoch);
  Batch batch;
  batch.b = options_.batch_size;
  batch.t = options_.seq_len;
  batch.tokens.resize(static_cast<size_t>(batch.b * batch.t));
  batch.targets.resize(batch.tokens.size());
  batch.position = position_;
  for (int64_t r = 0; r < batch.b; ++r) {
    int64_t seq = order[static_cast<size_t>(position_.batch_in_epoch * batch.b + r)];
    absl::Status s = FillSequence(seq, r, &batch);
    if (!s.ok()) return s;
  }
  ++position_.batch_in_epoch;
  return batch;
}

absl::StatusOr<std::vector<Batch>> TokenLoader::EvalBatches() const {
  std::vector<int64_t> mine;
  for (int64_t s = num_train_ + options_.rank; s < num_sequences_; s += options_.world) mine.push_back(s);
  std::vector<Batch> out;
  for (size_t i = 0; i < mine.size(); i += static_cast<size_t>(options_.batch_size)) {
    Batch b;
    b.b = std::min<int64_t>(options_.batch_size, static_cast<int64_t>(mine.size() - i));
    b.t = options_.seq_len;
    b.tokens.resize(static_cast<size_t>(b.b * b.t));
    b.targets.resize(b.tokens.size());
    for (int64_t r = 0; r < b.b; ++r) {
      absl::Status s = FillSequence(mine[i + static_cast<size_t>(r)], r, &b);
      if (!s.ok()) return s;
    }
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace mobius::data
