// Several nodes (issue 20, Verification): step time of 1, 2 and 3 nodes with the same global batch,
// measured against the planner's prediction, on the emulated paper testbed.
//
//   1. the pipeline benchmark's model and token file, and its calibration of the simulator's
//      compute model from standalone steps on this machine (bench_setup.h);
//   2. per node count N: the plan of one node of N (global batch / N sequences, the calibrated
//      device, PCIe links x --link_scale, and each stage's ring all-reduce on an inter-node link of
//      --internode_gbps x --link_scale and --internode_latency_us / --link_scale: the inter-node
//      link emulated like the PCIe links), both of bench_predict.h's predictions;
//   3. N Launchers at once in this process (each node its own store, run directory and emulated
//      links, as N servers have), rank k of every node meeting rank k of the others through a
//      rendezvous store on loopback (common/run/rendezvous.h) and Gloo (node_collective.h); the
//      node counts alternate over --reps;
//   4. per N: node 0's step time (median of the steps after --warmup) against both predictions,
//      the speedup over one node measured and predicted, the bytes each node sent to the others
//      per step; every node's losses equal to node 0's. A table on stdout, JSON with --out.
// The nodes share this machine's cores (each node's CPU work, small at this link scale, is
// not), so it measures the pipeline with the all-reduce on emulated links, not a cluster.
//
//   nodes_bench [--nodes=1,2,3 --gpus=0,4 --batch=12 --microbatch=1 --seq=32 --steps=6
//                --warmup=2 --reps=1 --num_stages=4 --link_scale=1e-3 --internode_gbps=100
//                --internode_latency_us=20 --calib_steps=3 --calib_reps=2 --out=FILE --keep
//                --work_dir=DIR --worker=PATH --topology=FILE]
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/pipeline/bench_flags.h"
#include "bench/pipeline/bench_predict.h"
#include "bench/pipeline/bench_setup.h"
#include "common/run/rendezvous.h"
#include "nlohmann/json.hpp"
#include "host/launch/launcher.h"
#include "host/launch/run_builder.h"
#include "host/topology/hwloc_source.h"

namespace mobius::bench {
namespace {

struct Args {
  ModelShape shape;
  std::vector<int> nodes = {1, 2, 3};
  std::vector<int> gpus = {0, 4};  // one GPU behind each switch of the fixture
  int64_t batch = 12, microbatch = 1, seq = 32, steps = 6, warmup = 2;
  int reps = 1, num_stages = 4, calib_steps = 3, calib_reps = 2;
  double link_scale = 1e-3, internode_gbps = 100, internode_latency_us = 20;
  bool keep = false;
  std::string out, work_dir, worker, topology;
};

[[noreturn]] void Usage(const std::string& why) { BenchUsage("nodes_bench", why); }

std::vector<int> Ints(const std::string& key, const std::string& v) {
  std::vector<int> out;
  for (absl::string_view p : absl::StrSplit(v, ',', absl::SkipEmpty())) {
    out.push_back(
        static_cast<int>(std::min<int64_t>(BenchCount("nodes_bench", key, std::string(p)), 1024)));
  }
  if (out.empty()) Usage(key + " is empty");
  return out;
}

Args Parse(int argc, char** argv) {
  Args a;
  a.topology =
      std::string(MOBIUS_SOURCE_DIR) + "/test/data/topology/paper_testbed_2s_2sw_8x3090.xml";
  std::error_code ec;
  a.worker = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "mobius-worker";
  std::map<std::string, int64_t*> ints = {{"--batch", &a.batch},
                                          {"--microbatch", &a.microbatch},
                                          {"--seq", &a.seq},
                                          {"--steps", &a.steps},
                                          {"--warmup", &a.warmup}};
  std::map<std::string, int*> small = {{"--reps", &a.reps},
                                       {"--num_stages", &a.num_stages},
                                       {"--calib_steps", &a.calib_steps},
                                       {"--calib_reps", &a.calib_reps}};
  std::map<std::string, double*> reals = {{"--link_scale", &a.link_scale},
                                          {"--internode_gbps", &a.internode_gbps},
                                          {"--internode_latency_us", &a.internode_latency_us}};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (auto it = ints.find(key); it != ints.end()) {
      *it->second = BenchCount("nodes_bench", key, value);
    } else if (auto s = small.find(key); s != small.end()) {
      *s->second =
          static_cast<int>(std::min<int64_t>(BenchCount("nodes_bench", key, value), 1 << 20));
    } else if (auto r = reals.find(key); r != reals.end()) {
      *r->second = BenchReal("nodes_bench", key, value);
    } else if (key == "--nodes") {
      a.nodes = Ints(key, value);
    } else if (key == "--gpus") {
      a.gpus = Ints(key, value);
    } else if (key == "--keep") {
      a.keep = true;
    } else if (key == "--out") {
      a.out = value;
    } else if (key == "--work_dir") {
      a.work_dir = value;
    } else if (key == "--worker") {
      a.worker = value;
    } else if (key == "--topology") {
      a.topology = value;
    } else {
      Usage(absl::StrCat("unknown argument ", arg));
    }
  }
  for (int n : a.nodes) {
    if (n < 1 || a.microbatch < 1 || a.batch % (a.microbatch * n) != 0) {
      Usage(absl::StrCat("--batch (", a.batch, ") must split into ", n,
                         " nodes of whole microbatches of ", a.microbatch));
    }
  }
  if (a.warmup < 1 || a.steps <= a.warmup) Usage("--warmup must be >= 1 and < --steps");
  if (a.reps < 1 || !(a.link_scale > 0) || !(a.internode_gbps > 0)) {
    Usage("--reps, --link_scale and --internode_gbps must be positive");
  }
  return a;
}

train::TrainerOptions Training(const Args& a, const BenchInputs& in) {
  return BenchTrainingOptions(in, a.steps, a.batch, a.microbatch, a.seq, /*threads=*/1,
                              /*grad_clip=*/0);
}

// The inter-node link as the emulation runs it (scaled like the PCIe links).
planner::sim::InterNodeConfig InterNode(const Args& a, int nodes) {
  planner::sim::InterNodeConfig c;
  c.nodes = nodes;
  c.link.bytes_per_s = a.internode_gbps * 1e9 / 8 * a.link_scale;
  c.link.latency_seconds = a.internode_latency_us * 1e-6 / a.link_scale;
  c.bucket_bytes = 0;  // the runtime reduces a stage after its whole offload
  return c;
}

struct NodesRun {
  int nodes = 0, rep = 0;
  double measured_seconds = 0;  // node 0, median of the timed steps
  std::vector<double> step_seconds;
  std::vector<float> losses;
  double internode_mb_per_step = 0;  // node 0 sent
  bool losses_agree = true;          // every node's losses equal node 0's
};

absl::StatusOr<NodesRun> RunNodes(const Args& a, const BenchInputs& in,
                                  const topology::Topology& topology,
                                  const topology::TopologyFacts& facts, const Prediction& pred,
                                  int nodes, int rep, const std::string& work) {
  absl::StatusOr<std::unique_ptr<runtime::RendezvousServer>> server =
      runtime::RendezvousServer::Start("127.0.0.1", 0);
  if (!server.ok()) return server.status();
  const std::string job = absl::StrCat("nodes", nodes, "-rep", rep);
  launch::EmulationOptions em;
  em.enabled = true;
  em.link_scale = a.link_scale;
  train::TrainerOptions training = Training(a, in);
  training.batch = a.batch / nodes;  // the plan's batch: this node's share
  absl::StatusOr<runtime::RunConfig> base =
      launch::BuildRunConfig(job, training, pred.report.plan, topology, facts, em);
  if (!base.ok()) return base.status();
  std::vector<runtime::LaunchResult> results(nodes);
  std::vector<absl::Status> started(nodes);
  std::vector<std::thread> threads;
  for (int r = 0; r < nodes; ++r) {
    threads.emplace_back([&, r] {
      runtime::LaunchOptions lo;
      lo.run = *base;
      lo.run.training.batch = a.batch;  // the global batch; each node runs its share
      if (nodes > 1) {
        const planner::sim::InterNodeConfig link = InterNode(a, nodes);
        lo.run.nodes = {.count = nodes,
                        .rank = r,
                        .rendezvous = absl::StrCat("127.0.0.1:", (*server)->port()),
                        .job_key = job,
                        .timeout_seconds = 300,
                        .link_bytes_per_second = link.link.bytes_per_s,
                        .link_latency_seconds = link.link.latency_seconds};
      }
      lo.worker_binary = a.worker;
      lo.run_dir = absl::StrCat(work, "/", job, "-node", r);
      absl::StatusOr<std::unique_ptr<runtime::Launcher>> l = runtime::Launcher::Start(lo);
      if (!l.ok()) {
        started[r] = l.status();
        return;
      }
      results[r] = (*l)->Wait();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < nodes; ++r) {
    if (!started[r].ok()) return started[r];
    if (!results[r].status.ok()) {
      return absl::Status(results[r].status.code(),
                          absl::StrCat(job, " node ", r, ": ", results[r].status.message()));
    }
  }
  NodesRun out;
  out.nodes = nodes;
  out.rep = rep;
  double internode = 0;
  for (const runtime::StepReport& s : results[0].steps) {
    out.losses.push_back(s.loss);
    internode += s.internode_bytes;
    if (s.step > a.warmup) out.step_seconds.push_back(s.step_seconds);
  }
  out.measured_seconds = Median(out.step_seconds);
  out.internode_mb_per_step = internode / 1e6 / std::max<size_t>(1, results[0].steps.size());
  for (int r = 1; r < nodes; ++r) {
    for (size_t i = 0; i < results[r].steps.size() && i < out.losses.size(); ++i) {
      out.losses_agree = out.losses_agree && results[r].steps[i].loss == out.losses[i];
    }
  }
  return out;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "nodes_bench: %s\n", std::string(s.message()).c_str());
  return 1;
}

int Main(int argc, char** argv) {
  const Args a = Parse(argc, argv);
  absl::StatusOr<topology::LoadedTopology> loaded =
      topology::MakeHwlocXmlFileSource(a.topology)->Load();
  if (!loaded.ok()) return Fail(loaded.status());
  const topology::TopologyFacts facts = topology::Analyze(loaded->topology);
  absl::StatusOr<std::unique_ptr<BenchWorkDir>> work_dir =
      BenchWorkDir::Make(a.work_dir, "nodes_bench", a.keep);
  if (!work_dir.ok()) return Fail(work_dir.status());
  const std::string& work = (*work_dir)->path();
  const int64_t tokens = (a.steps + 2) * a.batch * (a.seq + 1) * 2 + 4096;
  absl::StatusOr<BenchInputs> in = WriteBenchInputs(work, a.shape, a.seq, tokens);
  if (!in.ok()) return Fail(in.status());
  std::fprintf(stderr, "model %.2fM params; work dir %s; calibrating...\n", in->parameters / 1e6,
               work.c_str());
  absl::StatusOr<Calibration> cal =
      CalibrateStandalone(*in, Training(a, *in), a.calib_steps, a.calib_reps);
  if (!cal.ok()) return Fail(cal.status());

  std::map<int, Prediction> preds;
  for (int n : a.nodes) {
    planner::JobShape job;
    job.global_batch = a.batch / n;
    job.microbatch = a.microbatch;
    job.seq_len = a.seq;
    PredictOptions po;
    po.num_stages = a.num_stages;
    po.link_scale = a.link_scale;
    po.effective_flops_per_s = cal->effective_flops_per_s;
    po.optimizer_seconds_per_billion_params = cal->fixed_seconds_per_billion_params;
    po.gpus = a.gpus;
    po.internode = InterNode(a, n);
    absl::StatusOr<Prediction> p =
        Predict(in->description, loaded->topology, facts, job, po, "mobius", "cross");
    if (!p.ok()) return Fail(p.status());
    preds[n] = *std::move(p);
  }
  std::vector<NodesRun> runs;
  for (int rep = 0; rep < a.reps; ++rep) {
    for (size_t i = 0; i < a.nodes.size(); ++i) {
      const int n = a.nodes[(i + rep) % a.nodes.size()];
      std::fprintf(stderr, "running %d node(s), rep %d...\n", n, rep + 1);
      absl::StatusOr<NodesRun> r =
          RunNodes(a, *in, loaded->topology, facts, preds[n], n, rep, work);
      if (!r.ok()) return Fail(r.status());
      std::fprintf(stderr, "  %d node(s): %.3f s per step (plan %.3f, runtime-sim %.3f)\n", n,
                   r->measured_seconds, preds[n].report.plan.predicted_step_seconds,
                   preds[n].runtime_sim.step_seconds);
      runs.push_back(*std::move(r));
    }
  }

  auto measured = [&](int n) {
    std::vector<double> v;
    for (const NodesRun& r : runs) {
      if (r.nodes == n) v.push_back(r.measured_seconds);
    }
    return Median(v);
  };
  const int first = a.nodes.front();
  std::printf(
      "model %.2fM params, global batch %lld x %lld tokens, %zu GPUs per node (%s), %d "
      "stages, PCIe and inter-node links x%g (inter-node %g Gb/s, %g us before scaling); "
      "calibrated %.2f GFLOP/s; EMULATED\n\n",
      in->parameters / 1e6, static_cast<long long>(a.batch), static_cast<long long>(a.seq),
      a.gpus.size(), absl::StrJoin(a.gpus, ",").c_str(), a.num_stages, a.link_scale,
      a.internode_gbps, a.internode_latency_us, cal->effective_flops_per_s / 1e9);
  std::printf(
      "| nodes | batch/node | plan s | runtime-sim s | measured s | measured / plan | "
      "measured / runtime-sim | vs %d node(s) measured (plan) | sent to other nodes MB/step "
      "| losses equal on every node |\n|---|---|---|---|---|---|---|---|---|---|\n",
      first);
  nlohmann::json j = {{"link_scale", a.link_scale},
                      {"internode_gbps", a.internode_gbps},
                      {"internode_latency_us", a.internode_latency_us},
                      {"batch", a.batch},
                      {"parameters", in->parameters},
                      {"effective_flops_per_s", cal->effective_flops_per_s}};
  for (int n : a.nodes) {
    const Prediction& p = preds[n];
    const double m = measured(n);
    bool agree = true;
    double mb = 0;
    int count = 0;
    for (const NodesRun& r : runs) {
      if (r.nodes != n) continue;
      agree = agree && r.losses_agree;
      mb += r.internode_mb_per_step;
      ++count;
    }
    std::printf(
        "| %d | %lld | %.3f | %.3f | %.3f | %.2f | %.2f | %.2fx (%.2fx) | %.1f | %s |\n", n,
        static_cast<long long>(a.batch / n), p.report.plan.predicted_step_seconds,
        p.runtime_sim.step_seconds, m, m / p.report.plan.predicted_step_seconds,
        m / p.runtime_sim.step_seconds, measured(first) / m,
        preds[first].report.plan.predicted_step_seconds / p.report.plan.predicted_step_seconds,
        mb / std::max(1, count), agree ? "yes" : "NO");
    for (const NodesRun& r : runs) {
      if (r.nodes != n) continue;
      j["runs"].push_back({{"nodes", n},
                           {"rep", r.rep},
                           {"measured_s", r.measured_seconds},
                           {"step_seconds", r.step_seconds},
                           {"losses", r.losses},
                           {"plan_s", p.report.plan.predicted_step_seconds},
                           {"runtime_sim_s", p.runtime_sim.step_seconds},
                           {"internode_mb_per_step", r.internode_mb_per_step},
                           {"losses_agree", r.losses_agree}});
    }
  }
  if (!a.out.empty()) {
    std::ofstream f(a.out);
    f << j.dump(1) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace mobius::bench

int main(int argc, char** argv) { return mobius::bench::Main(argc, argv); }
