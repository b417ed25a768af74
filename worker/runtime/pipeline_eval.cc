// The eval pass of one rank (pipeline_state.h, pipeline_worker.h).
#include <algorithm>

#include "common/status_macros.h"
#include "worker/runtime/pipeline_state.h"

namespace mobius::runtime {
namespace {

using backend::DeviceBuffer;
using State = PipelineWorker::State;

// The eval set as the standalone trainer evaluates it (StandaloneTrainer::EvalLoss): microbatches
// of exactly MB rows, a short tail padded with ignored rows, those without a target skipped.
struct EvalMicrobatch {
  std::vector<int32_t> tokens, targets;
  int64_t count = 0;  // counted targets
};

absl::StatusOr<std::vector<EvalMicrobatch>> EvalMicrobatches(const State& s) {
  MOBIUS_ASSIGN_OR_RETURN(std::vector<data::Batch> batches, s.start.loader->EvalBatches());
  std::vector<EvalMicrobatch> out;
  const int64_t mb = s.mb, t = s.t;
  for (const data::Batch& b : batches) {
    for (int64_t row = 0; row < b.b; row += mb) {
      const int64_t rows = std::min(mb, b.b - row);
      EvalMicrobatch e;
      e.tokens.assign(static_cast<size_t>(mb * t), 0);
      e.targets.assign(e.tokens.size(), data::kIgnoreIndex);
      std::copy_n(b.tokens.begin() + row * t, rows * t, e.tokens.begin());
      std::copy_n(b.targets.begin() + row * t, rows * t, e.targets.begin());
      for (int32_t x : e.targets) e.count += x != data::kIgnoreIndex;
      if (e.count > 0) out.push_back(std::move(e));
    }
  }
  return out;
}

}  // namespace

// Forward only, through this rank's forward stages in order. Eval microbatches cross forward
// stage boundaries through the checkpoint slots there, in chunks of num_microbatches: a producer
// reuses slot j only after its consumer read the previous chunk's item (eval_free_word), so a chunk
// never waits on a later one and ranks holding several stages cannot deadlock. The weights loaded
// here (W_r) are the ones step r + 1 starts with (an eval step is a sync step). Training's readers
// of step r are done with those slots: the next forward stage's (forward_done, waited for below)
// and the backward stage's starting
// there (it precedes the update of the backward stage before it, which EnsureLoaded waited for).
// Ends with a barrier: training reuses the slots only after every eval read.
absl::StatusOr<std::optional<float>> EvalPass(State& s, uint32_t r) {
  MOBIUS_ASSIGN_OR_RETURN(std::vector<EvalMicrobatch> micro, EvalMicrobatches(s));
  s.dropout_key = 0;  // eval: no LoRA dropout
  s.row_offset = 0;
  const int K = s.layout.num_microbatches;
  const uint64_t n = static_cast<uint64_t>(s.mb * s.t);
  const uint64_t act_bytes = 2 * s.layout.boundary_elements;
  double sum = 0;
  int64_t count = 0;
  for (size_t c = 0; c < micro.size(); c += K) {
    const int chunk = static_cast<int>(std::min<size_t>(K, micro.size() - c));
    for (int f : s.forward_stages) {
      const StageRange range = s.fwd(f);
      const bool head = range.end == s.num_units();
      MOBIUS_ASSIGN_OR_RETURN(Slot * slot, EnsureLoaded(s, range, r));  // W_r
      if (!head && c == 0) {
        MOBIUS_RETURN_IF_ERROR(Await(s, s.layout.forward_done_word(f + 1), r));
      }
      for (int j = 0; j < chunk; ++j) {
        const EvalMicrobatch& e = micro[c + j];
        const uint32_t seq = s.eval_seq + static_cast<uint32_t>(c + j) + 1;
        if (f == 0) {
          MOBIUS_RETURN_IF_ERROR(
              s.backend->CopyToDevice(*s.compute, e.tokens.data(), s.tokens, 0, 4 * n));
        } else {
          const int k = s.layout.checkpoint_of(range.begin);
          MOBIUS_RETURN_IF_ERROR(Await(s, s.layout.eval_ready_word(f - 1, j), seq));
          MOBIUS_RETURN_IF_ERROR(s.backend->CopyToDevice(
              *s.compute, s.store->at<uint8_t>(s.layout.activation_offset(k, j, r)), s.stage_in,
              0, act_bytes));
          s.h2d_bytes += act_bytes;
          MOBIUS_RETURN_IF_ERROR(SyncCompute(s));
          s.store->Publish(s.layout.eval_free_word(f - 1, j), seq);
        }
        if (head) {
          MOBIUS_RETURN_IF_ERROR(
              s.backend->CopyToDevice(*s.compute, e.targets.data(), s.targets, 0, 4 * n));
        }
        MOBIUS_RETURN_IF_ERROR(ForwardUnits(
            s, range, *slot, [](int64_t, const DeviceBuffer&) { return absl::OkStatus(); }));
        if (head) {
          float loss = 0;
          MOBIUS_RETURN_IF_ERROR(s.backend->CopyToHost(*s.compute, s.loss, 0, &loss, 4));
          MOBIUS_RETURN_IF_ERROR(SyncCompute(s));
          sum += static_cast<double>(loss) * e.count;
          count += e.count;
          continue;
        }
        if (c >= static_cast<size_t>(K)) {  // slot j's previous eval item must have been read
          MOBIUS_RETURN_IF_ERROR(Await(s, s.layout.eval_free_word(f, j), seq - K));
        }
        const int k = s.layout.checkpoint_of(range.end);
        MOBIUS_RETURN_IF_ERROR(s.backend->CopyToHost(
            *s.compute, s.out, 0, s.store->at<uint8_t>(s.layout.activation_offset(k, j, r)),
            act_bytes));
        s.d2h_bytes += act_bytes;
        MOBIUS_RETURN_IF_ERROR(SyncCompute(s));
        s.store->Publish(s.layout.eval_ready_word(f, j), seq);
      }
    }
  }
  s.eval_seq += static_cast<uint32_t>(micro.size());
  MOBIUS_RETURN_IF_ERROR(s.store->Barrier(s.run.num_workers));
  if (!s.runs_head_forward()) return std::optional<float>();
  return std::optional<float>(count > 0 ? static_cast<float>(sum / count) : 0.0f);
}

}  // namespace mobius::runtime
