#include "common/data/tokenizer.h"

#include <algorithm>
#include <atomic>
#include <thread>

namespace mobius::data {

absl::StatusOr<std::vector<std::vector<int32_t>>> Tokenizer::EncodeBatch(
    const std::vector<std::string>& documents, bool add_special_tokens, int threads) const {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::min<int>(threads, static_cast<int>(std::max<size_t>(1, documents.size())));
  std::vector<std::vector<int32_t>> out(documents.size());
  std::vector<absl::Status> errors(documents.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < documents.size(); i = next++) {
      auto ids = Encode(documents[i], add_special_tokens);
      if (ids.ok()) {
        out[i] = std::move(*ids);
      } else {
        errors[i] = ids.status();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (size_t i = 0; i < errors.size(); ++i) {
    if (!errors[i].ok()) {
      return absl::Status(errors[i].code(),
                          std::string("document ") + std::to_string(i) + ": " +
                              std::string(errors[i].message()));
    }
  }
  return out;
}

}  // namespace mobius::data
