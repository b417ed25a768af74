// CPU GEMM paths for bf16-in / fp32-accumulate matmuls of transformer shapes, side by side:
//   sbgemm     OpenBLAS cblas_sbgemm (bf16 A, B -> fp32 C), looked up with dlsym: Debian's 0.3.21
//              declares it in cblas.h but is built without BUILD_BFLOAT16, so it is not exported
//   cvt+sgemm  bf16 -> fp32 into scratch (timed), then OpenBLAS cblas_sgemm   (CpuBackend's path)
//   sgemm only the same sgemm on the already converted operands (the conversion's share)
//   dnnl bf16  oneDNN matmul, bf16 A, B -> fp32 C (primitive created once, outside the timing)
//   dnnl f32   bf16 -> fp32 into scratch (timed), then oneDNN f32 matmul
//   torch bf16 / torch f32   torch.matmul in a coprocess (gemm_torch.py); f32 inputs are
//              pre-converted (an upper bound for what sgemm alone does)
// Each rep runs every method once, in turn (alternating), for each thread count; we report the
// median and min-max over reps, GFLOP/s and the ratio to cvt+sgemm. Every method's output is
// checked against cvt+sgemm on the first rep (max |diff| / max |ref|).
//
//   gemm_bench [--reps=5] [--threads=1,2] [--torch="/usr/bin/python3 bench/gemm/gemm_torch.py"]
// Threads: openblas_set_num_threads(t) for OpenBLAS, omp_set_num_threads(t) for oneDNN (OpenMP
// build in Debian), torch.set_num_threads(t). Run with bench/gemm/run.sh.
#include <dlfcn.h>
#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <cblas.h>

#include "bench/common/torch_process.h"
#include "common/numeric/bf16.h"
#include "oneapi/dnnl/dnnl.hpp"

using mobius::bench::TorchProcess;

namespace {

using Clock = std::chrono::steady_clock;

struct Shape {
  const char* name;
  int m, n, k;
};


// cblas_sbgemm when the loaded OpenBLAS exports it, else nullptr.
using SbgemmFn = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, blasint, blasint, blasint,
                          float, const bfloat16*, blasint, const bfloat16*, blasint, float, float*,
                          blasint);
const SbgemmFn kSbgemm = reinterpret_cast<SbgemmFn>(dlsym(RTLD_DEFAULT, "cblas_sbgemm"));

// One shape's operands: bf16 A [m,k], B [k,n] (row-major), outputs per method.
struct Problem {
  Shape s;
  std::vector<uint16_t> a, b;
  std::vector<float> a32, b32, c;  // scratch for the convert paths, C
  std::vector<float> ref;          // cvt+sgemm result of the first rep
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  dnnl::matmul mm_bf16, mm_f32;
  bool have_dnnl_bf16 = true;  // oneDNN 2.6 has no bf16 matmul without AVX512 (throws)

  explicit Problem(Shape shape) : s(shape) {
    std::mt19937 rng(42);
    std::normal_distribution<float> dist(0.f, 1.f);
    a.resize(size_t(s.m) * s.k);
    b.resize(size_t(s.k) * s.n);
    for (auto& v : a) v = mobius::numeric::Fp32ToBf16(dist(rng));
    for (auto& v : b) v = mobius::numeric::Fp32ToBf16(dist(rng));
    a32.resize(a.size());
    b32.resize(b.size());
    c.resize(size_t(s.m) * s.n);
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    auto make = [&](dt in) {
      dnnl::memory::desc am({s.m, s.k}, in, tag::ab), bm({s.k, s.n}, in, tag::ab),
          cm({s.m, s.n}, dt::f32, tag::ab);
      return dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(am, bm, cm), eng));
    };
    try {
      mm_bf16 = make(dt::bf16);
    } catch (const dnnl::error&) {
      have_dnnl_bf16 = false;
    }
    mm_f32 = make(dt::f32);
  }

  void Convert() {
    mobius::numeric::Bf16ToFp32(a.data(), a32.data(), a.size());
    mobius::numeric::Bf16ToFp32(b.data(), b32.data(), b.size());
  }
  void Sgemm(bool convert = true) {
    if (convert) Convert();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.f, a32.data(), s.k,
                b32.data(), s.n, 0.f, c.data(), s.n);
  }
  void Sbgemm() {
    kSbgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.f,
                 reinterpret_cast<const bfloat16*>(a.data()), s.k,
                 reinterpret_cast<const bfloat16*>(b.data()), s.n, 0.f, c.data(), s.n);
  }
  void Dnnl(bool bf16) {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    dt in = bf16 ? dt::bf16 : dt::f32;
    if (!bf16) Convert();
    void* ap = bf16 ? static_cast<void*>(a.data()) : a32.data();
    void* bp = bf16 ? static_cast<void*>(b.data()) : b32.data();
    dnnl::memory am({{s.m, s.k}, in, tag::ab}, eng, ap), bm({{s.k, s.n}, in, tag::ab}, eng, bp),
        cm({{s.m, s.n}, dt::f32, tag::ab}, eng, c.data());
    (bf16 ? mm_bf16 : mm_f32)
        .execute(strm, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    strm.wait();
  }
  double Error() const {  // max |c - ref| / max |ref|
    double diff = 0, scale = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      diff = std::max(diff, double(std::fabs(c[i] - ref[i])));
      scale = std::max(scale, double(std::fabs(ref[i])));
    }
    return diff / scale;
  }
};

double Seconds(const std::function<void()>& fn) {
  auto t0 = Clock::now();
  fn();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<int> ParseInts(const std::string& s) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    out.push_back(std::atoi(s.substr(pos, comma - pos).c_str()));
    pos = comma + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  std::vector<int> threads = {1, 2};
  std::string torch_cmd = "/usr/bin/python3 bench/gemm/gemm_torch.py";
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    size_t eq = arg.find('=');
    std::string key = arg.substr(0, eq), value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (key == "--reps") reps = std::max(1, std::atoi(value.c_str()));
    else if (key == "--threads") threads = ParseInts(value);
    else if (key == "--torch") torch_cmd = value;
    else {
      std::fprintf(stderr, "usage: gemm_bench [--reps=5] [--threads=1,2] [--torch=CMD]\n");
      return 2;
    }
  }
  std::printf("OpenBLAS %s core=%s; oneDNN %d.%d.%d (%s)\n", openblas_get_config(),
              openblas_get_corename(), dnnl_version()->major, dnnl_version()->minor,
              dnnl_version()->patch, dnnl_version()->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "?");
  std::printf("cblas_sbgemm: %s\n", kSbgemm ? "exported" : "NOT exported by this OpenBLAS (skipped)");
  std::unique_ptr<TorchProcess> torch;
  if (!torch_cmd.empty()) {
    torch = std::make_unique<TorchProcess>(torch_cmd);
    std::printf("PyTorch %s\n", torch->Ask("version").c_str());
  }
  const Shape shapes[] = {{"[4096,768]x[768,3072]", 4096, 3072, 768},
                          {"[4096,3072]x[3072,768]", 4096, 768, 3072},
                          {"[512,256]x[256,1024]", 512, 1024, 256}};
  const char* names[] = {"cvt+sgemm", "sgemm only", "sbgemm", "dnnl bf16", "dnnl f32(cvt)",
                         "torch bf16", "torch f32"};
  const int kMethods = torch ? 7 : 5;
  std::printf("%-24s %3s %-14s %10s %18s %8s %8s %9s\n", "shape (A x B)", "thr", "method",
              "median ms", "min-max ms", "GFLOP/s", "vs cvt+", "rel err");
  for (const Shape& shape : shapes) {
    Problem p(shape);
    if (!p.have_dnnl_bf16) std::printf("oneDNN: no bf16 matmul implementation on this CPU (skipped)\n");
    if (torch) torch->Ask("setup " + std::to_string(shape.m) + " " + std::to_string(shape.n) + " " +
                          std::to_string(shape.k));
    const double flop = 2.0 * shape.m * shape.n * shape.k;
    for (int t : threads) {
      openblas_set_num_threads(t);
      omp_set_num_threads(t);
      std::vector<std::vector<double>> times(kMethods);
      std::vector<double> err(kMethods, 0.0);
      for (int rep = -1; rep < reps; ++rep) {  // rep -1 warms up (and builds oneDNN's kernels)
        for (int mth = 0; mth < kMethods; ++mth) {
          double sec = 0;
          switch (mth) {
            case 0: sec = Seconds([&] { p.Sgemm(); }); break;
            case 1: sec = Seconds([&] { p.Sgemm(/*convert=*/false); }); break;
            case 2: sec = kSbgemm ? Seconds([&] { p.Sbgemm(); }) : NAN; break;
            case 3: sec = p.have_dnnl_bf16 ? Seconds([&] { p.Dnnl(true); }) : NAN; break;
            case 4: sec = Seconds([&] { p.Dnnl(false); }); break;
            case 5: sec = std::atof(torch->Ask("mm bf16 " + std::to_string(t)).c_str()); break;
            case 6: sec = std::atof(torch->Ask("mm f32 " + std::to_string(t)).c_str()); break;
          }
          if (rep == -1 && mth == 0) p.ref = p.c;
          if (rep == -1 && mth < 5) err[mth] = std::isnan(sec) ? NAN : p.Error();
          if (rep >= 0) times[mth].push_back(sec);
        }
      }
      const double base = Median(times[0]);
      for (int mth = 0; mth < kMethods; ++mth) {
        if (std::isnan(times[mth][0])) {
          std::printf("%-24s %3d %-14s %10s   (not available here)\n", shape.name, t, names[mth],
                      "n/a");
          continue;
        }
        auto [lo, hi] = std::minmax_element(times[mth].begin(), times[mth].end());
        double med = Median(times[mth]);
        char range[64], errs[32];
        std::snprintf(range, sizeof(range), "%.1f-%.1f", *lo * 1e3, *hi * 1e3);
        std::snprintf(errs, sizeof(errs), mth < 5 ? "%.1e" : "-", err[mth]);
        std::printf("%-24s %3d %-14s %10.1f %18s %8.1f %8.2f %9s\n", shape.name, t, names[mth],
                    med * 1e3, range, flop / med * 1e-9, med / base, errs);
      }
    }
  }
  std::printf("vs cvt+ = median time / median time of cvt+sgemm (>1: slower than cvt+sgemm)\n");
  return 0;
}
