// `mobius export --merge ADAPTER_DIR OUT` end to end, as users run it: the `mobius` binary spawns
// the `mobius-worker` next to it, and the model directory it writes holds PEFT's merge_and_unload
// (test/reference/golden_lora/<case>/merged.safetensors) for every golden case.
//
// Tolerance: max |ours - PEFT| <= 1e-6 with --dtype fp32: both sides compute W + (B @ A) * scaling
// in fp32, and only the order of the r-term sums inside torch's GEMM may differ (an ulp of a delta
// below 1). Measured: 0 (see merge_adapter_test.cc). bf16 output: each value is the fp32 merge
// rounded to nearest even.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/numeric/bf16.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/paths.h"
#include "test/testing/shell.h"
#include "worker/io/safetensors.h"

namespace mobius {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

Result RunMobius(const std::string& args) {
  const testing::ShellResult ran =
      testing::RunShell(testing::BinaryPath("bin/mobius") + " " + args + " 2>&1");
  return Result{ran.exit_code, ran.output};
}

std::vector<float> F32(const io::TensorView& t) {
  std::vector<float> v(t.num_elements());
  io::CopyToF32(t, v.data());
  return v;
}

class ExportCli : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/export_cli_" + std::to_string(getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_P(ExportCli, MergesLikePeft) {
  const std::string c = GetParam();
  const std::string golden = testing::SourcePath("test/reference/golden_lora/" + c);
  const std::string base = testing::SourcePath(
      std::string("test/reference/golden/") + (c.rfind("gpt2", 0) == 0 ? "gpt2" : "llama_gqa"));
  // The adapter as PEFT saved it after training; the base given by --base (the config's path is
  // relative to the source tree, which is not the test's working directory).
  const std::string adapter = dir_ + "/adapter";
  fs::create_directories(adapter);
  fs::copy_file(golden + "/adapter_config.json", adapter + "/adapter_config.json");
  fs::copy_file(golden + "/final_adapter.safetensors", adapter + "/adapter_model.safetensors");

  const std::string common = "export --merge " + adapter + " --base " + base + " ";
  Result r = RunMobius(common + dir_ + "/fp32 --dtype fp32");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("dtype fp32"));
  r = RunMobius(common + dir_ + "/bf16 --dtype=bf16");
  ASSERT_EQ(r.exit_code, 0) << r.output;

  auto peft = io::SafetensorsFile::Open(golden + "/merged.safetensors");
  auto fp32 = io::SafetensorsModel::Open(dir_ + "/fp32");
  auto bf16 = io::SafetensorsModel::Open(dir_ + "/bf16");
  ASSERT_TRUE(peft.ok() && fp32.ok() && bf16.ok());
  ASSERT_EQ((*fp32)->names().size(), (*peft)->tensors().size());
  double worst = 0;
  for (const io::TensorView& want : (*peft)->tensors()) {
    const io::TensorView* got = (*fp32)->Find(want.name);
    const io::TensorView* got16 = (*bf16)->Find(want.name);
    ASSERT_TRUE(got != nullptr && got16 != nullptr) << want.name;
    ASSERT_EQ(got->dtype, io::DType::kF32);
    ASSERT_EQ(got16->dtype, io::DType::kBF16);
    ASSERT_EQ(got->shape, want.shape) << want.name;
    const std::vector<float> a = F32(*got), b = F32(want);
    for (size_t i = 0; i < a.size(); ++i) {
      worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
      uint16_t h;
      std::memcpy(&h, static_cast<const char*>(got16->data) + 2 * i, 2);
      ASSERT_EQ(h, numeric::Fp32ToBf16(a[i])) << want.name << "[" << i << "]";
    }
  }
  EXPECT_LE(worst, 1e-6) << c;
  std::printf("%s: max |mobius export - PEFT| = %.3g\n", c.c_str(), worst);

  // An existing output is refused (exit 2), its contents untouched.
  r = RunMobius(common + dir_ + "/fp32");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("mobius export: " + dir_ + "/fp32 exists and is not empty"));
}

INSTANTIATE_TEST_SUITE_P(AllCases, ExportCli,
                         ::testing::Values("gpt2", "gpt2_c_attn", "llama_gqa", "llama_gqa_qv"));

TEST(ExportCliHelp, HelpWorksWithMerge) {
  for (const std::string& args : {"export --merge --help", "export --help", "help export"}) {
    Result r = RunMobius(args);
    EXPECT_EQ(r.exit_code, 0) << args << r.output;
    EXPECT_THAT(r.output, HasSubstr("Usage: mobius export --merge ADAPTER_DIR OUT")) << args;
    EXPECT_THAT(r.output, HasSubstr("--worker-binary (default: ")) << args;
  }
}

}  // namespace
}  // namespace mobius
