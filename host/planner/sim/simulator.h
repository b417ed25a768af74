// The pipeline simulator: builds a schedule's task graph (schedules.h), runs it on the machine
// (engine.h) and reports what a plan does in one training step. docs/planner.md ("Simulator")
// describes the model and its assumptions.
//
// Pure; thread-safe.
#ifndef MOBIUS_HOST_PLANNER_SIM_SIMULATOR_H_
#define MOBIUS_HOST_PLANNER_SIM_SIMULATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "host/planner/sim/engine.h"
#include "host/planner/sim/machine.h"
#include "host/planner/sim/schedules.h"

namespace mobius::planner::sim {

struct GpuStats {
  int gpu = -1;                   // topology GPU index
  double busy_seconds = 0;        // compute stream busy
  // Compute-stream idle time before a compute task, charged to the dependency that ended last:
  double stall_prefetch_seconds = 0;    // waiting for its stage's weights
  double stall_activation_seconds = 0;  // waiting for an activation / checkpoint / its gradient
  double stall_other_seconds = 0;       // waiting for another GPU's compute (no transfer)
  double idle_tail_seconds = 0;   // after its last compute until the last compute of the step
  int64_t h2d_bytes = 0;          // copies on its H2D engine
  int64_t d2h_bytes = 0;          // copies on its D2H engine (host-bound)
  int64_t p2p_bytes = 0;          // direct copies it sent
  int max_resident_stages = 0;    // most weight slots held at once (Residency)
};

struct LinkStats {
  std::string name;
  double bytes_per_s = 0;
  int64_t bytes = 0;
  double busy_seconds = 0;
};

// roundrobin with a separate backward partition: forward_* describe forward stage `stage`,
// backward_* backward stage `stage` (max(S_F, S_B) entries; unused halves stay 0 / -1).
struct StageTiming {
  int stage = 0;
  int forward_gpu = -1, backward_gpu = -1;  // topology GPU indices
  double forward_start = 0, forward_end = 0;
  double backward_start = 0, backward_end = 0;
  double optimizer_end = 0;                 // 0 without a CPU optimizer
  // Several nodes (SimConfig::internode): its gradients' all-reduce, first bucket's start to last
  // bucket's end (roundrobin: backward stage `stage`'s); 0 without one.
  double allreduce_start = 0, allreduce_end = 0;
};

// One load of a weight slot on a GPU: first weight byte in .. its last pass released it (mobius,
// roundrobin: a backward pass that found its weights still loaded extends its forward's
// residency, schedules.h). resident and zero: one per stage pass, compute (and copies) only.
struct Residency {
  int gpu = -1;     // machine position
  int stage = 0;    // the pass that loaded it
  bool backward = false;
  double begin = 0, end = 0;
};

// With several steps (SimConfig::steps) everything but `graph`/`engine` describes the last
// `reported_steps` steps before the drain (below), per step: their mean duration, their tasks'
// bytes and their GPUs' busy time / reported_steps; times stay absolute (from the first step's start), the window is
// [step_begin_seconds, step_begin + reported_steps x step_seconds].
//
// Round-robin passes continue the round-robin count across steps: with P passes per step on N
// GPUs the pass -> GPU assignment repeats every N / gcd(P, N) steps (the rotation cycle), and
// steps of one cycle differ (a GPU runs ceil or floor of P / N passes of a given step). Simulate
// then runs at least one cycle + 1 steps (SimConfig::steps, or more: at most 64) and reports the
// mean over whole cycles, not one step, whose length depends on its phase.
//
// The drain: the last step of a finite stream ends early, since nothing after it competes for its
// GPUs and links (with optimizer staleness the next step's forward passes would run beside its
// backward ones); on the emulated 8x RTX 4090 testbed the last of 9 simulated roundrobin steps
// was 0.70-0.85x the steps before it. Simulate therefore runs one step more than asked (with
// several steps and no explicit pass_gpus) and reports the ones before it (drain_steps): the mean
// of the steady ones, from the second step (the third with optimizer staleness 1, as the second
// then waits for no update) in whole rotation cycles, at least one cycle.
struct SimResult {
  std::string schedule;
  int steps = 1;                    // simulated; the reported ones end drain_steps before the last
  int drain_steps = 0;              // simulated after the reported ones, not reported
  int reported_steps = 1;           // the steady steps in whole rotation cycles (above)
  double step_begin_seconds = 0;    // end of the step before the reported ones (0: one step)
  // One step: the end of its last task (optimizer included). Several: (the end of the last step's
  // last task minus that of the step before the reported ones) / reported_steps (the
  // steady-state period).
  double step_seconds = 0;
  double compute_end_seconds = 0;   // end of the reported step's last compute task
  // Idle share of the GPUs' compute streams: one step over [0, compute_end]; several over the
  // reported steps' window: 1 - busy / (N x window).
  double bubble_fraction = 0;
  std::vector<GpuStats> gpus;       // by machine position
  std::vector<LinkStats> links;     // by link id (bytes of the reported step; busy time / steps)
  std::vector<StageTiming> stages;
  std::vector<Residency> residencies;
  int64_t h2d_bytes = 0, d2h_bytes = 0, p2p_bytes = 0;
  int64_t weight_upload_bytes = 0;  // weights host -> GPU (the traffic argument's quantity)
  // Several nodes: the gradient bytes all-reduced in the reported step (each node sends and
  // receives 2 (N - 1) / N of them) and the inter-node link's busy time (the ring times summed).
  int64_t allreduce_bytes = 0;
  double allreduce_seconds = 0;
  std::vector<int> pass_gpus;       // roundrobin pool dispatch: the GPU of every pass, all steps
  int pool_iterations = 0;          // pool dispatch: simulations run to find the assignment
  bool pool_converged = false;      // ... and whether it reached a fixed point
  TaskGraph graph;                  // what ran, with its timings (tests, traces)
  EngineResult engine;
};

absl::StatusOr<SimResult> Simulate(const SimMachine& machine, const std::vector<SimStage>& stages,
                                   const SimConfig& config);

// Chrome trace-event JSON (open in Perfetto or chrome://tracing): "X" events with ts/dur in
// microseconds; one process per GPU with threads compute / h2d / d2h, one process for the links
// (a thread per link and lane, lanes so that events on a thread never overlap) and one for the CPU
// optimizer; "M" metadata events name them.
std::string ChromeTraceJson(const SimMachine& machine, const SimResult& result);

}  // namespace mobius::planner::sim

#endif  // MOBIUS_HOST_PLANNER_SIM_SIMULATOR_H_
