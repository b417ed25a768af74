// Decoder: a model resident on one backend for text generation, with a key/value cache: a prompt
// is prefilled in one forward, then each new token runs one forward of one row that attends to
// the cached keys and values of every earlier position.
//
// It runs the training engine's own layer units (worker/model/unit_runner.h) in their decoding
// mode (MicroBatch::position, KvCache) and the head's logits (UnitRunner::Logits), so a decoding
// step computes what the training forward computes for that position. FullForward is that
// training forward over a whole sequence (no cache), the oracle a cached step must match: on the
// CPU backend the attention rows are bitwise equal (Backend::CachedAttentionForward); the GEMMs
// of one row and of many may round differently (BLAS kernels), see generate_test.cc for the
// measured bound.
//
// Device memory (against the backend's cap; RESOURCE_EXHAUSTED from Create or a call): per unit
// its bf16 weights (a tied head holds its own copy of the embedding) and, with an adapter, the
// fp32 adapter parameters; per decoder block a K and a V cache [capacity, KV, hd] bf16; the RoPE
// tables [capacity, hd / 2] fp32 x 2; one workspace, hidden and logits buffers sized for the
// largest call so far.
//
// Routed experts (a mixture of experts, Options::experts): the blocks' experts stay in host memory
// and an ExpertCache (expert_cache.h) holds a bounded number of them on the device; a block's
// forward uploads only the experts its rows were routed to that are not already there. The
// decoder then holds every weight but the experts, the cache's slots (Options::expert_cache_bytes;
// at least one block's experts), the KV cache and the buffers; the logits are bitwise those of the
// resident decoder (the same ops on the same values). kAuto routes when the model would not fit
// resident: its weights, KV cache and the buffers of a prefill of `capacity` rows.
//
//   auto d = *Decoder::Create(config, &backend, {.capacity = prompt.size() + max_new});
//   d->SetWeights(bf16_by_name);                  // and SetAdapters(peft_tensors) with a LoRA
//   std::vector<float> logits = *d->Append(prompt.data(), prompt.size());   // [V], last row
//   logits = *d->Append(&next, 1);                // position prompt.size()
//
// One sequence (batch 1). Not thread-safe; one caller at a time.
#ifndef MOBIUS_WORKER_GENERATE_DECODER_H_
#define MOBIUS_WORKER_GENERATE_DECODER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/model/model_config.h"
#include "worker/backend/backend.h"
#include "worker/generate/expert_cache.h"
#include "worker/model/adapter.h"
#include "worker/model/unit_runner.h"
#include "worker/reference/parameters.h"

namespace mobius::generate {

class Decoder {
 public:
  struct Options {
    int64_t capacity = 0;  // positions the cache holds (prompt + new tokens); >= 1
    // A LoRA adapter (its spec; SetAdapters uploads its tensors): the adapted modules add their
    // term as in training (no dropout: generation is an eval pass).
    std::optional<units::LoraSpec> lora;
    enum class Experts { kAuto, kResident, kRouted };
    Experts experts = Experts::kAuto;  // a model without experts is always resident
    // Routed: the device bytes of the expert slots; 0: what is left after everything else (a
    // prefill of `capacity` rows' buffers reserved), at most every expert of the model.
    uint64_t expert_cache_bytes = 0;
    // Routed: copy all of a block's experts at every forward (the block-streaming baseline that
    // routed experts are measured against; bench/generate).
    bool upload_all_experts = false;
  };

  // INVALID_ARGUMENT for a config the engine does not run or a capacity < 1, or one beyond the
  // learned positions (GPT-2's max_position_embeddings). `backend` must outlive the decoder.
  static absl::StatusOr<std::unique_ptr<Decoder>> Create(const model::ModelConfig& config,
                                                         backend::Backend* backend,
                                                         const Options& options);
  ~Decoder();

  // Every parameter from host bf16 bits keyed by HF name ([numel] each; missing or misshapen:
  // INVALID_ARGUMENT naming it). Returns after the copies completed. Routed experts: the experts'
  // tensors are moved into the cache's host memory (pass the map by std::move to hold them once).
  absl::Status SetWeights(std::map<std::string, std::vector<uint16_t>> bf16);
  // Every adapter tensor from fp32 by PEFT name (lora_A [r, in], lora_B [out, r]); a missing or
  // misshapen one: INVALID_ARGUMENT naming it. FAILED_PRECONDITION without Options::lora.
  absl::Status SetAdapters(const reference::Parameters& adapters);

  // Appends `n` tokens (host ids in [0, V)) at positions [length(), length() + n): one forward
  // that writes their keys and values into the cache and attends over positions [0, length() + n).
  // Returns the logits [V] fp32 of the last new row, or of every new row [n, V] when `all_rows`.
  // INVALID_ARGUMENT for n < 1, a token out of range (nothing appended) or positions past the
  // capacity.
  absl::StatusOr<std::vector<float>> Append(const int32_t* tokens, int64_t n,
                                            bool all_rows = false);

  // The training forward over a whole sequence tokens [n] (no cache, length() unchanged):
  // logits [n, V] fp32 of every row.
  absl::StatusOr<std::vector<float>> FullForward(const int32_t* tokens, int64_t n);

  void Reset() { length_ = 0; }  // forgets the sequence (the cache is overwritten from 0)
  int64_t length() const { return length_; }
  int64_t capacity() const { return options_.capacity; }
  const model::ModelConfig& config() const { return config_; }
  // The routed experts' cache (its stats, slots); nullptr when the experts are resident.
  const ExpertCache* expert_cache() const { return experts_.get(); }
  // Device bytes the decoder needs with every weight resident (Create's kAuto test).
  uint64_t resident_bytes() const { return resident_bytes_; }

 private:
  Decoder(const model::ModelConfig& config, backend::Backend* backend, const Options& options);
  absl::Status MakeRopeTables();
  // The per-call buffers of a call of `n` rows and `logit_rows` logits rows (Prepare's).
  uint64_t CallBytes(int64_t n, int64_t logit_rows) const;
  absl::Status MakeExpertCache();  // Create's, when routed
  absl::Status Prepare(int64_t n, int64_t logit_rows);  // grows the per-call buffers
  absl::Status CheckTokens(const int32_t* tokens, int64_t n) const;
  // Embedding and blocks over tokens [n] at `position` (cached when `cached`), then the head's
  // logits of rows [first_row, n) into logits_; returns them on the host.
  absl::StatusOr<std::vector<float>> Run(const int32_t* tokens, int64_t n, int64_t position,
                                         bool cached, int64_t first_row);

  model::ModelConfig config_;
  backend::Backend* backend_;
  Options options_;
  int64_t length_ = 0;
  std::unique_ptr<backend::Queue> queue_;
  std::vector<std::unique_ptr<units::UnitRunner>> runners_;
  std::vector<backend::DeviceBuffer> weights_;         // per unit, bf16
  std::vector<backend::DeviceBuffer> adapter_params_;  // per unit (LoRA), fp32
  std::vector<units::AdapterBuffers> adapters_;        // per unit, into the above
  std::vector<backend::DeviceBuffer> kv_buffers_;      // per block: K then V
  std::vector<units::KvCache> kv_;                     // per block, into the above
  backend::DeviceBuffer rope_;                         // cos then sin [capacity, hd / 2] fp32
  // Per call, grown as needed.
  std::unique_ptr<ExpertCache> experts_;  // routed experts only
  uint64_t resident_bytes_ = 0;
  int64_t rows_ = 0, logit_rows_ = 0;
  backend::DeviceBuffer tokens_, hidden_[2], workspace_, logits_;
};

}  // namespace mobius::generate

#endif  // MOBIUS_WORKER_GENERATE_DECODER_H_
