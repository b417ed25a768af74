#include "host/planner/api/published.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/run/schedule.h"

namespace mobius::planner {
namespace {

constexpr int64_t kSeq = 2048;

bool Is32B(const PublishedRow& row) { return row.model == "Qwen3-32B"; }

// What every published system shares: fp16 GEMMs with fp16 accumulation
// (torch.backends.cuda.matmul.allow_fp16_accumulation in every script of the artifact), fp16
// gradients, the calibrated profile and the fixture's host.
SystemSetup Common(const topology::Topology& topology) {
  SystemSetup s;
  s.job.seq_len = kSeq;
  s.job.dtype = "fp16";
  s.job.fp16_accumulate = true;
  s.options.gradient_bytes_per_parameter = 2;
  s.options.host = HostSpecForTopology(topology);
  s.options.compare = false;
  // Other systems' memory, as calibrated: the conservative two-slot rule (cost_model.h).
  s.options.cost.memory_model = MemoryModel::kTwoSlot;
  return s;
}

}  // namespace

std::vector<PublishedRow> PublishedRows() {
  const std::string l8 = "llama-3.1-8b-instruct.json", q32 = "qwen3-32b.json";
  return {
      {"Llama-3.1-8B", l8, "RoundPipe", 24274.54},
      {"Llama-3.1-8B", l8, "Megatron-PP", 16412.18},
      {"Llama-3.1-8B", l8, "Mobius", 11288.46},
      {"Llama-3.1-8B", l8, "ZeRO-Infinity", 1843.39},
      {"Llama-3.1-8B", l8, "RoundPipe-sync", 18888.43},
      {"Qwen3-32B", q32, "RoundPipe", 5516.22},
      {"Qwen3-32B", q32, "Megatron-PP", 0},
      {"Qwen3-32B", q32, "Mobius", 2551.63},
      {"Qwen3-32B", q32, "ZeRO-Infinity", 217.82},
      {"Qwen3-32B", q32, "RoundPipe-sync", 4163.62},
  };
}

absl::StatusOr<SystemSetup> SetupFor(const PublishedRow& row, const topology::Topology& topology) {
  SystemSetup s = Common(topology);
  const bool big = Is32B(row);
  if (row.system == "RoundPipe" || row.system == "RoundPipe-sync") {
    const bool sync = row.system == "RoundPipe-sync";
    // roundpipe/run.sh: 8B "256 2048 10 2" (sync: 10 microbatches x 5 calls), 32B "128 2048 10 2".
    const int calls = sync && !big ? 5 : 2;
    const double per = (big ? 128.0 : 256.0) / (calls * 10);  // sequences per microbatch
    s.job.microbatch = std::lround(per);
    s.job.global_batch = calls * 10 * s.job.microbatch;
    s.options.schedule = runtime::Schedule::kRoundRobin;
    s.options.optimizer_staleness = sync ? 0 : 1;
    s.options.optimizer_after_backward = sync;
    s.options.logits_bytes = 0;  // chunked linear + cross-entropy (4096-token chunks)
    s.options.cost.forward_keeps_boundaries_only = true;  // no saved activations in forward
    s.settings = absl::StrFormat(
        "roundrobin, exact fwd/bwd partitions, static dispatch, %s; %d microbatches of %d "
        "(artifact: %d calls x 10 of %.2f)",
        sync ? "optimizer after the backward" : "staleness 1", calls * 10,
        static_cast<int>(s.job.microbatch), calls, per);
  } else if (row.system == "Megatron-PP") {
    s.job.microbatch = 2;
    s.job.global_batch = 256;
    s.options.schedule = runtime::Schedule::kResident;
    s.options.megatron_resident = true;
    s.options.gradient_bytes_per_parameter = 4;  // grad_reduce_in_fp32 (megatron/train.py)
    s.settings = "PP=8, 1F1B, per-layer recompute, 128 microbatches of 2";
  } else if (row.system == "Mobius") {
    s.job.microbatch = 1;
    s.job.global_batch = big ? 128 : 256;
    s.job.fp16_accumulate = false;  // see published.h
    s.options.schedule = runtime::Schedule::kMobius;
    s.options.optimizer_after_backward = true;
    s.settings = absl::StrCat("assumed: batch ", s.job.global_batch,
                              ", microbatch 1, fp16 with fp32 accumulation, exact partition, "
                              "cross mapping, optimizer after the backward");
  } else if (row.system == "ZeRO-Infinity") {
    s.job.microbatch = big ? 1 : 2;
    s.job.global_batch = 8 * 16 * s.job.microbatch;
    s.options.schedule = runtime::Schedule::kZeroOffload;
    s.options.zero_as_deepspeed_runs_it = false;  // the artifact's own configuration, below
    s.options.zero.micro_steps = 16;
    s.options.zero.gathers = 3;
    s.options.zero.host_staged_collectives = true;
    s.settings = absl::StrCat(s.job.microbatch, " seq/GPU x 16 micro-steps, 3 gathers, ",
                              "collectives through host memory");
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown published system '", row.system, "'"));
  }
  return s;
}

absl::StatusOr<ReproducedRow> Reproduce(const PublishedRow& row,
                                        const model::ModelDescription& model,
                                        const topology::Topology& topology,
                                        const topology::TopologyFacts& facts) {
  absl::StatusOr<SystemSetup> setup = SetupFor(row, topology);
  if (!setup.ok()) return setup.status();
  ReproducedRow out;
  out.row = row;
  out.settings = setup->settings;
  absl::StatusOr<PlanReport> r = MakePlan(model, topology, facts, setup->job, setup->options);
  if (!r.ok() && r.status().code() == absl::StatusCode::kFailedPrecondition &&
      runtime::Traits(setup->options.schedule).weights_resident) {
    // Time it anyway; say that our memory rule does not fit it.
    out.fits = false;
    out.note = std::string(r.status().message());
    setup->options.resident_memory_check = false;
    r = MakePlan(model, topology, facts, setup->job, setup->options);
  }
  if (!r.ok()) {
    if (r.status().code() != absl::StatusCode::kFailedPrecondition) return r.status();
    out.fits = false;
    out.note = std::string(r.status().message());
    return out;
  }
  out.predicted_tokens_per_second = r->tokens_per_second;
  out.step_seconds = r->step_seconds;
  const Plan& p = r->plan;
  if (!out.fits) return out;
  out.note = p.round_robin
                 ? absl::StrFormat("%d fwd + %d bwd stages", p.round_robin->forward.num_stages(),
                                   p.round_robin->backward.num_stages())
                 : absl::StrFormat("%d stages, bubble %.3f", p.num_stages(), r->bubble_fraction);
  return out;
}

}  // namespace mobius::planner
