// Round trips through WriteSafetensors / SafetensorsFile::Open, atomic replacement, writer
// validation, and exact fp32 widening of bf16/f16 special values.
#include "worker/io/safetensors.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
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

namespace mobius::io {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "/safetensors_test.XXXXXX";
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  const std::string& path() const { return path_; }
  std::vector<std::string> Entries() const {
    std::vector<std::string> out;
    DIR* d = opendir(path_.c_str());
    while (dirent* e = readdir(d)) {
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") out.push_back(e->d_name);
    }
    closedir(d);
    return out;
  }

 private:
  std::string path_;
};

template <typename T>
TensorToWrite Tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                     const std::vector<T>& values) {
  return {name, dtype, std::move(shape), values.data(), values.size() * sizeof(T)};
}

std::vector<uint8_t> Bytes(const TensorView& v) {
  const auto* p = static_cast<const uint8_t*>(v.data);
  return std::vector<uint8_t>(p, p + v.nbytes);
}

TEST(SafetensorsRoundTrip, AllDTypesScalarsEmptyAndMetadata) {
  TempDir dir;
  const std::string path = dir.path() + "/m.safetensors";
  const std::vector<float> f32 = {1.0f, -2.5f, 3.0f, 1e-30f, 0.0f, -7.0f};
  const std::vector<uint16_t> bf16 = {0x3f80, 0xc000, 0x7f80};
  const std::vector<uint16_t> f16 = {0x3c00, 0x0001, 0xfc00, 0x7e00, 0x3555};
  const std::vector<float> scalar = {42.5f};
  const std::vector<uint16_t> none;
  ASSERT_TRUE(
      WriteSafetensors(
          path,
          {Tensor("z.f32", DType::kF32, {2, 3}, f32), Tensor("a.bf16", DType::kBF16, {3}, bf16),
           Tensor("m.f16", DType::kF16, {5, 1}, f16), Tensor("scalar", DType::kF32, {}, scalar),
           Tensor("empty", DType::kBF16, {0, 4}, none)},
          {{"format", "pt"}, {"step", "12"}})
          .ok());
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  std::vector<std::string> names;
  for (const TensorView& t : (*file)->tensors()) names.push_back(t.name);
  // File order == name order for our writer (the empty tensor shares its offset).
  EXPECT_THAT(names, ElementsAre("a.bf16", "empty", "m.f16", "scalar", "z.f32"));
  EXPECT_THAT((*file)->metadata(),
              ElementsAre(std::pair<const std::string, std::string>("format", "pt"),
                          std::pair<const std::string, std::string>("step", "12")));

  const TensorView* t = (*file)->Find("z.f32");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dtype, DType::kF32);
  EXPECT_THAT(t->shape, ElementsAre(2, 3));
  EXPECT_EQ(t->num_elements(), 6);
  std::vector<float> out(6);
  CopyToF32(*t, out.data());
  EXPECT_EQ(out, f32);

  t = (*file)->Find("a.bf16");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dtype, DType::kBF16);
  EXPECT_EQ(Bytes(*t), std::vector<uint8_t>({0x80, 0x3f, 0x00, 0xc0, 0x80, 0x7f}));

  t = (*file)->Find("m.f16");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dtype, DType::kF16);
  EXPECT_THAT(t->shape, ElementsAre(5, 1));
  ASSERT_EQ(t->nbytes, 10u);
  EXPECT_EQ(std::memcmp(t->data, f16.data(), 10), 0);

  t = (*file)->Find("scalar");
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->shape, IsEmpty());
  EXPECT_EQ(t->num_elements(), 1);
  float s = 0;
  CopyToF32(*t, &s);
  EXPECT_EQ(s, 42.5f);

  t = (*file)->Find("empty");
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->shape, ElementsAre(0, 4));
  EXPECT_EQ(t->nbytes, 0u);
  EXPECT_EQ(t->num_elements(), 0);

  EXPECT_EQ((*file)->Find("missing"), nullptr);
}

TEST(SafetensorsRoundTrip, HeaderIsPaddedToEightBytesAndEmptyFileWorks) {
  TempDir dir;
  const std::string path = dir.path() + "/empty.safetensors";
  ASSERT_TRUE(WriteSafetensors(path, {}).ok());
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes, std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT((*file)->tensors(), IsEmpty());
  EXPECT_THAT((*file)->metadata(), IsEmpty());
}

TEST(SafetensorsWrite, ReplacesExistingFileAndLeavesNoTempFile) {
  TempDir dir;
  const std::string path = dir.path() + "/m.safetensors";
  const std::vector<float> one = {1.0f}, two = {2.0f, 3.0f};
  ASSERT_TRUE(WriteSafetensors(path, {Tensor("x", DType::kF32, {1}, one)}).ok());
  ASSERT_TRUE(WriteSafetensors(path, {Tensor("y", DType::kF32, {2}, two)}).ok());
  EXPECT_THAT(dir.Entries(), ElementsAre("m.safetensors"));
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->Find("x"), nullptr);
  ASSERT_NE((*file)->Find("y"), nullptr);
}

TEST(SafetensorsWrite, FailureRemovesTempFileAndKeepsTarget) {
  TempDir dir;
  // The target is a non-empty directory: rename() fails after the temp file was written.
  const std::string path = dir.path() + "/target";
  ASSERT_EQ(mkdir(path.c_str(), 0755), 0);
  ASSERT_EQ(mkdir((path + "/keep").c_str(), 0755), 0);
  const std::vector<float> one = {1.0f};
  absl::Status status = WriteSafetensors(path, {Tensor("x", DType::kF32, {1}, one)});
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr("renaming"));
  EXPECT_THAT(dir.Entries(), ElementsAre("target"));
}

TEST(SafetensorsWrite, MissingDirectoryIsNotFound) {
  TempDir dir;
  const std::vector<float> one = {1.0f};
  absl::Status status =
      WriteSafetensors(dir.path() + "/no/such/m.safetensors", {Tensor("x", DType::kF32, {1}, one)});
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
}

TEST(SafetensorsWrite, RejectsInvalidTensors) {
  TempDir dir;
  const std::string path = dir.path() + "/m.safetensors";
  const std::vector<float> two = {1.0f, 2.0f};
  struct Case {
    std::vector<TensorToWrite> tensors;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{Tensor("x", DType::kF32, {2}, two), Tensor("x", DType::kF32, {2}, two)}, "duplicate"},
      {{Tensor("x", DType::kF32, {3}, two)}, "nbytes 8 != shape [3]"},
      {{Tensor("x", DType::kBF16, {2}, two)}, "nbytes 8 != shape [2]"},
      {{Tensor("x", DType::kF32, {-1, -2}, two)}, "negative"},
      {{Tensor("__metadata__", DType::kF32, {2}, two)}, "reserved"},
      {{TensorToWrite{"x", DType::kF32, {2}, nullptr, 8}}, "null"},
      {{Tensor("bad\xff", DType::kF32, {2}, two)}, "UTF-8"},
  };
  for (const Case& c : cases) {
    absl::Status status = WriteSafetensors(path, c.tensors);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message));
  }
  EXPECT_THAT(dir.Entries(), IsEmpty());
}

TEST(SafetensorsOpen, FileErrors) {
  TempDir dir;
  auto missing = SafetensorsFile::Open(dir.path() + "/nope.safetensors");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("nope.safetensors"));
  auto directory = SafetensorsFile::Open(dir.path());
  EXPECT_EQ(directory.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(directory.status().message()), HasSubstr("not a regular file"));
  const std::string empty = dir.path() + "/empty.safetensors";
  std::ofstream(empty).close();
  auto empty_file = SafetensorsFile::Open(empty);
  EXPECT_EQ(empty_file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(empty_file.status().message()), HasSubstr("too short"));
}

float Widen(DType dtype, uint16_t bits) {
  TensorView view;
  view.dtype = dtype;
  view.shape = {1};
  view.data = &bits;
  view.nbytes = 2;
  float out;
  CopyToF32(view, &out);
  return out;
}

uint32_t BitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(CopyToF32, BFloat16IsAShift) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    ASSERT_EQ(BitsOf(Widen(DType::kBF16, static_cast<uint16_t>(h))), h << 16) << h;
  }
  EXPECT_EQ(Widen(DType::kBF16, 0x3f80), 1.0f);
  EXPECT_EQ(Widen(DType::kBF16, 0xff80), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(Widen(DType::kBF16, 0x7fc1)));
  EXPECT_EQ(Widen(DType::kBF16, 0x0001), std::ldexp(1.0f, -133));  // bf16 subnormal
}

TEST(CopyToF32, Float16SpecialValues) {
  EXPECT_EQ(Widen(DType::kF16, 0x3c00), 1.0f);
  EXPECT_EQ(Widen(DType::kF16, 0xc000), -2.0f);
  EXPECT_EQ(Widen(DType::kF16, 0x7bff), 65504.0f);                  // largest finite
  EXPECT_EQ(Widen(DType::kF16, 0x0400), std::ldexp(1.0f, -14));     // smallest normal
  EXPECT_EQ(Widen(DType::kF16, 0x0001), std::ldexp(1.0f, -24));     // smallest subnormal
  EXPECT_EQ(Widen(DType::kF16, 0x03ff), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(Widen(DType::kF16, 0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(BitsOf(Widen(DType::kF16, 0x8000)), 0x80000000u);  // -0
  EXPECT_EQ(BitsOf(Widen(DType::kF16, 0x0000)), 0u);
  EXPECT_EQ(Widen(DType::kF16, 0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(Widen(DType::kF16, 0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(BitsOf(Widen(DType::kF16, 0x7e00)), 0x7fc00000u);  // quiet NaN
  EXPECT_EQ(BitsOf(Widen(DType::kF16, 0xfd01)), 0xffa02000u);  // signalling NaN keeps payload
}

TEST(CopyToF32, Float16AllFiniteValuesMatchArithmetic) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    if (exponent == 0x1f) continue;
    const double magnitude =
        exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, int(exponent) - 25);
    const double expected = (h & 0x8000) ? -magnitude : magnitude;
    ASSERT_EQ(Widen(DType::kF16, static_cast<uint16_t>(h)), static_cast<float>(expected)) << h;
  }
}

TEST(CopyToF32, UnalignedSource) {
  alignas(8) uint8_t buffer[13] = {};
  const float values[3] = {1.5f, -2.0f, 1e10f};
  std::memcpy(buffer + 1, values, sizeof values);
  TensorView view;
  view.dtype = DType::kF32;
  view.shape = {3};
  view.data = buffer + 1;
  view.nbytes = 12;
  float out[3];
  CopyToF32(view, out);
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[2], 1e10f);
}

TEST(DType, NamesAndSizes) {
  EXPECT_STREQ(DTypeName(DType::kF32), "F32");
  EXPECT_STREQ(DTypeName(DType::kBF16), "BF16");
  EXPECT_STREQ(DTypeName(DType::kF16), "F16");
  EXPECT_EQ(DTypeSize(DType::kF32), 4u);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kF16), 2u);
}

}  // namespace
}  // namespace mobius::io
