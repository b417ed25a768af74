// `mobius plan`: what a fine-tuning job would do on a server, before anything runs. Reads the
// model's config.json, takes the topology from an hwloc XML file (or the daemon's GetTopology when
// no file is given), runs planner::MakePlan (host/planner/api/make_plan.h) and prints the stages,
// the stage -> GPU mapping with root complexes and contention groups, per-GPU memory, host and
// pinned RAM, the predicted step time and tokens/s, traffic per link and the comparison table.
//
// Profile: --profile=analytic (default) | measured | FILE. `measured` runs `mobius-worker profile`
// (the binary next to `mobius`, or --worker_binary) at the job's microbatch shape; the worker
// answers from its cache (--profile_cache_dir; default $XDG_CACHE_HOME/mobius/profiles) or
// measures on its backend and caches. The output says which source was used.
//
// Output: readable text (default) or one JSON object (--json); --trace FILE also writes the
// simulated step as a Chrome trace (open in Perfetto). With --nodes: the multi-node prediction
// instead (per node count: the node's batch and step, the all-reduce's bytes, time and exposed
// part, the step, tokens/s and scaling efficiency against one node), headed by a line saying how
// to run it (one `mobius run` per node). Errors are one line on `err`; the return
// value is an exit code (client/exit_codes.h): 2 for bad input, including a job that does not fit
// (the message has the numbers and what would make it fit), 3/4 when the daemon cannot be asked.
#ifndef MOBIUS_CLIENT_PLAN_COMMAND_H_
#define MOBIUS_CLIENT_PLAN_COMMAND_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/daemon_endpoint.h"
#include "common/run/trainer_options.h"

namespace mobius::cli {

// The values of `mobius plan`'s profile flags (--profile, --profile_cache_dir, --worker_binary),
// read as PlanCommandOptions' defaults so that every caller gets them.
std::string PlanProfileFlagDefault();
std::string PlanProfileCacheDirFlagDefault();
std::string PlanWorkerBinaryFlagDefault();

struct PlanCommandOptions {
  std::string model;          // model directory or config.json (required)
  std::string topology_file;  // hwloc XML; empty: ask the daemon
  DaemonEndpoint daemon;      // where to ask for the topology
  absl::Duration timeout = absl::Seconds(10);
  int64_t batch = 8;          // global batch, sequences per optimizer step
  // 0, "auto", < 0: chosen by simulation (planner::ChooseConfiguration: the fastest the runtime
  // executes, printed with the runner-up); a value pins it. --nodes and measured profiles fix the
  // free ones at microbatch 1, mobius, static, staleness 0.
  int64_t microbatch = 0;     // sequences per microbatch
  int64_t seq = 1024;         // tokens per sequence
  std::string schedule = "auto";      // auto | mobius | roundrobin | resident | zero
  std::string partitioner = "exact";  // exact | mip | uniform
  std::string mapper = "cross";       // cross | sequential
  int optimizer_staleness = -1;       // -1 auto | 0 | 1 (a job's training.optimizer_staleness)
  std::string dispatch = "auto";      // roundrobin: auto | static | pool (plan.dispatch)
  // auto | bf16 | fp16 (training.precision); fp16 sums in fp16 where the GPU is faster so.
  std::string precision = "auto";
  bool clip = true;                   // training.grad_clip > 0: the optimizer after the backward
  // LoRA (planner::PlanOptions::lora): planned when `lora`, lora_rank > 0 or lora_targets is set;
  // rank lora_rank, or 8 (PEFT's default) when it is 0; lora_targets "q_proj,v_proj" (empty: the
  // family's PEFT default).
  bool lora = false;
  int64_t lora_rank = 0;
  std::string lora_targets;
  // The frozen base: bf16, or nf4 (QLoRA: its linears in 4-bit NF4; implies LoRA). A LoRA plan is
  // also made with the other base and compared in one line.
  std::string lora_base = "bf16";
  std::string gpus;           // "0,1,2": the granted subset; empty: all
  double gpu_memory_gib = 0;  // > 0: cap per-GPU memory
  double host_memory_gib = 0; // > 0: host RAM instead of the topology's NUMA total
  bool emulated_gpus = false;  // the CPU backend emulates the GPUs: their memory is host memory
  double efficiency = 0.5;    // fraction of peak FLOP/s
  double peak_tflops = 0;     // > 0: device peak instead of the GPU-name preset
  double mip_time_limit_seconds = 10;
  int stages = 0;             // > 0: exactly this many uniform stages (a job spec's plan.stages)
  // Every PCIe link's bandwidth times this, as mobiusd --link-scale and mobius run --link-scale
  // emulate the links on the CPU backend (the simulator's links at dma_efficiency x link_scale):
  // with --emulated-gpus and --profile measured the plan predicts the emulated run. > 0.
  double link_scale = 1.0;
  // Several nodes (planned; the runtime runs one node): "N" or a list "1,2,4,8" of identical
  // servers splitting `batch` (planner::PlanNodes, host/planner/nodes/nodes.h); empty: one node,
  // the usual output. The link: Gb/s per direction per node (> 0), one message's latency in
  // microseconds (>= 0), all-reduce buckets in MiB (0: one per stage).
  std::string nodes;
  double internode_gbps = 25;
  double internode_latency_us = 20;
  double allreduce_bucket_mib = 0;
  bool json = false;
  // Also search the longest sequence that plans (planner::FindLongestSequence) at `batch`,
  // microbatch 1, for full fine-tuning and LoRA, and print it (and name it when the job itself
  // does not fit).
  bool longest = true;
  std::string trace;          // write the Chrome trace here (--nodes: the last node count's)
  // Profile source: "analytic" (FLOPs and the device spec), "measured" (the measured-profile
  // cache: runs `mobius-worker profile`, which answers from the cache or measures on its backend),
  // or the path of a profile JSON file (common/run/profile_json.h). The defaults
  // come from --profile and --profile_cache_dir (defined in plan_command.cc) and --worker_binary
  // (client/flags.cc).
  std::string profile = PlanProfileFlagDefault();
  std::string profile_cache_dir = PlanProfileCacheDirFlagDefault();
  std::string worker_binary = PlanWorkerBinaryFlagDefault();  // empty: next to this executable
};

int RunPlan(const PlanCommandOptions& options, std::ostream& out, std::ostream& err);

// A job's adapter options (train::AdapterOptions) into `o`'s LoRA fields (type "": full
// fine-tuning); RunPlanSpec passes the spec's adapter section here. INVALID_ARGUMENT as
// planner::LoraFromAdapterOptions (another adapter type).
absl::Status SetAdapter(const train::AdapterOptions& adapter, PlanCommandOptions& o);

// `mobius plan JOB.yaml`: the plan of a job spec (model, shape, schedule/partitioner/mapper,
// stages, GPU count, device memory cap, adapter) on the daemon's topology or --topology-file;
// `base` supplies the output and topology options.
int RunPlanSpec(const std::string& spec_path, PlanCommandOptions base, std::ostream& out,
                std::ostream& err);

}  // namespace mobius::cli

#endif  // MOBIUS_CLIENT_PLAN_COMMAND_H_
