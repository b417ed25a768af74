// Training batches from a token file: documents packed back to back (each ends with its EOS), cut
// into sequences of T+1 tokens with stride T (inputs = first T, targets = last T, shifted by one;
// targets that the file's mask excludes become -100), a held-out eval split, seeded shuffling per
// epoch, deterministic sharding over data-parallel ranks, and a position that a checkpoint stores
// so a resumed run continues with the next unseen batch.
//
// Attention still crosses document boundaries inside a packed sequence (no block-diagonal mask
// yet): a known simplification.
//
// Split: the last ceil(eval_fraction x sequences) sequences (in file order) are the eval set.
// Order: epoch e visits the train sequences in a Fisher-Yates permutation seeded by (seed, e), and
// rank r of W takes every W-th sequence of that order starting at r; a batch is `batch_size`
// consecutive sequences of the rank's share; an epoch ends when a full batch no longer fits.
//
// Not thread-safe; one loader per rank.
#ifndef MOBIUS_COMMON_DATA_LOADER_H_
#define MOBIUS_COMMON_DATA_LOADER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data/token_file.h"

namespace mobius::data {

inline constexpr int32_t kIgnoreIndex = -100;

struct LoaderOptions {
  int64_t seq_len = 0;        // T
  int64_t batch_size = 0;     // sequences per batch (per rank)
  uint64_t seed = 0;
  double eval_fraction = 0;   // [0, 0.5]
  int rank = 0;
  int world = 1;
};

struct LoaderPosition {
  int64_t epoch = 0;
  int64_t batch_in_epoch = 0;  // batches of this rank already consumed in `epoch`
};

struct Batch {
  int64_t b = 0, t = 0;
  std::vector<int32_t> tokens;   // [b, t]
  std::vector<int32_t> targets;  // [b, t], kIgnoreIndex where masked
  LoaderPosition position;       // where this batch came from
};

class TokenLoader {
 public:
  // INVALID_ARGUMENT for bad options or a file too short for one batch (with the numbers).
  static absl::StatusOr<std::unique_ptr<TokenLoader>> Create(std::shared_ptr<const TokenFile> file,
                                                             const LoaderOptions& options);

  // The next training batch; advances the position (wrapping into the next epoch).
  // INVALID_ARGUMENT naming the token position for an id outside the vocabulary.
  absl::StatusOr<Batch> NextTrainBatch();

  // All eval sequences of this rank, in batches of batch_size (the last may be smaller).
  absl::StatusOr<std::vector<Batch>> EvalBatches() const;

  LoaderPosition position() const { return position_; }
  void Seek(const LoaderPosition& p) { position_ = p; }
  int64_t num_train_sequences() const { return num_train_; }
  int64_t num_eval_sequences() const { return num_sequences_ - num_train_; }
  int64_t batches_per_epoch() const;

 private:
  TokenLoader(std::shared_ptr<const TokenFile> file, const LoaderOptions& o);
  const std::vector<int64_t>& EpochOrder(int64_t epoch);
  absl::Status FillSequence(int64_t seq, int64_t row, Batch* batch) const;

  std::shared_ptr<const TokenFile> file_;
  LoaderOptions options_;
  int64_t num_sequences_ = 0;
  int64_t num_train_ = 0;
  LoaderPosition position_;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> order_;  // this rank's share of the epoch's permutation
};

}  // namespace mobius::data

#endif  // MOBIUS_COMMON_DATA_LOADER_H_
