// Our AdamW against torch.optim.AdamW (Debian's PyTorch 1.13): trajectories of 10 steps recorded by
// make_adamw_golden.py in adamw_golden.txt. Tolerance: |ours - torch| <= 1e-6 * max(|torch|, 1e-2)
// after every step (relative 1e-6; the floor keeps parameters that pass near 0 from dividing by 0).
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "test/testing/paths.h"
#include "test/worker/optim/adamw_test_util.h"
#include "worker/optim/adamw.h"

namespace mobius::optim {
namespace {

struct GoldenCase {
  std::string name;
  AdamWConfig config;
  double max_norm = 0;
  size_t n = 0;
  int steps = 0;
  std::vector<float> init;
  std::vector<std::vector<float>> grads;   // [steps][n]
  std::vector<std::vector<float>> params;  // [steps][n], after each step
};

std::vector<float> ReadFloats(std::istringstream& in, size_t n) {
  std::vector<float> out;
  std::string token;
  while (out.size() < n && in >> token) out.push_back(std::strtof(token.c_str(), nullptr));
  return out;
}

std::vector<GoldenCase> LoadGolden(const std::string& path) {
  std::ifstream file(path);
  EXPECT_TRUE(file.good()) << "cannot open " << path;
  std::vector<GoldenCase> cases;
  std::string line;
  while (std::getline(file, line)) {
    std::istringstream in(line);
    std::string kind;
    if (!(in >> kind) || kind[0] == '#') continue;
    if (kind == "case") {
      GoldenCase c;
      in >> c.name >> c.config.lr >> c.config.beta1 >> c.config.beta2 >> c.config.eps >>
          c.config.weight_decay >> c.max_norm >> c.n >> c.steps;
      cases.push_back(c);
      continue;
    }
    EXPECT_FALSE(cases.empty()) << "record before any case: " << kind;
    GoldenCase& c = cases.back();
    if (kind == "init") {
      c.init = ReadFloats(in, c.n);
    } else {
      int step = 0;
      in >> step;
      (kind == "grad" ? c.grads : c.params).push_back(ReadFloats(in, c.n));
      EXPECT_EQ(static_cast<size_t>(step), (kind == "grad" ? c.grads : c.params).size());
    }
  }
  return cases;
}

class AdamWGoldenTest : public ::testing::TestWithParam<Kernel> {};

TEST_P(AdamWGoldenTest, MatchesTorchAdamW) {
  const Kernel kernel = GetParam();
  MOBIUS_SKIP_IF_UNAVAILABLE(kernel);
  const std::vector<GoldenCase> cases =
      LoadGolden(mobius::testing::SourcePath("test/worker/optim/adamw_golden.txt"));
  ASSERT_EQ(cases.size(), 3u);
  for (const GoldenCase& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_EQ(c.init.size(), c.n);
    ASSERT_EQ(c.grads.size(), static_cast<size_t>(c.steps));
    ASSERT_EQ(c.params.size(), static_cast<size_t>(c.steps));
    std::vector<float> p = c.init, m(c.n, 0.0f), v(c.n, 0.0f);
    std::vector<uint16_t> bf16(c.n);
    double worst_rel = 0;
    for (int step = 1; step <= c.steps; ++step) {
      const std::vector<float>& grad = c.grads[step - 1];
      float scale = 1.0f;
      if (c.max_norm > 0) {
        scale = ClipScale(std::sqrt(SumOfSquares(grad.data(), grad.size(), kernel)), c.max_norm);
        ASSERT_LT(scale, 1.0f) << "the case is meant to clip";
      }
      ParamBuffers b{p.data(), m.data(), v.data(), grad.data(), bf16.data(), c.n, true};
      ASSERT_TRUE(AdamWStep(c.config, step, scale, b, kernel).ok());
      const std::vector<float>& torch = c.params[step - 1];
      for (size_t i = 0; i < c.n; ++i) {
        const double denom = std::max(std::fabs(static_cast<double>(torch[i])), 1e-2);
        const double rel = std::fabs(static_cast<double>(p[i]) - torch[i]) / denom;
        worst_rel = std::max(worst_rel, rel);
        EXPECT_LE(rel, 1e-6) << "step " << step << " element " << i << ": ours " << p[i]
                             << " torch " << torch[i];
      }
    }
    std::printf("[ golden %s / %s ] worst |ours - torch| / max(|torch|, 1e-2) over %d steps: %.3g\n",
                c.name.c_str(), KernelName(kernel), c.steps, worst_rel);
  }
}

INSTANTIATE_TEST_SUITE_P(AllKernels, AdamWGoldenTest, ::testing::ValuesIn(testing::AllKernels()),
                         testing::KernelParamName);

}  // namespace
}  // namespace mobius::optim
