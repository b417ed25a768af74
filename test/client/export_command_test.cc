// `mobius export --merge` (client/export_command.h) in process, with the real mobius-worker as its
// child: usage errors before any child runs, the worker's error line relayed with its exit code
// (2 bad input, 4 failure), the summary on success. The merge's numbers are checked against PEFT
// in test/worker/checkpoint/merge_adapter_test.cc, the `mobius` binary in export_cli_test.cc.
#include "client/export_command.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "client/exit_codes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/paths.h"

namespace mobius::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class ExportCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/export_" + std::to_string(getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The golden llama_gqa_qv adapter (trained), its base named by absolute path; `peft_type`
  // replaced when given.
  std::string Adapter(const std::string& peft_type = "LORA") {
    const std::string golden =
        mobius::testing::SourcePath("test/reference/golden_lora/llama_gqa_qv");
    const std::string a = dir_ + "/adapter";
    fs::create_directories(a);
    std::ifstream in(golden + "/adapter_config.json");
    nlohmann::json config = nlohmann::json::parse(in);
    config["base_model_name_or_path"] =
        mobius::testing::SourcePath("test/reference/golden/llama_gqa");
    config["peft_type"] = peft_type;
    std::ofstream(a + "/adapter_config.json") << config.dump(2);
    fs::copy_file(golden + "/final_adapter.safetensors", a + "/adapter_model.safetensors",
                  fs::copy_options::overwrite_existing);
    return a;
  }

  ExportOptions Options(const std::vector<std::string>& args) {
    ExportOptions o;
    o.merge = true;
    o.args = args;
    o.worker_binary = mobius::testing::BinaryPath("bin/mobius-worker");
    return o;
  }

  std::string dir_;
};

TEST_F(ExportCommandTest, MergesAndSummarises) {
  ExportOptions o = Options({Adapter(), dir_ + "/out"});
  o.dtype = "bf16";
  std::ostringstream out, err;
  ASSERT_EQ(RunExport(o, out, err), kExitOk) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("4 adapted weights (scaling 2), 21 tensors, dtype bf16"));
  EXPECT_THAT(out.str(), HasSubstr("wrote " + dir_ + "/out: model.safetensors, config.json"));
  EXPECT_EQ(err.str(), "");  // the worker's configuration log is not relayed
  EXPECT_TRUE(fs::exists(dir_ + "/out/model.safetensors"));
}

TEST_F(ExportCommandTest, UsageErrorsExitTwoWithoutAWorker) {
  ExportOptions o = Options({Adapter(), dir_ + "/out"});
  o.worker_binary = "/nonexistent/mobius-worker";  // never reached
  for (int which = 0; which < 3; ++which) {
    ExportOptions bad = o;
    if (which == 0) bad.merge = false;
    if (which == 1) bad.args.pop_back();
    if (which == 2) bad.dtype = "fp16";
    std::ostringstream out, err;
    EXPECT_EQ(RunExport(bad, out, err), kExitUsage) << which;
    EXPECT_THAT(err.str(), HasSubstr("usage: mobius export --merge ADAPTER_DIR OUT"));
  }
}

TEST_F(ExportCommandTest, RelaysTheWorkersErrorWithItsExitCode) {
  {
    std::ostringstream out, err;
    EXPECT_EQ(RunExport(Options({Adapter("PREFIX_TUNING"), dir_ + "/out"}), out, err),
              kExitUsage);
    EXPECT_THAT(err.str(), HasSubstr("mobius export: "));
    EXPECT_THAT(err.str(), HasSubstr("adapter_config.json: field \"peft_type\""));
    EXPECT_EQ(err.str().find("mobius-worker merge-adapter:"), std::string::npos) << err.str();
    EXPECT_FALSE(fs::exists(dir_ + "/out"));
  }
  {
    fs::create_directories(dir_ + "/taken");
    std::ofstream(dir_ + "/taken/x") << "x";
    std::ostringstream out, err;
    EXPECT_EQ(RunExport(Options({Adapter(), dir_ + "/taken"}), out, err), kExitUsage);
    EXPECT_THAT(err.str(), HasSubstr("taken exists and is not empty"));
  }
  {
    ExportOptions o = Options({Adapter(), dir_ + "/out"});
    o.worker_binary = "/nonexistent/mobius-worker";
    std::ostringstream out, err;
    EXPECT_EQ(RunExport(o, out, err), kExitServerError);
    EXPECT_THAT(err.str(), HasSubstr("/nonexistent/mobius-worker"));
    EXPECT_THAT(err.str(), HasSubstr("--worker_binary"));
  }
}

}  // namespace
}  // namespace mobius::cli
