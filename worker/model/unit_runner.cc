// UnitRunner: creation, workspace layout, dispatch, and the embedding and head units.
#include "worker/model/unit_runner.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/model/model_config_parse.h"
#include "common/numeric/bf16.h"
#include "common/numeric/f16.h"
#include "common/numeric/nf4.h"
#include "common/status_macros.h"
#include "worker/kernels/dropout_mask.h"
#include "worker/model/linear.h"
#include "worker/model/unit_runner_internal.h"
#include "worker/reference/ops_rope.h"

namespace mobius::units {

using backend::DType;
using model::UnitKind;

const void* UnitRunner::Ctx::W(const std::string& name, int64_t element_offset) const {
  if (name.empty()) return nullptr;
  const UnitParam* p = layout->Find(name);
  if (p == nullptr) {  // a programmer error: the layout comes from the same config
    std::fprintf(stderr, "unit %lld has no parameter %s\n",
                 static_cast<long long>(layout->unit_index), name.c_str());
    std::abort();
  }
  return weights->at(2 * static_cast<uint64_t>(p->offset + element_offset));
}

LinearWeight UnitRunner::Ctx::Base(LinearWeight linear, const std::string& name) const {
  const UnitParam* p = layout->Find(name);
  if (p != nullptr && p->nf4) {
    linear.nf4_elements = p->num_elements;
    linear.nf4_scratch = workspace->at(lws.nf4);
  }
  return linear;
}

float* UnitRunner::Ctx::NormG(const std::string& name, int which) const {
  if (name.empty()) return nullptr;
  if (!frozen) return G(name);
  return static_cast<float*>(workspace->at(lws.sink)) + which * lws.sink_elements;
}

LoraTerm UnitRunner::Ctx::Lora(const std::string& weight, int64_t row, bool first,
                               bool last) const {
  LoraTerm l;
  if (adapter == nullptr || adapter->empty() || adapter_buffers == nullptr) return l;
  const UnitAdapter::Module* m = adapter->Find(weight);
  if (m == nullptr) return l;
  const int64_t r = adapter->rank;
  float* params = static_cast<float*>(adapter_buffers->params->data());
  l.a = params + m->a;
  l.b = params + m->b + row * r;
  if (adapter_buffers->grads != nullptr) {
    float* grads = static_cast<float*>(adapter_buffers->grads->data());
    l.da = grads + m->a;
    l.db = grads + m->b + row * r;
  }
  l.rank = r;
  l.scale = adapter->scale;
  l.h = static_cast<float*>(workspace->at(lws.h + m->h_slot * lws.h_stride));
  l.gh = static_cast<float*>(workspace->at(lws.gh));
  l.first = first;
  l.last = last;
  if (adapter->dropout > 0 && mb.dropout_key != 0) {
    l.dropout = adapter->dropout;
    l.key = kernels::LoraDropoutModuleKey(mb.dropout_key, m->index);
    l.row_offset = mb.row_offset;
    l.xd = static_cast<float*>(workspace->at(lws.xd));
  }
  return l;
}

float* UnitRunner::Ctx::G(const std::string& name, int64_t element_offset) const {
  if (name.empty() || grads == nullptr) return nullptr;
  const void* w = W(name, element_offset);  // checks the name
  const uint64_t elements = (static_cast<const char*>(w) -
                             static_cast<const char*>(weights->data())) / 2;
  return static_cast<float*>(grads->at(4 * elements));
}

absl::StatusOr<std::unique_ptr<UnitRunner>> UnitRunner::Create(const model::ModelConfig& config,
                                                               int64_t unit_index,
                                                               backend::Backend* backend,
                                                               const LoraSpec* lora,
                                                               int64_t chunk_tokens,
                                                               backend::DType precision) {
  if (backend == nullptr) return absl::InvalidArgumentError("UnitRunner: null backend");
  if (!backend::IsHalf(precision)) {
    return absl::InvalidArgumentError(absl::StrCat("UnitRunner: precision ",
                                                   backend::DTypeName(precision),
                                                   " is not a 16-bit format (bf16, fp16)"));
  }
  MOBIUS_RETURN_IF_ERROR(reference::ValidateConfig(config));
  MOBIUS_ASSIGN_OR_RETURN(model::ModelDescription model, model::DescribeModel(config));
  MOBIUS_ASSIGN_OR_RETURN(UnitParamLayout layout,
                          MakeUnitParamLayout(model, unit_index, lora != nullptr && lora->base_nf4));
  const UnitKind kind = model.units[unit_index].kind;
  std::unique_ptr<UnitRunner> r(new UnitRunner(config, kind, std::move(layout),
                                               reference::ParameterNames(config), backend));
  r->chunk_tokens_ = chunk_tokens;
  r->half_ = precision;
  r->half_accumulate_ = precision == backend::DType::kF16 && backend->half_accumulate_faster();
  // fp16 with trainable weights: the backward's GEMMs write fp16 too (PyTorch autocast's order;
  // LoRA's frozen base keeps fp32 input gradients, which its adapters add into).
  r->half_backward_ = precision == backend::DType::kF16 && lora == nullptr;
  if (lora != nullptr) {
    if (lora->rank < 1) return absl::InvalidArgumentError("UnitRunner: LoRA rank must be >= 1");
    r->frozen_ = true;
    r->adapter_ = MakeUnitAdapter(*lora, unit_index, config.moe.experts_per_token);
  }
  MOBIUS_ASSIGN_OR_RETURN(r->experts_, r->FindExpertSpan());
  return r;
}

absl::StatusOr<UnitRunner::ExpertSpan> UnitRunner::FindExpertSpan() const {
  if (kind_ != UnitKind::kDecoderBlock) return ExpertSpan{};
  const reference::LayerNames& ln = names_.layers[unit_index() - 1];
  if (ln.experts.empty()) return ExpertSpan{};
  // An expert's tensors, whichever of them its MLP has.
  auto tensors = [](const reference::LayerNames::Expert& x) {
    std::vector<std::string> out;
    for (const std::string* n : {&x.gate_weight, &x.up_weight, &x.gate_up_weight, &x.gate_up_bias,
                                 &x.down_weight, &x.down_bias}) {
      if (!n->empty()) out.push_back(*n);
    }
    return out;
  };
  // Expert e's [first, end) element range and its tensors' offsets from its first.
  auto range = [&](int64_t e, std::vector<int64_t>* rel) -> absl::StatusOr<std::pair<int64_t, int64_t>> {
    int64_t first = INT64_MAX, end = 0;
    std::vector<const UnitParam*> params;
    for (const std::string& name : tensors(ln.experts[e])) {
      const UnitParam* p = layout_.Find(name);
      if (p == nullptr) return absl::InternalError("a MoE block without its experts' weights");
      params.push_back(p);
      first = std::min(first, p->offset);
      end = std::max(end, p->offset + p->storage_elements);
    }
    rel->clear();
    for (const UnitParam* p : params) rel->push_back(p->offset - first);
    return std::pair{first, end};
  };
  std::vector<int64_t> rel0, rel;
  MOBIUS_ASSIGN_OR_RETURN(const auto r0, range(0, &rel0));
  ExpertSpan span{.begin = r0.first, .elements = r0.second - r0.first,
                  .count = static_cast<int64_t>(ln.experts.size())};
  if (span.count > 1) {
    MOBIUS_ASSIGN_OR_RETURN(const auto r1, range(1, &rel));
    span.stride = r1.first - span.begin;
  } else {
    span.stride = span.elements;
  }
  // The layout puts experts last, each at the same stride with the same inner offsets: checked.
  for (int64_t e = 0; e < span.count; ++e) {
    MOBIUS_ASSIGN_OR_RETURN(const auto r, range(e, &rel));
    if (r.first != span.begin + e * span.stride || rel != rel0) {
      return absl::InternalError(absl::StrCat("unit ", unit_index(), ": expert ", e,
                                              " is not at its stride in the weight layout"));
    }
  }
  if (span.begin + (span.count - 1) * span.stride + span.elements != layout_.total_elements) {
    return absl::InternalError(absl::StrCat("unit ", unit_index(), ": experts are not last"));
  }
  return span;
}

UnitRunner::UnitRunner(const model::ModelConfig& config, UnitKind kind, UnitParamLayout layout,
                       reference::ModelNames names, backend::Backend* backend)
    : config_(config), kind_(kind), layout_(std::move(layout)), names_(std::move(names)),
      backend_(backend) {
  if (kind_ == UnitKind::kDecoderBlock && config_.position == model::PositionKind::kRope) {
    inv_freq_ = reference::RopeInverseFrequencies(config_.head_dim, config_.rope_theta,
                                                  config_.rope_scaling);
  }
}

LoraWorkspace MakeLoraWorkspace(const model::ModelConfig& config, const UnitAdapter& adapter,
                                bool frozen, const WorkspaceLayout& base, int64_t b, int64_t t,
                                int64_t nf4_scratch_elements) {
  LoraWorkspace w;
  const uint64_t n = b * t;
  const uint64_t h = (4 * n * adapter.rank + 63) / 64 * 64;
  uint64_t at = (base.total + 63) / 64 * 64;
  if (!adapter.empty()) {
    w.h = at;
    w.h_stride = h;
    at += h * adapter.h_slots;
    w.gh = at;
    at += h * adapter.gh_slots;
    if (adapter.dropout > 0) {
      // The MLP's modules see a chunk of rows at a time (unit_workspace.h), an expert's at most N
      // (a token routes to an expert once), the others all N.
      uint64_t elements = 0;
      for (const UnitAdapter::Module& m : adapter.modules) {
        const bool mlp = m.module.in_mlp() && base.mlp_rows > 0;
        const uint64_t rows = mlp ? static_cast<uint64_t>(base.mlp_rows) : n;
        elements = std::max(elements, rows * static_cast<uint64_t>(m.module.in));
      }
      w.xd = at;
      at += (4 * elements + 63) / 64 * 64;
    }
  }
  if (frozen) {
    w.sink = at;
    w.sink_elements = std::max(config.hidden_size, config.head_dim);
    at += 2 * 4 * static_cast<uint64_t>(w.sink_elements);
  }
  if (nf4_scratch_elements > 0) {
    w.nf4 = (at + 63) / 64 * 64;
    at = w.nf4;
    at += (2 * static_cast<uint64_t>(nf4_scratch_elements) + 63) / 64 * 64;
  }
  w.total = frozen || !adapter.empty() ? at : base.total;
  return w;
}

LoraTerm LoraRows(LoraTerm l, int64_t row0) {
  if (l.a == nullptr || row0 == 0) return l;
  l.h += row0 * l.rank;   // kept from forward to backward per row
  l.gh += row0 * l.rank;  // xd stays: per-call scratch from its start, the call's rows only
  l.row_offset += row0;
  return l;
}

uint64_t UnitRunner::WorkspaceBytes(int64_t b, int64_t t) const {
  return MakeLoraWorkspace(config_, adapter_, frozen_,
                           model::MakeWorkspaceLayout(config_, kind_, b, t, chunk_tokens_, half_backward_), b, t,
                           layout_.nf4_scratch_elements)
      .total;
}

absl::Status UnitRunner::UploadWeights(backend::Queue& queue,
                                       const std::map<std::string, std::vector<uint16_t>>& bf16,
                                       backend::DeviceBuffer& weights,
                                       absl::string_view what, bool skip_experts) const {
  for (const UnitParam& p : layout_.params) {
    if (skip_experts && experts_.count > 0 && p.offset >= experts_.begin) continue;
    auto it = bf16.find(p.name);
    if (it == bf16.end()) return absl::InvalidArgumentError(absl::StrCat(what, ": missing ", p.name));
    if (static_cast<int64_t>(it->second.size()) != p.num_elements) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", p.name, " has ",
                                                     it->second.size(), " elements, want ",
                                                     p.num_elements));
    }
    if (p.nf4) {  // QLoRA: the 16-bit values quantised (the caller synchronises before `bf16` goes)
      MOBIUS_RETURN_IF_ERROR(backend_->Synchronize(queue));  // the blob below is a local
      const std::vector<uint8_t> blob = QuantizeNf4Blob(it->second.data(), p.num_elements, half_);
      MOBIUS_RETURN_IF_ERROR(backend_->CopyToDevice(queue, blob.data(), weights,
                                                    2 * static_cast<uint64_t>(p.offset),
                                                    blob.size()));
      MOBIUS_RETURN_IF_ERROR(backend_->Synchronize(queue));
      continue;
    }
    MOBIUS_RETURN_IF_ERROR(backend_->CopyToDevice(queue, it->second.data(), weights,
                                                  2 * static_cast<uint64_t>(p.offset),
                                                  2 * static_cast<uint64_t>(p.num_elements)));
  }
  return absl::OkStatus();
}

std::vector<uint8_t> QuantizeNf4Blob(const uint16_t* bits, int64_t n, backend::DType precision) {
  std::vector<uint8_t> blob(static_cast<size_t>(numeric::Nf4Bytes(n)));
  numeric::Nf4BlobQuantizer q(n, blob.data());
  constexpr int64_t kPiece = 64 * 1024;  // whole NF4 blocks, widened a piece at a time
  std::vector<float> x(static_cast<size_t>(std::min(n, kPiece)));
  for (int64_t begin = 0; begin < n; begin += kPiece) {
    const int64_t count = std::min(kPiece, n - begin);
    if (precision == backend::DType::kF16) {
      numeric::F16ToFp32(bits + begin, x.data(), static_cast<size_t>(count));
    } else {
      numeric::Bf16ToFp32(bits + begin, x.data(), static_cast<size_t>(count));
    }
    q.Add(x.data(), count);
  }
  q.Finish();
  return blob;
}

absl::StatusOr<backend::DeviceBuffer> UnitRunner::AllocateWorkspace(int64_t b, int64_t t) const {
  return backend_->Allocate(WorkspaceBytes(b, t),
                            absl::StrCat("unit", unit_index(), ".workspace"));
}

absl::Status UnitRunner::CheckCall(const MicroBatch& mb, const backend::DeviceBuffer& weights,
                                   const backend::DeviceBuffer* grads,
                                   const backend::DeviceBuffer& workspace,
                                   const AdapterBuffers* adapter, bool backward,
                                   bool logits_only) const {
  const std::string unit = absl::StrCat("unit ", unit_index(), ": ");
  if (mb.b <= 0 || mb.t <= 0) return absl::InvalidArgumentError(unit + "empty microbatch");
  if (config_.position == model::PositionKind::kLearned &&
      mb.position + mb.t > config_.max_position_embeddings) {
    return absl::InvalidArgumentError(absl::StrCat(unit, "positions up to ", mb.position + mb.t,
                                                   " exceed ", config_.max_position_embeddings,
                                                   " positions"));
  }
  if (mb.position < 0) return absl::InvalidArgumentError(unit + "negative position");
  if (kind_ == UnitKind::kDecoderBlock && mb.kv == nullptr && mb.position != 0) {
    return absl::InvalidArgumentError(unit + "a block at position > 0 needs a KV cache");
  }
  if (kind_ == UnitKind::kDecoderBlock && mb.kv != nullptr) {
    const KvCache& kv = *mb.kv;
    if (backward) return absl::InvalidArgumentError(unit + "a KV cache is for the forward only");
    if (kv.k == nullptr || kv.v == nullptr || mb.position + mb.t > kv.capacity) {
      return absl::InvalidArgumentError(absl::StrCat(unit, "KV cache of ", kv.capacity,
                                                     " positions cannot take positions up to ",
                                                     mb.position + mb.t));
    }
    if (config_.position == model::PositionKind::kRope && (kv.cos == nullptr || kv.sin == nullptr)) {
      return absl::InvalidArgumentError(unit + "a RoPE block's KV cache needs its tables");
    }
  }
  if (mb.input == nullptr) return absl::InvalidArgumentError(unit + "null input");
  if (kind_ == UnitKind::kHead && mb.targets == nullptr && !logits_only) {
    return absl::InvalidArgumentError(unit + "the head needs targets");
  }
  if (mb.experts != nullptr && experts_.count > 0) {
    if (backward) return absl::InvalidArgumentError(unit + "experts from a source are forward-only");
    if (layout_.nf4_scratch_elements > 0) {
      return absl::InvalidArgumentError(unit + "experts from a source cannot be NF4");
    }
  }
  const uint64_t want_weights =
      mb.experts != nullptr ? dense_weight_bytes() : layout_.weight_bytes();
  if (weights.size_bytes() < want_weights) {
    return absl::InvalidArgumentError(absl::StrCat(unit, "weights buffer holds ",
                                                   weights.size_bytes(), " bytes, want ",
                                                   want_weights));
  }
  if (!adapter_.empty()) {
    const uint64_t want = adapter_.bytes();
    if (adapter == nullptr || adapter->params == nullptr || adapter->params->size_bytes() < want ||
        (backward && (adapter->grads == nullptr || adapter->grads->size_bytes() < want))) {
      return absl::InvalidArgumentError(absl::StrCat(
          unit, "the unit's adapters need ", want, "-byte parameter",
          backward ? " and gradient buffers" : " buffer"));
    }
  }
  if (!frozen_ && grads != nullptr && grads->size_bytes() < layout_.grad_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat(unit, "grads buffer holds ", grads->size_bytes(),
                                                   " bytes, want ", layout_.grad_bytes()));
  }
  if (workspace.size_bytes() < WorkspaceBytes(mb.b, mb.t)) {
    return absl::InvalidArgumentError(absl::StrCat(unit, "workspace holds ", workspace.size_bytes(),
                                                   " bytes, want ", WorkspaceBytes(mb.b, mb.t)));
  }
  return absl::OkStatus();
}

UnitRunner::Ctx UnitRunner::MakeCtx(backend::Queue& queue, const MicroBatch& mb,
                                    const backend::DeviceBuffer& weights,
                                    const backend::DeviceBuffer* grads,
                                    const backend::DeviceBuffer& workspace,
                                    const AdapterBuffers* adapter) const {
  Ctx c{&queue, mb, mb.b * mb.t, &weights, frozen_ ? nullptr : grads, &workspace,
        model::MakeWorkspaceLayout(config_, kind_, mb.b, mb.t, chunk_tokens_, half_backward_), &layout_};
  c.adapter = &adapter_;
  c.adapter_buffers = adapter;
  c.lws = MakeLoraWorkspace(config_, adapter_, frozen_, c.ws, mb.b, mb.t,
                            layout_.nf4_scratch_elements);
  c.frozen = frozen_;
  c.half = half_;
  c.half_accumulate = half_accumulate_;
  c.half_backward = half_backward_;
  return c;
}

absl::Status UnitRunner::Forward(backend::Queue& queue, const MicroBatch& mb,
                                 const backend::DeviceBuffer& weights, void* out,
                                 const backend::DeviceBuffer& workspace,
                                 const AdapterBuffers* adapter) const {
  MOBIUS_RETURN_IF_ERROR(CheckCall(mb, weights, nullptr, workspace, adapter, false, false));
  if (out == nullptr) return absl::InvalidArgumentError("unit forward: null output");
  const Ctx c = MakeCtx(queue, mb, weights, nullptr, workspace, adapter);
  switch (kind_) {
    case UnitKind::kEmbedding: return EmbeddingForward(c, out);
    case UnitKind::kDecoderBlock: return BlockForward(c, out);
    case UnitKind::kHead: return HeadForward(c, static_cast<float*>(out));
  }
  return absl::InternalError("unknown unit kind");
}

absl::Status UnitRunner::Logits(backend::Queue& queue, const MicroBatch& mb,
                                const backend::DeviceBuffer& weights, float* logits,
                                const backend::DeviceBuffer& workspace) const {
  if (kind_ != UnitKind::kHead) {
    return absl::FailedPreconditionError(
        absl::StrCat("unit ", unit_index(), ": logits come from the head"));
  }
  MOBIUS_RETURN_IF_ERROR(CheckCall(mb, weights, nullptr, workspace, nullptr, false, true));
  if (logits == nullptr) return absl::InvalidArgumentError("head logits: null output");
  return HeadLogits(MakeCtx(queue, mb, weights, nullptr, workspace, nullptr), logits);
}

absl::Status UnitRunner::Backward(backend::Queue& queue, const MicroBatch& mb,
                                  const backend::DeviceBuffer& weights,
                                  const backend::DeviceBuffer& grads, const float* dout,
                                  float* dinp, float loss_scale,
                                  const backend::DeviceBuffer& workspace, bool recompute,
                                  const AdapterBuffers* adapter, float* loss) const {
  MOBIUS_RETURN_IF_ERROR(CheckCall(mb, weights, &grads, workspace, adapter, true, false));
  if (kind_ != UnitKind::kHead && dout == nullptr) {
    return absl::InvalidArgumentError("unit backward: null dout");
  }
  if (kind_ != UnitKind::kEmbedding && dinp == nullptr) {
    return absl::InvalidArgumentError("unit backward: null dinp");
  }
  MicroBatch once = mb;  // the recompute writes no routing statistics (MicroBatch::moe_stats)
  once.moe_stats = nullptr;
  const Ctx c = MakeCtx(queue, once, weights, &grads, workspace, adapter);
  switch (kind_) {
    case UnitKind::kEmbedding: return EmbeddingBackward(c, dout);
    case UnitKind::kDecoderBlock:
      if (recompute) MOBIUS_RETURN_IF_ERROR(BlockForward(c, nullptr));
      return BlockBackward(c, dout, dinp);
    case UnitKind::kHead: {
      // One chunk: the forward's logits are the backward's (recomputed here unless kept). Several:
      // the backward recomputes each chunk's logits from the final norm's output.
      const bool one_chunk = c.ws.head_rows >= c.n;
      // With recompute the loss comes out of the recomputed forward (`loss`, else the workspace's).
      float* mean_loss = recompute && loss != nullptr ? loss : c.f32(c.ws.loss);
      if (recompute && one_chunk) MOBIUS_RETURN_IF_ERROR(HeadForward(c, mean_loss));
      if (recompute && !one_chunk) MOBIUS_RETURN_IF_ERROR(HeadNorm(c));
      return HeadBackward(c, dinp, loss_scale, /*logits_ready=*/one_chunk,
                          recompute && !one_chunk ? loss : nullptr);
    }
  }
  return absl::InternalError("unknown unit kind");
}

// ---- norms (LayerNorm or RMSNorm per config) ----

absl::Status UnitRunner::Norm(const Ctx& c, const std::string& weight, const std::string& bias,
                              const void* inp, void* out, float* mean, float* rstd,
                              int64_t n) const {
  const bool layer = config_.norm == model::NormKind::kLayerNorm;
  return backend_->NormForward(
      *c.queue, {.dtype = c.half, .op = layer ? backend::NormOp::kLayerNorm : backend::NormOp::kRmsNorm,
                 .n = n, .c = config_.hidden_size, .eps = static_cast<float>(config_.norm_eps),
                 .inp = inp, .weight = c.W(weight), .bias = layer ? c.W(bias) : nullptr,
                 .out = out, .mean = layer ? mean : nullptr, .rstd = rstd});
}

absl::Status UnitRunner::NormBackward(const Ctx& c, const std::string& weight,
                                      const std::string& bias, const void* dout, const void* inp,
                                      const float* mean, const float* rstd, float* dinp,
                                      int64_t n) const {
  const bool layer = config_.norm == model::NormKind::kLayerNorm;
  return backend_->NormBackward(
      *c.queue, {.dtype = c.half, .op = layer ? backend::NormOp::kLayerNorm : backend::NormOp::kRmsNorm,
                 .n = n, .c = config_.hidden_size, .dout = dout, .inp = inp,
                 .weight = c.W(weight), .mean = layer ? mean : nullptr, .rstd = rstd,
                 .dinp_type = DType::kFp32, .dinp = dinp, .dweight = c.NormG(weight, 0),
                 .dbias = layer ? c.NormG(bias, 1) : nullptr});
}

// ---- embedding ----

absl::Status UnitRunner::EmbeddingForward(const Ctx& c, void* out) const {
  // Rows at positions [position, position + t): the learned table from row `position` on.
  const int64_t C = config_.hidden_size;
  return backend_->EmbeddingForward(
      *c.queue, {.dtype = c.half, .b = c.mb.b, .t = c.mb.t, .c = C, .vocab = config_.vocab_size,
                 .positions = config_.max_position_embeddings - c.mb.position,
                 .tokens = static_cast<const int32_t*>(c.mb.input),
                 .wte = c.W(names_.token_embedding),
                 .wpe = c.W(names_.position_embedding, c.mb.position * C), .out = out});
}

absl::Status UnitRunner::EmbeddingBackward(const Ctx& c, const float* dout) const {
  if (c.frozen) return absl::OkStatus();  // nothing to train in the embedding, no input gradient
  // The kernel scatters bf16 rows (the activation type); the fp32 boundary gradient is rounded once.
  MOBIUS_RETURN_IF_ERROR(backend_->Cast(*c.queue, {.n = c.n * config_.hidden_size,
                                                   .src_type = DType::kFp32,
                                                   .dst_type = c.half, .src = dout,
                                                   .dst = c.at(c.ws.d_norm)}));
  return backend_->EmbeddingBackward(
      *c.queue, {.dtype = c.half, .b = c.mb.b, .t = c.mb.t, .c = config_.hidden_size, .vocab = config_.vocab_size,
                 .positions = config_.max_position_embeddings,
                 .tokens = static_cast<const int32_t*>(c.mb.input), .dout = c.at(c.ws.d_norm),
                 .dwte = c.G(names_.token_embedding), .dwpe = c.G(names_.position_embedding)});
}

// ---- head: final norm, LM head (fp32 logits), cross-entropy ----

absl::Status UnitRunner::HeadNorm(const Ctx& c) const {
  return Norm(c, names_.final_norm_weight, names_.final_norm_bias, c.mb.input, c.at(c.ws.norm1),
              c.f32(c.ws.norm1_mean), c.f32(c.ws.norm1_rstd), c.n);
}

absl::Status UnitRunner::HeadChunkLogits(const Ctx& c, int64_t row0, int64_t rows,
                                         void* logits) const {
  const int64_t C = config_.hidden_size, V = config_.vocab_size;
  const LinearWeight head{.in_out = false, .dtype = c.half, .half_accumulate = c.half_accumulate,
                          .w = c.W(names_.lm_head), .ld = C};
  return LinearForward(*backend_, *c.queue, head, c.bf(c.ws.norm1) + row0 * C, logits,
                       LogitsType(c), rows, C, V);
}

absl::Status UnitRunner::HeadLogits(const Ctx& c, float* logits) const {
  MOBIUS_RETURN_IF_ERROR(HeadNorm(c));
  // Decoding's logits are fp32 whatever the training precision.
  const int64_t C = config_.hidden_size, V = config_.vocab_size;
  const LinearWeight head{.in_out = false, .dtype = c.half, .w = c.W(names_.lm_head), .ld = C};
  return LinearForward(*backend_, *c.queue, head, c.bf(c.ws.norm1), logits, DType::kFp32, c.n,
                       C, V);
}

DType UnitRunner::LogitsType(const Ctx& c) { return c.half_backward ? c.half : DType::kFp32; }

absl::Status UnitRunner::HeadChunkLoss(const Ctx& c, int64_t row0, int64_t rows,
                                       float* mean_loss) const {
  MOBIUS_RETURN_IF_ERROR(HeadChunkLogits(c, row0, rows, c.at(c.ws.logits)));
  return backend_->CrossEntropyForward(
      *c.queue, {.n = rows, .v = config_.vocab_size, .logits_type = LogitsType(c),
                 .logits = c.at(c.ws.logits), .targets = c.mb.targets + row0,
                 .losses = c.f32(c.ws.losses) + row0, .lse = c.f32(c.ws.ce_lse) + row0,
                 .mean_loss = mean_loss, .rows = ChunkRowsOf(c, row0)});
}

backend::CrossEntropyRows UnitRunner::ChunkRowsOf(const Ctx& c, int64_t row0) const {
  if (c.ws.head_rows >= c.n) return {};  // one chunk: the unchunked op
  return {.row0 = row0, .total_rows = c.n};
}

absl::Status UnitRunner::HeadForward(const Ctx& c, float* loss) const {
  MOBIUS_RETURN_IF_ERROR(HeadNorm(c));
  const int64_t step = c.ws.head_rows;
  for (int64_t r0 = 0; r0 < c.n; r0 += step) {
    const int64_t rows = std::min(step, c.n - r0);
    MOBIUS_RETURN_IF_ERROR(HeadChunkLoss(c, r0, rows, r0 + rows == c.n ? loss : nullptr));
  }
  return absl::OkStatus();
}

absl::Status UnitRunner::HeadBackward(const Ctx& c, float* dinp, float loss_scale,
                                      bool logits_ready, float* loss) const {
  const int64_t C = config_.hidden_size, V = config_.vocab_size;
  // fp16 backward: fp16 logits gradient, input gradient and weight gradient, the last through
  // an fp16 block of head_dw_rows vocabulary rows added into the fp32 gradient (linear.h).
  const bool hb = c.half_backward;
  const DType logits_type = LogitsType(c);
  const LinearWeight head{.in_out = false, .dtype = c.half, .half_accumulate = c.half_accumulate,
                          .half_backward = hb, .dw_half = hb ? c.at(c.ws.dw_half) : nullptr,
                          .dw_block_rows = hb ? c.ws.head_dw_rows : 0, .w = c.W(names_.lm_head),
                          .ld = C, .dw = c.G(names_.lm_head)};
  const int64_t step = c.ws.head_rows;
  for (int64_t r0 = 0; r0 < c.n; r0 += step) {
    const int64_t rows = std::min(step, c.n - r0);
    if (!logits_ready) {
      MOBIUS_RETURN_IF_ERROR(HeadChunkLoss(c, r0, rows, r0 + rows == c.n ? loss : nullptr));
    }
    MOBIUS_RETURN_IF_ERROR(backend_->CrossEntropyBackward(
        *c.queue, {.n = rows, .v = V, .logits_type = logits_type, .logits = c.at(c.ws.logits),
                   .lse = c.f32(c.ws.ce_lse) + r0, .targets = c.mb.targets + r0,
                   .dloss = loss_scale, .dlogits = c.at(c.ws.logits),
                   .rows = ChunkRowsOf(c, r0)}));
    void* dx = hb ? static_cast<void*>(c.bf(c.ws.d_norm) + r0 * C)
                  : static_cast<void*>(c.f32(c.ws.d_norm_f32) + r0 * C);
    MOBIUS_RETURN_IF_ERROR(LinearBackward(*backend_, *c.queue, head, c.bf(c.ws.norm1) + r0 * C,
                                          c.at(c.ws.logits), logits_type, dx,
                                          hb ? c.half : DType::kFp32, false, rows, C, V));
  }
  if (!hb) {
    MOBIUS_RETURN_IF_ERROR(backend_->Cast(*c.queue, {.n = c.n * C, .src_type = DType::kFp32,
                                                     .dst_type = c.half,
                                                     .src = c.at(c.ws.d_norm_f32),
                                                     .dst = c.at(c.ws.d_norm)}));
  }
  MOBIUS_RETURN_IF_ERROR(backend_->Zero(*c.queue, {.dst = dinp, .bytes = 4 * uint64_t(c.n * C)}));
  return NormBackward(c, names_.final_norm_weight, names_.final_norm_bias, c.at(c.ws.d_norm),
                      c.mb.input, c.f32(c.ws.norm1_mean), c.f32(c.ws.norm1_rstd), dinp, c.n);
}

}  // namespace mobius::units
