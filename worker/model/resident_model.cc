#include "worker/model/resident_model.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/numeric/bf16.h"
#include "common/numeric/f16.h"
#include "common/status_macros.h"
#include "worker/model/moe_aux.h"

namespace mobius::units {

using backend::DeviceBuffer;

namespace {

absl::Status CheckRange(const char* what, const UnitParam& p, int64_t begin, int64_t n) {
  if (begin >= 0 && n >= 0 && begin + n <= p.num_elements) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": [", begin, ", ", begin + n, ") is outside ", p.name, " [0, ",
                   p.num_elements, ")"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ResidentModel>> ResidentModel::Create(
    const model::ModelConfig& config, backend::Backend* backend, const Options& options) {
  if (backend == nullptr) return absl::InvalidArgumentError("ResidentModel: null backend");
  std::unique_ptr<ResidentModel> m(new ResidentModel(config, backend, options));
  MOBIUS_ASSIGN_OR_RETURN(m->queue_, backend->CreateQueue(backend::QueueKind::kCompute, 0));
  const int64_t units = config.num_layers + 2;
  const LoraSpec* lora = options.lora ? &*options.lora : nullptr;
  m->adapter_params_.resize(units);
  m->adapter_grads_.resize(units);
  m->adapters_.resize(units);
  for (int64_t u = 0; u < units; ++u) {
    MOBIUS_ASSIGN_OR_RETURN(std::unique_ptr<UnitRunner> runner,
                            UnitRunner::Create(config, u, backend, lora, options.chunk_tokens,
                                               options.precision));
    const UnitParamLayout& layout = runner->layout();
    MOBIUS_ASSIGN_OR_RETURN(DeviceBuffer w,
                            backend->Allocate(layout.weight_bytes(), absl::StrCat("unit", u, ".weights")));
    // Frozen base weights (LoRA) have no gradients.
    MOBIUS_ASSIGN_OR_RETURN(
        DeviceBuffer g,
        backend->Allocate(runner->frozen() ? 0 : layout.grad_bytes(), absl::StrCat("unit", u, ".grads")));
    if (!runner->adapter().empty()) {
      const uint64_t bytes = runner->adapter().bytes();
      MOBIUS_ASSIGN_OR_RETURN(m->adapter_params_[u],
                              backend->Allocate(bytes, absl::StrCat("unit", u, ".adapters")));
      MOBIUS_ASSIGN_OR_RETURN(m->adapter_grads_[u],
                              backend->Allocate(bytes, absl::StrCat("unit", u, ".adapter_grads")));
      MOBIUS_RETURN_IF_ERROR(backend->Zero(*m->queue_, {.dst = m->adapter_params_[u].data(),
                                                        .bytes = bytes}));
      m->adapters_[u] = {&m->adapter_params_[u], &m->adapter_grads_[u]};
    }
    // Padding between tensors is never written by the ops; zero it once so it stays defined.
    MOBIUS_RETURN_IF_ERROR(backend->Zero(*m->queue_, {.dst = w.data(), .bytes = w.size_bytes()}));
    m->runners_.push_back(std::move(runner));
    m->weights_.push_back(std::move(w));
    m->grads_.push_back(std::move(g));
  }
  MOBIUS_RETURN_IF_ERROR(m->ZeroGrads());
  return m;
}

ResidentModel::ResidentModel(const model::ModelConfig& config, backend::Backend* backend,
                             const Options& options)
    : config_(config), backend_(backend), options_(options) {}

ResidentModel::~ResidentModel() {
  // Queued work may still use the buffers; drain before they are freed (errors are moot here).
  if (queue_ != nullptr) backend_->Synchronize(*queue_).IgnoreError();
}

absl::Status ResidentModel::SetWeights(const std::map<std::string, std::vector<uint16_t>>& bf16) {
  for (size_t u = 0; u < runners_.size(); ++u) {
    MOBIUS_RETURN_IF_ERROR(runners_[u]->UploadWeights(*queue_, bf16, weights_[u], "SetWeights"));
  }
  return backend_->Synchronize(*queue_);
}

absl::Status ResidentModel::ZeroGrads() {
  for (auto* set : {&grads_, &adapter_grads_}) {
    for (DeviceBuffer& g : *set) {
      if (g.size_bytes() == 0) continue;
      MOBIUS_RETURN_IF_ERROR(backend_->Zero(*queue_, {.dst = g.data(), .bytes = g.size_bytes()}));
    }
  }
  return absl::OkStatus();
}

std::vector<std::pair<std::string, int64_t>> ResidentModel::AdapterTensors() const {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto& r : runners_) {
    const UnitAdapter& a = r->adapter();
    for (const UnitAdapter::Module& m : a.modules) {
      out.push_back({m.module.a_name(), a.rank * m.module.in});
      out.push_back({m.module.b_name(), m.module.out * a.rank});
    }
  }
  return out;
}

absl::StatusOr<ResidentModel::AdapterTensor> ResidentModel::FindAdapter(
    const std::string& name) const {
  for (size_t u = 0; u < runners_.size(); ++u) {
    const UnitAdapter& a = runners_[u]->adapter();
    for (const UnitAdapter::Module& m : a.modules) {
      if (m.module.a_name() == name) {
        return AdapterTensor{static_cast<int64_t>(u), m.a, a.rank * m.module.in};
      }
      if (m.module.b_name() == name) {
        return AdapterTensor{static_cast<int64_t>(u), m.b, m.module.out * a.rank};
      }
    }
  }
  return absl::InvalidArgumentError("no adapter tensor " + name);
}

absl::Status ResidentModel::SetAdapter(const std::string& name, const float* data) {
  MOBIUS_ASSIGN_OR_RETURN(const AdapterTensor t, FindAdapter(name));
  MOBIUS_RETURN_IF_ERROR(backend_->CopyToDevice(*queue_, data, adapter_params_[t.unit],
                                                4 * static_cast<uint64_t>(t.offset),
                                                4 * static_cast<uint64_t>(t.elements)));
  return backend_->Synchronize(*queue_);
}

absl::Status ResidentModel::ReadAdapterGrad(const std::string& name, float* out) {
  MOBIUS_ASSIGN_OR_RETURN(const AdapterTensor t, FindAdapter(name));
  MOBIUS_RETURN_IF_ERROR(backend_->CopyToHost(*queue_, adapter_grads_[t.unit],
                                              4 * static_cast<uint64_t>(t.offset), out,
                                              4 * static_cast<uint64_t>(t.elements)));
  return backend_->Synchronize(*queue_);
}

absl::Status ResidentModel::Prepare(int64_t b, int64_t t) {
  if (b == b_ && t == t_) return absl::OkStatus();
  MOBIUS_RETURN_IF_ERROR(backend_->Synchronize(*queue_));  // the old buffers may be in use
  b_ = t_ = 0;
  inputs_.clear();
  workspaces_.clear();
  for (DeviceBuffer& d : dhidden_) d.Reset();
  const uint64_t n = b * t, hidden_bytes = 2 * n * config_.hidden_size;
  MOBIUS_ASSIGN_OR_RETURN(tokens_, backend_->Allocate(4 * n, "resident.tokens"));
  MOBIUS_ASSIGN_OR_RETURN(targets_, backend_->Allocate(4 * n, "resident.targets"));
  MOBIUS_ASSIGN_OR_RETURN(loss_, backend_->Allocate(4, "resident.loss"));
  inputs_.resize(runners_.size());
  for (size_t u = 1; u < runners_.size(); ++u) {
    MOBIUS_ASSIGN_OR_RETURN(inputs_[u],
                            backend_->Allocate(hidden_bytes, absl::StrCat("unit", u, ".input")));
  }
  for (DeviceBuffer& d : dhidden_) {
    MOBIUS_ASSIGN_OR_RETURN(d, backend_->Allocate(2 * hidden_bytes, "resident.dhidden"));
  }
  if (options_.recompute) {
    uint64_t bytes = 0;
    for (const auto& r : runners_) bytes = std::max(bytes, r->WorkspaceBytes(b, t));
    MOBIUS_ASSIGN_OR_RETURN(DeviceBuffer ws, backend_->Allocate(bytes, "resident.workspace"));
    workspaces_.push_back(std::move(ws));
  } else {
    for (const auto& r : runners_) {
      MOBIUS_ASSIGN_OR_RETURN(DeviceBuffer ws, r->AllocateWorkspace(b, t));
      workspaces_.push_back(std::move(ws));
    }
  }
  b_ = b, t_ = t;
  return absl::OkStatus();
}

const DeviceBuffer& ResidentModel::Workspace(int64_t unit) const {
  return workspaces_[options_.recompute ? 0 : unit];
}

MicroBatch ResidentModel::Batch(int64_t unit) const {
  const int64_t units = num_units();
  MicroBatch mb{b_, t_, unit == 0 ? tokens_.data() : inputs_[unit].data(),
                unit == units - 1 ? static_cast<const int32_t*>(targets_.data()) : nullptr,
                dropout_key_, row_offset_};
  const int64_t block = runners_[unit]->kind() == model::UnitKind::kDecoderBlock
                            ? config_.moe.MoeLayerIndex(unit - 1)
                            : -1;
  if (block >= 0 && !moe_stats_.empty()) {
    const int64_t E = config_.moe.num_experts;
    // The runner writes them during this call (Batch is const: it only describes the call).
    mb.moe_stats = const_cast<float*>(moe_stats_.data()) + block * 2 * E;
    if (!moe_aux_grad_.empty()) mb.moe_aux_grad = moe_aux_grad_.data();
  }
  return mb;
}

absl::Status ResidentModel::EnqueueForward(const int32_t* tokens, const int32_t* targets,
                                           int64_t b, int64_t t) {
  if (b <= 0 || t <= 0) return absl::InvalidArgumentError("ResidentModel: empty batch");
  MOBIUS_RETURN_IF_ERROR(Prepare(b, t));
  backend::Queue& q = *queue_;
  const uint64_t n = b * t;
  MOBIUS_RETURN_IF_ERROR(backend_->CopyToDevice(q, tokens, tokens_, 0, 4 * n));
  MOBIUS_RETURN_IF_ERROR(backend_->CopyToDevice(q, targets, targets_, 0, 4 * n));
  const int64_t units = num_units();
  for (int64_t u = 0; u < units; ++u) {
    void* out = u + 1 < units ? inputs_[u + 1].data() : loss_.data();
    MOBIUS_RETURN_IF_ERROR(
        runners_[u]->Forward(q, Batch(u), weights_[u], out, Workspace(u), &adapters_[u]));
  }
  return absl::OkStatus();
}

absl::StatusOr<float> ResidentModel::Forward(const int32_t* tokens, const int32_t* targets,
                                             int64_t b, int64_t t) {
  dropout_key_ = 0;  // eval: no dropout
  row_offset_ = 0;
  MOBIUS_RETURN_IF_ERROR(EnqueueForward(tokens, targets, b, t));
  float loss = 0.0f;
  MOBIUS_RETURN_IF_ERROR(backend_->CopyToHost(*queue_, loss_, 0, &loss, 4));
  MOBIUS_RETURN_IF_ERROR(backend_->Synchronize(*queue_));
  return loss;
}

absl::StatusOr<float> ResidentModel::ForwardBackward(const int32_t* tokens, const int32_t* targets,
                                                     int64_t b, int64_t t, float loss_scale,
                                                     uint64_t dropout_key, int64_t row_offset) {
  dropout_key_ = dropout_key;
  row_offset_ = row_offset;
  // The load-balancing loss: the forward writes the routing statistics (each MoE block's
  // synchronises the queue, so they are on the host when EnqueueForward returns).
  moe_aux_grad_.clear();
  if (MoeAuxEnabled(config_)) {
    moe_stats_.assign(config_.moe.NumMoeLayers(config_.num_layers) * 2 * config_.moe.num_experts,
                      0.0f);
  }
  MOBIUS_RETURN_IF_ERROR(EnqueueForward(tokens, targets, b, t));
  MoeAux aux;
  if (MoeAuxEnabled(config_)) {
    aux = MoeAuxLoss(config_, moe_stats_.data(), b * t, loss_scale);
    moe_aux_grad_ = aux.grad;
  }
  backend::Queue& q = *queue_;
  float loss = 0.0f;
  MOBIUS_RETURN_IF_ERROR(backend_->CopyToHost(q, loss_, 0, &loss, 4));
  const int64_t units = num_units();
  for (int64_t u = units - 1; u >= 0; --u) {
    const float* dout = u + 1 < units ? static_cast<const float*>(dhidden_[(u + 1) % 2].data())
                                      : nullptr;
    float* dinp = u > 0 ? static_cast<float*>(dhidden_[u % 2].data()) : nullptr;
    // The head ran last: its internals are still in the (shared) workspace (see the header).
    const bool recompute = options_.recompute && u != units - 1;
    MOBIUS_RETURN_IF_ERROR(runners_[u]->Backward(q, Batch(u), weights_[u], grads_[u], dout, dinp,
                                                 loss_scale, Workspace(u), recompute,
                                                 &adapters_[u]));
  }
  MOBIUS_RETURN_IF_ERROR(backend_->Synchronize(q));
  moe_stats_.clear();
  moe_aux_grad_.clear();
  return static_cast<float>(loss + aux.loss);
}

absl::StatusOr<float> ResidentModel::Step(const int32_t* tokens, const int32_t* targets, int64_t b,
                                          int64_t t, int64_t microbatches, uint64_t dropout_key,
                                          float loss_scale) {
  if (microbatches < 1 || b % microbatches != 0) {
    return absl::InvalidArgumentError(absl::StrCat("Step: b = ", b, " is not a multiple of ",
                                                   microbatches, " microbatches"));
  }
  const int64_t mb = b / microbatches, rows = mb * t;
  std::vector<int64_t> counts(microbatches, 0);
  int64_t total = 0;
  for (int64_t i = 0; i < microbatches; ++i) {
    for (int64_t j = 0; j < rows; ++j) counts[i] += targets[i * rows + j] != -100;
    total += counts[i];
  }
  MOBIUS_RETURN_IF_ERROR(ZeroGrads());
  double loss = 0.0;
  for (int64_t i = 0; i < microbatches; ++i) {
    const float share = total == 0 ? 0.0f : static_cast<float>(counts[i]) / total;
    MOBIUS_ASSIGN_OR_RETURN(float l, ForwardBackward(tokens + i * rows, targets + i * rows, mb, t,
                                                     share * loss_scale, dropout_key, i * rows));
    loss += double{share} * l;
  }
  return static_cast<float>(loss);
}

absl::StatusOr<std::map<std::string, std::vector<float>>> ResidentModel::Grads() {
  if (options_.lora) {  // the adapters' (the base is frozen)
    std::map<std::string, std::vector<float>> out;
    for (const auto& [name, elements] : AdapterTensors()) {
      std::vector<float>& g = out[name];
      g.resize(elements);
      MOBIUS_RETURN_IF_ERROR(ReadAdapterGrad(name, g.data()));
    }
    return out;
  }
  std::vector<std::vector<float>> host(runners_.size());
  for (size_t u = 0; u < runners_.size(); ++u) {
    host[u].resize(runners_[u]->layout().total_elements);
    MOBIUS_RETURN_IF_ERROR(backend_->CopyToHost(*queue_, grads_[u], 0, host[u].data(),
                                                grads_[u].size_bytes()));
  }
  MOBIUS_RETURN_IF_ERROR(backend_->Synchronize(*queue_));
  std::map<std::string, std::vector<float>> out;
  for (size_t u = 0; u < runners_.size(); ++u) {
    for (const UnitParam& p : runners_[u]->layout().params) {
      std::vector<float>& g = out[p.name];
      g.resize(p.num_elements, 0.0f);
      for (int64_t i = 0; i < p.num_elements; ++i) g[i] += host[u][p.offset + i];
    }
  }
  return out;
}

absl::Status ResidentModel::ReadGrad(const std::string& name, int64_t begin, int64_t n,
                                     float* out, float* scratch) {
  bool first = true;
  for (size_t u = 0; u < runners_.size(); ++u) {
    const UnitParam* p = runners_[u]->layout().Find(name);
    if (p == nullptr) continue;
    MOBIUS_RETURN_IF_ERROR(CheckRange("ReadGrad", *p, begin, n));
    MOBIUS_RETURN_IF_ERROR(backend_->CopyToHost(*queue_, grads_[u],
                                                4 * static_cast<uint64_t>(p->offset + begin),
                                                first ? out : scratch, 4 * static_cast<uint64_t>(n)));
    MOBIUS_RETURN_IF_ERROR(backend_->Synchronize(*queue_));
    // Grads() adds every part to 0.0f in unit order; the same additions, so -0.0 becomes +0.0
    // there and here alike.
    if (first) {
      for (int64_t i = 0; i < n; ++i) out[i] = 0.0f + out[i];
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] += scratch[i];
    }
    first = false;
  }
  if (first) return absl::InvalidArgumentError("ReadGrad: no parameter " + name);
  return absl::OkStatus();
}

absl::Status ResidentModel::SetWeight(const std::string& name, int64_t begin, int64_t n,
                                      const uint16_t* bf16) {
  bool found = false;
  for (size_t u = 0; u < runners_.size(); ++u) {
    const UnitParam* p = runners_[u]->layout().Find(name);
    if (p == nullptr) continue;
    MOBIUS_RETURN_IF_ERROR(CheckRange("SetWeight", *p, begin, n));
    if (p->nf4 && (begin != 0 || n != p->num_elements)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "SetWeight: ", name, " is held in NF4: set all of it, not [", begin, ", ", begin + n,
          ")"));
    }
    found = true;
    if (p->nf4) {
      const std::vector<uint8_t> blob = QuantizeNf4Blob(bf16, n, runners_[u]->precision());
      MOBIUS_RETURN_IF_ERROR(backend_->CopyToDevice(*queue_, blob.data(), weights_[u],
                                                    2 * static_cast<uint64_t>(p->offset),
                                                    blob.size()));
      MOBIUS_RETURN_IF_ERROR(backend_->Synchronize(*queue_));
      continue;
    }
    MOBIUS_RETURN_IF_ERROR(backend_->CopyToDevice(*queue_, bf16, weights_[u],
                                                  2 * static_cast<uint64_t>(p->offset + begin),
                                                  2 * static_cast<uint64_t>(n)));
  }
  if (!found) return absl::InvalidArgumentError("SetWeight: no parameter " + name);
  return backend_->Synchronize(*queue_);
}

bool ResidentModel::IsNf4Weight(const std::string& name) const {
  for (const auto& r : runners_) {
    const UnitParam* p = r->layout().Find(name);
    if (p != nullptr) return p->nf4;
  }
  return false;
}

absl::Status ResidentModel::SetNf4Weight(const std::string& name, const numeric::Nf4Tensor& t) {
  bool found = false;
  for (size_t u = 0; u < runners_.size(); ++u) {
    const UnitParam* p = runners_[u]->layout().Find(name);
    if (p == nullptr) continue;
    if (!p->nf4 || t.numel != p->num_elements) {
      return absl::InvalidArgumentError(absl::StrCat(
          "SetNf4Weight: ", name, p->nf4 ? " has " : " is not held in NF4 (",
          p->nf4 ? absl::StrCat(p->num_elements, " elements, not ", t.numel)
                 : std::string("a 16-bit weight)")));
    }
    found = true;
    std::vector<uint8_t> blob(static_cast<size_t>(numeric::Nf4Bytes(t.numel)));
    numeric::WriteNf4Blob(t, blob.data());
    MOBIUS_RETURN_IF_ERROR(backend_->CopyToDevice(*queue_, blob.data(), weights_[u],
                                                  2 * static_cast<uint64_t>(p->offset),
                                                  blob.size()));
    MOBIUS_RETURN_IF_ERROR(backend_->Synchronize(*queue_));
  }
  if (!found) return absl::InvalidArgumentError("SetNf4Weight: no parameter " + name);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> ResidentModel::UnitInput(int64_t unit) {
  if (unit < 1 || unit >= num_units() || inputs_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("UnitInput: no hidden input for unit ", unit));
  }
  std::vector<uint16_t> bits(inputs_[unit].size_bytes() / 2);
  MOBIUS_RETURN_IF_ERROR(backend_->CopyToHost(*queue_, inputs_[unit], 0, bits.data(),
                                              inputs_[unit].size_bytes()));
  MOBIUS_RETURN_IF_ERROR(backend_->Synchronize(*queue_));
  std::vector<float> out(bits.size());
  if (runners_[unit]->precision() == backend::DType::kF16) {
    numeric::F16ToFp32(bits.data(), out.data(), bits.size());
  } else {
    numeric::Bf16ToFp32(bits.data(), out.data(), bits.size());
  }
  return out;
}

}  // namespace mobius::units
