#include "host/planner/mapping.h"

#include <algorithm>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/host/planner/test_models.h"

namespace mobius::planner {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAreArray;

const std::vector<int> kAll8 = {0, 1, 2, 3, 4, 5, 6, 7};

TEST(CrossMapping, PaperTestbedAlternatesRootComplexes) {
  LoadedFixture f = LoadFixture("paper_testbed_2s_2sw_8x3090.xml");
  for (ContentionDomain domain :
       {ContentionDomain::kContentionGroup, ContentionDomain::kRootComplex}) {
    for (int stages : {8, 16, 24}) {
      MappingOptions o;
      o.domain = domain;
      absl::StatusOr<Mapping> cross = CrossMapping(f.facts, kAll8, stages, o);
      absl::StatusOr<Mapping> seq = SequentialMapping(f.facts, kAll8, stages, o);
      ASSERT_TRUE(cross.ok() && seq.ok());
      EXPECT_THAT(cross->gpu_order, ElementsAre(0, 4, 1, 5, 2, 6, 3, 7)) << stages;
      EXPECT_THAT(seq->gpu_order, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
      EXPECT_EQ(cross->method, "cross-exhaustive");
      EXPECT_LT(cross->contention_score, seq->contention_score);
      for (int s = 0; s + 1 < stages; ++s) {
        EXPECT_NE(f.facts.gpus[cross->GpuOfStage(s)].root_complex,
                  f.facts.gpus[cross->GpuOfStage(s + 1)].root_complex);
      }
    }
  }
}

TEST(CrossMapping, ScoreByHandOnPaperTestbed) {
  LoadedFixture f = LoadFixture("paper_testbed_2s_2sw_8x3090.xml");
  // 8 stages, sequential: each group of 4 holds 4 consecutive stages: pairs at distances
  // 1,1,1,2,2,3 weigh shared = 4 each: 2 groups x 4 x (3 + 1 + 1/3).
  EXPECT_NEAR(ContentionScore(f.facts, kAll8, 8, ContentionDomain::kContentionGroup),
              2 * 4 * (3 + 1 + 1.0 / 3), 1e-12);
  // Alternating: distances 2,2,2,4,4,6.
  EXPECT_NEAR(
      ContentionScore(f.facts, {0, 4, 1, 5, 2, 6, 3, 7}, 8, ContentionDomain::kContentionGroup),
      2 * 4 * (1.5 + 0.5 + 1.0 / 6), 1e-12);
}

TEST(CrossMapping, NoSharedSwitchEqualsSequential) {
  LoadedFixture f = LoadFixture("root_ports_1s_4gpu.xml");
  const std::vector<int> all = {0, 1, 2, 3};
  for (ContentionDomain domain :
       {ContentionDomain::kContentionGroup, ContentionDomain::kRootComplex}) {
    MappingOptions o;
    o.domain = domain;
    absl::StatusOr<Mapping> cross = CrossMapping(f.facts, all, 12, o);
    absl::StatusOr<Mapping> seq = SequentialMapping(f.facts, all, 12, o);
    ASSERT_TRUE(cross.ok() && seq.ok());
    EXPECT_DOUBLE_EQ(cross->contention_score, seq->contention_score);
    EXPECT_EQ(cross->gpu_order, seq->gpu_order);  // ties go to the sequential order
  }
}

TEST(CrossMapping, Rtx4090SpreadsAcrossSwitchesAndSockets) {
  LoadedFixture f = LoadFixture("rtx4090_2s_4sw_8gpu.xml");
  absl::StatusOr<Mapping> by_group = CrossMapping(f.facts, kAll8, 16);
  ASSERT_TRUE(by_group.ok());
  EXPECT_LT(by_group->contention_score, SequentialMapping(f.facts, kAll8, 16)->contention_score);
  for (int s = 0; s + 1 < 16; ++s) {
    EXPECT_NE(f.facts.gpus[by_group->GpuOfStage(s)].switch_index,
              f.facts.gpus[by_group->GpuOfStage(s + 1)].switch_index);
  }
  MappingOptions o;
  o.domain = ContentionDomain::kRootComplex;
  absl::StatusOr<Mapping> by_socket = CrossMapping(f.facts, kAll8, 16, o);
  ASSERT_TRUE(by_socket.ok());
  for (int s = 0; s + 1 < 16; ++s) {
    EXPECT_NE(f.facts.gpus[by_socket->GpuOfStage(s)].root_complex,
              f.facts.gpus[by_socket->GpuOfStage(s + 1)].root_complex);
  }
}

TEST(CrossMapping, RespectsTheGrantedSubset) {
  LoadedFixture f = LoadFixture("paper_testbed_2s_2sw_8x3090.xml");
  const std::vector<int> granted = {6, 1, 2, 5};
  absl::StatusOr<Mapping> cross = CrossMapping(f.facts, granted, 8);
  ASSERT_TRUE(cross.ok());
  EXPECT_THAT(cross->gpu_order, UnorderedElementsAreArray(granted));
  EXPECT_THAT(cross->gpu_order, ElementsAre(1, 5, 2, 6));
  absl::StatusOr<Mapping> seq = SequentialMapping(f.facts, granted, 8);
  ASSERT_TRUE(seq.ok());
  EXPECT_THAT(seq->gpu_order, ElementsAre(1, 2, 5, 6));
}

TEST(CrossMapping, BadGrants) {
  LoadedFixture f = LoadFixture("paper_testbed_2s_2sw_8x3090.xml");
  EXPECT_EQ(CrossMapping(f.facts, {}, 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CrossMapping(f.facts, {1, 1}, 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CrossMapping(f.facts, {8}, 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CrossMapping(f.facts, {0}, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CrossMapping, LocalSearchMatchesExhaustiveOnPaperTestbed) {
  LoadedFixture f = LoadFixture("paper_testbed_2s_2sw_8x3090.xml");
  MappingOptions o;
  o.exhaustive_max_gpus = 0;
  absl::StatusOr<Mapping> heuristic = CrossMapping(f.facts, kAll8, 16, o);
  absl::StatusOr<Mapping> exhaustive = CrossMapping(f.facts, kAll8, 16);
  ASSERT_TRUE(heuristic.ok() && exhaustive.ok());
  EXPECT_EQ(heuristic->method, "cross-local-search");
  EXPECT_NEAR(heuristic->contention_score, exhaustive->contention_score, 1e-9);
}

TEST(CrossMapping, SixteenGpusInFourGroupsUseLocalSearch) {
  // Synthetic facts: the score only reads each GPU's contention group and root complex.
  topology::TopologyFacts facts;
  std::vector<int> all;
  for (int g = 0; g < 16; ++g) {
    topology::GpuFacts gf;
    gf.contention_group = g / 4;
    gf.root_complex = g / 8;
    facts.gpus.push_back(gf);
    all.push_back(g);
  }
  absl::StatusOr<Mapping> cross = CrossMapping(facts, all, 32);
  ASSERT_TRUE(cross.ok());
  EXPECT_EQ(cross->method, "cross-local-search");
  EXPECT_THAT(cross->gpu_order, UnorderedElementsAreArray(all));
  EXPECT_LT(cross->contention_score, SequentialMapping(facts, all, 32)->contention_score);
  for (int s = 0; s + 1 < 32; ++s) {
    EXPECT_NE(cross->GpuOfStage(s) / 4, cross->GpuOfStage(s + 1) / 4);
  }
}

}  // namespace
}  // namespace mobius::planner
