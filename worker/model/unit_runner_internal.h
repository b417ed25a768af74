// Internal to worker/model: the workspace layout of each unit kind and the per-call context shared
// by unit_runner.cc and block_runner.cc.
#ifndef MOBIUS_WORKER_MODEL_UNIT_RUNNER_INTERNAL_H_
#define MOBIUS_WORKER_MODEL_UNIT_RUNNER_INTERNAL_H_

#include <cstdint>
#include <string>

#include "common/model/model_config.h"
#include "common/model/unit_workspace.h"
#include "worker/model/adapter.h"
#include "worker/model/linear.h"
#include "worker/model/unit_runner.h"

namespace mobius::units {

// The workspace layout (common/model/unit_workspace.h: shared with the planner's memory model).
using model::WorkspaceLayout;

// The adapters' share of the workspace, after the unit's own (64-byte aligned): the adapters'
// h = x A^T fp32 (forward to backward) in UnitAdapter::h_slots slots of [N, rank] (a module's
// from its h_slot: model::LoraStateSlots), gh scratch in gh_slots slots, with
// dropout the dropped-out input xd [rows, in] fp32 of the widest module (rows: N, or the MLP's
// chunk rows R for the MLP's modules), and (a frozen unit) a sink for the norm-parameter
// gradients its kernels always write, 2 x max(C, hd) fp32, never read.
struct LoraWorkspace {
  uint64_t h = 0;  // offset of slot 0; slot i's at h + i * h_stride
  uint64_t h_stride = 0;
  uint64_t gh = 0;
  uint64_t xd = 0;  // with dropout: [N, max in] fp32, the dropped-out input (linear.h)
  uint64_t sink = 0;
  int64_t sink_elements = 0;  // per parameter (weight, bias)
  uint64_t nf4 = 0;  // an NF4 base: the dequantised weight, 16-bit [nf4_scratch_elements]
  uint64_t total = 0;    // the whole workspace, the unit's part included
};
LoraWorkspace MakeLoraWorkspace(const model::ModelConfig& config, const UnitAdapter& adapter,
                                bool frozen, const WorkspaceLayout& base, int64_t b, int64_t t,
                                int64_t nf4_scratch_elements = 0);

// The rows [row0, row0 + rows) of a linear's adapter term: h, gh (and xd's scratch) offset to
// those rows, the dropout mask's row offset advanced.
LoraTerm LoraRows(LoraTerm l, int64_t row0);

// The projections of one block read in both weight layouts. GPT-2's fused c_attn [C, Q + 2K] is
// read as three column slices (q | k | v) of the same weight and bias: no copies.
struct BlockWeights {
  LinearWeight q, k, v, o, fc, proj, gate, up, down;
};

struct UnitRunner::Ctx {
  backend::Queue* queue = nullptr;
  MicroBatch mb;
  int64_t n = 0;  // B * T
  const backend::DeviceBuffer* weights = nullptr;
  const backend::DeviceBuffer* grads = nullptr;  // null in Forward
  const backend::DeviceBuffer* workspace = nullptr;
  WorkspaceLayout ws;
  const UnitParamLayout* layout = nullptr;
  // LoRA: the unit's adapters (empty when none), their buffers for this call, the workspace part.
  const UnitAdapter* adapter = nullptr;
  const AdapterBuffers* adapter_buffers = nullptr;
  LoraWorkspace lws;
  bool frozen = false;  // base weights frozen: grads is null, norm gradients go to the sink
  backend::DType half = backend::DType::kBf16;  // the weights' and activations' 16-bit format
  bool half_accumulate = false;                 // fp16 GEMMs with fp16 outputs sum in fp16
  bool half_backward = false;  // the block's backward GEMMs write fp16 (linear.h half_backward)

  void* at(uint64_t offset) const { return workspace->at(offset); }
  uint16_t* bf(uint64_t offset) const { return static_cast<uint16_t*>(at(offset)); }
  float* f32(uint64_t offset) const { return static_cast<float*>(at(offset)); }
  // The weight / gradient of `name` plus `element_offset`; nullptr for an empty name (absent bias).
  const void* W(const std::string& name, int64_t element_offset = 0) const;
  float* G(const std::string& name, int64_t element_offset = 0) const;
  // `linear` reading the weight `name`: with an NF4 base weight, its blob's values and the
  // scratch it dequantises into (linear.h); unchanged otherwise.
  LinearWeight Base(LinearWeight linear, const std::string& name) const;
  // A norm parameter's gradient: G, or with frozen base weights the sink (`which` 0 weight,
  // 1 bias); nullptr for an absent parameter.
  float* NormG(const std::string& name, int which) const;
  // The adapter term of the linear whose weight is `weight` (LoraTerm{} when not adapted): the
  // slice of `out` rows from `row` of a fused module of `total_out` rows.
  LoraTerm Lora(const std::string& weight, int64_t row, bool first, bool last) const;
};

}  // namespace mobius::units

#endif  // MOBIUS_WORKER_MODEL_UNIT_RUNNER_INTERNAL_H_
