// The published measurements the calibrated model is checked against (RoundPipe's artifact:
// ITcarrot/RoundPipe-artifact, exp/raw-data.csv; 8x RTX 4090, sequence 2048, tokens/s of all
// GPUs together), each system configured as the artifact ran it, and the planner's prediction
// for it: MakePlan with the one calibrated RTX 4090 profile (profile.h) and the topology's host
// (host_spec.h). docs/planner.md, "Predicted against published", has the table and the reasons.
//
//   RoundPipe      roundrobin, separate partitions (exact), static dispatch, asynchronous
//                  optimizer (staleness 1, steady state of 3 steps); fp16 GEMMs with fp16
//                  accumulation, fp16 gradients offloaded; 8B: 2 calls of 128 sequences in 10
//                  microbatches of 12.8 sequences per step, modelled as 20 microbatches of 13
//                  (32B: 2 x 64 in 10 microbatches of 6.4, modelled as 20 of 6).
//   Megatron-PP    resident with Megatron's pipeline (megatron_resident: 8 stages of 4 blocks,
//                  1F1B, per-layer full recompute), global batch 256 in 128 microbatches of 2;
//                  weights and Adam state on the GPUs (fp16 with fp32 gradient buckets:
//                  18 bytes/parameter).
//   RoundPipe-sync RoundPipe with its synchronous optimizer (the artifact's train-sync.py):
//                  staleness 0, every optimizer step after the whole backward; 8B in 5 calls of
//                  10 microbatches of 5.12 sequences (modelled as 50 of 5).
//   Mobius         mobius, the paper's schedule: CPU optimizer after the whole backward. Its
//                  settings are not published (the code came privately from the Mobius authors):
//                  assumed RoundPipe's global batch, microbatch 1, fp16 weights and gradients
//                  with fp32 accumulation. The artifact sets allow_fp16_accumulation in the
//                  scripts it publishes (RoundPipe, DeepSpeed, FSDP, Megatron), not for Mobius,
//                  whose code predates the flag (PyTorch 2.7); and the measured rows imply 68
//                  (8B) / 63 (32B) TFLOP/s per GPU at 6 FLOPs per parameter and token, within
//                  the fp32-accumulate peak (165). With fp16 accumulation the model predicts
//                  1.8x / 2.0x the measurement at this batch (docs/planner.md).
//   ZeRO-Infinity  zero with the ZeRO-Infinity model: 8B 2 sequences per GPU x 16 micro-steps
//                  (32B: 1 x 16), 3 gathers per layer per micro-step (forward, recompute,
//                  backward), all-gathers and reduce-scatters through host memory (no P2P on
//                  GeForce), CPU Adam after the backward; fp16 gradients.
//
// Pure; thread-safe.
#ifndef MOBIUS_HOST_PLANNER_API_PUBLISHED_H_
#define MOBIUS_HOST_PLANNER_API_PUBLISHED_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "host/planner/api/make_plan.h"

namespace mobius::planner {

struct PublishedRow {
  std::string model;        // "Llama-3.1-8B"
  std::string config_file;  // under test/data/models: "llama-3.1-8b-instruct.json"
  std::string system;       // "RoundPipe", "Megatron-PP", "Mobius", "ZeRO-Infinity"
  double published_tokens_per_second = 0;  // 0: the artifact reports OOM
};

// The rows of issue 21: Llama-3.1-8B (RoundPipe, Megatron-PP, Mobius, ZeRO-Infinity) and
// Qwen3-32B (RoundPipe, Megatron-PP (OOM), Mobius, ZeRO-Infinity).
std::vector<PublishedRow> PublishedRows();

// The job and options a row's system ran with (above), for MakePlan on the 8x RTX 4090 fixture.
struct SystemSetup {
  JobShape job;
  PlanOptions options;
  std::string settings;  // one line: what was assumed
};
absl::StatusOr<SystemSetup> SetupFor(const PublishedRow& row, const topology::Topology& topology);

struct ReproducedRow {
  PublishedRow row;
  std::string settings;
  bool fits = true;                  // false: the plan does not fit (the note says why)
  double predicted_tokens_per_second = 0;
  double step_seconds = 0;
  std::string note;                  // the plan's stages / partition, or why it does not fit
  double ratio() const {
    return row.published_tokens_per_second > 0
               ? predicted_tokens_per_second / row.published_tokens_per_second
               : 0;
  }
};

// MakePlan for the row. A plan that does not fit comes back with fits = false and the reason
// (FAILED_PRECONDITION from MakePlan); other errors are returned.
absl::StatusOr<ReproducedRow> Reproduce(const PublishedRow& row,
                                        const model::ModelDescription& model,
                                        const topology::Topology& topology,
                                        const topology::TopologyFacts& facts);

}  // namespace mobius::planner

#endif  // MOBIUS_HOST_PLANNER_API_PUBLISHED_H_
