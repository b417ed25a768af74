// The measured profile on the CPU backend: every number positive where it must be, the bytes
// exact against the model description, and the `mobius-worker profile` verb measuring once and then
// answering from its cache.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "common/model/model_config_parse.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/run/profile_cache.h"
#include "common/run/profile_json.h"
#include "host/planner/measured_profile.h"  // the planner reads what the worker measured
#include "test/testing/paths.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/profile/unit_profiler.h"

namespace mobius::profile {
namespace {

using ::testing::HasSubstr;

constexpr char kTinyLlama[] = "test/data/models/tiny-llama";  // tied embeddings, GQA

model::ModelDescription Tiny() {
  absl::StatusOr<model::ModelConfig> c =
      model::LoadModelConfig(mobius::testing::SourcePath(kTinyLlama));
  EXPECT_TRUE(c.ok()) << c.status();
  absl::StatusOr<model::ModelDescription> m = model::DescribeModel(*c);
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

BackendFactory Cpu(uint64_t cap = 0) {
  return [cap](int) -> absl::StatusOr<std::unique_ptr<backend::Backend>> {
    backend::CpuBackendOptions o;
    o.backend.capacity_bytes = cap;
    auto b = backend::CpuBackend::Create(o);
    if (!b.ok()) return b.status();
    return std::unique_ptr<backend::Backend>(std::move(*b));
  };
}

TEST(UnitProfiler, NumbersArePositiveAndBytesExact) {
  const model::ModelDescription m = Tiny();
  ProfilerOptions o;
  o.warmup = 1;
  o.repetitions = 3;
  o.copy_bytes = 1 << 20;
  o.num_devices = 2;
  const planner::MicrobatchShape shape{2, 32};
  absl::StatusOr<planner::MeasuredProfile> p =
      MeasureProfile(m, shape, Cpu(), "cpu", "cpu", "test", o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->model_hash, planner::ModelConfigHash(m.config));
  EXPECT_EQ(p->num_units, 4);
  ASSERT_EQ(p->kinds.size(), 3u);
  const int64_t tokens = shape.tokens();
  for (const planner::UnitKindMeasurement& k : p->kinds) {
    SCOPED_TRACE(k.kind);
    const model::LayerUnit& unit = m.units[k.unit_index];
    EXPECT_EQ(k.kind, model::UnitKindName(unit.kind));
    EXPECT_GT(k.forward_seconds, 0);
    EXPECT_GT(k.backward_seconds, 0);
    // Exact against the model description: bf16 weights the unit reads (the tied head reads the
    // embedding too), fp32 gradients of the same elements, its input per token.
    EXPECT_EQ(k.parameter_bytes, model::UnitResidentParameterBytes(unit));
    EXPECT_EQ(k.gradient_bytes, 2 * model::UnitResidentParameterBytes(unit));
    EXPECT_EQ(k.boundary_bytes,
              model::UnitActivations(m, k.unit_index).boundary_bytes_per_token * tokens);
    EXPECT_GE(k.workspace_bytes, 0);
  }
  const planner::UnitKindMeasurement* emb = p->Find("embedding");
  const planner::UnitKindMeasurement* block = p->Find("block");
  const planner::UnitKindMeasurement* head = p->Find("head");
  ASSERT_TRUE(emb && block && head);
  EXPECT_EQ(emb->saved_activation_bytes, 0);  // the embedding keeps nothing but its ids
  // A block's forward writes at least its norm/q/k/v/attention/MLP internals: more than its
  // output [B, T, C] bf16; the head at least its fp32 logits [B, T, V].
  EXPECT_GT(block->saved_activation_bytes, 2 * tokens * m.config.hidden_size);
  EXPECT_GE(head->saved_activation_bytes, 4 * tokens * m.config.vocab_size);
  EXPECT_GT(block->workspace_bytes, 0);
  // The head reads the tied embedding: the same parameter bytes as the embedding + its norm.
  EXPECT_EQ(head->parameter_bytes, emb->parameter_bytes + 2 * m.config.hidden_size);
  ASSERT_EQ(p->links.size(), 2u);
  for (const planner::LinkMeasurement& l : p->links) {
    EXPECT_EQ(l.group_size, 2);
    for (double r : {l.h2d_bytes_per_s, l.d2h_bytes_per_s, l.duplex_h2d_bytes_per_s,
                     l.duplex_d2h_bytes_per_s, l.group_h2d_bytes_per_s, l.group_d2h_bytes_per_s}) {
      EXPECT_GT(r, 0);
    }
  }
  // The planner accepts it, and it round-trips through JSON.
  absl::StatusOr<planner::Profile> planner_profile = planner::MeasuredToProfile(*p, m);
  ASSERT_TRUE(planner_profile.ok()) << planner_profile.status();
  EXPECT_EQ(planner_profile->gradient_bytes_per_parameter, 4);
  EXPECT_TRUE(planner::MeasuredProfileFromJson(planner::MeasuredProfileToJson(*p), "mem").ok());
}

TEST(UnitProfiler, MemoryCapIsReported) {
  const model::ModelDescription m = Tiny();
  ProfilerOptions o;
  o.repetitions = 1;
  absl::StatusOr<planner::UnitKindMeasurement> u = MeasureUnit(m, 1, {2, 32}, Cpu(4096), o);
  EXPECT_EQ(u.status().code(), absl::StatusCode::kResourceExhausted) << u.status();
}

struct WorkerRun {
  int code;
  std::string out;
};

WorkerRun Worker(const std::string& args) {
  const std::string cmd = mobius::testing::BinaryPath("bin/mobius-worker") + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (pipe != nullptr && fgets(buf, sizeof buf, pipe) != nullptr) out += buf;
  const int status = pipe != nullptr ? pclose(pipe) : -1;
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(ProfileVerb, MeasuresOnceThenAnswersFromTheCache) {
  const std::string worker = mobius::testing::BinaryPath("bin/mobius-worker");
  if (!std::filesystem::exists(worker)) GTEST_SKIP() << "no " << worker;
  const char* t = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(t ? t : "/tmp") + "/mobius_profile_verb_test";
  std::filesystem::remove_all(dir);
  const std::string args = "profile --model " + mobius::testing::SourcePath(kTinyLlama) +
                           " --microbatch 2 --seq 32 --cache_dir " + dir + "/cache --out " + dir +
                           "/out.json --profile_repetitions 2 --copy_mib 1 --threads 1";
  WorkerRun first = Worker(args);
  ASSERT_EQ(first.code, 0) << first.out;
  EXPECT_THAT(first.out, HasSubstr("(measured)"));
  WorkerRun second = Worker(args);
  ASSERT_EQ(second.code, 0) << second.out;
  EXPECT_THAT(second.out, HasSubstr("(cached)"));
  absl::StatusOr<planner::MeasuredProfile> p = planner::ReadProfileFile(dir + "/out.json");
  ASSERT_TRUE(p.ok()) << p.status();
  const model::ModelDescription m = Tiny();
  EXPECT_EQ(p->shape.microbatch_size, 2);
  EXPECT_EQ(p->shape.seq_len, 32);
  EXPECT_EQ(p->backend, "cpu");
  EXPECT_EQ(p->Find("block")->parameter_bytes, model::UnitResidentParameterBytes(m.units[1]));
  // The cache file is where the key says.
  EXPECT_TRUE(
      std::filesystem::exists(planner::ProfileCachePath(dir + "/cache", planner::CacheKeyOf(*p))));
  EXPECT_EQ(p->precision, "bf16");
  // --precision fp16: the fp16 units, cached under their own key (the bf16 entry stays).
  WorkerRun fp16 = Worker(args + " --precision fp16");
  ASSERT_EQ(fp16.code, 0) << fp16.out;
  EXPECT_THAT(fp16.out, HasSubstr("-fp16.json (measured)"));
  absl::StatusOr<planner::MeasuredProfile> h = planner::ReadProfileFile(dir + "/out.json");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->precision, "fp16");
  EXPECT_EQ(h->Find("block")->parameter_bytes, p->Find("block")->parameter_bytes);
  EXPECT_TRUE(
      std::filesystem::exists(planner::ProfileCachePath(dir + "/cache", planner::CacheKeyOf(*p))));
  WorkerRun bad_precision = Worker(args + " --precision fp8");
  EXPECT_EQ(bad_precision.code, 2);
  EXPECT_THAT(bad_precision.out, HasSubstr("--precision must be bf16 or fp16"));
  // Bad usage: exit 2 with one line.
  WorkerRun bad = Worker("profile --microbatch 2 --seq 32");
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.out, HasSubstr("--model"));
  WorkerRun too_long = Worker("profile --model " + mobius::testing::SourcePath(kTinyLlama) +
                              " --seq 100000 --cache_dir " + dir + "/cache");
  EXPECT_EQ(too_long.code, 2);
  EXPECT_THAT(too_long.out, HasSubstr("max_position_embeddings"));
  WorkerRun bad_backend = Worker("profile --model " + mobius::testing::SourcePath(kTinyLlama) +
                                 " --backend tpu --cache_dir " + dir + "/cache");
  EXPECT_EQ(bad_backend.code, 2);
  EXPECT_THAT(bad_backend.out, HasSubstr("--backend must be auto, cpu or cuda"));
  // --backend cuda: measured on the GPU where there is one (the profile names it), else refused
  // with the reason.
  WorkerRun cuda = Worker(args + " --backend cuda --refresh");
  if (cuda.code == 0) {
    absl::StatusOr<planner::MeasuredProfile> g = planner::ReadProfileFile(dir + "/out.json");
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(g->backend, "cuda");
  } else {
    EXPECT_THAT(cuda.out, HasSubstr("no usable CUDA device"));
  }
}

}  // namespace
}  // namespace mobius::profile
