// Internal to worker/model: the workspace layout of each unit kind and the per-call context shared
// by unit_runner.cc and block_runner.cc.
#ifndef MOBIUS_WORKER_MODEL_UNIT_RUNNER_INTERNAL_H_
#define MOBIUS_WORKER_MODEL_UNIT_RUNNER_INTERNAL_H_

#include <cstdint>
#include <string>

#include "common/model/model_config.h"
#include "worker/model/adapter.h"
#include "worker/model/linear.h"
#include "worker/model/unit_runner.h"

namespace mobius::units {

// Byte offsets into the workspace (64-byte aligned); fields a kind does not use stay 0-sized.
// Names follow reference/activations.h. N = B * T, Q = H * hd, K = KV * hd, I intermediate.
struct WorkspaceLayout {
  uint64_t total = 0;
  // block forward, bf16
  uint64_t norm1 = 0, q_proj = 0, k_proj = 0, q_normed = 0, k_normed = 0, q = 0, k = 0, v = 0;
  uint64_t att = 0, o = 0, mid = 0, norm2 = 0, mlp_in = 0, mlp_up = 0, mlp_act = 0, mlp_out = 0;
  // block forward, fp32
  uint64_t norm1_mean = 0, norm1_rstd = 0, qn_rstd = 0, kn_rstd = 0, lse = 0;
  uint64_t norm2_mean = 0, norm2_rstd = 0, inv_freq = 0, cos = 0, sin = 0;
  // block backward: bf16 [N, I] x3, [N, Q] / [N, K] x3 each; fp32 [N, max(C, I, Q)]; bf16 [N, C]
  uint64_t d_act = 0, d_in = 0, d_up = 0, d_att = 0, dq = 0, dk = 0, dv = 0;
  uint64_t dq_pre = 0, dk_pre = 0, dq_proj = 0, dk_proj = 0, d_norm_f32 = 0, d_norm = 0;
  // head (norm out and stats reuse norm1*, d_norm*): fp32
  uint64_t logits = 0, losses = 0, ce_lse = 0, loss = 0;
  // embedding backward: the bf16 copy of dout reuses d_norm
};

WorkspaceLayout MakeWorkspaceLayout(const model::ModelConfig& config, model::UnitKind kind,
                                    int64_t b, int64_t t);

// The adapters' share of the workspace, after the unit's own (64-byte aligned): per adapted
// module h = x A^T [N, rank] fp32 (forward to backward), one gh [N, rank] fp32 scratch, and (a
// frozen unit) a sink for the norm-parameter gradients its kernels always write, 2 x max(C, hd)
// fp32, never read.
struct LoraWorkspace {
  uint64_t h = 0;        // offset of module 0's h; module i's at h + i * h_stride
  uint64_t h_stride = 0;
  uint64_t gh = 0;
  uint64_t xd = 0;  // with dropout: [N, max in] fp32, the dropped-out input (linear.h)
  uint64_t sink = 0;
  int64_t sink_elements = 0;  // per parameter (weight, bias)
  uint64_t total = 0;    // the whole workspace, the unit's part included
};
LoraWorkspace MakeLoraWorkspace(const model::ModelConfig& config, const UnitAdapter& adapter,
                                bool frozen, uint64_t base_total, int64_t b, int64_t t);

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

  void* at(uint64_t offset) const { return workspace->at(offset); }
  uint16_t* bf(uint64_t offset) const { return static_cast<uint16_t*>(at(offset)); }
  float* f32(uint64_t offset) const { return static_cast<float*>(at(offset)); }
  // The weight / gradient of `name` plus `element_offset`; nullptr for an empty name (absent bias).
  const void* W(const std::string& name, int64_t element_offset = 0) const;
  float* G(const std::string& name, int64_t element_offset = 0) const;
  // A norm parameter's gradient: G, or with frozen base weights the sink (`which` 0 weight,
  // 1 bias); nullptr for an absent parameter.
  float* NormG(const std::string& name, int which) const;
  // The adapter term of the linear whose weight is `weight` (LoraTerm{} when not adapted): the
  // slice of `out` rows from `row` of a fused module of `total_out` rows.
  LoraTerm Lora(const std::string& weight, int64_t row, bool first, bool last) const;
};

}  // namespace mobius::units

#endif  // MOBIUS_WORKER_MODEL_UNIT_RUNNER_INTERNAL_H_
