// bitsandbytes 4-bit checkpoints read directly (worker/checkpoint/bnb4bit.h, TensorSetReader),
// against checkpoints bitsandbytes itself wrote (test/reference/make_bnb4bit_golden.py): every
// quantised linear dequantises to bitsandbytes' own dequantize_4bit output bit for bit (after the
// bf16 rounding both apply), QLoRA's NF4 is handed over with the codes and scales our quantiser
// makes from the same bf16 weights, and malformed checkpoints are refused naming the tensor.
#include "worker/checkpoint/bnb4bit.h"

#include <cstdlib>
#include <cstring>
#include <functional>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/model/model_config_parse.h"
#include "common/numeric/bf16.h"
#include "common/numeric/nf4.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/checkpoint/model_init.h"
#include "worker/checkpoint/tensor_files.h"
#include "worker/io/safetensors.h"
#include "worker/reference/parameters.h"
#include "test/testing/paths.h"

namespace mobius::checkpoint {
namespace {

using ::testing::HasSubstr;

std::string Golden(const std::string& name) {
  return mobius::testing::SourcePath("test/reference/golden_bnb4bit/" + name);
}

TensorShapes Shapes(const std::string& dir) {
  auto config = model::LoadModelConfig(dir);
  EXPECT_TRUE(config.ok()) << config.status();
  return reference::ParameterShapes(*config);
}

std::vector<uint16_t> Bits(const io::TensorView& t) {
  std::vector<uint16_t> out(static_cast<size_t>(t.num_elements()));
  std::memcpy(out.data(), t.data, t.nbytes);
  return out;
}

std::vector<uint16_t> ReadAsBf16(const TensorSetReader& r, const std::string& name,
                                 int64_t numel) {
  std::vector<float> f(static_cast<size_t>(numel));
  r.ReadF32(name, f.data());
  std::vector<uint16_t> out(f.size());
  numeric::Fp32ToBf16(f.data(), out.data(), f.size());
  return out;
}

void CheckCase(const std::string& name, bool qlora) {
  SCOPED_TRACE(name);
  const std::string dir = Golden(name);
  auto reader = TensorSetReader::Open(dir, "model", Shapes(dir), std::nullopt);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->num_quantized(), 14);  // 7 linears x 2 layers
  auto dequantized = io::SafetensorsFile::Open(dir + "/dequantized.safetensors");
  auto original = io::SafetensorsFile::Open(Golden("original.safetensors"));
  ASSERT_TRUE(dequantized.ok() && original.ok());
  int quantized = 0;
  int64_t near_ties = 0, scale_codes = 0;
  for (const auto& [tensor, shape] : Shapes(dir)) {
    const io::TensorView* plain = (*original)->Find(tensor);
    ASSERT_NE(plain, nullptr) << tensor;
    const io::TensorView* bnb = (*dequantized)->Find(tensor);
    const Bnb4bitWeight* w = (*reader)->quantized(tensor);
    ASSERT_EQ(bnb != nullptr, w != nullptr) << tensor;
    const std::vector<uint16_t> got = ReadAsBf16(**reader, tensor, plain->num_elements());
    if (w == nullptr) {
      EXPECT_EQ(got, Bits(*plain)) << tensor;  // norms, embeddings, head: bf16 as stored
      continue;
    }
    ++quantized;
    EXPECT_EQ(w->quant_type, qlora ? "nf4" : "fp4");
    EXPECT_EQ(w->shape, shape);
    EXPECT_EQ(got, Bits(*bnb)) << tensor << ": not bitsandbytes' dequantize_4bit";
    // A slice starting inside a block reads the same values as the whole.
    const int64_t begin = 37, n = plain->num_elements() - 100;
    std::vector<float> part(static_cast<size_t>(n)), whole(plain->num_elements());
    (*reader)->ReadF32(tensor, begin, n, part.data());
    (*reader)->ReadF32(tensor, whole.data());
    EXPECT_EQ(0, std::memcmp(part.data(), whole.data() + begin, part.size() * sizeof(float)));
    // QLoRA's configuration is our NF4 tensor: the codes and scales our quantiser makes from
    // the original bf16 weight, bit for bit; others are not handed over.
    const std::optional<numeric::Nf4Tensor> nf4 = (*reader)->ReadNf4(tensor);
    ASSERT_EQ(nf4.has_value(), qlora) << tensor;
    if (!qlora) continue;
    // Dequantising the handed-over tensor (what the kernels compute) reads the same weight.
    std::vector<uint16_t> from_nf4(got.size());
    numeric::DequantizeNf4ToBf16(*nf4, from_nf4.data());
    EXPECT_EQ(from_nf4, got) << tensor;
    const std::vector<uint16_t> bits = Bits(*plain);
    const numeric::Nf4Tensor ours = numeric::QuantizeNf4(bits.data(), plain->num_elements());
    EXPECT_EQ(nf4->packed, ours.packed) << tensor;
    // The block scales' 8-bit codes: bitsandbytes 0.50's CPU quantiser finds the dynamic map's
    // nearest entry through a 65,536-bin table (csrc/cpu_ops.cpp, build_quantize_lut), so on a
    // near-tie it may take the neighbour; ours (and its CUDA kernel's search) takes the nearest.
    // Every difference must be such a neighbour, and rare.
    ASSERT_EQ(nf4->scale_codes.size(), ours.scale_codes.size()) << tensor;
    for (size_t b = 0; b < ours.scale_codes.size(); ++b) {
      const int d = int{nf4->scale_codes[b]} - int{ours.scale_codes[b]};
      EXPECT_LE(std::abs(d), 1) << tensor << " block " << b;
      near_ties += d != 0;
      scale_codes += 1;
    }
    ASSERT_EQ(nf4->scale_scales.size(), ours.scale_scales.size()) << tensor;
    EXPECT_EQ(0, std::memcmp(nf4->scale_scales.data(), ours.scale_scales.data(),
                             ours.scale_scales.size() * sizeof(float)))
        << tensor;
    EXPECT_EQ(0, std::memcmp(&nf4->scale_offset, &ours.scale_offset, sizeof(float))) << tensor;
  }
  EXPECT_EQ(quantized, 14);
  EXPECT_LE(near_ties * 200, scale_codes) << near_ties << " of " << scale_codes;
}

TEST(Bnb4bit, QloraCheckpointReadsAsBitsandbytesDequantizesIt) { CheckCase("nf4", true); }

TEST(Bnb4bit, Fp4WithPlainScalesReadsAsBitsandbytesDequantizesIt) {
  CheckCase("fp4_plain", false);
}

// The model loader (generate, export, the standalone trainer) takes a 4-bit checkpoint as the
// dequantised model; config.json's quantization_config does not get in the way.
TEST(Bnb4bit, ModelDirectoryLoadsDequantised) {
  auto loaded = ReadModelDirectory(Golden("nf4"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto dequantized = io::SafetensorsFile::Open(Golden("nf4/dequantized.safetensors"));
  ASSERT_TRUE(dequantized.ok());
  const std::string name = "model.layers.1.mlp.down_proj.weight";
  const reference::Tensor& t = loaded->params.tensors.at(name);
  std::vector<uint16_t> bits(t.data.size());
  numeric::Fp32ToBf16(t.data.data(), bits.data(), bits.size());
  EXPECT_EQ(bits, Bits(*(*dequantized)->Find(name)));
}

// A copy of the nf4 checkpoint with `edit` applied to its tensors, in a directory of its own.
struct Edited {
  std::string name;  // the tensor the edit touches
  std::function<void(std::vector<io::TensorToWrite>&, std::vector<std::vector<uint8_t>>&)> edit;
  std::string message;
};

std::string WriteEdited(const std::string& tag, const Edited& e) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / ("bnb_" + tag);
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(Golden("nf4/config.json"), dir / "config.json",
                             std::filesystem::copy_options::overwrite_existing);
  auto file = io::SafetensorsFile::Open(Golden("nf4/model.safetensors"));
  EXPECT_TRUE(file.ok());
  std::vector<io::TensorToWrite> tensors;
  for (const io::TensorView& t : (*file)->tensors()) {
    tensors.push_back({t.name, t.dtype, t.shape, t.data, t.nbytes});
  }
  std::vector<std::vector<uint8_t>> keep;
  keep.reserve(8);
  e.edit(tensors, keep);
  EXPECT_TRUE(io::WriteSafetensors((dir / "model.safetensors").string(), tensors).ok());
  return dir.string();
}

io::TensorToWrite* Named(std::vector<io::TensorToWrite>& ts, const std::string& name) {
  for (io::TensorToWrite& t : ts) {
    if (t.name == name) return &t;
  }
  ADD_FAILURE() << name;
  return nullptr;
}

TEST(Bnb4bit, MalformedCheckpointsAreRefusedNamingTheTensor) {
  const std::string w = "model.layers.0.self_attn.q_proj.weight";
  const std::string state = w + ".quant_state.bitsandbytes__nf4";
  auto set_state = [state](std::string json) {
    return [state, json](std::vector<io::TensorToWrite>& ts, std::vector<std::vector<uint8_t>>& keep) {
      keep.emplace_back(json.begin(), json.end());
      io::TensorToWrite* t = Named(ts, state);
      t->data = keep.back().data(), t->nbytes = keep.back().size();
      t->shape = {static_cast<int64_t>(keep.back().size())};
    };
  };
  const Edited cases[] = {
      {"missing absmax",
       [w](auto& ts, auto&) {
         std::erase_if(ts, [&](const io::TensorToWrite& t) { return t.name == w + ".absmax"; });
       },
       "missing " + w + ".absmax"},
      {"bad json", set_state("{not json"), "quant state is not a JSON object"},
      {"wrong shape",
       set_state(R"({"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [32, 128],)"
                 R"( "nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": 0.01})"),
       "its shape is [32, 128], expected [64, 64]"},
      {"blocksize",
       set_state(R"({"quant_type": "nf4", "blocksize": 48, "dtype": "bfloat16", "shape": [64, 64],)"
                 R"( "nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": 0.01})"),
       "blocksize 48 is not a positive power of two"},
      {"no offset",
       set_state(R"({"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [64, 64],)"
                 R"( "nested_blocksize": 256, "nested_dtype": "float32"})"),
       "\"nested_offset\" is missing"},
      {"short codes",
       [w](auto& ts, auto&) {
         io::TensorToWrite* t = Named(ts, w);
         t->shape = {100, 1}, t->nbytes = 100;
       },
       "the packed codes are 100 bytes, expected 2048"},
      {"u8 without state",
       [state](auto& ts, auto&) {
         std::erase_if(ts, [&](const io::TensorToWrite& t) { return t.name == state; });
       },
       "is U8 without a bitsandbytes quant state"},
  };
  int i = 0;
  for (const Edited& c : cases) {
    const std::string dir = WriteEdited(std::to_string(i++), c);
    auto r = TensorSetReader::Open(dir, "model", Shapes(dir), std::nullopt);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(r.status().message(), HasSubstr(c.message)) << c.name;
    EXPECT_THAT(r.status().message(), HasSubstr("model.safetensors")) << c.name;
  }
  // A stray companion of a weight that is not quantised is an unexpected tensor, as any other.
  const std::string dir = WriteEdited("stray", {"stray", [](auto& ts, auto& keep) {
    keep.push_back(std::vector<uint8_t>(64, 0));
    ts.push_back({"model.norm.weight.absmax", io::DType::kU8, {64}, keep.back().data(), 64});
  }, ""});
  auto r = TensorSetReader::Open(dir, "model", Shapes(dir), std::nullopt);
  EXPECT_THAT(r.status().message(), HasSubstr("unexpected tensor model.norm.weight.absmax"));
  // A reader that requires fp32 (checkpoints' masters) does not take a 4-bit weight.
  auto f32 = TensorSetReader::Open(Golden("nf4"), "model", Shapes(Golden("nf4")), io::DType::kF32);
  EXPECT_EQ(f32.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mobius::checkpoint
