// UnitRunner: forward and backward of one layer unit (embedding, decoder block or head,
// layer_units.h) on a Backend, 16-bit weights and activations (bf16, or fp16: Create's precision;
// "bf16" below means that format), fp32 accumulation and gradients.
//
// Activation recompute: Forward keeps nothing but what the caller keeps (the unit's input); the
// unit's internals go to a caller-owned workspace. Backward(recompute = true) re-runs the forward
// internals from the saved input into the workspace, then runs the backward; with
// recompute = false it trusts that the workspace still holds the internals of this unit's last
// Forward on the same input (no other use of the workspace in between). The same ops run in the
// same order either way, so on the CPU backend both give bitwise identical gradients.
//
//   auto runner = *UnitRunner::Create(config, unit, &backend);
//   DeviceBuffer ws = *runner->AllocateWorkspace(b, t);        // RESOURCE_EXHAUSTED: evict, retry
//   runner->Forward(queue, mb, weights, out, ws);
//   runner->Backward(queue, mb, weights, grads, dout, dinp, loss_scale, ws, /*recompute=*/true);
//
// Tensors (N = B * T rows, C hidden):
//   input   embedding: token ids [B, T] int32; block, head: hidden [B, T, C] bf16
//   output  embedding, block: hidden [B, T, C] bf16; head: the mean loss [1] fp32
//   dout    d(loss) / d(output) [B, T, C] fp32 (not for the head: its loss is the end)
//   dinp    d(loss) / d(input) [B, T, C] fp32, written (not for the embedding)
//   weights bf16 / grads fp32 device buffers in layout() (unit_params.h); grads are accumulated
//           (+=), so microbatches accumulate; the head scales by loss_scale (its share of the
//           batch), which then flows into every unit's gradients.
// Everything is enqueued on `queue` (all calls return after enqueueing; Synchronize to see op
// errors such as out-of-range token ids). Buffers must stay valid until the queue ran the work.
//
// Thread-safety: a runner is immutable after Create; calls on distinct workspaces may run
// concurrently (on different queues).
#ifndef MOBIUS_WORKER_MODEL_UNIT_RUNNER_H_
#define MOBIUS_WORKER_MODEL_UNIT_RUNNER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/model/layer_units.h"
#include "common/model/model_config.h"
#include "worker/backend/backend.h"
#include "worker/model/adapter.h"
#include "common/run/unit_params.h"
#include "worker/reference/parameters.h"

namespace mobius::units {

struct BlockWeights;  // unit_runner_internal.h

// One decoder block's key/value cache for incremental decoding (worker/generate/): k, v
// [B, capacity, KV, hd] bf16 device addresses, and (RoPE models) the rotary tables cos, sin
// [capacity, hd / 2] fp32 of positions 0 .. capacity - 1 (Backend::RopeTables), shared by all
// blocks. Owned by the caller.
struct KvCache {
  void* k = nullptr;
  void* v = nullptr;
  int64_t capacity = 0;
  const float* cos = nullptr;
  const float* sin = nullptr;
};

// A mixture-of-experts block's experts held outside its weight buffer (worker/generate's routed
// experts: only the experts a call routes rows to are uploaded). The buffer then holds the unit's
// weights up to its first expert (UnitRunner::dense_weight_bytes), and the block's forward asks
// the source for the experts it routed rows to, after the routing.
class ExpertSource {
 public:
  virtual ~ExpertSource() = default;
  // Makes `experts` (ascending expert indices of unit `unit`, each with rows in this call)
  // resident and returns each one's device address: that of its first tensor (the gate; gpt-oss's
  // gate_up), its others at their layout offsets relative to it (UnitRunner::ExpertSpan). Copies are queued on
  // `queue` (the caller's, before the GEMMs that read them); an address stays valid until the
  // queue ran this call's work. An error ends the forward with it.
  virtual absl::StatusOr<std::vector<const void*>> Fetch(backend::Queue& queue, int64_t unit,
                                                         const std::vector<int32_t>& experts) = 0;
};

struct MicroBatch {
  int64_t b = 0, t = 0;
  const void* input = nullptr;          // device address, see above
  const int32_t* targets = nullptr;     // head only: [B, T] int32 device address (-100: ignore)
  // LoRA dropout (LoraSpec::dropout > 0): the step's key (worker/kernels/dropout_mask.h
  // LoraDropoutStepKey; 0: no dropout, as in eval passes) and the token row of this microbatch's
  // first token in the whole batch (its sequence index times T), so masks do not depend on the
  // split into microbatches or stages. A backward must get its forward's values.
  uint64_t dropout_key = 0;
  int64_t row_offset = 0;
  // Incremental decoding (forward only): the rows are positions [position, position + t) of their
  // sequences (the embedding adds those learned positions; a block rotates by them). A block with
  // `kv` writes its keys and values of these positions into the cache and attends over cache
  // positions [0, position + t), the earlier ones written by earlier calls. Without `kv` a block
  // requires position 0 (the training forward).
  int64_t position = 0;
  const KvCache* kv = nullptr;
  // A mixture of experts' load-balancing loss (config moe.output_router_logits; moe_aux.h). A MoE
  // block's Forward writes this microbatch's routing statistics to moe_stats (host memory, 2E
  // floats: each expert's count of routed rows, then its probability summed over the N rows);
  // the recompute inside Backward writes nothing. Its Backward adds moe_aux_grad (host memory, E
  // floats, valid until the queue ran the call: d(scaled loss)/d probs[row, e], the same for every
  // row) to the router's probability gradient. nullptr: not this microbatch or unit.
  float* moe_stats = nullptr;
  const float* moe_aux_grad = nullptr;
  // A MoE block's experts from `experts` instead of the weight buffer (forward only, 16-bit
  // experts only: not an NF4 base). nullptr: they are in the buffer.
  ExpertSource* experts = nullptr;
};

class UnitRunner {
 public:
  // INVALID_ARGUMENT / UNIMPLEMENTED for configs the reference model rejects or a bad index.
  // `backend` is not owned and must outlive the runner. With `lora` (adapter.h) the unit's base
  // weights are frozen and its adapted modules (if any) carry LoRA terms: Backward then takes
  // no base gradient buffer and writes the adapters' gradients.
  // `chunk_tokens`: the token chunks of the head and the MLP (common/model/unit_workspace.h:
  // 0 = sized from memory, > 0 = at most that many rows, < 0 = unchunked).
  // `precision`: the 16-bit format of the weights, activations and the hidden states in and out
  // (bf16 or fp16; INVALID_ARGUMENT otherwise), arithmetic fp32 in both. With fp16, the GEMMs
  // whose output is fp16 sum in fp16 where the backend is faster so (half_accumulate_faster);
  // without adapters a block's backward GEMMs write fp16 too: input gradients in fp16 and each
  // call's weight gradient rounded to fp16 before it is added into the fp32 one (linear.h
  // half_backward, PyTorch autocast's order), the LM head's logits and their gradient included
  // (cross-entropy reads fp16 logits and sums in fp32); the head's weight gradient stays fp32.
  static absl::StatusOr<std::unique_ptr<UnitRunner>> Create(const model::ModelConfig& config,
                                                            int64_t unit_index,
                                                            backend::Backend* backend,
                                                            const LoraSpec* lora = nullptr,
                                                            int64_t chunk_tokens = 0,
                                                            backend::DType precision =
                                                                backend::DType::kBf16);

  const UnitParamLayout& layout() const { return layout_; }
  const UnitAdapter& adapter() const { return adapter_; }  // empty without adapters
  bool frozen() const { return frozen_; }
  backend::DType precision() const { return half_; }
  model::UnitKind kind() const { return kind_; }
  int64_t unit_index() const { return layout_.unit_index; }

  // Queues the copies of this unit's parameters, found by HF name in `bf16` (bf16 bits), into
  // `weights` at their layout offsets; the caller synchronizes `queue` before `bf16` goes.
  // INVALID_ARGUMENT "<what>: missing NAME" or "<what>: NAME has N elements, want M".
  // `skip_experts`: a MoE block's experts are neither read nor copied (MicroBatch::experts).
  absl::Status UploadWeights(backend::Queue& queue,
                             const std::map<std::string, std::vector<uint16_t>>& bf16,
                             backend::DeviceBuffer& weights, absl::string_view what,
                             bool skip_experts = false) const;

  // A MoE block's experts in its layout: the tail of the weight buffer from element `begin`,
  // expert e's tensors (gate, up, down; gpt-oss: gate_up and down with their biases, in layout
  // order) from begin + e * stride, `elements` 16-bit slots each (its span, padding between its
  // tensors included), at the same offsets within every expert (checked). All zero for a unit
  // without experts.
  struct ExpertSpan {
    int64_t begin = 0, stride = 0, elements = 0;
    int64_t count = 0;  // the experts
  };
  const ExpertSpan& expert_span() const { return experts_; }
  // The weight bytes before the first expert (weight_bytes() for a unit without experts): what
  // the buffer must hold when a MicroBatch brings its experts.
  uint64_t dense_weight_bytes() const {
    return experts_.count == 0 ? layout_.weight_bytes() : 2 * static_cast<uint64_t>(experts_.begin);
  }

  // An NF4 base weight (layout().params[i].nf4) is quantised from the given 16-bit values
  // (QuantizeNf4Blob); such an upload completes before this returns.

  // Bytes of workspace one [b, t] microbatch needs (forward internals + backward scratch; the
  // head's logits and the MLP's intermediates for one token chunk).
  uint64_t WorkspaceBytes(int64_t b, int64_t t) const;
  // Allocates WorkspaceBytes(b, t) on the backend (RESOURCE_EXHAUSTED past the device cap).
  absl::StatusOr<backend::DeviceBuffer> AllocateWorkspace(int64_t b, int64_t t) const;

  // `adapter`: the unit's adapter parameters (REQUIRED when adapter() is not empty).
  absl::Status Forward(backend::Queue& queue, const MicroBatch& mb,
                       const backend::DeviceBuffer& weights, void* out,
                       const backend::DeviceBuffer& workspace,
                       const AdapterBuffers* adapter = nullptr) const;

  // The head without its loss: logits [B, T, V] fp32 (device, caller-owned) of the final norm and
  // LM head, the same ops Forward runs before the cross-entropy (mb.targets is not read).
  // FAILED_PRECONDITION unless kind() is the head.
  absl::Status Logits(backend::Queue& queue, const MicroBatch& mb,
                      const backend::DeviceBuffer& weights, float* logits,
                      const backend::DeviceBuffer& workspace) const;

  // A frozen unit ignores `grads` (may be empty) and needs `adapter`'s params and grads when it
  // has adapters. `loss` (the head with recompute; ignored otherwise): device memory that gets the
  // microbatch's mean loss [1] fp32 of the forward the backward recomputes, the value Forward
  // writes to `out`, so a pipeline's forward pass need not run the head at all.
  absl::Status Backward(backend::Queue& queue, const MicroBatch& mb,
                        const backend::DeviceBuffer& weights, const backend::DeviceBuffer& grads,
                        const float* dout, float* dinp, float loss_scale,
                        const backend::DeviceBuffer& workspace, bool recompute,
                        const AdapterBuffers* adapter = nullptr, float* loss = nullptr) const;

  struct Ctx;  // one call's addresses; internal (unit_runner_internal.h)

 private:

  UnitRunner(const model::ModelConfig& config, model::UnitKind kind, UnitParamLayout layout,
             reference::ModelNames names, backend::Backend* backend);
  absl::StatusOr<ExpertSpan> FindExpertSpan() const;  // Create's, from the layout
  absl::Status CheckCall(const MicroBatch& mb, const backend::DeviceBuffer& weights,
                         const backend::DeviceBuffer* grads,
                         const backend::DeviceBuffer& workspace,
                         const AdapterBuffers* adapter, bool backward,
                         bool logits_only) const;
  Ctx MakeCtx(backend::Queue& queue, const MicroBatch& mb, const backend::DeviceBuffer& weights,
              const backend::DeviceBuffer* grads, const backend::DeviceBuffer& workspace,
              const AdapterBuffers* adapter) const;

  // The three kinds (block_runner.cc holds the block's).
  absl::Status EmbeddingForward(const Ctx& c, void* out) const;
  absl::Status EmbeddingBackward(const Ctx& c, const float* dout) const;
  // The head a chunk of rows at a time (common/model/unit_workspace.h): the final norm once, then
  // per chunk [row0, row0 + rows) its logits (LogitsType, into `logits` or the workspace's chunk), its
  // losses and lse, and in the backward its logits' gradient, the head's weight gradient (+=) and
  // the norm output's gradient rows. With one chunk the ops are the unchunked ones.
  absl::Status HeadNorm(const Ctx& c) const;
  absl::Status HeadChunkLogits(const Ctx& c, int64_t row0, int64_t rows, void* logits) const;
  // The training logits' type: fp16 with the fp16 backward (Ctx::half_backward), else fp32.
  static backend::DType LogitsType(const Ctx& c);
  absl::Status HeadChunkLoss(const Ctx& c, int64_t row0, int64_t rows, float* mean_loss) const;
  backend::CrossEntropyRows ChunkRowsOf(const Ctx& c, int64_t row0) const;
  absl::Status HeadForward(const Ctx& c, float* loss) const;
  absl::Status HeadLogits(const Ctx& c, float* logits) const;  // final norm + LM head, all rows
  // logits_ready: the workspace holds the (single) chunk's logits and lse of this microbatch.
  // `loss`: where the last chunk's recomputed cross-entropy writes the mean loss (nullptr: none).
  absl::Status HeadBackward(const Ctx& c, float* dinp, float loss_scale, bool logits_ready,
                            float* loss) const;
  absl::Status BlockForward(const Ctx& c, void* out) const;  // out null: internals only
  absl::Status BlockBackward(const Ctx& c, const float* dout, float* dinp) const;
  // The block's MLP a token chunk at a time (common/model/unit_workspace.h; block_runner.cc).
  absl::Status MlpChunkForward(const Ctx& c, const BlockWeights& w, int64_t row0, int64_t rows,
                               bool down) const;
  absl::Status MlpChunkBackward(const Ctx& c, const BlockWeights& w, int64_t row0, int64_t rows,
                                const float* dout) const;
  // A mixture-of-experts MLP (moe_runner.cc; backend/moe_params.h): router, routing, one GEMM
  // set per expert over its rows, and with `combine` the weighted sum into mlp_out (a recompute
  // for the backward keeps the experts' outputs only); the backward from dout (fp32 [N, C]) into
  // d_norm. The host reads the experts' row offsets (a queue synchronisation per call).
  absl::Status MoeForward(const Ctx& c, const reference::LayerNames& ln, bool combine) const;
  absl::Status MoeBackward(const Ctx& c, const reference::LayerNames& ln,
                           const float* dout) const;
  // The experts' row offsets [E + 1] on the host (a queue synchronisation); with prob_sums, the
  // workspace's probability column sums [E] copied there too.
  absl::StatusOr<std::vector<int32_t>> ExpertOffsets(const Ctx& c,
                                                     float* prob_sums = nullptr) const;
  // With MicroBatch::experts: the addresses [E] of the experts with rows (nullptr for the
  // others), fetched from the source; without: empty (the experts are in the weight buffer).
  absl::StatusOr<std::vector<const void*>> FetchExperts(const Ctx& c,
                                                        const std::vector<int32_t>& offsets) const;
  absl::Status Norm(const Ctx& c, const std::string& weight, const std::string& bias,
                    const void* inp, void* out, float* mean, float* rstd, int64_t n) const;
  absl::Status NormBackward(const Ctx& c, const std::string& weight, const std::string& bias,
                            const void* dout, const void* inp, const float* mean,
                            const float* rstd, float* dinp, int64_t n) const;

  const model::ModelConfig config_;
  const model::UnitKind kind_;
  const UnitParamLayout layout_;
  const reference::ModelNames names_;
  backend::Backend* const backend_;
  UnitAdapter adapter_;
  bool frozen_ = false;
  int64_t chunk_tokens_ = 0;
  backend::DType half_ = backend::DType::kBf16;
  bool half_accumulate_ = false;
  bool half_backward_ = false;  // fp16 without adapters: fp16 backward GEMM outputs (linear.h)
  std::vector<float> inv_freq_;  // [head_dim / 2] RoPE inverse frequencies (RoPE blocks only)
  ExpertSpan experts_;
};

// The NF4 blob (common/numeric/nf4.h) of n 16-bit values of `precision` (bf16 or fp16 bits):
// what the store and the device hold for a QLoRA base weight.
std::vector<uint8_t> QuantizeNf4Blob(const uint16_t* bits, int64_t n, backend::DType precision);

}  // namespace mobius::units

#endif  // MOBIUS_WORKER_MODEL_UNIT_RUNNER_H_
