#include "worker/generate/decoder.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/reference/ops_rope.h"

namespace mobius::generate {

using backend::DeviceBuffer;

absl::StatusOr<std::unique_ptr<Decoder>> Decoder::Create(const model::ModelConfig& config,
                                                         backend::Backend* backend,
                                                         const Options& options) {
  if (backend == nullptr) return absl::InvalidArgumentError("Decoder: null backend");
  if (options.capacity < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("Decoder: capacity must be >= 1 (got ", options.capacity, ")"));
  }
  if (config.position == model::PositionKind::kLearned &&
      options.capacity > config.max_position_embeddings) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model has ", config.max_position_embeddings,
        " learned positions (max_position_embeddings); prompt and new tokens need ",
        options.capacity));
  }
  std::unique_ptr<Decoder> d(new Decoder(config, backend, options));
  MOBIUS_ASSIGN_OR_RETURN(d->queue_, backend->CreateQueue(backend::QueueKind::kCompute, 0));
  const int64_t units = config.num_layers + 2;
  const units::LoraSpec* lora = options.lora ? &*options.lora : nullptr;
  for (int64_t u = 0; u < units; ++u) {
    MOBIUS_ASSIGN_OR_RETURN(std::unique_ptr<units::UnitRunner> runner,
                            units::UnitRunner::Create(config, u, backend, lora));
    d->runners_.push_back(std::move(runner));
  }
  const int64_t kv_elements = options.capacity * config.num_kv_heads * config.head_dim;
  const uint64_t kv_bytes = 2 * 2 * static_cast<uint64_t>(kv_elements);
  const uint64_t rope_bytes =
      config.position == model::PositionKind::kRope
          ? 4 * static_cast<uint64_t>((2 * options.capacity + 1) * (config.head_dim / 2))
          : 0;
  bool has_experts = false;
  d->resident_bytes_ = kv_bytes * config.num_layers + rope_bytes + d->CallBytes(options.capacity, 1);
  for (const auto& r : d->runners_) {
    d->resident_bytes_ += r->layout().weight_bytes() + r->adapter().bytes();
    has_experts = has_experts || r->expert_span().count > 0;
  }
  using Experts = Options::Experts;
  const uint64_t free_bytes = backend->capacity_bytes() - std::min(backend->capacity_bytes(),
                                                                   backend->used_bytes());
  const bool routed =
      has_experts && (options.experts == Experts::kRouted ||
                      (options.experts == Experts::kAuto && d->resident_bytes_ > free_bytes));
  d->adapter_params_.resize(units);
  d->adapters_.resize(units);
  for (int64_t u = 0; u < units; ++u) {
    const units::UnitRunner& runner = *d->runners_[u];
    const uint64_t weight_bytes =
        routed ? runner.dense_weight_bytes() : runner.layout().weight_bytes();
    MOBIUS_ASSIGN_OR_RETURN(DeviceBuffer w,
                            backend->Allocate(weight_bytes, absl::StrCat("unit", u, ".weights")));
    // Padding between tensors is never written by the ops; zero it once so it stays defined.
    MOBIUS_RETURN_IF_ERROR(backend->Zero(*d->queue_, {.dst = w.data(), .bytes = w.size_bytes()}));
    if (!runner.adapter().empty()) {
      const uint64_t bytes = runner.adapter().bytes();
      MOBIUS_ASSIGN_OR_RETURN(d->adapter_params_[u],
                              backend->Allocate(bytes, absl::StrCat("unit", u, ".adapters")));
      MOBIUS_RETURN_IF_ERROR(
          backend->Zero(*d->queue_, {.dst = d->adapter_params_[u].data(), .bytes = bytes}));
      d->adapters_[u] = {&d->adapter_params_[u], nullptr};
    }
    d->weights_.push_back(std::move(w));
  }
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    MOBIUS_ASSIGN_OR_RETURN(DeviceBuffer kv,
                            backend->Allocate(kv_bytes, absl::StrCat("block", layer, ".kv_cache")));
    d->kv_.push_back({.k = kv.data(), .v = kv.at(2 * static_cast<uint64_t>(kv_elements)),
                      .capacity = options.capacity});
    d->kv_buffers_.push_back(std::move(kv));
  }
  MOBIUS_RETURN_IF_ERROR(d->MakeRopeTables());
  if (routed) MOBIUS_RETURN_IF_ERROR(d->MakeExpertCache());
  MOBIUS_RETURN_IF_ERROR(backend->Synchronize(*d->queue_));
  return d;
}

uint64_t Decoder::CallBytes(int64_t n, int64_t logit_rows) const {
  uint64_t ws = 0;
  for (const auto& r : runners_) ws = std::max(ws, r->WorkspaceBytes(1, n));
  const uint64_t hidden = 2 * static_cast<uint64_t>(n * config_.hidden_size);
  return ws + 2 * hidden + 4 * static_cast<uint64_t>(n) +
         4 * static_cast<uint64_t>(logit_rows * config_.vocab_size);
}

absl::Status Decoder::MakeExpertCache() {
  std::vector<const units::UnitRunner*> runners;
  int64_t total = 0;
  for (const auto& r : runners_) {
    runners.push_back(r.get());
    total += r->expert_span().count;
  }
  const uint64_t slot = ExpertCache::SlotBytes(runners);
  const int64_t need = ExpertCache::MaxBlockExperts(runners);
  int64_t slots = 0;
  if (options_.expert_cache_bytes > 0) {
    slots = static_cast<int64_t>(options_.expert_cache_bytes / slot);
  } else {
    // What is left once a prefill of `capacity` rows has its buffers, less 5% for what the
    // device's libraries allocate outside the backend's count (cuBLAS workspaces).
    const uint64_t cap = backend_->capacity_bytes();
    const uint64_t taken = backend_->used_bytes() + CallBytes(options_.capacity, 1);
    const uint64_t left = cap > taken ? (cap - taken) / 20 * 19 : 0;
    slots = std::min<int64_t>(total, static_cast<int64_t>(left / slot));
  }
  if (slots < need) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "routed experts need device memory for one block's ", need, " experts (", need * slot,
        " bytes); ", options_.expert_cache_bytes > 0 ? "the expert cache is " : "there are ",
        slots * slot, " bytes",
        options_.expert_cache_bytes > 0 ? "" : " left after the other weights and a prefill's buffers",
        " (", backend_->used_bytes(), " bytes in use of ", backend_->capacity_bytes(), ")"));
  }
  MOBIUS_ASSIGN_OR_RETURN(experts_, ExpertCache::Create(config_, backend_, runners, slots,
                                                        options_.upload_all_experts));
  return absl::OkStatus();
}

Decoder::Decoder(const model::ModelConfig& config, backend::Backend* backend,
                 const Options& options)
    : config_(config), backend_(backend), options_(options) {}

Decoder::~Decoder() {
  // Queued work may still use the buffers; drain before they are freed (errors are moot here).
  if (queue_ != nullptr) backend_->Synchronize(*queue_).IgnoreError();
}

absl::Status Decoder::MakeRopeTables() {
  if (config_.position != model::PositionKind::kRope) return absl::OkStatus();
  const std::vector<float> inv_freq = reference::RopeInverseFrequencies(
      config_.head_dim, config_.rope_theta, config_.rope_scaling);
  const int64_t half = config_.head_dim / 2;
  const uint64_t table = 4 * static_cast<uint64_t>(options_.capacity * half);
  MOBIUS_ASSIGN_OR_RETURN(rope_, backend_->Allocate(2 * table + 4 * half, "rope_tables"));
  MOBIUS_RETURN_IF_ERROR(
      backend_->CopyToDevice(*queue_, inv_freq.data(), rope_, 2 * table, 4 * half));
  auto* cos = static_cast<float*>(rope_.data());
  auto* sin = static_cast<float*>(rope_.at(table));
  MOBIUS_RETURN_IF_ERROR(backend_->RopeTables(
      *queue_, {.t = options_.capacity, .half = half,
                .scale = reference::RopeTableScale(config_.rope_scaling),
                .inv_freq = static_cast<const float*>(rope_.at(2 * table)), .cos = cos,
                .sin = sin}));
  for (units::KvCache& kv : kv_) kv.cos = cos, kv.sin = sin;
  return backend_->Synchronize(*queue_);  // the copy reads inv_freq, a local
}

absl::Status Decoder::SetWeights(std::map<std::string, std::vector<uint16_t>> bf16) {
  const bool routed = experts_ != nullptr;
  for (size_t u = 0; u < runners_.size(); ++u) {
    MOBIUS_RETURN_IF_ERROR(
        runners_[u]->UploadWeights(*queue_, bf16, weights_[u], "model weights", routed));
  }
  MOBIUS_RETURN_IF_ERROR(backend_->Synchronize(*queue_));
  if (routed) MOBIUS_RETURN_IF_ERROR(experts_->TakeHostWeights(bf16));
  return absl::OkStatus();
}

absl::Status Decoder::SetAdapters(const reference::Parameters& adapters) {
  if (!options_.lora) return absl::FailedPreconditionError("the decoder has no LoRA adapter");
  for (size_t u = 0; u < runners_.size(); ++u) {
    const units::UnitAdapter& a = runners_[u]->adapter();
    for (const units::UnitAdapter::Module& m : a.modules) {
      for (const auto& [name, offset, elements] :
           {std::tuple{m.module.a_name(), m.a, a.rank * m.module.in},
            std::tuple{m.module.b_name(), m.b, m.module.out * a.rank}}) {
        auto it = adapters.tensors.find(name);
        if (it == adapters.tensors.end()) {
          return absl::InvalidArgumentError("adapter: missing tensor " + name);
        }
        if (static_cast<int64_t>(it->second.data.size()) != elements) {
          return absl::InvalidArgumentError(absl::StrCat("adapter: ", name, " has ",
                                                         it->second.data.size(),
                                                         " elements, want ", elements));
        }
        MOBIUS_RETURN_IF_ERROR(backend_->CopyToDevice(*queue_, it->second.data.data(),
                                                      adapter_params_[u],
                                                      4 * static_cast<uint64_t>(offset),
                                                      4 * static_cast<uint64_t>(elements)));
      }
    }
  }
  return backend_->Synchronize(*queue_);
}

absl::Status Decoder::Prepare(int64_t n, int64_t logit_rows) {
  if (n > rows_) {
    uint64_t ws = 0;  // CallBytes counts the same buffers
    for (const auto& r : runners_) ws = std::max(ws, r->WorkspaceBytes(1, n));
    const uint64_t hidden = 2 * static_cast<uint64_t>(n * config_.hidden_size);
    // Release the old buffers first so that a cap fits the new ones.
    MOBIUS_RETURN_IF_ERROR(backend_->Synchronize(*queue_));
    workspace_.Reset(), hidden_[0].Reset(), hidden_[1].Reset(), tokens_.Reset();
    MOBIUS_ASSIGN_OR_RETURN(workspace_, backend_->Allocate(ws, "generate.workspace"));
    MOBIUS_ASSIGN_OR_RETURN(hidden_[0], backend_->Allocate(hidden, "generate.hidden0"));
    MOBIUS_ASSIGN_OR_RETURN(hidden_[1], backend_->Allocate(hidden, "generate.hidden1"));
    MOBIUS_ASSIGN_OR_RETURN(tokens_, backend_->Allocate(4 * static_cast<uint64_t>(n), "tokens"));
    rows_ = n;
  }
  if (logit_rows > logit_rows_) {
    MOBIUS_RETURN_IF_ERROR(backend_->Synchronize(*queue_));
    logits_.Reset();
    MOBIUS_ASSIGN_OR_RETURN(
        logits_, backend_->Allocate(4 * static_cast<uint64_t>(logit_rows * config_.vocab_size),
                                    "generate.logits"));
    logit_rows_ = logit_rows;
  }
  return absl::OkStatus();
}

absl::Status Decoder::CheckTokens(const int32_t* tokens, int64_t n) const {
  if (n < 1) return absl::InvalidArgumentError("no tokens to run");
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= config_.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", tokens[i], " at index ", i,
                                                     " is outside the vocabulary [0, ",
                                                     config_.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> Decoder::Run(const int32_t* tokens, int64_t n, int64_t position,
                                                bool cached, int64_t first_row) {
  const int64_t rows = n - first_row, C = config_.hidden_size, V = config_.vocab_size;
  MOBIUS_RETURN_IF_ERROR(Prepare(n, rows));
  backend::Queue& q = *queue_;
  MOBIUS_RETURN_IF_ERROR(backend_->CopyToDevice(q, tokens, tokens_, 0, 4 * static_cast<uint64_t>(n)));
  units::MicroBatch mb{.b = 1, .t = n, .input = tokens_.data(), .position = position};
  mb.experts = experts_.get();
  MOBIUS_RETURN_IF_ERROR(runners_[0]->Forward(q, mb, weights_[0], hidden_[0].data(), workspace_));
  int cur = 0;
  for (int64_t layer = 0; layer < config_.num_layers; ++layer) {
    const int64_t u = layer + 1;
    mb.input = hidden_[cur].data();
    mb.kv = cached ? &kv_[layer] : nullptr;
    const units::AdapterBuffers* adapter = runners_[u]->adapter().empty() ? nullptr : &adapters_[u];
    MOBIUS_RETURN_IF_ERROR(
        runners_[u]->Forward(q, mb, weights_[u], hidden_[1 - cur].data(), workspace_, adapter));
    cur = 1 - cur;
  }
  const units::MicroBatch head{.b = 1, .t = rows,
                               .input = hidden_[cur].at(2 * static_cast<uint64_t>(first_row * C)),
                               .position = position + first_row};
  MOBIUS_RETURN_IF_ERROR(runners_.back()->Logits(q, head, weights_.back(),
                                                 static_cast<float*>(logits_.data()), workspace_));
  std::vector<float> logits(static_cast<size_t>(rows * V));
  MOBIUS_RETURN_IF_ERROR(backend_->CopyToHost(q, logits_, 0, logits.data(), 4 * logits.size()));
  MOBIUS_RETURN_IF_ERROR(backend_->Synchronize(q));
  return logits;
}

absl::StatusOr<std::vector<float>> Decoder::Append(const int32_t* tokens, int64_t n,
                                                   bool all_rows) {
  MOBIUS_RETURN_IF_ERROR(CheckTokens(tokens, n));
  if (length_ + n > options_.capacity) {
    return absl::InvalidArgumentError(absl::StrCat("positions up to ", length_ + n,
                                                   " exceed the cache's capacity of ",
                                                   options_.capacity));
  }
  MOBIUS_ASSIGN_OR_RETURN(std::vector<float> logits,
                          Run(tokens, n, length_, /*cached=*/true, all_rows ? 0 : n - 1));
  length_ += n;
  return logits;
}

absl::StatusOr<std::vector<float>> Decoder::FullForward(const int32_t* tokens, int64_t n) {
  MOBIUS_RETURN_IF_ERROR(CheckTokens(tokens, n));
  return Run(tokens, n, 0, /*cached=*/false, 0);
}

}  // namespace mobius::generate
