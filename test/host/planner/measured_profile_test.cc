// Measured profiles: the JSON format (round trip, errors with file and field), the cache key and
// cache files, the conversion to a planner Profile, and that measured numbers move the plan.
#include "host/planner/measured_profile.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "host/planner/cost_model.h"
#include "host/planner/partition.h"
#include "common/run/profile_cache.h"
#include "common/run/profile_json.h"
#include "test/host/planner/test_models.h"

namespace mobius::planner {
namespace {

using ::testing::HasSubstr;

// A measured profile for `m` built from its analytic numbers (RTX 3090 preset) at B x T.
MeasuredProfile FromAnalytic(const model::ModelDescription& m, MicrobatchShape shape) {
  absl::StatusOr<Profile> a = AnalyticProfile(m, shape, Rtx3090Spec());
  EXPECT_TRUE(a.ok()) << a.status();
  MeasuredProfile p;
  p.model_hash = ModelConfigHash(m.config);
  p.model_type = m.config.model_type;
  p.num_units = m.num_units();
  p.shape = shape;
  p.backend = "cpu";
  p.device = "cpu";
  p.build_version = BuildVersion();
  p.warmup = 1;
  p.repetitions = 3;
  p.copy_bytes = 1 << 20;
  for (int64_t u : {int64_t{0}, int64_t{1}, m.num_units() - 1}) {
    const UnitProfile& up = a->units[u];
    p.kinds.push_back({model::UnitKindName(m.units[u].kind), u, up.forward_seconds,
                       up.backward_seconds, up.parameter_bytes, up.gradient_bytes,
                       up.boundary_bytes, up.saved_activation_bytes, up.workspace_bytes});
  }
  p.links.push_back({0, 10e9, 9e9, 7e9, 6e9, 2, 5e9, 4e9});
  return p;
}

model::ModelDescription ManyBlocks(int layers) {
  model::ModelDescription m = TinyLlama();
  model::ModelConfig c = m.config;
  c.num_layers = layers;
  absl::StatusOr<model::ModelDescription> d = model::DescribeModel(c);
  EXPECT_TRUE(d.ok()) << d.status();
  return *d;
}

std::string TempDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(t ? t : "/tmp") + "/mobius_profile_test_" +
                    std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
                    ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(MeasuredProfileJson, RoundTrip) {
  const MeasuredProfile p = FromAnalytic(TinyLlama(), {2, 8});
  const std::string text = MeasuredProfileToJson(p);
  absl::StatusOr<MeasuredProfile> q = MeasuredProfileFromJson(text, "x.json");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(MeasuredProfileToJson(*q), text);
  EXPECT_EQ(q->kinds.size(), 3u);
  EXPECT_EQ(q->links.size(), 1u);
  EXPECT_EQ(q->links[0].group_size, 2);
  EXPECT_EQ(q->kinds[1].kind, "block");
  EXPECT_EQ(q->kinds[1].parameter_bytes, p.kinds[1].parameter_bytes);
  EXPECT_DOUBLE_EQ(q->kinds[1].forward_seconds, p.kinds[1].forward_seconds);
}

TEST(MeasuredProfileJson, ErrorsNameFileAndField) {
  const std::string good = MeasuredProfileToJson(FromAnalytic(TinyLlama(), {2, 8}));
  auto parse_error = [](const std::string& text) {
    absl::StatusOr<MeasuredProfile> p = MeasuredProfileFromJson(text, "/p/prof.json");
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(p.status().message());
  };
  EXPECT_THAT(parse_error("{not json"), HasSubstr("profile /p/prof.json: not valid JSON"));
  EXPECT_THAT(parse_error("[1, 2]"), HasSubstr("must be an object"));
  nlohmann::json j = nlohmann::json::parse(good);
  auto with = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json k = j;
    edit(k);
    return parse_error(k.dump());
  };
  EXPECT_THAT(with([](auto& k) { k["units"][1]["forward_seconds"] = -1.0; }),
              HasSubstr("profile /p/prof.json: field units[1].forward_seconds: must be a finite "
                        "number >= 0 seconds (got -1)"));
  EXPECT_THAT(with([](auto& k) { k["units"][0].erase("workspace_bytes"); }),
              HasSubstr("field units[0].workspace_bytes: missing"));
  EXPECT_THAT(with([](auto& k) { k["units"][2]["parameter_bytes"] = "many"; }),
              HasSubstr("field units[2].parameter_bytes: must be an integer"));
  EXPECT_THAT(with([](auto& k) { k["units"][2]["kind"] = "block"; }),
              HasSubstr("field units[2].kind: \"block\" measured twice"));
  EXPECT_THAT(with([](auto& k) { k["units"][0]["kind"] = "mlp"; }),
              HasSubstr("must be embedding, block or head"));
  EXPECT_THAT(with([](auto& k) { k["format"] = "other"; }), HasSubstr("field format"));
  EXPECT_THAT(with([](auto& k) { k["version"] = 99; }),
              HasSubstr("field version: unsupported version 99"));
  EXPECT_THAT(with([](auto& k) { k["shape"]["seq_len"] = 0; }), HasSubstr("field shape"));
  EXPECT_THAT(with([](auto& k) { k["links"][0]["d2h_bytes_per_s"] = -5; }),
              HasSubstr("field links[0].d2h_bytes_per_s"));
  EXPECT_THAT(with([](auto& k) { k["repetitions"] = 0; }), HasSubstr("field repetitions"));
  EXPECT_THAT(with([](auto& k) { k["precision"] = "fp8"; }),
              HasSubstr("field precision: must be bf16 or fp16 (got \"fp8\")"));
}

// The units' precision (training.precision fp16 profiles the fp16 backward): written, read back,
// bf16 for a file written before the field, and carried into the planner's Profile, where MakePlan
// refuses a job of the other precision (make_plan_test).
TEST(MeasuredProfileJson, PrecisionRoundTripsAndDefaultsToBf16) {
  MeasuredProfile p = FromAnalytic(TinyLlama(), {2, 8});
  p.precision = "fp16";
  absl::StatusOr<MeasuredProfile> q = MeasuredProfileFromJson(MeasuredProfileToJson(p), "x.json");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->precision, "fp16");
  nlohmann::json old = nlohmann::json::parse(MeasuredProfileToJson(p));
  old.erase("precision");
  q = MeasuredProfileFromJson(old.dump(), "old.json");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->precision, "bf16");
  p.precision = "fp16";
  absl::StatusOr<Profile> planner_profile = MeasuredToProfile(p, TinyLlama());
  ASSERT_TRUE(planner_profile.ok()) << planner_profile.status();
  EXPECT_EQ(planner_profile->precision, "fp16");
}

TEST(ProfileCache, KeyDependsOnEveryPart) {
  const model::ModelDescription m = TinyLlama();
  const std::string h = ModelConfigHash(m.config);
  EXPECT_EQ(h.size(), 16u);
  EXPECT_EQ(h, ModelConfigHash(m.config));  // stable
  model::ModelConfig other = m.config;
  other.hidden_size = 128;
  EXPECT_NE(ModelConfigHash(other), h);
  other = m.config;
  other.eos_token_id = 7;  // does not change the work
  EXPECT_EQ(ModelConfigHash(other), h);
  const std::string k = ProfileCacheKey(h, {1, 128}, "cpu", "cpu", "0.1.0");
  EXPECT_EQ(k, h + "-b1-t128-cpu-cpu-v0.1.0");
  EXPECT_NE(ProfileCacheKey(h, {2, 128}, "cpu", "cpu", "0.1.0"), k);
  EXPECT_NE(ProfileCacheKey(h, {1, 256}, "cpu", "cpu", "0.1.0"), k);
  EXPECT_NE(ProfileCacheKey(h, {1, 128}, "cuda", "cpu", "0.1.0"), k);
  EXPECT_NE(ProfileCacheKey(h, {1, 128}, "cpu", "cuda", "0.1.0"), k);
  EXPECT_NE(ProfileCacheKey(h, {1, 128}, "cpu", "cpu", "0.2.0"), k);
  // bf16 keys are the ones of before the precision; fp16 ones say so.
  EXPECT_EQ(ProfileCacheKey(h, {1, 128}, "cpu", "cpu", "0.1.0", "bf16"), k);
  EXPECT_EQ(ProfileCacheKey(h, {1, 128}, "cpu", "cpu", "0.1.0", "fp16"), k + "-fp16");
  // Device names become file-name safe.
  EXPECT_EQ(ProfileCacheKey("ab", {1, 2}, "cuda", "NVIDIA GeForce RTX 4090/x", "1"),
            "ab-b1-t2-cuda-nvidia_geforce_rtx_4090_x-v1");
}

TEST(ProfileCache, DirectoryDefaults) {
  EXPECT_EQ(*ResolveProfileCacheDir("/given"), "/given");
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const std::string saved = xdg ? xdg : "";
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(*ResolveProfileCacheDir(""), "/xdg/mobius/profiles");
  ::unsetenv("XDG_CACHE_HOME");
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(*ResolveProfileCacheDir(""), "/home/u/.cache/mobius/profiles");
  if (!saved.empty()) ::setenv("XDG_CACHE_HOME", saved.c_str(), 1);
}

TEST(ProfileCache, WriteLookupAndDamagedEntries) {
  const std::string dir = TempDir();
  const MeasuredProfile p = FromAnalytic(TinyLlama(), {2, 8});
  const std::string key = CacheKeyOf(p);
  absl::StatusOr<std::optional<MeasuredProfile>> miss = LookupCachedProfile(dir, key);
  ASSERT_TRUE(miss.ok()) << miss.status();
  EXPECT_FALSE(miss->has_value());
  ASSERT_TRUE(WriteProfileFile(ProfileCachePath(dir, key), p).ok());
  absl::StatusOr<std::optional<MeasuredProfile>> hit = LookupCachedProfile(dir, key);
  ASSERT_TRUE(hit.ok()) << hit.status();
  ASSERT_TRUE(hit->has_value());
  EXPECT_EQ(MeasuredProfileToJson(**hit), MeasuredProfileToJson(p));
  // Another shape is another key: a miss.
  EXPECT_FALSE(
      LookupCachedProfile(dir, ProfileCacheKey(p.model_hash, {4, 8}, "cpu", "cpu", p.build_version))
          ->has_value());
  // A damaged entry is an error naming the file, not a crash or a silent miss.
  std::ofstream(ProfileCachePath(dir, key)) << "{\"format\": \"mobius-profile\"";
  absl::StatusOr<std::optional<MeasuredProfile>> bad = LookupCachedProfile(dir, key);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr(ProfileCachePath(dir, key)));
  EXPECT_EQ(ReadProfileFile(dir + "/none.json").status().code(), absl::StatusCode::kNotFound);
}

TEST(MeasuredToProfile, ExpandsKindsToUnits) {
  const model::ModelDescription m = ManyBlocks(5);
  MeasuredProfile mp = FromAnalytic(m, {2, 8});
  mp.kinds[1].forward_seconds = 0.5;
  absl::StatusOr<Profile> p = MeasuredToProfile(mp, m);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->source, "measured");
  EXPECT_EQ(p->device, "cpu");
  ASSERT_EQ(p->units.size(), 7u);
  for (int u = 1; u <= 5; ++u) EXPECT_DOUBLE_EQ(p->units[u].forward_seconds, 0.5);
  EXPECT_EQ(p->units[6].parameter_bytes, mp.kinds[2].parameter_bytes);
  EXPECT_EQ(p->gradient_bytes_per_parameter, 4);  // fp32 gradients (the analytic default)
  ASSERT_TRUE(p->links.has_value());
  EXPECT_DOUBLE_EQ(p->links->h2d_bytes_per_s, 10e9);
}

TEST(MeasuredToProfile, RejectsAnotherModel) {
  MeasuredProfile mp = FromAnalytic(TinyLlama(), {2, 8});
  absl::StatusOr<Profile> p = MeasuredToProfile(mp, ManyBlocks(4));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("for another model"));
  mp.kinds.pop_back();  // no head
  p = MeasuredToProfile(mp, TinyLlama());
  EXPECT_THAT(p.status().message(), HasSubstr("no \"head\" entry"));
}

// The measured link rates cap the topology's: the slower of the two feeds the partition problem.
TEST(MeasuredToProfile, MeasuredLinksCapTheTopology) {
  const model::ModelDescription m = TinyLlama();
  LoadedFixture f = LoadFixture("paper_testbed_2s_2sw_8x3090.xml");
  MeasuredProfile mp = FromAnalytic(m, {2, 8});
  mp.links = {{0, 2e9, 1.5e9, 1e9, 1e9, 4, 0.75e9, 0.5e9}};
  absl::StatusOr<Profile> p = MeasuredToProfile(mp, m);
  ASSERT_TRUE(p.ok());
  // One GPU alone: the measured 2 / 1.5 GB/s (the topology gives 12.6).
  absl::StatusOr<PartitionProblem> one =
      MakePartitionProblem(*p, m, f.topology, f.facts, {0}, 1, 0);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_DOUBLE_EQ(one->h2d_bytes_per_s, 2e9);
  EXPECT_DOUBLE_EQ(one->d2h_bytes_per_s, 1.5e9);
  // Four GPUs of one group: the group's aggregate 4 x 0.75 shared by 4 (topology: 3.15).
  absl::StatusOr<PartitionProblem> four =
      MakePartitionProblem(*p, m, f.topology, f.facts, {0, 1, 2, 3}, 1, 0);
  ASSERT_TRUE(four.ok());
  EXPECT_DOUBLE_EQ(four->h2d_bytes_per_s, 0.75e9);
  EXPECT_DOUBLE_EQ(four->d2h_bytes_per_s, 0.5e9);
  // Faster than the topology: the topology's rate stays.
  mp.links = {{0, 100e9, 100e9, 100e9, 100e9, 1, 100e9, 100e9}};
  p = MeasuredToProfile(mp, m);
  four = MakePartitionProblem(*p, m, f.topology, f.facts, {0, 1, 2, 3}, 1, 0);
  EXPECT_NEAR(four->h2d_bytes_per_s, 3.15e9, 1e7);
}

// A unit kind measured slower gets fewer units per stage: the same model, the decoder block
// measured 8x slower, is cut into more stages with fewer blocks each.
TEST(MeasuredToProfile, SlowerKindGetsFewerUnitsPerStage) {
  const model::ModelDescription m = ManyBlocks(32);
  LoadedFixture f = LoadFixture("paper_testbed_2s_2sw_8x3090.xml");
  MeasuredProfile mp = FromAnalytic(m, {1, 128});
  mp.links.clear();
  // Per stage: J ~ (L / (N u) + (N-1)/M) (c u + o) for u units of per-unit slot time c, so the
  // best u ~ sqrt(o L / (N (N-1) c)): on 2 GPUs with o = 2 ms, ~6 units at c = 1 ms, ~2 at 8 ms.
  mp.kinds[1].forward_seconds = 0.00025 / 4;
  mp.kinds[1].backward_seconds = 0.00075 / 4;
  auto max_units = [&](const MeasuredProfile& measured, int* stages) {
    absl::StatusOr<Profile> p = MeasuredToProfile(measured, m);
    EXPECT_TRUE(p.ok()) << p.status();
    absl::StatusOr<PartitionProblem> problem =
        MakePartitionProblem(*p, m, f.topology, f.facts, {0, 1}, 4, 0);
    EXPECT_TRUE(problem.ok()) << problem.status();
    absl::StatusOr<Partition> part = ExactPartition(*problem);
    EXPECT_TRUE(part.ok()) << part.status();
    int most = 0;
    for (const StageRange& r : part->stages) most = std::max(most, r.end - r.begin);
    *stages = part->num_stages();
    return most;
  };
  int fast_stages = 0, slow_stages = 0;
  const int fast = max_units(mp, &fast_stages);
  mp.kinds[1].forward_seconds *= 8;
  mp.kinds[1].backward_seconds *= 8;
  const int slow = max_units(mp, &slow_stages);
  std::printf("blocks fast: %d stages, at most %d units; 8x slower: %d stages, at most %d\n",
              fast_stages, fast, slow_stages, slow);
  EXPECT_LT(slow, fast);
  EXPECT_GT(slow_stages, fast_stages);
}

}  // namespace
}  // namespace mobius::planner
