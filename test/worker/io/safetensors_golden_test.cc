// Files written by the reference implementation (Python `safetensors`, see
// test/data/safetensors/make_golden.py): exact values, byte-identical output of our writer, the
// sharded and single-file model directories, and the malformed corpus.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/paths.h"
#include "worker/io/safetensors.h"

namespace mobius::io {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string Fixture(const std::string& name) {
  return mobius::testing::SourcePath("test/data/safetensors/" + name);
}

std::vector<float> ToF32(const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.num_elements()));
  CopyToF32(t, out.data());
  return out;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(SafetensorsGolden, ReadsReferenceFileExactly) {
  auto file = SafetensorsFile::Open(Fixture("golden.safetensors"));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT((*file)->metadata(),
              ElementsAre(std::pair<const std::string, std::string>("format", "pt")));
  std::vector<std::string> names;
  for (const TensorView& t : (*file)->tensors()) names.push_back(t.name);
  // File order as the reference writer lays it out (by dtype, then name).
  EXPECT_THAT(names, ElementsAre("f32", "scalar", "bf16", "empty", "f16"));

  const TensorView* f32 = (*file)->Find("f32");
  ASSERT_NE(f32, nullptr);
  EXPECT_EQ(f32->dtype, DType::kF32);
  EXPECT_THAT(f32->shape, ElementsAre(2, 3));
  EXPECT_THAT(ToF32(*f32), ElementsAre(1.0f, -2.5f, 3.25f, 0.0f, -0.0f, 1e-3f));
  EXPECT_TRUE(std::signbit(ToF32(*f32)[4]));

  const TensorView* f16 = (*file)->Find("f16");
  ASSERT_NE(f16, nullptr);
  EXPECT_EQ(f16->dtype, DType::kF16);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_THAT(ToF32(*f16), ElementsAre(1.0f, -2.0f, 0.5f, 65504.0f, std::ldexp(1.0f, -14),
                                       std::ldexp(1.0f, -24), inf, -inf));

  const TensorView* bf16 = (*file)->Find("bf16");
  ASSERT_NE(bf16, nullptr);
  EXPECT_EQ(bf16->dtype, DType::kBF16);
  EXPECT_THAT(ToF32(*bf16), ElementsAre(1.0f, -2.0f, 3.140625f, 1.5f * std::ldexp(1.0f, 100), -0.0f,
                                        std::ldexp(1.0f, -130)));

  const TensorView* scalar = (*file)->Find("scalar");
  ASSERT_NE(scalar, nullptr);
  EXPECT_THAT(scalar->shape, IsEmpty());
  EXPECT_THAT(ToF32(*scalar), ElementsAre(42.5f));

  const TensorView* empty = (*file)->Find("empty");
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(empty->dtype, DType::kF16);
  EXPECT_THAT(empty->shape, ElementsAre(0, 3));
  EXPECT_EQ(empty->nbytes, 0u);
}

TEST(SafetensorsGolden, WriterMatchesReferenceBytes) {
  const std::string golden = Fixture("golden_f32.safetensors");
  auto file = SafetensorsFile::Open(golden);
  ASSERT_TRUE(file.ok()) << file.status();
  std::vector<TensorToWrite> tensors;
  for (const TensorView& t : (*file)->tensors()) {
    tensors.push_back({t.name, t.dtype, t.shape, t.data, t.nbytes});
  }
  const std::string out =
      ::testing::TempDir() + "/golden_f32_rewritten." + std::to_string(getpid()) + ".safetensors";
  ASSERT_TRUE(WriteSafetensors(out, tensors, (*file)->metadata()).ok());
  EXPECT_EQ(ReadAll(out), ReadAll(golden));
  std::remove(out.c_str());
}

TEST(SafetensorsModel, ShardedDirectory) {
  auto model = SafetensorsModel::Open(Fixture("sharded"));
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_THAT((*model)->names(),
              ElementsAre("embed.weight", "layer.0.w", "layer.1.w", "lm_head.weight"));
  const TensorView* embed = (*model)->Find("embed.weight");
  ASSERT_NE(embed, nullptr);
  EXPECT_THAT(embed->shape, ElementsAre(2, 2));
  EXPECT_THAT(ToF32(*embed), ElementsAre(0.0f, 1.0f, 2.0f, 3.0f));
  const TensorView* w0 = (*model)->Find("layer.0.w");
  ASSERT_NE(w0, nullptr);
  EXPECT_EQ(w0->dtype, DType::kF16);
  EXPECT_THAT(ToF32(*w0), ElementsAre(1.5f, -1.5f));
  const TensorView* w1 = (*model)->Find("layer.1.w");
  ASSERT_NE(w1, nullptr);
  EXPECT_THAT(ToF32(*w1), ElementsAre(2.0f, 4.0f, 8.0f));
  EXPECT_EQ((*model)->Find("nope"), nullptr);
}

TEST(SafetensorsModel, SingleFileDirectory) {
  auto model = SafetensorsModel::Open(Fixture("single"));
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_THAT((*model)->names(), ElementsAre("w"));
  ASSERT_NE((*model)->Find("w"), nullptr);
  EXPECT_THAT(ToF32(*(*model)->Find("w")), ElementsAre(1.0f, 2.0f));
}

TEST(SafetensorsModel, DirectoryWithoutModelFiles) {
  auto model = SafetensorsModel::Open(Fixture("bad"));
  EXPECT_EQ(model.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(model.status().message()), HasSubstr("has neither model.safetensors"));
  auto missing = SafetensorsModel::Open(Fixture("no_such_dir"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

struct BadCase {
  const char* file;
  const char* message;
};

class SafetensorsBadFile : public ::testing::TestWithParam<BadCase> {};

TEST_P(SafetensorsBadFile, IsRejectedWithInvalidArgument) {
  const std::string path = Fixture(std::string("bad/") + GetParam().file);
  auto file = SafetensorsFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << file.status();
  EXPECT_THAT(std::string(file.status().message()), HasSubstr(GetParam().message));
  EXPECT_THAT(std::string(file.status().message()), HasSubstr(path));
}

INSTANTIATE_TEST_SUITE_P(
    Corpus, SafetensorsBadFile,
    ::testing::Values(
        BadCase{"too_short.safetensors", "too short for the 8-byte header length"},
        BadCase{"header_len_too_big.safetensors", "header length 1099511627776 exceeds the limit"},
        BadCase{"header_len_past_end.safetensors", "runs past the end of the file"},
        BadCase{"truncated_data.safetensors",
                "tensor \"t\": data_offsets [0, 8] out of range: the data section has 5 bytes"},
        BadCase{"bad_json.safetensors", "header is not valid JSON"},
        BadCase{"not_object.safetensors", "header is not a JSON object"},
        BadCase{"unknown_dtype.safetensors", "tensor \"t\": unsupported dtype \"I64\""},
        BadCase{"overlapping_offsets.safetensors",
                "overlapping data_offsets: tensor \"a\" [0, 8] and tensor \"b\" [4, 12]"},
        BadCase{"out_of_range_offsets.safetensors",
                "tensor \"t\": data_offsets [0, 16] out of range"},
        BadCase{"begin_after_end.safetensors", "tensor \"t\": data_offsets [8, 4] has begin > end"},
        BadCase{"shape_size_mismatch.safetensors",
                "tensor \"t\": shape/size mismatch: shape [3] x F32 needs 12 bytes"},
        BadCase{"negative_shape.safetensors", "tensor \"t\": shape[0] = -2 is negative"},
        BadCase{"shape_overflow.safetensors", "needs more than 2^64 bytes"},
        BadCase{"missing_data_offsets.safetensors", "tensor \"t\": missing \"data_offsets\""},
        BadCase{"bad_metadata.safetensors", "\"__metadata__\" value for \"k\" is not a string"}));

class SafetensorsBadModel : public ::testing::TestWithParam<BadCase> {};

TEST_P(SafetensorsBadModel, IsRejectedWithInvalidArgument) {
  auto model = SafetensorsModel::Open(Fixture(std::string("bad/") + GetParam().file));
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument) << model.status();
  EXPECT_THAT(std::string(model.status().message()), HasSubstr(GetParam().message));
  EXPECT_THAT(std::string(model.status().message()), HasSubstr("model.safetensors.index.json"));
}

INSTANTIATE_TEST_SUITE_P(
    Corpus, SafetensorsBadModel,
    ::testing::Values(
        BadCase{"index_missing_shard",
                "tensor \"v\" is in shard \"shard2.safetensors\", which does not exist"},
        BadCase{"index_parent_path",
                "shard \"../single/model.safetensors\" is not a plain file name"},
        BadCase{"index_tensor_not_in_shard",
                "tensor \"missing\" is not in its shard \"shard1.safetensors\""}));

}  // namespace
}  // namespace mobius::io
