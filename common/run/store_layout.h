// StoreLayout: where everything lives in a job's shared host model store (host_store.h). Computed
// deterministically from the model and the run config, so the launcher (which sizes the file) and
// every worker (which map it) agree on every offset without exchanging anything.
//
// The schedule's two partitions (run_config.h: ForwardStages, BackwardStages; the same ranges for
// mobius) decide the per-stage words: optimizer bookkeeping is per *backward* stage (each unit's
// gradients come from exactly one backward stage), activation checkpoints are per checkpoint unit
// (CheckpointUnits: every unit that starts a forward or a backward stage, unit 0 excepted) and
// activation gradients per backward stage boundary.
//
// Regions, in order, each 4 KiB aligned:
//   header + control   magic, version, the launcher's pid, the abort word, barrier, and the
//                      per-stage / per-microbatch progress words (uint32 step counters, futex-able),
//                      the eval pass's per-forward-boundary slot counters
//   unit weights       per layer unit in unit order, its bf16 weights in the device layout
//                      (unit_params.h): any stage's weights are one contiguous range, uploaded with
//                      one chunked copy. With optimizer_staleness 1, two copies of the region:
//                      W_k (the weights after the run's k-th update) lives in copy k mod 2, so the
//                      update of step k writes copy k mod 2 while step k+1 still reads W_{k-1}
//                      from the other
//   unit grads         per unit, fp32 gradients in the same layout: one D2H copy per stage
//   optimizer state    per owned tensor (grouped by owning unit): fp32 master, Adam m, Adam v
//
// LoRA (run.training.adapter enabled; optimizer staleness 0): the base is frozen, so the unit
// weights (one copy) are its only state; the trainable tensors (`tensors`, the norm partials) are
// the adapters, by PEFT name. Then
//   unit grads         per unit, its adapters' fp32 gradients in the unit's adapter layout (per
//                      adapted module of the unit, model::LoraModules order: A [r, in], B [out, r];
//                      worker/model/adapter.h's UnitAdapter), one D2H copy per stage as above
//   unit adapters      per unit, its adapters' fp32 values (the optimizer's master, updated in
//                      place, uploaded as they are) in the same layout: one H2D copy per stage
//   adapter moments    per unit, Adam m then Adam v in the same layout
//   checkpoints        per checkpoint k (the input of unit checkpoint_units[k]) and microbatch m:
//                      the bf16 activation [mb, T, C], written by the forward, read by the forward
//                      stage and the backward stage starting there (two copies with staleness)
//   activation grads   per microbatch m, one fp32 [mb, T, C]: the gradient of m crossing
//                      whichever backward boundary it is at. A microbatch's gradient moves down
//                      the backward stages one boundary at a time and the pass that reads it at
//                      boundary b (backward stage b) is the one that writes it at b - 1, on one
//                      queue after its read, so one buffer per microbatch serves every boundary
//                      (nothing reads a boundary's gradient once the next one is written).
//                      Step r's first writer waits for step r-1's last reader (backward stage 0)
//   peer channels      per channel of the boundary-gradient transport (peer_transport.h): a
//                      128-byte NCCL unique id, and with transport "emulated" one fp32 payload
//                      slot [mb, T, C]
//   link words         per emulated link: next free time (ns) per direction and bytes per direction
//   norm partials      one double per 64 Ki-element chunk of every tensor, in HF-name order: the
//                      exact partial sums CpuAdamW::GlobalGradNorm adds, so a pipeline's global
//                      gradient norm is bit-identical to the standalone trainer's; two sets, step
//                      r's in set r mod 2 (with staleness, step r+1's backward can publish before
//                      step r's norm is summed)
//   counters           the pool dispatch's pass ticket (uint64) and the summed global norm of the
//                      last two steps (double, step r's at index r mod 2)
//
// Value type; immutable after Make.
#ifndef MOBIUS_COMMON_RUN_STORE_LAYOUT_H_
#define MOBIUS_COMMON_RUN_STORE_LAYOUT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/layer_units.h"
#include "common/run/unit_params.h"
#include "common/run/run_config.h"

namespace mobius::runtime {

// The grad-norm chunk: the store keeps one partial sum of squares per chunk of this many elements
// of each tensor (name order). It must equal optim::CpuAdamW::kChunkElements, the chunk the
// optimizer's GlobalGradNorm sums over, so that the pipeline's norm is bit-identical to the
// standalone trainer's (worker/runtime/pipeline_optimizer.cc checks this at compile time).
inline constexpr int64_t kGradNormChunkElements = int64_t{1} << 16;

struct TensorSlot {
  std::string name;
  int64_t owner_unit = 0;
  int64_t num_elements = 0;
  uint64_t master = 0, m = 0, v = 0;  // byte offsets of the fp32 arrays
  uint64_t grad = 0;                  // byte offset of its fp32 gradient (in the unit grads)
  int64_t first_chunk = 0;            // index of its first norm partial
  int64_t num_chunks = 0;
  bool decay = false;
};

struct StoreLayout {
  int num_forward_stages = 0, num_backward_stages = 0, num_workers = 0, num_microbatches = 0;
  std::vector<int64_t> checkpoint_units;      // [k] ascending (CheckpointUnits)
  std::vector<units::UnitParamLayout> units;  // [unit]
  std::vector<uint64_t> unit_weights;         // [unit] byte offset of the bf16 weights
  std::vector<uint64_t> unit_grads;           // [unit] byte offset of the fp32 grads
  // The trainable tensors by name: every base tensor (HF names) or, with LoRA, every adapter
  // tensor (PEFT names).
  std::map<std::string, TensorSlot> tensors;
  // LoRA only (empty otherwise): per unit, the byte offset of its fp32 adapters and their element
  // count (0 for a unit without adapters).
  bool lora = false;
  std::vector<uint64_t> unit_adapters;
  std::vector<int64_t> unit_adapter_elements;
  uint64_t boundary_elements = 0;             // mb * T * C
  uint64_t checkpoints = 0;                   // offset of checkpoint 0, microbatch 0
  uint64_t activation_grads = 0;              // offset of microbatch 0's gradient buffer
  uint64_t norm_partials = 0;                 // offset of the doubles of set 0
  uint64_t norm_partials_stride = 0;          // bytes from set 0 to set 1
  int weight_copies = 1;                      // 2 with optimizer_staleness 1
  uint64_t weight_copy_stride = 0;            // bytes from copy 0 of the unit weights to copy 1
  uint64_t pool_ticket = 0;                   // offset of the uint64 pass ticket (pool dispatch)
  uint64_t norm_values = 0;                   // offset of 2 doubles: summed norms by step parity
  // fp16 runs (train/loss_scaler.h): by step parity, the loss scaler after the step (a double
  // scale, an int64 count of good steps) and the scale the step itself used (a double): 2 x 24
  // bytes, written with norm_values by the rank that sums the norm (pipeline_optimizer.cc).
  uint64_t loss_scales = 0;
  // A mixture of experts trained with the load-balancing loss (output_router_logits): per
  // checkpoint copy, microbatch and MoE block (in layer order) its routing statistics, 2E floats
  // (units::MicroBatch::moe_stats), written by the forward pass that runs the block and read by
  // the head (the loss) and every backward pass (its gradient). 0 bytes otherwise.
  uint64_t moe_stats = 0;
  int64_t moe_blocks = 0;         // MoE blocks with the aux loss on (0: off)
  uint64_t moe_stats_stride = 0;  // bytes of one microbatch's statistics (all blocks)
  uint64_t moe_stats_offset(int mb, uint32_t r) const {  // step r's, microbatch mb, block 0
    return moe_stats + ((r % checkpoint_copies) * static_cast<uint64_t>(num_microbatches) + mb) *
                           moe_stats_stride;
  }
  uint64_t link_words = 0;                    // offset of 4 uint64 per emulated link (link_emulator.h),
                                              // links.size() + 1 of them: the last is the emulated
                                              // inter-node link (RunConfig::nodes)
  int internode_link = 0;                     // = links.size(): that last link's index
  // Boundary-gradient channels between ranks (DgradChannels in run_config.h).
  std::vector<PeerChannel> peer_channels;
  uint64_t channel_ids = 0;      // offset of 128 bytes per channel
  uint64_t channel_payload = 0;  // offset of one fp32 [mb, T, C] per channel ("emulated" only)
  uint64_t channel_payload_stride = 0;  // 0 unless transport "emulated"
  int64_t num_chunks = 0;
  uint64_t total_bytes = 0;

  int num_checkpoints() const { return static_cast<int>(checkpoint_units.size()); }
  // The checkpoint index of the input of `unit`; -1 if it is not checkpointed.
  int checkpoint_of(int64_t unit) const;

  // Control words (uint32), as word indices into the control area at offset kControlOffset.
  // Per backward stage b (the optimizer's granularity): gradients in the store, norm share
  // published, AdamW done (bf16 copies written).
  int64_t grads_ready_word(int b) const { return kFirstStageWord + b; }
  int64_t norm_ready_word(int b) const { return kFirstStageWord + num_backward_stages + b; }
  int64_t updated_word(int b) const { return kFirstStageWord + 2 * num_backward_stages + b; }
  // Per forward stage f: its forward (every microbatch) is done, i.e. it has read its weights
  // and its input checkpoints of this step.
  int64_t forward_done_word(int f) const { return kFirstStageWord + 3 * num_backward_stages + f; }
  // Checkpoint k of microbatch mb written.
  int64_t act_ready_word(int k, int mb) const {
    return forward_done_word(num_forward_stages) + k * num_microbatches + mb;
  }
  // The activation gradient at backward boundary b of microbatch mb written.
  int64_t dgrad_ready_word(int b, int mb) const {
    return act_ready_word(num_checkpoints(), 0) + b * num_microbatches + mb;
  }
  int64_t loss_word(int mb) const {  // float bits of the head's loss of microbatch mb
    return dgrad_ready_word(num_backward_boundaries(), 0) + mb;
  }
  // Eval passes (pipeline_worker.h) reuse the checkpoints at forward stage boundaries in chunks of
  // num_microbatches; per forward boundary f (the output of forward stage f) and slot, a counter
  // of eval microbatches written (ready) and read (free), counted over the whole run.
  int64_t eval_ready_word(int f, int slot) const {
    return loss_word(num_microbatches) + f * num_microbatches + slot;
  }
  int64_t eval_free_word(int f, int slot) const {
    return eval_ready_word(f, slot) + num_forward_stages * num_microbatches;
  }
  // Per rank: CLOCK_MONOTONIC seconds of its last heartbeat, written every second by the
  // worker while it runs (0: none yet); the launcher's watchdog reads them (launcher.h).
  int64_t heartbeat_word(int rank) const {
    return loss_word(num_microbatches) + 2 * num_forward_stages * num_microbatches + rank;
  }
  // Transport set-up: per rank, its vote (peer_transport.h: 1 = can use NCCL, 2 = cannot); per
  // channel c (peer_channels[c]), its id published (NCCL) and the emulated transport's counters:
  // receives posted, payloads sent, payloads taken.
  int64_t transport_vote_word(int rank) const { return heartbeat_word(num_workers) + rank; }
  int64_t channel_word(int c, int which) const {
    return transport_vote_word(num_workers) + 4 * c + which;
  }
  static constexpr int kChannelIdReady = 0, kChannelPosted = 1, kChannelSent = 2,
                       kChannelTaken = 3;
  // Streamed checkpoints (pipeline_checkpoint.cc), as run-local steps: rank 0 created the
  // checkpoint's files; rank k wrote its share of them.
  int64_t checkpoint_files_word() const { return channel_word(num_channels(), 0); }
  int64_t checkpoint_written_word(int rank) const { return checkpoint_files_word() + 1 + rank; }
  // Per backward stage b: the newest step whose backward pass of b is done (every microbatch's
  // checkpoint and output gradient read, its input gradients written), published by the rank
  // that ran it; and the newest checkpoint step whose share of b's state is written.
  int64_t backward_done_word(int b) const { return checkpoint_written_word(num_workers) + b; }
  int64_t stage_written_word(int b) const { return backward_done_word(num_backward_stages) + b; }
  // The global gradient norm: per step parity, the number of backward stages that published
  // their partials (cumulative over the run, modulo 2^32); the newest step whose norm is summed
  // into norm_values (pipeline_optimizer.cc).
  int64_t norm_count_word(int parity) const {
    return stage_written_word(num_backward_stages) + parity;
  }
  int64_t norm_step_word() const { return norm_count_word(2); }
  // Rank 0's newest step whose stop decision (kStopAtWord) is made (pipeline_worker.h).
  int64_t decided_word() const { return norm_step_word() + 1; }
  int64_t num_control_words() const { return decided_word() + 1; }
  int num_channels() const { return static_cast<int>(peer_channels.size()); }
  int num_backward_boundaries() const {
    return num_backward_stages > 1 ? num_backward_stages - 1 : 0;
  }

  // The bf16 weights of `unit` as W_k (after the run's k-th update): copy k mod weight_copies.
  uint64_t weights_offset(int64_t unit, uint32_t k) const {
    return unit_weights[unit] + (k % weight_copies) * weight_copy_stride;
  }
  uint64_t norm_partials_at(uint32_t r) const {  // step r's partials
    return norm_partials + (r % 2) * norm_partials_stride;
  }
  // With optimizer staleness the activation checkpoints have two copies too (step r's in copy
  // r mod 2), so that the next step's forward passes do not wait for this step's last backward
  // passes, which read them: a writer of step r waits for the readers of step r -
  // checkpoint_copies. (The boundary gradients need no second copy: their next writer, a
  // backward pass of the next step, comes after that step's whole forward, and waits for the
  // previous step's backward stage 0, the last reader of every microbatch's buffer.)
  int checkpoint_copies = 1;
  uint64_t activation_offset(int k, int mb, uint32_t r) const;  // bf16 [mb, T, C], checkpoint k
  // fp32 [mb, T, C]: microbatch mb's gradient at whichever backward boundary it has reached
  // (the activation grads region above).
  uint64_t dgrad_offset(int mb) const;
  // Bytes of a unit range's weights (bf16) and grads (fp32): contiguous ranges starting at
  // unit_weights[begin] / unit_grads[begin].
  uint64_t stage_weight_bytes(const StageRange& r) const;
  uint64_t stage_grad_bytes(const StageRange& r) const;  // LoRA: the adapters' gradients
  // LoRA: bytes of a unit range's fp32 adapters, contiguous from unit_adapters[begin]; 0 otherwise.
  uint64_t stage_adapter_bytes(const StageRange& r) const;

  // Checkpoint-and-stop: the launcher sets kStopRequestWord to 1; rank 0 answers with the run-local
  // step after which every rank checkpoints and stops (kStopAtWord; pipeline_worker.h).
  static constexpr int64_t kStopRequestWord = 3;
  static constexpr int64_t kStopAtWord = 4;
  static constexpr uint64_t kControlOffset = 4096;
  static constexpr int64_t kFirstStageWord = 8;  // words 0..7: abort, barrier count, generation..
};

// INVALID_ARGUMENT for a config that does not fit the model (ValidateRunConfig), or an adapter
// that does not (model::ValidateLora) or comes with optimizer staleness.
absl::StatusOr<StoreLayout> MakeStoreLayout(const model::ModelConfig& config,
                                            const RunConfig& run);

}  // namespace mobius::runtime

#endif  // MOBIUS_COMMON_RUN_STORE_LAYOUT_H_
