// Solve time of the `exact` and `mip` partitioners on the same instances: Llama-like models of 32,
// 80 and 128 layer units (analytic RTX 3090 profile) on 4 and 8 GPUs of the paper testbed fixture.
// Exact and MIP alternate within each repetition; the table reports median and min-max wall time,
// the J of each, whether they agree (1e-9 relative) and the MIP's status, gap, solves and nodes.
//
//   partition_bench [--sizes=32,80,128] [--gpus=4,8] [--reps=5] [--mip_reps=3]
//                   [--mip_limit=60] [--microbatches=8] [--seq=2048] [--topology=FILE]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/model/layer_units.h"
#include "host/planner/cost_model.h"
#include "host/planner/mip/mip_partition.h"
#include "host/planner/partition.h"
#include "host/planner/profile.h"
#include "host/topology/analysis.h"
#include "host/topology/hwloc_source.h"

namespace mobius::planner {
namespace {

struct Args {
  std::vector<int> sizes = {32, 80, 128};
  std::vector<int> gpus = {4, 8};
  int reps = 5;
  int mip_reps = 3;
  double mip_limit = 60;
  int microbatches = 8;
  int seq = 2048;
  std::string topology =
      std::string(MOBIUS_SOURCE_DIR) + "/test/data/topology/paper_testbed_2s_2sw_8x3090.xml";
};

std::vector<int> IntList(const std::string& s) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(s, ',')) {
    int v = 0;
    if (absl::SimpleAtoi(part, &v)) out.push_back(v);
  }
  return out;
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq), value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (key == "--sizes") a.sizes = IntList(value);
    else if (key == "--gpus") a.gpus = IntList(value);
    else if (key == "--reps") a.reps = std::atoi(value.c_str());
    else if (key == "--mip_reps") a.mip_reps = std::atoi(value.c_str());
    else if (key == "--mip_limit") a.mip_limit = std::atof(value.c_str());
    else if (key == "--microbatches") a.microbatches = std::atoi(value.c_str());
    else if (key == "--seq") a.seq = std::atoi(value.c_str());
    else if (key == "--topology") a.topology = value;
    else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      std::exit(2);
    }
  }
  return a;
}

// Llama-2-7B block dimensions with `units - 2` decoder blocks (embedding + blocks + head).
model::ModelDescription LlamaLike(int units) {
  model::ModelConfig c;
  c.family = model::Family::kLlama;
  c.model_type = "llama";
  c.vocab_size = 32000;
  c.hidden_size = 4096;
  c.num_layers = units - 2;
  c.num_heads = c.num_kv_heads = 32;
  c.head_dim = 128;
  c.intermediate_size = 11008;
  c.max_position_embeddings = 4096;
  c.norm = model::NormKind::kRmsNorm;
  c.mlp = model::MlpKind::kSwiGlu;
  c.position = model::PositionKind::kRope;
  c.tie_word_embeddings = false;
  absl::StatusOr<model::ModelDescription> m = model::DescribeModel(c);
  if (!m.ok()) {
    std::fprintf(stderr, "DescribeModel: %s\n", std::string(m.status().message()).c_str());
    std::exit(1);
  }
  return *m;
}

struct Stats {
  double median = 0, min = 0, max = 0;
};
Stats Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int Main(int argc, char** argv) {
  const Args args = Parse(argc, argv);
  absl::StatusOr<topology::LoadedTopology> loaded =
      topology::MakeHwlocXmlFileSource(args.topology)->Load();
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", std::string(loaded.status().message()).c_str());
    return 1;
  }
  const topology::TopologyFacts facts = topology::Analyze(loaded->topology);
  std::printf("topology %s, RTX 3090 analytic profile, microbatch 1 x %d tokens, M = %d, "
              "reps %d (mip %d), mip limit %.0f s per instance\n\n",
              args.topology.c_str(), args.seq, args.microbatches, args.reps, args.mip_reps,
              args.mip_limit);
  std::printf("| units | GPUs | S exact | exact ms median (min-max) | S mip | mip s median (min-max) "
              "| mip / exact | J exact s | J mip s | agree | mip status | gap | MIPs | nodes |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int units : args.sizes) {
    const model::ModelDescription model = LlamaLike(units);
    absl::StatusOr<Profile> profile =
        AnalyticProfile(model, {1, args.seq}, Rtx3090Spec());
    if (!profile.ok()) {
      std::fprintf(stderr, "profile: %s\n", std::string(profile.status().message()).c_str());
      return 1;
    }
    for (int n : args.gpus) {
      // 4 GPUs: two per switch (0, 1 on socket 0; 4, 5 on socket 1); 8: all.
      const std::vector<int> gpus = n == 4 ? std::vector<int>{0, 1, 4, 5}
                                           : std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7};
      absl::StatusOr<PartitionProblem> problem = MakePartitionProblem(
          *profile, model, loaded->topology, facts, gpus, args.microbatches, 0);
      if (!problem.ok()) {
        std::fprintf(stderr, "problem: %s\n", std::string(problem.status().message()).c_str());
        return 1;
      }
      // Like for like: the MIP solves the paper's objective (every backward uploads), so the
      // exact partitioner is timed and checked on that objective too (its default counts the
      // two-slot reuse, cost_model.h).
      problem->backward_uploads = BackwardUploads::kEveryStage;
      MipOptions options;
      options.time_limit_seconds = options.time_limit_per_solve_seconds = args.mip_limit;
      std::vector<double> exact_s, mip_s;
      absl::StatusOr<Partition> exact;
      absl::StatusOr<MipResult> mip;
      for (int r = 0; r < std::max(args.reps, args.mip_reps); ++r) {
        if (r < args.reps) {
          const double t0 = Now();
          exact = ExactPartition(*problem);
          exact_s.push_back(Now() - t0);
        }
        if (r < args.mip_reps) {
          const double t0 = Now();
          mip = MipPartition(*problem, options);
          mip_s.push_back(Now() - t0);
        }
      }
      if (!exact.ok() || !mip.ok()) {
        std::fprintf(stderr, "solve failed: %s / %s\n",
                     std::string(exact.status().message()).c_str(),
                     std::string(mip.status().message()).c_str());
        return 1;
      }
      const Stats e = Summarize(exact_s), m = Summarize(mip_s);
      const double je = exact->objective_seconds, jm = mip->partition.objective_seconds;
      const bool agree = std::abs(je - jm) <= 1e-9 * je;
      std::printf("| %d | %d | %d | %.2f (%.2f-%.2f) | %d | %.2f (%.2f-%.2f) | %.0fx | %.4f | %.4f "
                  "| %s | %s | %.2g | %d | %lld |\n",
                  units, n, exact->num_stages(), 1e3 * e.median, 1e3 * e.min, 1e3 * e.max,
                  mip->partition.num_stages(), m.median, m.min, m.max, m.median / e.median, je, jm,
                  agree ? "yes" : (jm > je ? "no (mip worse)" : "NO (mip better)"),
                  MipStatusName(mip->status).c_str(), mip->relative_gap, mip->solves,
                  static_cast<long long>(mip->nodes));
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace mobius::planner

int main(int argc, char** argv) { return mobius::planner::Main(argc, argv); }
