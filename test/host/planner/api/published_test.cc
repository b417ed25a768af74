// The published-table reproduction (issue 21): every row of RoundPipe's artifact on 8x RTX 4090
// (Llama-3.1-8B and Qwen3-32B) predicted by MakePlan with the one calibrated RTX 4090 profile
// within 25% of the measurement. The table is printed (docs/planner.md, "Predicted against
// published", shows it with the reasons).
#include "host/planner/api/published.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "absl/strings/str_format.h"
#include "common/model/model_config_parse.h"
#include "gtest/gtest.h"
#include "host/topology/hwloc_source.h"
#include "test/testing/paths.h"

namespace mobius::planner {
namespace {

// Rows the model does not bring within 25% with mechanisms it can defend (docs/planner.md, "What
// the model does not explain"): their ratio must stay inside the documented band, so a change that
// moves them shows up here and in the doc.
struct KnownGap {
  const char* model;
  const char* system;
  double low, high;  // predicted / published
};
constexpr KnownGap kKnownGaps[] = {
    {"Llama-3.1-8B", "ZeRO-Infinity", 1.75, 1.95},
    {"Qwen3-32B", "ZeRO-Infinity", 1.9, 2.1},
};

const KnownGap* GapOf(const PublishedRow& row) {
  for (const KnownGap& g : kKnownGaps) {
    if (row.model == g.model && row.system == g.system) return &g;
  }
  return nullptr;
}

TEST(Published, ReproducesTheTableWithin25Percent) {
  auto loaded =
      topology::MakeHwlocXmlFileSource(testing::TopologyFixture("rtx4090_2s_4sw_8gpu.xml"))->Load();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const topology::TopologyFacts facts = topology::Analyze(loaded->topology);
  std::printf("| model | system | published tok/s | predicted tok/s | predicted / published |"
              " step s | settings | plan |\n|---|---|---:|---:|---:|---:|---|---|\n");
  int within = 0, rows = 0;
  for (const PublishedRow& row : PublishedRows()) {
    auto config = model::LoadModelConfig(testing::SourcePath("test/data/models/" + row.config_file));
    ASSERT_TRUE(config.ok()) << config.status();
    auto m = model::DescribeModel(*config);
    ASSERT_TRUE(m.ok()) << m.status();
    absl::StatusOr<ReproducedRow> r = Reproduce(row, *m, loaded->topology, facts);
    ASSERT_TRUE(r.ok()) << row.system << ": " << r.status();
    const bool oom = row.published_tokens_per_second <= 0;
    std::printf("| %s | %s | %s | %.0f | %s | %.2f | %s | %s |\n", row.model.c_str(),
                row.system.c_str(),
                oom ? "OOM" : absl::StrFormat("%.0f", row.published_tokens_per_second).c_str(),
                r->predicted_tokens_per_second,
                oom ? "-" : absl::StrFormat("%.2f", r->ratio()).c_str(), r->step_seconds,
                r->settings.c_str(),
                r->fits ? r->note.c_str() : ("does not fit: " + r->note).c_str());
    if (row.published_tokens_per_second <= 0) {
      // Published OOM: our memory rule must not fit it either.
      EXPECT_FALSE(r->fits) << row.model << " " << row.system;
      continue;
    }
    ++rows;
    if (const KnownGap* g = GapOf(row)) {
      EXPECT_GE(r->ratio(), g->low) << row.model << " " << row.system;
      EXPECT_LE(r->ratio(), g->high) << row.model << " " << row.system;
      continue;
    }
    EXPECT_GE(r->ratio(), 0.75) << row.model << " " << row.system;
    EXPECT_LE(r->ratio(), 1.25) << row.model << " " << row.system;
    within += std::abs(r->ratio() - 1) <= 0.25;
  }
  std::printf("%d of %d published rows within 25%%; known gaps: ZeRO-Infinity (docs/planner.md)\n",
              within, rows);
}

}  // namespace
}  // namespace mobius::planner
