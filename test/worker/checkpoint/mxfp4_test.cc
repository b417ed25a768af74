// gpt-oss's MXFP4 experts (worker/checkpoint/mxfp4.h) against transformers: a tiny gpt-oss
// checkpoint stored as OpenAI stores one (test/reference/make_mxfp4_golden.py: U8 blocks and
// scales, config.json's quantization_config mxfp4) read by ReadModelDirectory gives exactly the
// tensors transformers' convert_moe_packed_tensors makes of it (bitwise), and the reference model
// on them transformers' loss (fp32 both, 1e-5); any sub-range of an expert decodes as that part of
// the whole; a checkpoint missing its scales or with misshapen blocks is refused naming them.
#include <filesystem>
#include <string>
#include <vector>

#include "common/model/layer_units.h"
#include "common/model/model_config_parse.h"
#include "gtest/gtest.h"
#include "test/testing/paths.h"
#include "worker/checkpoint/model_init.h"
#include "worker/checkpoint/tensor_files.h"
#include "worker/io/safetensors.h"
#include "worker/reference/model.h"
#include "worker/reference/parameters.h"

namespace mobius::checkpoint {
namespace {

namespace fs = std::filesystem;

std::string Golden() {
  return mobius::testing::SourcePath("test/reference/golden_mxfp4/gpt_oss_mxfp4");
}

reference::Parameters ReadAll(const std::string& path) {
  auto file = io::SafetensorsFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  reference::Parameters out;
  if (!file.ok()) return out;
  for (const io::TensorView& v : (*file)->tensors()) {
    reference::Tensor& t = out.tensors[v.name];
    t.shape = v.shape;
    t.data.resize(v.num_elements());
    io::CopyToF32(v, t.data.data());
  }
  return out;
}

TEST(Mxfp4Test, DecodesAsTransformersAndTheModelGivesItsLoss) {
  auto loaded = ReadModelDirectory(Golden());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto joined = reference::JoinFusedTensors(loaded->config, loaded->params);
  ASSERT_TRUE(joined.ok()) << joined.status();
  const reference::Parameters want = ReadAll(Golden() + "/expected.safetensors");
  ASSERT_EQ(want.tensors.size(), 4u);
  for (const auto& [name, t] : want.tensors) {
    ASSERT_TRUE(joined->tensors.contains(name)) << name;
    EXPECT_EQ(joined->tensors.at(name).shape, t.shape) << name;
    EXPECT_EQ(joined->tensors.at(name).data, t.data) << name;  // bitwise
  }
  const reference::Parameters outputs = ReadAll(Golden() + "/outputs.safetensors");
  std::vector<int32_t> tokens, targets;
  for (float x : outputs.at("tokens").data) tokens.push_back(static_cast<int32_t>(x));
  for (float x : outputs.at("targets").data) targets.push_back(static_cast<int32_t>(x));
  const std::vector<int64_t>& shape = outputs.at("tokens").shape;
  auto model = reference::ReferenceModel::Create(loaded->config, loaded->params);
  ASSERT_TRUE(model.ok()) << model.status();
  auto loss = model->Forward(tokens.data(), targets.data(), shape[0], shape[1]);
  ASSERT_TRUE(loss.ok()) << loss.status();
  const float golden = outputs.at("loss").data[0];
  EXPECT_NEAR(*loss, golden, 1e-5 * golden);
}

TEST(Mxfp4Test, AnyRangeDecodesAsThatPartOfTheWhole) {
  auto config = model::LoadModelConfig(Golden());
  ASSERT_TRUE(config.ok()) << config.status();
  const auto shapes = reference::ParameterShapes(*config);
  auto reader = TensorSetReader::Open(Golden(), "model", shapes, std::nullopt,
                                      model::FusedExpertTensors(*config));
  ASSERT_TRUE(reader.ok()) << reader.status();
  const std::string name = "model.layers.1.mlp.experts.2.gate_up_proj.weight";
  const io::TensorView& v = (*reader)->view(name);
  EXPECT_EQ(v.dtype, io::DType::kBF16);
  const int64_t n = v.num_elements();
  std::vector<float> whole(n);
  (*reader)->ReadF32(name, whole.data());
  for (const auto& [begin, count] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 1}, {5, 100}, {63, 64 * 33 + 7}, {n - 70, 70}, {1000, n - 1000}}) {
    std::vector<float> part(count);
    (*reader)->ReadF32(name, begin, count, part.data());
    EXPECT_EQ(part, std::vector<float>(whole.begin() + begin, whole.begin() + begin + count))
        << begin << "+" << count;
  }
}

// A copy of the golden checkpoint with `drop` left out and `reshape` given another shape.
std::string BrokenCopy(const std::string& name, const std::string& drop,
                       const std::string& reshape) {
  const std::string dir = ::testing::TempDir() + "/mxfp4_" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(Golden() + "/config.json", dir + "/config.json");
  auto file = io::SafetensorsFile::Open(Golden() + "/model.safetensors");
  EXPECT_TRUE(file.ok());
  std::vector<io::TensorToWrite> out;
  for (const io::TensorView& v : (*file)->tensors()) {
    if (v.name == drop) continue;
    io::TensorToWrite t{v.name, v.dtype, v.shape, v.data, v.nbytes};
    if (v.name == reshape) t.shape = {t.shape[0], t.shape[1] * t.shape[2] * t.shape[3]};
    out.push_back(t);
  }
  EXPECT_TRUE(io::WriteSafetensors(dir + "/model.safetensors", out, {{"format", "pt"}}).ok());
  return dir;
}

TEST(Mxfp4Test, MissingScalesOrMisshapenBlocksAreRefusedNamingThem) {
  const std::string fused = "model.layers.0.mlp.experts.down_proj";
  auto a = ReadModelDirectory(BrokenCopy("no_scales", fused + "_scales", ""));
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("missing " + fused + "_scales"), std::string::npos)
      << a.status();
  auto b = ReadModelDirectory(BrokenCopy("flat_blocks", "", fused + "_blocks"));
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find(fused + ": _blocks is U8"), std::string::npos)
      << b.status();
}

}  // namespace
}  // namespace mobius::checkpoint
