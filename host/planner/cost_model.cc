#include "host/planner/cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace mobius::planner {
namespace {

constexpr double kGiga = 1e9;

double NvLinkGBytesPerSecond(const topology::Topology& topology, int a, int b) {
  for (const topology::NvLink& l : topology.nvlinks) {
    if ((l.gpu_a == a && l.gpu_b == b) || (l.gpu_a == b && l.gpu_b == a)) return l.gbytes_per_s;
  }
  return 0;
}

struct MeasuredRates {
  double h2d = std::numeric_limits<double>::infinity();
  double d2h = std::numeric_limits<double>::infinity();
};

// A device's measured rate while k devices of its group copy at once: alone for k = 1; with a
// group measurement, the group's aggregate (group_size x per-device rate) shared by k, capped by
// the rate alone. Zero (unmeasured) fields do not constrain.
MeasuredRates MeasuredRatesFor(const LinkProfile& l, int k) {
  auto pick = [&](double alone, double group) {
    double r = alone > 0 ? alone : std::numeric_limits<double>::infinity();
    if (k > 1 && group > 0) r = std::min(r, group * l.group_size / k);
    return r;
  };
  return {pick(l.h2d_bytes_per_s, l.group_h2d_bytes_per_s),
          pick(l.d2h_bytes_per_s, l.group_d2h_bytes_per_s)};
}

}  // namespace

int GpusInContentionGroup(const topology::TopologyFacts& facts, const std::vector<int>& gpus,
                          int gpu) {
  const int group = facts.gpus[gpu].contention_group;
  int n = 0;
  for (int g : gpus) {
    if (g == gpu || (group >= 0 && facts.gpus[g].contention_group == group)) ++n;
  }
  return std::max(n, 1);
}

double EffectiveHostGBytesPerSecond(const topology::TopologyFacts& facts, int gpu, int concurrent,
                                    double dma_efficiency) {
  const topology::GpuFacts& g = facts.gpus[gpu];
  double own = g.host_path_gbytes_per_s > 0 ? g.host_path_gbytes_per_s : g.link_gbytes_per_s;
  double bw = own;
  if (g.contention_group >= 0) {
    const double uplink = facts.contention_groups[g.contention_group].uplink_gbytes_per_s;
    if (uplink > 0) bw = std::min(own, uplink / std::max(concurrent, 1));
  }
  return dma_efficiency * bw;
}

double BoundaryTransferSeconds(const topology::Topology& topology,
                               const topology::TopologyFacts& facts, int src, int dst,
                               int64_t bytes, int src_concurrent, int dst_concurrent,
                               double dma_efficiency) {
  if (src == dst || bytes <= 0) return 0;
  const double up = EffectiveHostGBytesPerSecond(facts, src, src_concurrent, dma_efficiency);
  const double down = EffectiveHostGBytesPerSecond(facts, dst, dst_concurrent, dma_efficiency);
  const double b = static_cast<double>(bytes);
  if (facts.p2p[src][dst]) {
    const double nvlink = NvLinkGBytesPerSecond(topology, src, dst);
    const double bw = nvlink > 0 ? nvlink * dma_efficiency : std::min(up, down);
    return b / (bw * kGiga);
  }
  return b / (up * kGiga) + b / (down * kGiga);
}

double OptimizerSeconds(int64_t parameters, double seconds_per_billion) {
  return static_cast<double>(parameters) / kGiga * seconds_per_billion;
}

void StageAccumulator::Add(int unit) {
  const UnitCost& c = problem_->units[unit];
  forward_seconds_ += problem_->ForwardPassSeconds(unit);
  backward_seconds_ += c.backward_seconds;
  weight_bytes_ += c.weight_bytes;
  gradient_bytes_ += c.gradient_bytes;
  activation_bytes_ += c.activation_bytes;
  boundary_bytes_ += c.boundary_bytes;
  max_transient_bytes_ = std::max(max_transient_bytes_, c.activation_bytes - c.boundary_bytes);
}

StageCost StageAccumulator::Cost(bool backward_upload) const {
  const PartitionProblem& p = *problem_;
  const double m = p.num_microbatches;
  const double act = m * static_cast<double>(p.boundary_bytes);
  const double w = static_cast<double>(weight_bytes_);
  StageCost s;
  s.forward_compute_seconds = m * forward_seconds_;
  s.backward_compute_seconds = m * backward_seconds_;
  s.load_seconds = w / p.h2d_bytes_per_s;
  const double h2d = (w + act) / p.h2d_bytes_per_s;
  // Without the upload the backward still reloads its checkpoints (and output gradients): M h.
  const double backward_h2d = backward_upload ? h2d : act / p.h2d_bytes_per_s;
  s.backward_upload = backward_upload;
  s.forward_seconds = std::max({s.forward_compute_seconds, h2d, act / p.d2h_bytes_per_s});
  s.backward_seconds = std::max({s.backward_compute_seconds, backward_h2d,
                                 (static_cast<double>(gradient_bytes_) + act) / p.d2h_bytes_per_s});
  switch (p.pass) {
    case Pass::kBoth:
      s.slot_seconds = s.forward_seconds + s.backward_seconds;
      break;
    case Pass::kForward:
      s.slot_seconds = s.forward_seconds;
      break;
    case Pass::kBackward:
      s.slot_seconds = s.backward_seconds;
      break;
  }
  s.memory_bytes = MemoryBytes();
  s.slot_bytes = s.memory_bytes / 2;
  s.weight_bytes = weight_bytes_;
  s.gradient_bytes = GradientBytes();
  s.activation_bytes = ActivationBytes();
  return s;
}

int64_t RuntimeActivationBufferBytes(const Profile& profile) {
  int64_t hidden = 0;
  for (const UnitProfile& u : profile.units) hidden = std::max(hidden, u.boundary_bytes);
  return 6 * hidden + 8 * profile.shape.tokens();
}

int64_t UnitStageMemoryBytes(const PartitionProblem& p, int unit) {
  const UnitCost& c = p.units[unit];
  const int64_t g = p.pass == Pass::kForward ? 0 : c.gradient_bytes;
  if (p.memory_model == MemoryModel::kRuntime) return 2 * (c.weight_bytes + g) + c.activation_bytes;
  return 2 * (c.weight_bytes + g + c.activation_bytes);
}

StageCost EvaluateStage(const PartitionProblem& p, int begin, int end, bool backward_upload) {
  StageAccumulator acc(p);
  for (int u = begin; u < end; ++u) acc.Add(u);
  return acc.Cost(backward_upload);
}

int ReusedBackwardStages(const PartitionProblem& p, int num_stages) {
  if (p.pass != Pass::kBoth || p.backward_uploads != BackwardUploads::kTwoSlotReuse) return 0;
  return std::min(num_stages, 2 * p.num_gpus);
}

double PipelineSlots(int num_stages, int num_gpus, int num_microbatches) {
  const double s = num_stages, n = num_gpus, m = num_microbatches;
  const double rounds = std::ceil(s / n);
  const double fill = (std::min(s, n) - 1) / m;
  return std::max(rounds + fill, 1 + (s - 1) / m);
}

double Objective(const PartitionProblem& p, int num_stages, double max_slot_seconds) {
  return PipelineSlots(num_stages, p.num_gpus, p.num_microbatches) *
             (max_slot_seconds + p.stage_overhead_seconds) +
         p.optimizer_seconds;
}

double RoundRobinSlots(int num_passes, int num_gpus, int num_microbatches) {
  const double step = 1.0 / num_microbatches;
  std::vector<double> start(num_passes, 0.0);
  for (int j = 1; j < num_passes; ++j) {
    start[j] = start[j - 1] + step;
    if (j >= num_gpus) start[j] = std::max(start[j], start[j - num_gpus] + 1.0);
  }
  return start[num_passes - 1] + 1.0;
}

double RoundRobinObjective(const PartitionProblem& p, int num_passes, double max_pass_seconds) {
  return RoundRobinSlots(num_passes, p.num_gpus, p.num_microbatches) *
             (max_pass_seconds + p.stage_overhead_seconds / 2) +
         p.optimizer_seconds;
}

PartitionProblem PassProblem(const PartitionProblem& problem, Pass pass) {
  PartitionProblem p = problem;
  p.pass = pass;
  return p;
}

absl::StatusOr<PartitionProblem> MakePartitionProblem(
    const Profile& profile, const model::ModelDescription& model,
    const topology::Topology& topology, const topology::TopologyFacts& facts,
    const std::vector<int>& gpus, int num_microbatches, int64_t gpu_memory_bytes,
    const CostOptions& options) {
  if (gpus.empty()) {
    return absl::InvalidArgumentError("a GPU plan needs at least one GPU (got none)");
  }
  if (num_microbatches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_microbatches must be >= 1 (got ", num_microbatches, ")"));
  }
  if (profile.units.size() != model.units.size()) {
    return absl::InvalidArgumentError(absl::StrCat("profile has ", profile.units.size(),
                                                   " units, model has ", model.units.size()));
  }
  PartitionProblem p;
  p.num_gpus = static_cast<int>(gpus.size());
  p.num_microbatches = num_microbatches;
  double bw = std::numeric_limits<double>::infinity();
  double measured_h2d = std::numeric_limits<double>::infinity();
  double measured_d2h = measured_h2d;
  int64_t memory = std::numeric_limits<int64_t>::max();
  for (int g : gpus) {
    if (g < 0 || g >= static_cast<int>(topology.gpus.size())) {
      return absl::InvalidArgumentError(absl::StrCat("GPU index ", g, " out of range (server has ",
                                                     topology.gpus.size(), " GPUs)"));
    }
    const int k = GpusInContentionGroup(facts, gpus, g);
    bw = std::min(bw, EffectiveHostGBytesPerSecond(facts, g, k, options.dma_efficiency));
    if (profile.links.has_value()) {
      const MeasuredRates r = MeasuredRatesFor(*profile.links, k);
      measured_h2d = std::min(measured_h2d, r.h2d);
      measured_d2h = std::min(measured_d2h, r.d2h);
    }
    const uint64_t m = topology.gpus[g].memory_bytes;
    memory = std::min(memory, m > 0 ? static_cast<int64_t>(m) : gpu_memory_bytes);
  }
  if (memory <= 0) {
    return absl::InvalidArgumentError(
        "GPU memory size unknown: the topology does not report it and no device spec gives it");
  }
  if (!(bw > 0)) {
    return absl::InvalidArgumentError("host link bandwidth of the plan's GPUs is unknown (0 GB/s)");
  }
  p.h2d_bytes_per_s = std::min(bw * kGiga, measured_h2d);
  p.d2h_bytes_per_s = std::min(bw * kGiga, measured_d2h);
  p.gpu_memory_bytes = memory;
  const bool runtime = options.memory_model == MemoryModel::kRuntime;
  p.memory_model = options.memory_model;
  p.reserved_bytes = options.memory_margin_bytes + profile.MaxWorkspaceBytes();
  p.forward_keeps_boundaries_only = options.forward_keeps_boundaries_only;
  p.forward_skips_head = runtime;
  p.stage_overhead_seconds = options.stage_overhead_seconds;
  const int64_t trained = profile.lora ? profile.lora->parameters : model::TotalParameters(model);
  p.optimizer_seconds = OptimizerSeconds(trained, options.optimizer_seconds_per_billion_params);
  for (size_t i = 0; i < profile.units.size(); ++i) {
    const UnitProfile& u = profile.units[i];
    p.boundary_bytes = std::max(p.boundary_bytes, u.boundary_bytes);
    p.units.push_back({u.forward_seconds, u.backward_seconds, u.parameter_bytes, u.gradient_bytes,
                       runtime ? u.boundary_bytes : u.boundary_bytes + u.saved_activation_bytes,
                       u.boundary_bytes,
                       profile.lora ? profile.lora->UnitParameters(static_cast<int64_t>(i))
                                    : u.parameter_bytes / 2});
  }
  if (runtime) p.reserved_bytes += RuntimeActivationBufferBytes(profile);
  return p;
}

}  // namespace mobius::planner
