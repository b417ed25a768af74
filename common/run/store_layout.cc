#include "common/run/store_layout.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/model/lora.h"
#include "common/status_macros.h"

namespace mobius::runtime {
namespace {

uint64_t Align(uint64_t x) { return (x + 4095) & ~uint64_t{4095}; }

}  // namespace

int StoreLayout::checkpoint_of(int64_t unit) const {
  const auto it = std::lower_bound(checkpoint_units.begin(), checkpoint_units.end(), unit);
  if (it == checkpoint_units.end() || *it != unit) return -1;
  return static_cast<int>(it - checkpoint_units.begin());
}

uint64_t StoreLayout::activation_offset(int k, int mb, uint32_t r) const {
  const uint64_t copy = r % checkpoint_copies;
  return checkpoints + ((copy * num_checkpoints() + k) * num_microbatches + mb) *
                           Align(boundary_elements * 2);
}

uint64_t StoreLayout::dgrad_offset(int mb) const {
  return activation_grads + static_cast<uint64_t>(mb) * Align(boundary_elements * 4);
}

uint64_t StoreLayout::stage_weight_bytes(const StageRange& r) const {
  const uint64_t end = r.end < static_cast<int64_t>(units.size())
                           ? unit_weights[r.end]
                           : unit_weights.back() + Align(units.back().weight_bytes());
  return end - unit_weights[r.begin];
}

uint64_t StoreLayout::stage_grad_bytes(const StageRange& r) const {
  const uint64_t last = lora ? 4 * static_cast<uint64_t>(unit_adapter_elements.back())
                             : units.back().grad_bytes();
  const uint64_t end = r.end < static_cast<int64_t>(units.size())
                           ? unit_grads[r.end]
                           : unit_grads.back() + Align(last);
  return end - unit_grads[r.begin];
}

uint64_t StoreLayout::stage_adapter_bytes(const StageRange& r) const {
  if (!lora) return 0;
  const uint64_t end =
      r.end < static_cast<int64_t>(units.size())
          ? unit_adapters[r.end]
          : unit_adapters.back() + Align(4 * static_cast<uint64_t>(unit_adapter_elements.back()));
  return end - unit_adapters[r.begin];
}

namespace {

// LoRA's regions (store_layout.h): per unit the adapters' gradients, values, then moments, each in
// the unit's adapter layout (worker/model/adapter.h: per module A then B), and their TensorSlots.
absl::Status LayOutAdapters(const model::ModelConfig& config, const train::AdapterOptions& a,
                            StoreLayout& l, uint64_t& at) {
  const std::vector<std::string> targets =
      a.target_modules.empty() ? model::DefaultLoraTargets(config) : a.target_modules;
  MOBIUS_RETURN_IF_ERROR(model::ValidateLora(config, a.rank, targets, "training.adapter.rank",
                                             "training.adapter.target_modules"));
  MOBIUS_ASSIGN_OR_RETURN(std::vector<model::LoraModule> modules,
                          model::LoraModules(config, targets, "training.adapter.target_modules"));
  const int64_t num_units = static_cast<int64_t>(l.units.size());
  l.lora = true;
  // Per unit: its modules' element offsets (A, then B), in LoraModules order.
  std::vector<std::vector<std::pair<const model::LoraModule*, int64_t>>> of(num_units);
  l.unit_adapter_elements.assign(num_units, 0);
  for (const model::LoraModule& m : modules) {
    const int64_t u = m.layer + 1;
    of[u].push_back({&m, l.unit_adapter_elements[u]});
    l.unit_adapter_elements[u] += a.rank * (m.in + m.out);
  }
  auto bytes = [&](int64_t u) { return Align(4 * static_cast<uint64_t>(l.unit_adapter_elements[u])); };
  for (int64_t u = 0; u < num_units; ++u) {
    l.unit_grads.push_back(at);
    at += bytes(u);
  }
  for (int64_t u = 0; u < num_units; ++u) {
    l.unit_adapters.push_back(at);
    at += bytes(u);
  }
  std::vector<uint64_t> moments;
  for (int64_t u = 0; u < num_units; ++u) {
    moments.push_back(at);
    at += 2 * bytes(u);
  }
  for (int64_t u = 0; u < num_units; ++u) {
    for (const auto& [m, first] : of[u]) {
      const int64_t a_elements = a.rank * m->in;
      for (int which = 0; which < 2; ++which) {
        const int64_t offset = which == 0 ? first : first + a_elements;
        TensorSlot s;
        s.name = which == 0 ? m->a_name() : m->b_name();
        s.owner_unit = u;
        s.num_elements = which == 0 ? a_elements : a.rank * m->out;
        s.decay = true;  // the Hugging Face Trainer decays every adapter matrix
        s.master = l.unit_adapters[u] + 4 * static_cast<uint64_t>(offset);
        s.grad = l.unit_grads[u] + 4 * static_cast<uint64_t>(offset);
        s.m = moments[u] + 4 * static_cast<uint64_t>(offset);
        s.v = moments[u] + bytes(u) + 4 * static_cast<uint64_t>(offset);
        l.tensors[s.name] = s;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<StoreLayout> MakeStoreLayout(const model::ModelConfig& config,
                                            const RunConfig& run) {
  MOBIUS_ASSIGN_OR_RETURN(model::ModelDescription desc, model::DescribeModel(config));
  const int64_t num_units = static_cast<int64_t>(desc.units.size());
  MOBIUS_RETURN_IF_ERROR(ValidateRunConfig(run, num_units));
  const train::TrainerOptions& t = run.training;
  const int64_t mb = t.EffectiveMicrobatch();
  if (mb <= 0 || t.batch % mb != 0 || t.seq <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("training: batch ", t.batch, ", microbatch ", mb,
                                                   ", seq ", t.seq, " do not make microbatches"));
  }
  StoreLayout l;
  l.num_forward_stages = static_cast<int>(ForwardStages(run).size());
  l.num_backward_stages = static_cast<int>(BackwardStages(run).size());
  l.checkpoint_units = CheckpointUnits(run);
  l.num_workers = run.num_workers;
  // With several nodes training.batch is the global batch; this node's store holds its share.
  l.num_microbatches = static_cast<int>(t.batch / mb / std::max(1, run.nodes.count));
  l.boundary_elements = static_cast<uint64_t>(mb * t.seq * config.hidden_size);
  l.peer_channels = DgradChannels(run);

  uint64_t at = Align(StoreLayout::kControlOffset + 4 * static_cast<uint64_t>(l.num_control_words()));
  for (int64_t u = 0; u < num_units; ++u) {
    MOBIUS_ASSIGN_OR_RETURN(units::UnitParamLayout ul,
                            units::MakeUnitParamLayout(desc, u, t.adapter.base_nf4()));
    l.unit_weights.push_back(at);
    at += Align(ul.weight_bytes());
    l.units.push_back(std::move(ul));
  }
  if (t.adapter.enabled() && t.optimizer_staleness != 0) {
    return absl::InvalidArgumentError(
        "training.optimizer_staleness: must be 0 with an adapter (the adapters' update is small: "
        "there is nothing to overlap)");
  }
  l.weight_copies = t.optimizer_staleness == 1 ? 2 : 1;
  if (l.weight_copies == 2) {
    l.weight_copy_stride = at - l.unit_weights.front();
    at += l.weight_copy_stride;
  }
  if (t.adapter.enabled()) {
    MOBIUS_RETURN_IF_ERROR(LayOutAdapters(config, t.adapter, l, at));
  } else {
    for (int64_t u = 0; u < num_units; ++u) {
      l.unit_grads.push_back(at);
      at += Align(l.units[u].grad_bytes());
    }
    for (const model::LayerUnit& unit : desc.units) {
      const units::UnitParamLayout& ul = l.units[unit.index];
      for (const model::ParamSpec& p : unit.params) {
        TensorSlot s;
        s.name = p.name;
        s.owner_unit = unit.index;
        s.num_elements = p.num_elements;
        s.decay = p.weight_decay;
        const uint64_t bytes = Align(4 * static_cast<uint64_t>(p.num_elements));
        s.master = at;
        s.m = at + bytes;
        s.v = at + 2 * bytes;
        s.grad = l.unit_grads[unit.index] + 4 * static_cast<uint64_t>(ul.Find(p.name)->offset);
        at += 3 * bytes;
        l.tensors[p.name] = s;
      }
    }
  }
  // Chunk indices in name order: the order of CpuAdamW::GlobalGradNorm over a name-ordered map.
  const int64_t chunk = kGradNormChunkElements;
  for (auto& [name, s] : l.tensors) {
    s.first_chunk = l.num_chunks;
    s.num_chunks = (s.num_elements + chunk - 1) / chunk;
    l.num_chunks += s.num_chunks;
  }
  l.checkpoint_copies = t.optimizer_staleness == 1 ? 2 : 1;
  l.checkpoints = at;
  at += static_cast<uint64_t>(l.checkpoint_copies) * l.num_checkpoints() * l.num_microbatches *
        Align(l.boundary_elements * 2);
  l.activation_grads = at;
  if (l.num_backward_boundaries() > 0) {
    at += static_cast<uint64_t>(l.num_microbatches) * Align(l.boundary_elements * 4);
  }
  l.channel_ids = at;
  at += Align(128 * static_cast<uint64_t>(l.num_channels()));
  l.channel_payload = at;
  if (run.transport == "emulated") {
    l.channel_payload_stride = Align(l.boundary_elements * 4);
    at += static_cast<uint64_t>(l.num_channels()) * l.channel_payload_stride;
  }
  l.link_words = at;
  l.internode_link = static_cast<int>(run.links.size());
  at += Align(32 * static_cast<uint64_t>(run.links.size() + 1));
  l.norm_partials = at;
  l.norm_partials_stride = Align(8 * static_cast<uint64_t>(l.num_chunks));
  at += 2 * l.norm_partials_stride;
  l.pool_ticket = at;
  l.norm_values = at + 8;
  at += Align(8 + 2 * 8);
  l.loss_scales = at;
  at += Align(2 * 24);
  l.moe_stats = at;
  if (config.moe.enabled() && config.moe.output_router_logits) {
    l.moe_blocks = config.moe.NumMoeLayers(config.num_layers);
    l.moe_stats_stride = 8 * static_cast<uint64_t>(l.moe_blocks * config.moe.num_experts);
    at +=
        Align(static_cast<uint64_t>(l.checkpoint_copies) * l.num_microbatches * l.moe_stats_stride);
  }
  l.total_bytes = at;
  return l;
}

}  // namespace mobius::runtime
