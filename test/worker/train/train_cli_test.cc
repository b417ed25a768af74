// `mobius-worker train --standalone`, run as users run it: step lines, checkpoints, exit codes.

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "test/testing/paths.h"
#include "test/testing/shell.h"
#include "test/worker/train/train_test_util.h"

namespace mobius::train {
namespace {

using testing::TempDir;

struct Result {
  int exit_code = -1;
  std::string out;  // stdout
  std::string all;  // stdout and stderr
};

Result RunWorker(const std::string& args, const TempDir& tmp) {
  const std::string err = tmp / "stderr.txt";
  const std::string cmd =
      mobius::testing::BinaryPath("bin/mobius-worker") + " " + args + " 2>" + err;
  const mobius::testing::ShellResult ran = mobius::testing::RunShell(cmd);
  Result r;
  r.exit_code = ran.exit_code;
  r.out = ran.output;
  std::ostringstream s;
  s << std::ifstream(err).rdbuf();
  r.all = r.out + s.str();
  return r;
}

TEST(TrainCliTest, TrainsPrintsOneLinePerStepAndCheckpoints) {
  TempDir tmp;
  const std::string model = testing::WriteTinyModel(tmp / "model", "llama");
  const std::string data = testing::WriteRandomTokens(tmp / "data.tok", 512, 20, 100);
  const std::string base = "train --standalone --model=" + model + " --data=" + data +
                           " --steps=4 --batch=4 --microbatch=2 --seq=32 --lr=1e-3 --warmup=1"
                           " --threads=2 --eval_every=2 --eval_fraction=0.1 --checkpoint_dir=" +
                           (tmp / "ckpt");
  Result r = RunWorker(base, tmp);
  ASSERT_EQ(r.exit_code, 0) << r.all;
  const std::regex line(
      R"(step (\d+)/4 \| loss \d+\.\d{4} \| lr \d\.\d\de[-+]\d\d \| grad_norm \d+\.\d{3} \| )"
      R"(tok/s \d+ \| \d+ ms( \| eval loss \d+\.\d{4})?)");
  std::istringstream lines(r.out);
  std::string l;
  int steps = 0;
  while (std::getline(lines, l)) {
    if (l.starts_with("checkpoint ")) continue;
    std::smatch m;
    ASSERT_TRUE(std::regex_match(l, m, line)) << "line: " << l << "\n" << r.all;
    EXPECT_EQ(std::stoi(m[1]), ++steps);
    EXPECT_EQ(m[2].matched, steps % 2 == 0) << l;  // eval every 2 steps
  }
  EXPECT_EQ(steps, 4) << r.out;
  EXPECT_TRUE(std::filesystem::exists(tmp / "ckpt/checkpoint-00000004/DONE")) << r.all;
  EXPECT_TRUE(std::filesystem::exists(tmp / "ckpt/checkpoint-00000004/model.safetensors"));

  // --resume with --steps 6 runs steps 5 and 6 only.
  r = RunWorker(base.substr(0, base.find("--steps=4")) + "--steps=6" +
                    base.substr(base.find("--steps=4") + 9) + " --resume",
                tmp);
  ASSERT_EQ(r.exit_code, 0) << r.all;
  EXPECT_NE(r.out.find("step 5/6 |"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("step 4/6 |"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(tmp / "ckpt/checkpoint-00000006/DONE")) << r.all;
}

TEST(TrainCliTest, BadInputExitsTwoWithOneClearLine) {
  TempDir tmp;
  const std::string model = testing::WriteTinyModel(tmp / "model", "gpt2");
  const std::string data = testing::WriteRandomTokens(tmp / "data.tok", 512, 4, 100);
  const std::string ok = " --seq=32 --threads=1 --steps=2";
  struct Case {
    std::string args, expect;
  } cases[] = {
      {"train --model=" + model + " --data=" + data + ok, "--standalone"},
      {"train --standalone --model=" + (tmp / "missing") + " --data=" + data + ok, "missing"},
      {"train --standalone --model=" + model + " --data=" + (tmp / "missing.tok") + ok,
       "missing.tok"},
      {"train --standalone --model=" + model + " --data=" + data + ok + " --batch=4 --microbatch=3",
       "not a multiple"},
      {"train --standalone --model=" + model + " --data=" + data + ok + " --batch=64",
       "fewer than one batch"},
      {"train --standalone --model=" + model + " --data=" + data + ok + " --batch=2 "
       "--device_memory_bytes=300000", "--device_memory_bytes"},
      {"train --standalone --model=" + model + " --data=" + data + ok + " --batch=2 "
       "--schedule=linear", "--schedule"},
      {"train --standalone --model=" + model + " --data=" + data + ok + " --batch=2 "
       "--backend=tpu", "--backend must be cpu, cuda or auto"},
      // --lora_* reach the trainer options (their ranges; the model checks need the engine).
      {"train --standalone --model=" + model + " --data=" + data + ok + " --batch=2 "
       "--lora_rank=-1", "--lora_rank must be >= 1 (got -1)"},
      {"train --standalone --model=" + model + " --data=" + data + ok + " --batch=2 "
       "--lora_rank=4 --lora_alpha=0", "--lora_alpha must be positive (got 0)"},
      {"train --standalone --model=" + model + " --data=" + data + ok + " --batch=2 "
       "--lora_rank=4 --lora_dropout=1", "--lora_dropout must be in [0, 1) (got 1)"},
  };
  for (const Case& c : cases) {
    Result r = RunWorker(c.args, tmp);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.all;
    EXPECT_NE(r.all.find(c.expect), std::string::npos) << c.args << "\n" << r.all;
    EXPECT_EQ(r.out.find("step "), std::string::npos) << r.out;  // no step ran
  }
  // --backend cuda: trains on a machine with a usable GPU; without one it fails before any step,
  // naming why. auto falls back to the CPU backend (or uses the GPU) and trains either way.
  Result cuda = RunWorker("train --standalone --model=" + model + " --data=" + data + ok +
                              " --batch=2 --backend=cuda",
                          tmp);
  if (cuda.exit_code == 0) {
    EXPECT_NE(cuda.out.find("step 2/2"), std::string::npos) << cuda.out;
  } else {
    EXPECT_NE(cuda.all.find("backend cuda requested but unusable"), std::string::npos) << cuda.all;
    EXPECT_EQ(cuda.out.find("step "), std::string::npos) << cuda.out;
  }
  Result fallback = RunWorker("train --standalone --model=" + model + " --data=" + data + ok +
                                  " --batch=2 --backend=auto",
                              tmp);
  EXPECT_EQ(fallback.exit_code, 0) << fallback.all;
  EXPECT_NE(fallback.out.find("step 2/2"), std::string::npos) << fallback.out;
  // Token ids beyond the vocabulary of a raw llm.c file (u16 ids, vocab 512 < 1000).
  const std::string raw = tmp / "raw.bin";
  {
    std::ofstream f(raw, std::ios::binary);
    for (uint16_t i = 0; i < 400; ++i) {
      const uint16_t id = i == 300 ? 1000 : i;
      f.write(reinterpret_cast<const char*>(&id), 2);
    }
  }
  Result r = RunWorker("train --standalone --model=" + model + " --data=" + raw +
                           " --data_raw_bytes=2 --batch=2" + ok,
                       tmp);
  EXPECT_EQ(r.exit_code, 2) << r.all;
  EXPECT_NE(r.all.find("position 300"), std::string::npos) << r.all;
}

}  // namespace
}  // namespace mobius::train
