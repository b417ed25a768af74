// `mobius run job.yaml`: runs a job spec in the foreground without a daemon, the way a Slurm job
// step or a quick experiment does: parse and validate the spec, take the topology (--topology-file
// or this machine's), plan the job on the GPUs the spec asks for (the first ones; --gpus picks
// them), and run the pipeline with the runtime's launcher: one mobius-worker per GPU, on the CPU
// backend with emulated PCIe links when there is no usable CUDA device. Prints one progress line
// per step and a summary; SIGINT/SIGTERM stop the workers cleanly (nothing is left in /dev/shm).
// The run directory (run.json; default checkpoints) is ./mobius-run-<name> unless --run-dir.
// A text dataset (jsonl, prompt_completion, chat, text) is tokenized first by `mobius-worker
// tokenize` into $XDG_CACHE_HOME/mobius/datasets (~/.cache/mobius/datasets), reused next time.
//
// Several nodes: one `mobius run` per node; which node it is, how many there are and where node
// 0's rendezvous is come from the flags or the environment (client/node_world.h), resolved right
// after the spec is read and logged as "node R of N".
//
// Exit codes: 0 all steps done; 1 the run failed; 2 bad input (spec, plan that does not fit, a
// device cap too small), reported before any worker starts.
#ifndef MOBIUS_CLIENT_RUN_COMMAND_H_
#define MOBIUS_CLIENT_RUN_COMMAND_H_

#include <ostream>
#include <string>

namespace mobius::cli {

struct RunCommandOptions {
  std::string spec_path;
  std::string topology_file;  // empty: discover this machine
  std::string gpus;           // "0,1" (CUDA_VISIBLE_DEVICES syntax); empty: the first N
  std::string run_dir;        // empty: ./mobius-run-<name>
  std::string worker_binary;  // empty: mobius-worker next to this binary
  double link_scale = 1.0;
  std::string emulate_links = "auto";  // auto | on | off
  std::string backend = "auto";        // RunConfig::backend: auto | cpu | cuda
  std::string transport = "auto";      // RunConfig::transport: auto | host | nccl | emulated
  bool resume = false;  // from the newest complete checkpoint of checkpoint.dir, if there is one
  // Several nodes (client/node_world.h): --nodes, --node-rank, --rendezvous; 0 / -1 / "": not
  // given (then MOBIUS_*, Slurm, Kubernetes, else one node).
  int nodes = 0;
  int node_rank = -1;
  std::string rendezvous;
  double node_timeout_seconds = 300;  // NodeGroup::timeout_seconds
  // The inter-node link the plan assumes (and, with emulated PCIe links, the emulated one, scaled
  // by link_scale like them); gradients all-reduced in buckets of this many MiB (0: 25).
  double internode_gbps = 25;
  double internode_latency_us = 20;
  double allreduce_bucket_mib = 0;
  std::string report_file;  // non-empty: one JSON line per step (StepReportToJson)
};

int RunRunCommand(const RunCommandOptions& options, std::ostream& out, std::ostream& err);

}  // namespace mobius::cli

#endif  // MOBIUS_CLIENT_RUN_COMMAND_H_
