// The weight slots and the stage passes of one rank (pipeline_state.h).
#include <algorithm>
#include <functional>
#include <utility>

#include "common/status_macros.h"
#include "worker/kernels/dropout_mask.h"
#include "worker/model/moe_aux.h"
#include "worker/runtime/pipeline_state.h"

namespace mobius::runtime {

using backend::DeviceBuffer;
using State = PipelineWorker::State;

bool State::runs_head_forward() const {
  return std::find(forward_stages.begin(), forward_stages.end(), head_forward) !=
         forward_stages.end();
}

uint32_t ComputeIndex(const State& s, uint32_t r) {
  const train::TrainerOptions& o = s.run.training;
  if (o.optimizer_staleness == 0 || r == 1 || train::IsSyncStep(o, s.start.step + r - 1)) {
    return r - 1;
  }
  return r - 2;
}

absl::Status Await(State& s, int64_t word, uint32_t value) {
  if (s.store->Load(word) >= value) return absl::OkStatus();
  const Clock::time_point t0 = Clock::now();
  absl::Status st = s.store->WaitAtLeast(word, value);
  s.stall += Since(t0);
  return st;
}

absl::Status SyncCompute(State& s) {
  const Clock::time_point t0 = Clock::now();
  absl::Status st = s.backend->Synchronize(*s.compute);
  s.compute_wait += Since(t0);
  return st;
}

std::vector<int> WeightSources(const State& s, const StageRange& range) {
  std::vector<int> out;
  const std::vector<StageRange>& backward = BackwardStages(s.run);
  for (int b = 0; b < static_cast<int>(backward.size()); ++b) {
    if (backward[b].begin < range.end && range.begin < backward[b].end) out.push_back(b);
  }
  // A tied head's copy of the embedding is written by the embedding's update (LoRA: frozen).
  if (s.tied && !s.layout.lora && range.end == s.num_units() && out.front() != 0) {
    out.push_back(0);
  }
  return out;
}

namespace {

// Training passes of step r, microbatch m: the masks of LoRA dropout (none without it).
void SetDropout(State& s, uint32_t r, int m) {
  const bool drop = s.lora && s.lora->spec.dropout > 0;
  s.dropout_key = drop ? kernels::LoraDropoutStepKey(s.run.training.seed, s.start.step + r) : 0;
  // Rows of the global batch (several nodes: this node's microbatches come after the earlier
  // nodes'), so the masks are those of one node running the whole batch.
  s.row_offset = (s.first_microbatch + m) * s.mb * s.t;
}

bool WeightsReady(const State& s, const StageRange& range, uint32_t k) {
  for (int src : WeightSources(s, range)) {
    if (s.store->Load(s.layout.updated_word(src)) < k) return false;
  }
  return true;
}

uint64_t Align256(uint64_t bytes) { return (bytes + 255) & ~uint64_t{255}; }

// Whether this rank runs the backward of `range` (its slot then holds gradients).
bool RunsBackward(const State& s, const StageRange& range) {
  if (s.resident != nullptr) return true;
  for (const Pass& p : s.passes) {
    const StageRange& r = s.range(p);
    if (p.backward && r.begin == range.begin && r.end == range.end) return true;
  }
  return false;
}

uint64_t GradPartBytes(const State& s, const StageRange& range) {
  return RunsBackward(s, range) ? Align256(s.layout.stage_grad_bytes(range)) : 0;
}

}  // namespace

uint64_t SlotBytes(const State& s, const StageRange& range) {
  return Align256(s.layout.stage_weight_bytes(range)) +
         Align256(s.layout.stage_adapter_bytes(range)) + GradPartBytes(s, range);
}

void CarveSlot(const State& s, Slot& slot, const StageRange& range) {
  const uint64_t weights = s.layout.stage_weight_bytes(range);
  const uint64_t adapters = s.layout.stage_adapter_bytes(range);
  const uint64_t grads = GradPartBytes(s, range);
  const uint64_t size = slot.arena.size_bytes();
  slot.weights = backend::DeviceView(slot.arena, 0, weights);
  slot.adapters = backend::DeviceView(slot.arena, Align256(weights), adapters);
  slot.grads = grads == 0 ? DeviceBuffer()
                          : backend::DeviceView(slot.arena, size - grads,
                                                s.layout.stage_grad_bytes(range));
}

namespace {

// Starts the upload of `range`'s weights W_k into `slot` on the H2D queue.
absl::Status Upload(State& s, Slot& slot, const StageRange& range, uint32_t k) {
  const uint64_t bytes = s.layout.stage_weight_bytes(range);
  // The slot's previous gradients (at the arena's end) may still be on their way to the store:
  // where the new weights and adapters reach into them, the upload waits for that download.
  if (!slot.grads.empty()) {
    const uint64_t old_grads_begin = slot.arena.size_bytes() - Align256(slot.grads.size_bytes());
    const uint64_t new_end =
        Align256(bytes) + Align256(s.layout.stage_adapter_bytes(range));
    if (new_end > old_grads_begin) {
      MOBIUS_RETURN_IF_ERROR(s.backend->Wait(*s.h2d, *slot.saved));
    }
  }
  if (s.deferred && &s.slots[s.deferred->slot] == &slot) s.deferred.reset();  // slot reused
  CarveSlot(s, slot, range);
  // The slot's gradients may still be on their way to the store; the weights may be overwritten
  // only after the compute queue is done with them (every pass ends by synchronising it).
  MOBIUS_RETURN_IF_ERROR(s.backend->CopyToDevice(
      *s.h2d, s.store->at<uint8_t>(s.layout.weights_offset(range.begin, k)), slot.weights, 0,
      bytes));
  s.h2d_bytes += bytes;
  // LoRA: the adapters after update k (updated in place in the store; their next update waits for
  // every pass that reads them: AwaitReaders, the stage's own backward).
  if (const uint64_t adapter_bytes = s.layout.stage_adapter_bytes(range); adapter_bytes > 0) {
    MOBIUS_RETURN_IF_ERROR(s.backend->CopyToDevice(
        *s.h2d, s.store->at<uint8_t>(s.layout.unit_adapters[range.begin]), slot.adapters, 0,
        adapter_bytes));
    s.h2d_bytes += adapter_bytes;
  }
  MOBIUS_RETURN_IF_ERROR(s.backend->Record(*s.h2d, *slot.loaded));
  slot.range = range;
  slot.index = k;
  slot.used = ++s.slot_clock;
  return absl::OkStatus();
}

DeviceBuffer UnitWeights(const State& s, const Slot& slot, int64_t unit) {
  const int64_t begin = slot.range.begin;
  return backend::DeviceView(slot.weights, s.layout.unit_weights[unit] - s.layout.unit_weights[begin],
                             s.layout.units[unit].weight_bytes());
}

// The unit's fp32 gradients in the slot (LoRA: none, the base is frozen).
DeviceBuffer UnitGrads(const State& s, const Slot& slot, int64_t unit) {
  if (s.layout.lora) return {};
  const int64_t begin = slot.range.begin;
  return backend::DeviceView(slot.grads, s.layout.unit_grads[unit] - s.layout.unit_grads[begin],
                             s.layout.units[unit].grad_bytes());
}

// Puts microbatch m's input of `range` (token ids for unit 0, else the activation checkpoint at
// its first unit, waited for) and, for the head, its targets on the device.
absl::Status UploadInput(State& s, const StageRange& range, int m, uint32_t r,
                         const data::Batch& batch) {
  const uint64_t n = static_cast<uint64_t>(s.mb * s.t);
  if (range.begin == 0) {
    MOBIUS_RETURN_IF_ERROR(
        s.backend->CopyToDevice(*s.compute, batch.tokens.data() + m * n, s.tokens, 0, 4 * n));
    s.h2d_bytes += 4 * n;
  } else {
    const int k = s.layout.checkpoint_of(range.begin);
    MOBIUS_RETURN_IF_ERROR(Await(s, s.layout.act_ready_word(k, m), r));
    const uint64_t bytes = 2 * s.layout.boundary_elements;
    MOBIUS_RETURN_IF_ERROR(s.backend->CopyToDevice(
        *s.compute, s.store->at<uint8_t>(s.layout.activation_offset(k, m, r)), s.stage_in, 0,
        bytes));
    s.h2d_bytes += bytes;
  }
  if (range.end == s.num_units()) {
    MOBIUS_RETURN_IF_ERROR(
        s.backend->CopyToDevice(*s.compute, batch.targets.data() + m * n, s.targets, 0, 4 * n));
    s.h2d_bytes += 4 * n;
  }
  return absl::OkStatus();
}

// The load-balancing loss (units/moe_aux.h): microbatch m's routing statistics of step r in the
// store (every MoE block's, StoreLayout::moe_stats); nullptr when the loss is off.
float* MoeStats(State& s, int m, uint32_t r) {
  if (s.layout.moe_blocks == 0) return nullptr;
  return s.store->at<float>(s.layout.moe_stats_offset(m, r));
}

// `stats` (the microbatch's, all blocks) and `aux_grad` ([E]) where `unit` is a MoE block.
units::MicroBatch Micro(const State& s, const StageRange& range, int64_t unit,
                        float* stats = nullptr, const float* aux_grad = nullptr) {
  const void* input = unit == 0             ? s.tokens.data()
                      : unit == range.begin ? s.stage_in.data()
                                            : s.hidden[unit - range.begin - 1].data();
  const bool head = unit == s.num_units() - 1;
  units::MicroBatch mb{s.mb, s.t, input,
                       head ? static_cast<const int32_t*>(s.targets.data()) : nullptr,
                       s.dropout_key, s.row_offset};
  const model::ModelConfig& c = s.start.config;
  const int64_t block =
      unit > 0 && unit + 1 < s.num_units() ? c.moe.MoeLayerIndex(unit - 1) : -1;
  if (block >= 0) {
    if (stats != nullptr) mb.moe_stats = stats + block * 2 * c.moe.num_experts;
    mb.moe_aux_grad = aux_grad;
  }
  return mb;
}

}  // namespace

const units::AdapterBuffers* UnitAdapters(const State& s, const Slot& slot, int64_t unit,
                                          AdapterViews& views) {
  if (!s.layout.lora || s.layout.unit_adapter_elements[unit] == 0) return nullptr;
  const int64_t begin = slot.range.begin;
  const uint64_t bytes = 4 * static_cast<uint64_t>(s.layout.unit_adapter_elements[unit]);
  views.params = backend::DeviceView(
      slot.adapters, s.layout.unit_adapters[unit] - s.layout.unit_adapters[begin], bytes);
  views.grads = backend::DeviceView(
      slot.grads, s.layout.unit_grads[unit] - s.layout.unit_grads[begin], bytes);
  views.buffers = {&views.params, &views.grads};
  return &views.buffers;
}

absl::StatusOr<Slot*> EnsureLoaded(State& s, const StageRange& range, uint32_t k) {
  if (s.deferred && s.deferred->k == k && s.deferred->range.begin == range.begin &&
      s.deferred->range.end == range.end) {
    s.deferred.reset();  // its pass has come: loaded here (on demand) if it never started
  }
  for (Slot& slot : s.slots) {
    if (slot.Holds(range, k)) {
      MOBIUS_RETURN_IF_ERROR(s.backend->Wait(*s.compute, *slot.loaded));
      slot.used = ++s.slot_clock;
      return &slot;
    }
  }
  for (int src : WeightSources(s, range)) {
    MOBIUS_RETURN_IF_ERROR(Await(s, s.layout.updated_word(src), k));
  }
  // Replace the slot least recently loaded or used: the other one holds the last pass's weights
  // (mobius: a backward reuses its rank's last two forward stages) or a prefetch for later.
  Slot& slot = s.slots[0].used <= s.slots[1].used ? s.slots[0] : s.slots[1];
  MOBIUS_RETURN_IF_ERROR(Upload(s, slot, range, k));
  ++s.uploads_on_demand;
  MOBIUS_RETURN_IF_ERROR(s.backend->Wait(*s.compute, *slot.loaded));
  return &slot;
}

absl::Status Prefetch(State& s, const Slot* current, const StageRange& next, uint32_t k) {
  for (const Slot& slot : s.slots) {
    if (slot.Holds(next, k)) return absl::OkStatus();
  }
  const int other = current == &s.slots[0] ? 1 : 0;
  if (!WeightsReady(s, next, k)) {
    // Not updated yet (the optimizer of an earlier step is still at it): started between this
    // pass's microbatches once it is, rather than when the pass comes (a whole upload on its
    // critical path).
    s.deferred = State::DeferredPrefetch{next, k, other};
    return absl::OkStatus();
  }
  return Upload(s, s.slots[other], next, k);
}

absl::Status RetryPrefetch(State& s) {
  if (!s.deferred || !WeightsReady(s, s.deferred->range, s.deferred->k)) return absl::OkStatus();
  const State::DeferredPrefetch d = *s.deferred;
  s.deferred.reset();
  return Upload(s, s.slots[d.slot], d.range, d.k);
}

absl::Status ForwardUnits(
    State& s, const StageRange& range, const Slot& slot,
    const std::function<absl::Status(int64_t, const DeviceBuffer&)>& after_unit, float* moe_stats) {
  for (int64_t u = range.begin; u < range.end; ++u) {
    const DeviceBuffer& out = u == s.num_units() - 1 ? s.loss
                              : u == range.end - 1    ? s.out
                                                      : s.hidden[u - range.begin];
    AdapterViews views;
    MOBIUS_RETURN_IF_ERROR(s.runners[u]->Forward(*s.compute, Micro(s, range, u, moe_stats),
                                                 UnitWeights(s, slot, u), out.data(), s.workspace,
                                                 UnitAdapters(s, slot, u, views)));
    MOBIUS_RETURN_IF_ERROR(after_unit(u, out));
  }
  return absl::OkStatus();
}

absl::Status ForwardPass(State& s, int f, uint32_t r, const data::Batch& batch) {
  const StageRange range = s.fwd(f);
  // The passes of one stage run in step order: with optimizer staleness and dispatch that puts a
  // stage's consecutive steps on different ranks (pool, the roundrobin rotation) step r's pass
  // could otherwise finish first, and step r-1's later Publish would move the stage's words back.
  MOBIUS_RETURN_IF_ERROR(Await(s, s.layout.forward_done_word(f), r - 1));
  // The units it runs: not the head (its backward recomputes it and gives the loss).
  const StageRange run{range.begin, std::min<int64_t>(range.end, s.num_units() - 1)};
  MOBIUS_ASSIGN_OR_RETURN(Slot * slot, EnsureLoaded(s, range, ComputeIndex(s, r)));
  // Step r overwrites the checkpoints step r - c wrote at this stage's output and at its interior
  // units where a backward stage starts (c = checkpoint_copies: 1, or 2 with optimizer staleness):
  // their readers of that step must be done, the next forward stage and the backward stages
  // starting there. (Without staleness the updates this stage waited for already imply the
  // backward readers; with it they need not.)
  const uint32_t earlier = r - std::min<uint32_t>(r, s.layout.checkpoint_copies);
  if (f + 1 < s.layout.num_forward_stages) {
    MOBIUS_RETURN_IF_ERROR(Await(s, s.layout.forward_done_word(f + 1), earlier));
  }
  const std::vector<StageRange>& backward = BackwardStages(s.run);
  for (int b = 0; b < static_cast<int>(backward.size()); ++b) {
    if (backward[b].begin > range.begin && backward[b].begin <= range.end &&
        backward[b].begin < s.num_units()) {
      MOBIUS_RETURN_IF_ERROR(Await(s, s.layout.backward_done_word(b), earlier));
    }
  }
  const uint64_t bytes = 2 * s.layout.boundary_elements;
  std::vector<int> written;  // checkpoints written for the current microbatch
  for (int m = 0; m < s.layout.num_microbatches && run.begin < run.end; ++m) {
    SetDropout(s, r, m);
    MOBIUS_RETURN_IF_ERROR(RetryPrefetch(s));  // the next pass's weights, if deferred
    MOBIUS_RETURN_IF_ERROR(UploadInput(s, run, m, r, batch));  // no targets: no head here
    written.clear();
    // Every unit output that is the input of a checkpoint unit goes to the store (the stage's
    // output for the next forward stage; in roundrobin also interior units that start a backward
    // stage).
    MOBIUS_RETURN_IF_ERROR(ForwardUnits(
        s, run, *slot,
        [&](int64_t u, const DeviceBuffer& out) -> absl::Status {
          const int k = u + 1 < s.num_units() ? s.layout.checkpoint_of(u + 1) : -1;
          if (k < 0) return absl::OkStatus();
          written.push_back(k);
          s.d2h_bytes += bytes;
          return s.backend->CopyToHost(*s.compute, out, 0,
                                       s.store->at<uint8_t>(s.layout.activation_offset(k, m, r)),
                                       bytes);
        },
        MoeStats(s, m, r)));
    MOBIUS_RETURN_IF_ERROR(SyncCompute(s));
    for (int k : written) s.store->Publish(s.layout.act_ready_word(k, m), r);
  }
  s.store->Publish(s.layout.forward_done_word(f), r);
  return absl::OkStatus();
}

absl::Status BackwardPass(State& s, int b, uint32_t r, const data::Batch& batch,
                          const std::vector<float>& shares, std::vector<float>& losses) {
  const StageRange range = s.bwd(b);
  MOBIUS_RETURN_IF_ERROR(Await(s, s.layout.backward_done_word(b), r - 1));  // as ForwardPass
  MOBIUS_ASSIGN_OR_RETURN(Slot * slot, EnsureLoaded(s, range, ComputeIndex(s, r)));
  // The store has one gradient buffer per microbatch, handed down the boundaries (store_layout.h):
  // within step r the pass writing it at b-1 is the one that read it at b (on the compute queue,
  // before the write), so only step r-1's readers are owed a wait; the last of them, backward
  // stage 0, is an earlier pass of the stream (implied without optimizer staleness).
  if (b > 0 && !GradientOverTransport(s, b, b - 1, r)) {
    MOBIUS_RETURN_IF_ERROR(Await(s, s.layout.backward_done_word(0), r - 1));
  }
  // The slot's previous gradients must have reached the store before they are zeroed.
  MOBIUS_RETURN_IF_ERROR(s.backend->Wait(*s.compute, *slot->saved));
  MOBIUS_RETURN_IF_ERROR(s.backend->Zero(
      *s.compute, {.dst = slot->grads.data(), .bytes = s.layout.stage_grad_bytes(range)}));
  const int64_t num_units = s.num_units();
  const uint64_t hidden_bytes = 4 * s.layout.boundary_elements;
  // The head scales its loss's gradient by the step's loss scale (fp16; 1 otherwise).
  float loss_scale = 1.0f;
  const bool head = range.end == num_units;
  // (Every stage with the load-balancing loss: its gradient carries the scale too.)
  if (head || s.layout.moe_blocks > 0) {
    MOBIUS_ASSIGN_OR_RETURN(loss_scale, StepLossScale(s, r));
  }
  if (head) s.ran_head = true;
  // The load-balancing loss of each microbatch, from every MoE block's statistics (written by the
  // forward passes): its gradient for the blocks here (kept until the queue has run them) and, at
  // the head, the loss term.
  std::vector<units::MoeAux> aux(s.layout.moe_blocks > 0 ? s.layout.num_microbatches : 0);
  for (int m = 0; m < s.layout.num_microbatches; ++m) {
    SetDropout(s, r, m);
    MOBIUS_RETURN_IF_ERROR(RetryPrefetch(s));  // the next pass's weights, if deferred
    MOBIUS_RETURN_IF_ERROR(UploadInput(s, range, m, r, batch));
    // Recompute the stage interior from its checkpoint: the inputs of units begin+1 .. end-1.
    for (int64_t u = range.begin; u + 1 < range.end; ++u) {
      AdapterViews views;
      MOBIUS_RETURN_IF_ERROR(s.runners[u]->Forward(
          *s.compute, Micro(s, range, u), UnitWeights(s, *slot, u),
          s.hidden[u - range.begin].data(), s.workspace, UnitAdapters(s, *slot, u, views)));
    }
    int cur = 0;  // dh[cur] holds d(loss)/d(output) of the unit about to run backward
    if (range.end != num_units && GradientOverTransport(s, b + 1, b, r)) {
      MOBIUS_RETURN_IF_ERROR(ReceiveGradient(s, b, r, s.dh[cur]));
    } else if (range.end != num_units) {
      MOBIUS_RETURN_IF_ERROR(Await(s, s.layout.dgrad_ready_word(b, m), r));
      MOBIUS_RETURN_IF_ERROR(s.backend->CopyToDevice(
          *s.compute, s.store->at<uint8_t>(s.layout.dgrad_offset(m)), s.dh[cur], 0,
          hidden_bytes));
      s.h2d_bytes += hidden_bytes;
    }
    // Every forward of microbatch m is done: the head's input (its last checkpoint) or, for any
    // other stage, the output gradient just received comes after them.
    if (!aux.empty()) {
      aux[m] = units::MoeAuxLoss(s.start.config, MoeStats(s, m, r), s.mb * s.t,
                                 double{shares[m] * loss_scale});
    }
    const float* aux_grad = aux.empty() ? nullptr : aux[m].grad.data();
    for (int64_t u = range.end - 1; u >= range.begin; --u) {
      const float* dout =
          u == num_units - 1 ? nullptr : static_cast<const float*>(s.dh[cur].data());
      float* dinp = u > 0 ? static_cast<float*>(s.dh[1 - cur].data()) : nullptr;
      AdapterViews views;
      MOBIUS_RETURN_IF_ERROR(s.runners[u]->Backward(
          *s.compute, Micro(s, range, u, nullptr, aux_grad), UnitWeights(s, *slot, u),
          UnitGrads(s, *slot, u), dout, dinp, shares[m] * loss_scale, s.workspace,
          /*recompute=*/true, UnitAdapters(s, *slot, u, views),
          u == num_units - 1 ? static_cast<float*>(s.loss.data()) : nullptr));
      cur = 1 - cur;
    }
    if (head) MOBIUS_RETURN_IF_ERROR(s.backend->CopyToHost(*s.compute, s.loss, 0, &losses[m], 4));
    if (b > 0 && GradientOverTransport(s, b, b - 1, r)) {
      MOBIUS_RETURN_IF_ERROR(SendGradient(s, b, r, s.dh[cur]));
    } else if (b > 0) {
      MOBIUS_RETURN_IF_ERROR(s.backend->CopyToHost(
          *s.compute, s.dh[cur], 0, s.store->at<uint8_t>(s.layout.dgrad_offset(m)),
          hidden_bytes));
      s.d2h_bytes += hidden_bytes;
      MOBIUS_RETURN_IF_ERROR(SyncCompute(s));
      s.store->Publish(s.layout.dgrad_ready_word(b - 1, m), r);
    }
  }
  MOBIUS_RETURN_IF_ERROR(SyncCompute(s));
  if (head) {  // the cross-entropy plus coef x aux, as the standalone trainer adds them
    for (size_t m = 0; m < aux.size(); ++m) losses[m] = static_cast<float>(losses[m] + aux[m].loss);
  }
  s.store->Publish(s.layout.backward_done_word(b), r);
  // Resident: the gradients stay on the device; ResidentUpdate (pipeline_resident.cc) uses them.
  if (s.resident != nullptr) return absl::OkStatus();
  // The store holds one gradient per stage: step r-1's update of this stage (and, for a tied head,
  // of the embedding, which adds the head's gradient to its own) must be done with it (implied
  // without optimizer staleness: this step's forward waited for those updates).
  MOBIUS_RETURN_IF_ERROR(Await(s, s.layout.updated_word(b), r - 1));
  if (s.tied && !s.layout.lora && range.end == s.num_units() && b != 0) {
    MOBIUS_RETURN_IF_ERROR(Await(s, s.layout.updated_word(0), r - 1));
  }
  // Gradients to the store on the D2H queue; the optimizer thread waits for the copy.
  std::unique_ptr<backend::Event> done;
  MOBIUS_ASSIGN_OR_RETURN(done, s.backend->CreateEvent());
  MOBIUS_RETURN_IF_ERROR(s.backend->Record(*s.compute, *done));
  MOBIUS_RETURN_IF_ERROR(s.backend->Wait(*s.d2h, *done));
  const uint64_t bytes = s.layout.stage_grad_bytes(range);
  MOBIUS_RETURN_IF_ERROR(s.backend->CopyToHost(
      *s.d2h, slot->grads, 0, s.store->at<uint8_t>(s.layout.unit_grads[range.begin]), bytes));
  MOBIUS_RETURN_IF_ERROR(s.backend->Record(*s.d2h, *slot->saved));
  s.d2h_bytes += bytes;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.tasks.push_back({b, r, slot});
  }
  s.cv.notify_one();
  return absl::OkStatus();
}

}  // namespace mobius::runtime
