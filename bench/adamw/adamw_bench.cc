// CPU AdamW benchmark: our fused step vs PyTorch's torch.optim.AdamW (foreach) vs the memory
// bandwidth bound from a STREAM-like triad, all measured in one run, alternating, per thread count.
//
//   adamw_bench [--params=100000000] [--tensors=50] [--threads=1,2] [--reps=5]
//               [--torch="/usr/bin/python3 bench/adamw/torch_adamw.py"]   (--torch= skips PyTorch)
//
// Bound: our step touches 30 bytes per parameter (reads master, grad, m, v as fp32; writes master,
// m, v as fp32 and the bf16 copy), so it cannot beat 30 * params / triad_bytes_per_second. The triad
// a[i] = b[i] + s * c[i] counts 12 bytes per element, like STREAM (no write-allocate traffic).
// "bound / ours" is that bound over our time (100% = at the bound). A single core's bandwidth also
// depends on how many streams it runs (outstanding misses), so the bench also times a kernel with our
// exact traffic and no arithmetic ("same-traffic"), the ceiling for this access pattern.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench/common/torch_process.h"
#include "worker/optim/adamw.h"
#include "worker/optim/thread_pool.h"

using mobius::bench::TorchProcess;

namespace {

using Clock = std::chrono::steady_clock;
using mobius::optim::CpuAdamW;
using mobius::optim::ParamBuffers;

struct Args {
  size_t params = 100000000;
  size_t tensors = 50;
  std::vector<int> threads = {1, 2};
  int reps = 5;
  std::string torch = "/usr/bin/python3 bench/adamw/torch_adamw.py";
};

Args ParseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string key = arg.substr(0, eq), value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (key == "--params") a.params = std::stoull(value);
    else if (key == "--tensors") a.tensors = std::stoull(value);
    else if (key == "--reps") a.reps = std::stoi(value);
    else if (key == "--torch") a.torch = value;
    else if (key == "--threads") {
      a.threads.clear();
      for (size_t pos = 0; pos < value.size();) {
        const size_t comma = std::min(value.find(',', pos), value.size());
        a.threads.push_back(std::stoi(value.substr(pos, comma - pos)));
        pos = comma + 1;
      }
    } else {
      std::fprintf(stderr, "unknown argument %s (see the comment at the top of adamw_bench.cc)\n",
                   arg.c_str());
      std::exit(2);
    }
  }
  return a;
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Summary {
  double median, min, max;
};

Summary Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return {median, v.front(), v.back()};
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}


// Our state: `tensors` tensors summing to `params`, each with its own allocations.
struct OurState {
  std::vector<std::vector<float>> master, m, v, grad;
  std::vector<std::vector<uint16_t>> bf16;
  std::vector<ParamBuffers> buffers;

  OurState(size_t params, size_t tensors) {
    const size_t per = params / tensors;
    uint32_t x = 12345;
    auto next = [&x] { x = x * 1664525u + 1013904223u; return static_cast<float>(x >> 8) * 0x1p-24f - 0.5f; };
    for (size_t t = 0; t < tensors; ++t) {
      const size_t n = t + 1 < tensors ? per : params - per * (tensors - 1);
      master.emplace_back(n);
      grad.emplace_back(n);
      m.emplace_back(n, 0.0f);
      v.emplace_back(n, 0.0f);
      bf16.emplace_back(n);
      for (size_t i = 0; i < n; ++i) {
        master[t][i] = next();
        grad[t][i] = next();
      }
      buffers.push_back({master[t].data(), m[t].data(), v[t].data(), grad[t].data(),
                         bf16[t].data(), n, true});
    }
  }
};

// STREAM triad a = b + s * c over the pool; returns bytes per second (12 bytes per element).
double TriadBytesPerSecond(mobius::optim::ThreadPool& pool, std::vector<float>& a,
                           const std::vector<float>& b, const std::vector<float>& c) {
  constexpr size_t kChunk = size_t{1} << 16;
  const size_t n = a.size(), chunks = (n + kChunk - 1) / kChunk;
  const auto start = Clock::now();
  pool.ParallelFor(chunks, [&](size_t k) {
    const size_t end = std::min(n, (k + 1) * kChunk);
    float* __restrict pa = a.data();
    const float* __restrict pb = b.data();
    const float* __restrict pc = c.data();
    for (size_t i = k * kChunk; i < end; ++i) pa[i] = pb[i] + 3.0f * pc[i];
  });
  return 12.0 * static_cast<double>(n) / Seconds(start, Clock::now());
}

// The same memory traffic as our step (read master, grad, m, v; write master, m, v and a 16-bit
// copy) with next to no arithmetic: the ceiling for this access pattern on this machine. The tiny
// additions keep the values as they are (1e-30 * g vanishes next to a weight) without denormals.
double SameTrafficSeconds(mobius::optim::ThreadPool& pool, OurState& s) {
  struct Piece {
    const ParamBuffers* b;
    size_t begin, end;
  };
  std::vector<Piece> pieces;
  constexpr size_t kChunk = size_t{1} << 16;
  for (const ParamBuffers& b : s.buffers) {
    for (size_t i = 0; i < b.n; i += kChunk) pieces.push_back({&b, i, std::min(b.n, i + kChunk)});
  }
  const auto start = Clock::now();
  pool.ParallelFor(pieces.size(), [&](size_t k) {
    const ParamBuffers& b = *pieces[k].b;
    float* __restrict p = b.master;
    float* __restrict m = b.m;
    float* __restrict v = b.v;
    const float* __restrict g = b.grad;
    uint16_t* __restrict out = b.bf16_out;
    for (size_t i = pieces[k].begin; i < pieces[k].end; ++i) {
      const float tiny = 1e-30f * g[i];
      p[i] += tiny;
      m[i] += tiny;
      v[i] += tiny * tiny * 0.0f + 1e-30f;
      uint32_t bits;
      std::memcpy(&bits, &p[i], sizeof(bits));
      out[i] = static_cast<uint16_t>(bits >> 16);
    }
  });
  return Seconds(start, Clock::now());
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = ParseArgs(argc, argv);
  std::printf("CPU: %s (%u hardware threads)\n", CpuModel().c_str(),
              std::max(1u, std::thread::hardware_concurrency()));
  std::printf("params %zu in %zu tensors, %d repetitions, kernel %s\n", args.params, args.tensors,
              args.reps, mobius::optim::KernelName(mobius::optim::ResolveKernel(mobius::optim::Kernel::kAuto)));

  std::unique_ptr<TorchProcess> torch;
  if (!args.torch.empty()) {
    torch = std::make_unique<TorchProcess>(args.torch);
    std::printf("PyTorch: %s (torch.optim.AdamW foreach=True; fused= argument exists: see 'fused')\n",
                torch->Ask("setup " + std::to_string(args.params) + " " + std::to_string(args.tensors)).c_str());
  }
  OurState ours(args.params, args.tensors);
  const size_t triad_n = size_t{48} << 20;  // 3 x 192 MiB: far beyond any cache
  std::vector<float> ta(triad_n, 0.0f), tb(triad_n, 1.0f), tc(triad_n, 2.0f);
  const double bytes = 30.0 * static_cast<double>(args.params);

  std::printf("\n%7s | %-24s | %-24s | %-20s | %-20s | %-8s | %-18s | %s\n", "threads",
              "ours s (min-max)", "torch s step+bf16 copy", "torch / ours", "triad GB/s", "bound s",
              "bound / ours", "same-traffic s / ours");
  int64_t step = 1;
  for (int threads : args.threads) {
    mobius::optim::ThreadPool pool(threads);
    auto opt = CpuAdamW::Create({.config = {.lr = 1e-3, .weight_decay = 0.01},
                                 .num_threads = threads});
    if (!opt.ok()) {
      std::fprintf(stderr, "%s\n", opt.status().ToString().c_str());
      return 1;
    }
    // Warm-up: page in everything once (PyTorch also allocates its moments on the first step).
    (void)(*opt)->Step(step++, 1.0f, ours.buffers);
    TriadBytesPerSecond(pool, ta, tb, tc);
    if (torch) torch->Ask("step " + std::to_string(threads));

    std::vector<double> t_ours, t_torch, t_torch_step, ratio, bw, eff, traffic;
    for (int rep = 0; rep < args.reps; ++rep) {
      // Alternate the order so that neither side always runs first after the other.
      double ours_s = 0, torch_s = 0, triad_bw = 0;
      auto run_ours = [&] {
        const auto start = Clock::now();
        (void)(*opt)->Step(step++, 1.0f, ours.buffers);
        ours_s = Seconds(start, Clock::now());
      };
      auto run_torch = [&] {
        if (!torch) return;
        double step_s = 0, copy_s = 0;
        std::sscanf(torch->Ask("step " + std::to_string(threads)).c_str(), "%lf %lf", &step_s, &copy_s);
        torch_s = step_s + copy_s;
        t_torch_step.push_back(step_s);
      };
      double traffic_s = 0;
      if (rep % 2 == 0) {
        triad_bw = TriadBytesPerSecond(pool, ta, tb, tc);
        traffic_s = SameTrafficSeconds(pool, ours);
        run_ours();
        run_torch();
      } else {
        run_torch();
        run_ours();
        traffic_s = SameTrafficSeconds(pool, ours);
        triad_bw = TriadBytesPerSecond(pool, ta, tb, tc);
      }
      traffic.push_back(traffic_s / ours_s);
      t_ours.push_back(ours_s);
      bw.push_back(triad_bw);
      eff.push_back(bytes / triad_bw / ours_s);
      if (torch) {
        t_torch.push_back(torch_s);
        ratio.push_back(torch_s / ours_s);
      }
    }
    const Summary o = Summarize(t_ours), b = Summarize(bw), e = Summarize(eff),
                  st = Summarize(traffic);
    char torch_col[64] = "-", ratio_col[64] = "-";
    if (torch) {
      const Summary t = Summarize(t_torch), r = Summarize(ratio);
      std::snprintf(torch_col, sizeof(torch_col), "%.3f (%.3f-%.3f)", t.median, t.min, t.max);
      std::snprintf(ratio_col, sizeof(ratio_col), "%.2fx (%.2f-%.2f)", r.median, r.min, r.max);
    }
    std::printf("%7d | %.3f (%.3f-%.3f)      | %-24s | %-20s | %5.2f (%.2f-%.2f)   | %.3f    | %3.0f%% (%.0f-%.0f%%)     | %.0f%% (%.0f-%.0f%%)\n",
                threads, o.median, o.min, o.max, torch_col, ratio_col, b.median / 1e9, b.min / 1e9,
                b.max / 1e9, bytes / b.median, 100 * e.median, 100 * e.min, 100 * e.max,
                100 * st.median, 100 * st.min, 100 * st.max);
    std::printf("        ours %.0f Mparams/s", args.params / o.median / 1e6);
    if (torch) {
      std::printf(", torch %.0f Mparams/s (step alone median %.3f s)", args.params / Summarize(t_torch).median / 1e6,
                  Summarize(t_torch_step).median);
    }
    std::printf("\n");
  }
  return 0;
}
