// Chrome trace-event JSON of a simulated step (simulator.h).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "host/planner/sim/simulator.h"

namespace mobius::planner::sim {
namespace {

constexpr int kLinksPid = 1000;
constexpr int kCpuPid = 999;
constexpr int kNetPid = 998;

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

void Meta(std::vector<std::string>& ev, const char* what, int pid, int tid,
          const std::string& name) {
  ev.push_back(absl::StrFormat(R"({"name":"%s","ph":"M","pid":%d,"tid":%d,"args":{"name":"%s"}})",
                               what, pid, tid, Escape(name)));
}

void Slice(std::vector<std::string>& ev, const Task& t, int pid, int tid, const TaskTiming& tm) {
  ev.push_back(absl::StrFormat(
      R"({"name":"%s","cat":"%s","ph":"X","pid":%d,"tid":%d,"ts":%.3f,"dur":%.3f,)"
      R"("args":{"stage":%d,"microbatch":%d,"bytes":%d}})",
      Escape(t.label), TaskKindName(t.kind), pid, tid, tm.start * 1e6,
      (tm.end - tm.start) * 1e6, t.stage, t.microbatch, t.bytes));
}

// Greedy lane for an interval: the first lane free at `start`.
int Lane(std::vector<double>& lane_end, double start, double end) {
  for (size_t i = 0; i < lane_end.size(); ++i) {
    if (lane_end[i] <= start + 1e-12) {
      lane_end[i] = end;
      return static_cast<int>(i);
    }
  }
  lane_end.push_back(end);
  return static_cast<int>(lane_end.size()) - 1;
}

}  // namespace

std::string ChromeTraceJson(const SimMachine& machine, const SimResult& result) {
  std::vector<std::string> ev;
  const TaskGraph& g = result.graph;
  const std::vector<TaskTiming>& tm = result.engine.timings;
  for (int i = 0; i < machine.num_gpus(); ++i) {
    Meta(ev, "process_name", i + 1,
         0, absl::StrCat("GPU ", machine.gpus[i].topology_gpu, " ", machine.gpus[i].name));
    Meta(ev, "thread_name", i + 1, 1, "compute");
    Meta(ev, "thread_name", i + 1, 2, "h2d");
    Meta(ev, "thread_name", i + 1, 3, "d2h");
  }
  Meta(ev, "process_name", kCpuPid, 0, "host CPU optimizer");
  Meta(ev, "process_name", kNetPid, 0, "inter-node link (all-reduce, planned)");
  Meta(ev, "process_name", kLinksPid, 0, "links");
  std::vector<int> order(g.tasks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return tm[a].start < tm[b].start || (tm[a].start == tm[b].start && a < b);
  });
  std::vector<std::vector<double>> link_lanes(machine.links.size());
  std::vector<std::vector<bool>> named(machine.links.size());
  std::vector<double> cpu_lanes;
  for (int i : order) {
    const Task& t = g.tasks[i];
    const Stream& s = g.streams[t.stream];
    if (s.kind == StreamKind::kCpu) {
      Slice(ev, t, kCpuPid, 1 + Lane(cpu_lanes, tm[i].start, tm[i].end), tm[i]);
      continue;
    }
    if (s.kind == StreamKind::kNetwork) {
      Slice(ev, t, kNetPid, 1, tm[i]);
      continue;
    }
    const int tid = s.kind == StreamKind::kCompute ? 1 : s.kind == StreamKind::kH2D ? 2 : 3;
    Slice(ev, t, s.gpu + 1, tid, tm[i]);
    for (int l : t.path) {
      const int lane = Lane(link_lanes[l], tm[i].start, tm[i].end);
      if (named[l].size() <= static_cast<size_t>(lane)) named[l].resize(lane + 1, false);
      const int ltid = l * 64 + std::min(lane, 63);
      if (!named[l][lane]) {
        named[l][lane] = true;
        Meta(ev, "thread_name", kLinksPid, ltid, absl::StrCat(machine.links[l].name, " #", lane));
      }
      Slice(ev, t, kLinksPid, ltid, tm[i]);
    }
  }
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  for (size_t i = 0; i < ev.size(); ++i) absl::StrAppend(&out, ev[i], i + 1 < ev.size() ? ",\n" : "\n");
  absl::StrAppend(&out, "]}\n");
  return out;
}

}  // namespace mobius::planner::sim
