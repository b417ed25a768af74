// The resident schedule's device-side model state and optimizer (pipeline_state.h).
//
// Why the arithmetic matches the mobius schedule (and the standalone trainer) bit for bit on the
// CPU backend: the norm partials are SumSquares' per-chunk sums (chunk mode, 64 Ki elements, into
// zeroed doubles, one op per tensor), i.e. exactly the chunk sums the host optimizer writes, and they are added in the
// same order (GlobalNorm); the AdamW op is optim::AdamWStep per element with the same per-step
// scalars; the tied head's gradient is added to the embedding's with one fp32 add per element
// (BiasBackward over one row: dbias[j] += 0 + dout[j], which is dbias[j] + dout[j] unless both are
// -0), as the host optimizer adds it. A CUDA backend sums squares in its own order, so there the
// norm, hence a clip scale, may differ in the last bit.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/runtime/pipeline_state.h"

namespace mobius::runtime {

using backend::DeviceBuffer;
using State = PipelineWorker::State;

namespace {

const StageRange& Range(const State& s) { return s.bwd(s.resident->stage); }

bool HoldsEmbedding(const State& s) { return Range(s).begin == 0; }
bool HoldsHead(const State& s) { return Range(s).end == s.num_units(); }

// Byte offsets of a parameter of `unit` inside the stage's slot buffers.
uint64_t WeightOffset(const State& s, int64_t unit, const std::string& name) {
  const units::UnitParam* p = s.layout.units[unit].Find(name);
  return s.layout.unit_weights[unit] - s.layout.unit_weights[Range(s).begin] +
         2 * static_cast<uint64_t>(p->offset);
}

uint64_t GradOffset(const State& s, int64_t unit, const std::string& name) {
  const units::UnitParam* p = s.layout.units[unit].Find(name);
  return s.layout.unit_grads[unit] - s.layout.unit_grads[Range(s).begin] +
         4 * static_cast<uint64_t>(p->offset);
}

// The head's copies of tied tensors (the token embedding); empty for untied models.
std::vector<const units::UnitParam*> SharedHeadParams(const State& s) {
  std::vector<const units::UnitParam*> out;
  if (!s.tied) return out;
  for (const units::UnitParam& p : s.layout.units[s.num_units() - 1].params) {
    if (p.shared) out.push_back(&p);
  }
  return out;
}

// With the embedding and the head on different ranks, each step moves the shared matrix's head
// gradient to the embedding's rank and its new bf16 weights back.
bool TiedAcrossRanks(const State& s) { return s.tied && s.layout.num_backward_stages > 1; }

// The store range [begin, end) of the stage's owned optimizer state (contiguous: tensors are laid
// out by owning unit, master/m/v each).
std::pair<uint64_t, uint64_t> OptimizerRegion(const State& s) {
  uint64_t begin = UINT64_MAX, end = 0;
  for (const TensorSlot* t : OwnedTensors(s, s.resident->stage)) {
    begin = std::min(begin, t->master);
    end = std::max(end, t->v + 4 * static_cast<uint64_t>(t->num_elements));
  }
  return begin < end ? std::make_pair(begin, end) : std::make_pair(uint64_t{0}, uint64_t{0});
}

int64_t OwnedChunks(const State& s) {
  int64_t n = 0;
  for (const TensorSlot* t : OwnedTensors(s, s.resident->stage)) n += t->num_chunks;
  return n;
}

uint64_t HeadGradBytes(const State& s) {
  if (!TiedAcrossRanks(s) || !HoldsEmbedding(s)) return 0;
  uint64_t bytes = 0;
  for (const units::UnitParam* p : SharedHeadParams(s)) bytes += 4 * p->num_elements;
  return bytes;
}

float* F32(const DeviceBuffer& b, uint64_t offset) { return static_cast<float*>(b.at(offset)); }

// The head's rank sends its gradient of the shared matrix to the store (the mobius location,
// GradOf(head)), for the embedding's rank.
absl::Status SendHeadGradient(State& s) {
  if (!TiedAcrossRanks(s) || !HoldsHead(s)) return absl::OkStatus();
  const int64_t head = s.num_units() - 1;
  for (const units::UnitParam* p : SharedHeadParams(s)) {
    const uint64_t bytes = 4 * static_cast<uint64_t>(p->num_elements);
    MOBIUS_RETURN_IF_ERROR(s.backend->CopyToHost(*s.compute, s.slots[0].grads,
                                                 GradOffset(s, head, p->name),
                                                 GradOf(s, p->name, head), bytes));
    s.d2h_bytes += bytes;
  }
  return s.backend->Synchronize(*s.compute);
}

// The embedding's gradient of a tied matrix is the embedding's plus the head's, in that order
// (pipeline_optimizer.cc's Partials; the standalone trainer's sum).
absl::Status AddHeadGradient(State& s, uint32_t r) {
  if (!s.tied || !HoldsEmbedding(s)) return absl::OkStatus();
  const int64_t head = s.num_units() - 1;
  const Slot& slot = s.slots[0];
  if (TiedAcrossRanks(s)) {
    MOBIUS_RETURN_IF_ERROR(Await(s, s.layout.grads_ready_word(s.head_backward), r));
  }
  uint64_t staged = 0;
  for (const units::UnitParam* p : SharedHeadParams(s)) {
    const uint64_t bytes = 4 * static_cast<uint64_t>(p->num_elements);
    const float* head_grad;
    if (HoldsHead(s)) {
      head_grad = F32(slot.grads, GradOffset(s, head, p->name));
    } else {
      MOBIUS_RETURN_IF_ERROR(s.backend->CopyToDevice(*s.compute, GradOf(s, p->name, head),
                                                     s.resident->head_grad, staged, bytes));
      s.h2d_bytes += bytes;
      head_grad = F32(s.resident->head_grad, staged);
      staged += bytes;
    }
    // dbias [C] += column sums of one row: an element-wise fp32 add.
    MOBIUS_RETURN_IF_ERROR(
        s.backend->BiasBackward(*s.compute, {.n = 1,
                                             .c = p->num_elements,
                                             .dout_type = backend::DType::kFp32,
                                             .dout = head_grad,
                                             .dbias = F32(slot.grads, GradOffset(s, 0, p->name))}));
  }
  return absl::OkStatus();
}

// The stage's share of the global norm: one double per 64 Ki-element chunk of each owned tensor,
// computed on the device and written to the store's partials.
absl::Status PublishNormPartials(State& s, uint32_t r) {
  ResidentStage& res = *s.resident;
  const std::vector<const TensorSlot*> owned = OwnedTensors(s, res.stage);
  const int64_t chunks = OwnedChunks(s);
  std::vector<double> partials(chunks);
  if (chunks > 0) {
    MOBIUS_RETURN_IF_ERROR(
        s.backend->Zero(*s.compute, {.dst = res.norm.data(), .bytes = res.norm.size_bytes()}));
    const int64_t chunk = static_cast<int64_t>(optim::CpuAdamW::kChunkElements);
    double* out = static_cast<double*>(res.norm.data());
    for (const TensorSlot* t : owned) {  // one op per tensor: its chunk partials at once
      const float* g = F32(s.slots[0].grads, GradOffset(s, t->owner_unit, t->name));
      MOBIUS_RETURN_IF_ERROR(s.backend->SumSquares(
          *s.compute, {.n = t->num_elements, .x = g, .out = out, .chunk = chunk}));
      out += t->num_chunks;
    }
    MOBIUS_RETURN_IF_ERROR(
        s.backend->CopyToHost(*s.compute, res.norm, 0, partials.data(), 8 * partials.size()));
    s.d2h_bytes += 8 * partials.size();
  }
  MOBIUS_RETURN_IF_ERROR(s.backend->Synchronize(*s.compute));
  double* store = s.store->at<double>(s.layout.norm_partials_at(r));
  size_t k = 0;
  for (const TensorSlot* t : owned) {
    for (int64_t c = 0; c < t->num_chunks; ++c) store[t->first_chunk + c] = partials[k++];
  }
  s.store->Publish(s.layout.norm_ready_word(res.stage), r);
  return absl::OkStatus();
}

// Every stage's share of step r, added in the standalone trainer's order.
absl::StatusOr<double> AwaitGlobalNorm(State& s, uint32_t r, int64_t global_step) {
  for (int b = 0; b < s.layout.num_backward_stages; ++b) {
    MOBIUS_RETURN_IF_ERROR(Await(s, s.layout.norm_ready_word(b), r));
  }
  const double norm = GlobalNorm(s, r);
  if (!std::isfinite(norm)) {
    return absl::InternalError(absl::StrCat("step ", global_step, ": the gradient norm is ", norm,
                                            " (training diverged; lower the lr)"));
  }
  return norm;
}

// AdamW per owned tensor, with its own decay flag and the step's learning rate, writing the bf16
// weights in place in the slot; then the tied head's copy of the embedding: in the slot when the
// head is on this rank, else through the store (the mobius location, WeightOf(head)).
absl::Status Update(State& s, uint32_t r, int64_t global_step, float scale) {
  ResidentStage& res = *s.resident;
  const Slot& slot = s.slots[0];
  const optim::AdamWConfig& c = s.adamw->config();
  const double lr = s.schedule->At(global_step);
  for (const TensorSlot* t : OwnedTensors(s, res.stage)) {
    MOBIUS_RETURN_IF_ERROR(s.backend->AdamW(
        *s.compute, {.n = t->num_elements,
                     .step = global_step,
                     .lr = lr,
                     .beta1 = c.beta1,
                     .beta2 = c.beta2,
                     .eps = c.eps,
                     .weight_decay = c.weight_decay,
                     .decay = t->decay,
                     .grad_scale = scale,
                     .master = F32(res.optimizer, t->master - res.optimizer_offset),
                     .m = F32(res.optimizer, t->m - res.optimizer_offset),
                     .v = F32(res.optimizer, t->v - res.optimizer_offset),
                     .grad = F32(slot.grads, GradOffset(s, t->owner_unit, t->name)),
                     .bf16_out = slot.weights.at(WeightOffset(s, t->owner_unit, t->name))}));
  }
  if (HoldsEmbedding(s)) {
    const int64_t head = s.num_units() - 1;
    for (const units::UnitParam* p : SharedHeadParams(s)) {
      const uint64_t bytes = 2 * static_cast<uint64_t>(p->num_elements);
      const uint64_t from = WeightOffset(s, 0, p->name);
      if (HoldsHead(s)) {
        MOBIUS_RETURN_IF_ERROR(s.backend->CopyDeviceToDevice(
            *s.compute, slot.weights, from, slot.weights, WeightOffset(s, head, p->name), bytes));
        continue;
      }
      // The head's rank read the previous copy before its forward of step r.
      MOBIUS_RETURN_IF_ERROR(Await(s, s.layout.forward_done_word(s.head_forward), r));
      MOBIUS_RETURN_IF_ERROR(
          s.backend->CopyToHost(*s.compute, slot.weights, from,
                                WeightOf(s, p->name, head, /*k=*/0), bytes));
      s.d2h_bytes += bytes;
    }
  }
  MOBIUS_RETURN_IF_ERROR(s.backend->Synchronize(*s.compute));
  s.store->Publish(s.layout.updated_word(res.stage), r);
  return absl::OkStatus();
}

// The head's rank takes the embedding's new bf16 weights of step r into its copy.
absl::Status RefreshTiedHead(State& s, uint32_t r) {
  if (!TiedAcrossRanks(s) || !HoldsHead(s)) return absl::OkStatus();
  const int64_t head = s.num_units() - 1;
  MOBIUS_RETURN_IF_ERROR(Await(s, s.layout.updated_word(0), r));
  for (const units::UnitParam* p : SharedHeadParams(s)) {
    const uint64_t bytes = 2 * static_cast<uint64_t>(p->num_elements);
    MOBIUS_RETURN_IF_ERROR(s.backend->CopyToDevice(*s.compute, WeightOf(s, p->name, head, /*k=*/0),
                                                   s.slots[0].weights,
                                                   WeightOffset(s, head, p->name), bytes));
    s.h2d_bytes += bytes;
  }
  return s.backend->Synchronize(*s.compute);
}

}  // namespace

uint64_t ResidentStateBytes(const State& s) {
  const StageRange& range = Range(s);
  const auto [begin, end] = OptimizerRegion(s);
  return s.layout.stage_weight_bytes(range) + s.layout.stage_grad_bytes(range) + (end - begin) +
         8 * static_cast<uint64_t>(OwnedChunks(s)) + HeadGradBytes(s);
}

absl::Status CheckResidentFits(const State& s, uint64_t activation_bytes) {
  const uint64_t state = ResidentStateBytes(s);
  const uint64_t need = state + activation_bytes;
  const uint64_t capacity = s.backend->capacity_bytes(), used = s.backend->used_bytes();
  if (used <= capacity && need <= capacity - used) return absl::OkStatus();
  int64_t params = 0;
  for (const TensorSlot* t : OwnedTensors(s, s.resident->stage)) params += t->num_elements;
  const StageRange& range = Range(s);
  return absl::ResourceExhaustedError(absl::StrCat(
      "rank ", s.rank, ": schedule resident keeps stage ", s.resident->stage, " (units [",
      range.begin, ", ", range.end, "), ", params,
      " parameters) on the device for the whole run: ", state,
      " bytes of model state (18 bytes per parameter: bf16 weights 2, fp32 gradients 4, "
      "fp32 master weights and Adam m and v 12",
      s.tied && (HoldsEmbedding(s) || HoldsHead(s)) ? ", plus the tied embedding's copies" : "",
      ") + ", activation_bytes, " bytes of activations and workspace = ", need,
      " bytes needed, but the device memory cap is ", capacity, " bytes",
      used > 0 ? absl::StrCat(" (", used, " in use)") : "",
      "; the mobius schedule streams stages from host memory instead"));
}

absl::Status ResidentAllocate(State& s) {
  ResidentStage& res = *s.resident;
  CarveSlot(s, s.slots[0], Range(s));  // the stage never moves
  const auto [begin, end] = OptimizerRegion(s);
  res.optimizer_offset = begin;
  MOBIUS_ASSIGN_OR_RETURN(res.optimizer, s.backend->Allocate(end - begin, "resident.optimizer"));
  MOBIUS_ASSIGN_OR_RETURN(res.norm, s.backend->Allocate(8 * OwnedChunks(s), "resident.norm"));
  MOBIUS_ASSIGN_OR_RETURN(res.head_grad,
                          s.backend->Allocate(HeadGradBytes(s), "resident.head_grad"));
  return absl::OkStatus();
}

absl::Status ResidentLoad(State& s) {
  ResidentStage& res = *s.resident;
  Slot& slot = s.slots[0];
  const StageRange range = Range(s);
  const uint64_t weights = s.layout.stage_weight_bytes(range);
  MOBIUS_RETURN_IF_ERROR(s.backend->CopyToDevice(
      *s.h2d, s.store->at<uint8_t>(s.layout.unit_weights[range.begin]), slot.weights, 0, weights));
  if (!res.optimizer.empty()) {
    MOBIUS_RETURN_IF_ERROR(s.backend->CopyToDevice(*s.h2d,
                                                   s.store->at<uint8_t>(res.optimizer_offset),
                                                   res.optimizer, 0, res.optimizer.size_bytes()));
  }
  MOBIUS_RETURN_IF_ERROR(s.backend->Record(*s.h2d, *slot.loaded));
  s.h2d_bytes += weights + res.optimizer.size_bytes();
  slot.range = range;
  slot.index = 0;
  return s.backend->Synchronize(*s.h2d);
}

absl::Status ResidentUpdate(State& s, uint32_t r) {
  const Clock::time_point t0 = Clock::now();
  const double stall_before = s.stall;
  const int64_t global_step = s.start.step + r;
  MOBIUS_RETURN_IF_ERROR(SendHeadGradient(s));
  s.store->Publish(s.layout.grads_ready_word(s.resident->stage), r);
  MOBIUS_RETURN_IF_ERROR(AddHeadGradient(s, r));
  MOBIUS_RETURN_IF_ERROR(PublishNormPartials(s, r));
  // As the optimizer thread: without clipping the update needs no other rank's gradients.
  double norm = 0;
  if (s.run.training.grad_clip <= 0) {
    MOBIUS_RETURN_IF_ERROR(Update(s, r, global_step, 1.0f));
    MOBIUS_ASSIGN_OR_RETURN(norm, AwaitGlobalNorm(s, r, global_step));
  } else {
    MOBIUS_ASSIGN_OR_RETURN(norm, AwaitGlobalNorm(s, r, global_step));
    MOBIUS_RETURN_IF_ERROR(
        Update(s, r, global_step, optim::ClipScale(norm, s.run.training.grad_clip)));
  }
  MOBIUS_RETURN_IF_ERROR(RefreshTiedHead(s, r));
  s.slots[0].index = r;  // W_r, what step r + 1 computes with
  {
    // The device's time: waits for other ranks (norm shares, the tied exchange) count as stall.
    std::lock_guard<std::mutex> lock(s.mu);
    s.optimizer_seconds += std::max(0.0, Since(t0) - (s.stall - stall_before));
    s.summed_norms[r] = norm;
  }
  s.cv.notify_all();
  return absl::OkStatus();
}

absl::Status ResidentWriteBack(State& s) {
  ResidentStage& res = *s.resident;
  const StageRange range = Range(s);
  const uint64_t weights = s.layout.stage_weight_bytes(range);
  MOBIUS_RETURN_IF_ERROR(
      s.backend->CopyToHost(*s.compute, s.slots[0].weights, 0,
                            s.store->at<uint8_t>(s.layout.unit_weights[range.begin]), weights));
  if (!res.optimizer.empty()) {
    MOBIUS_RETURN_IF_ERROR(s.backend->CopyToHost(*s.compute, res.optimizer, 0,
                                                 s.store->at<uint8_t>(res.optimizer_offset),
                                                 res.optimizer.size_bytes()));
  }
  s.d2h_bytes += weights + res.optimizer.size_bytes();
  return s.backend->Synchronize(*s.compute);
}

}  // namespace mobius::runtime
