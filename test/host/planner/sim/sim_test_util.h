// Helpers for the simulator tests: hand-built machines and the invariants every run must satisfy.
#ifndef MOBIUS_TEST_HOST_PLANNER_SIM_SIM_TEST_UTIL_H_
#define MOBIUS_TEST_HOST_PLANNER_SIM_SIM_TEST_UTIL_H_

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "host/planner/sim/simulator.h"

namespace mobius::planner::sim {

// n GPUs, each with its own link of `own` bytes/s per direction; with uplink > 0 all share one
// uplink of that capacity. No P2P.
inline SimMachine HandMachine(int n, double own, double uplink = 0, double duplex = 1.0) {
  SimMachine m;
  m.duplex_factor = duplex;
  const int up = uplink > 0 ? m.AddDuplexLink("uplink", uplink) : -1;
  for (int i = 0; i < n; ++i) {
    SimGpu g;
    g.topology_gpu = i;
    g.name = "hand";
    const int own_link = m.AddDuplexLink("gpu" + std::to_string(i), own);
    g.own_link = own_link;
    g.h2d_path = up >= 0 ? std::vector<int>{up, own_link} : std::vector<int>{own_link};
    g.d2h_path = up >= 0 ? std::vector<int>{own_link + 1, up + 1} : std::vector<int>{own_link + 1};
    m.gpus.push_back(g);
  }
  m.p2p.assign(n, std::vector<bool>(n, false));
  return m;
}

// No overlap on a capacity-1 stream; every task starts after its dependencies end; bytes per link
// = sum over the reported (last) step's transfers crossing it; a host-staged copy lands as many
// bytes as it left.
inline void ExpectInvariants(const SimResult& r) {
  const TaskGraph& g = r.graph;
  const auto& t = r.engine.timings;
  ASSERT_EQ(t.size(), g.tasks.size());
  std::vector<std::vector<int>> by_stream(g.streams.size());
  std::vector<int64_t> link_bytes(r.links.size(), 0);
  // The reported steps (simulator.h: the last rotation cycle before the drain), per step.
  const int last = r.steps - 1 - r.drain_steps;
  const int first = last + 1 - r.reported_steps;
  const int64_t reported = r.reported_steps;
  ASSERT_GE(reported, 1);
  for (size_t i = 0; i < g.tasks.size(); ++i) {
    const Task& k = g.tasks[i];
    EXPECT_LE(t[i].start, t[i].end);
    for (int d : k.deps) EXPECT_GE(t[i].start, t[d].end - 1e-9) << k.label << " after " << g.tasks[d].label;
    if (g.streams[k.stream].capacity == 1) by_stream[k.stream].push_back(static_cast<int>(i));
    if (k.step >= first && k.step <= last) {
      for (int l : k.path) link_bytes[l] += k.bytes;
    }
    if (k.direction == Direction::kH2D && (k.kind == TaskKind::kActivation) && !k.deps.empty()) {
      const Task& src = g.tasks[k.deps[0]];
      if (src.direction == Direction::kD2H) EXPECT_EQ(src.bytes, k.bytes) << k.label;
    }
    if (!k.is_transfer()) EXPECT_NEAR(t[i].end - t[i].start, k.seconds, 1e-9) << k.label;
  }
  for (auto& v : by_stream) {
    // By start, then end: a zero-length task (a forward pass of the head alone, which runs
    // nothing) may start and end at the instant the next one starts.
    std::sort(v.begin(), v.end(), [&](int a, int b) {
      return t[a].start != t[b].start ? t[a].start < t[b].start : t[a].end < t[b].end;
    });
    for (size_t j = 1; j < v.size(); ++j) {
      EXPECT_GE(t[v[j]].start, t[v[j - 1]].end - 1e-9)
          << g.tasks[v[j]].label << " overlaps " << g.tasks[v[j - 1]].label;
    }
  }
  int64_t sum_links = 0, sum_paths = 0;
  for (size_t l = 0; l < r.links.size(); ++l) {
    EXPECT_EQ(r.links[l].bytes, link_bytes[l] / reported) << r.links[l].name;
    sum_links += link_bytes[l];
  }
  for (const Task& k : g.tasks) {
    if (k.step >= first && k.step <= last) {
      sum_paths += k.bytes * static_cast<int64_t>(k.path.size());
    }
  }
  EXPECT_EQ(sum_links, sum_paths);
  // GPU copies (CPU optimizer steps move DRAM bytes, not GPU bytes), per direction.
  int64_t h2d = 0, d2h = 0, p2p = 0;
  for (const Task& k : g.tasks) {
    if (k.step < first || k.step > last || k.gpu < 0) continue;
    (k.direction == Direction::kH2D ? h2d : k.direction == Direction::kD2H ? d2h : p2p) += k.bytes;
  }
  EXPECT_EQ(r.h2d_bytes, h2d / reported);
  EXPECT_EQ(r.d2h_bytes, d2h / reported);
  EXPECT_EQ(r.p2p_bytes, p2p / reported);
}

// Parses the trace and checks the keys Perfetto needs.
inline void ExpectValidTrace(const std::string& json, size_t num_tasks) {
  nlohmann::json j = nlohmann::json::parse(json);  // throws on malformed JSON
  ASSERT_TRUE(j.contains("traceEvents"));
  size_t slices = 0;
  for (const auto& e : j["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph") && e.contains("pid") && e.contains("tid") && e.contains("name"));
    if (e["ph"] == "X") {
      ASSERT_TRUE(e.contains("ts") && e.contains("dur"));
      EXPECT_GE(e["dur"].get<double>(), 0);
      ++slices;
    }
  }
  EXPECT_GE(slices, num_tasks);
}

}  // namespace mobius::planner::sim

#endif  // MOBIUS_TEST_HOST_PLANNER_SIM_SIM_TEST_UTIL_H_
