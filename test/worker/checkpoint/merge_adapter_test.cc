// Merging a PEFT LoRA adapter into its base model (merge_adapter.h), checked against PEFT itself:
// test/reference/golden_lora/<case>/merged.safetensors is PEFT 0.10's merge_and_unload of the
// case's final_adapter.safetensors over test/reference/golden/<base>/, in fp32
// (make_lora_golden.py).
//
// Tolerance: max |ours - PEFT| <= 1e-6 per element. Both compute W + (B @ A) * scaling in fp32 from
// the same fp32 inputs; the only freedom is how torch's GEMM orders (or fuses) the r = 4 products
// of each element of B @ A, an ulp or two of a delta that is below 1 here (~1e-7). Measured: 0 on
// all four cases (our sum over r in order rounds as torch's did).
//
// Also: bf16 output is the fp32 merge rounded to nearest even, element for element; "auto" keeps
// a BF16 or F16 base's dtype (unchanged tensors bit for bit); sharded bases and outputs; the
// tokenizer and generation_config.json copies; every refusal names the file and the tensor and
// leaves nothing behind. And TensorSetWriter writes WriteTensorSet's bytes.
#include "worker/checkpoint/merge_adapter.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/numeric/bf16.h"
#include "common/numeric/f16.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/paths.h"
#include "test/worker/checkpoint/test_util.h"
#include "worker/checkpoint/adapter_config.h"
#include "worker/checkpoint/tensor_files.h"
#include "worker/checkpoint/tensor_set_writer.h"
#include "worker/io/safetensors.h"

namespace mobius::checkpoint {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Json = nlohmann::ordered_json;
using testing::ReadAll;
using testing::TempDir;
using testing::WriteAll;

constexpr double kTolerance = 1e-6;  // see the header comment

struct Values {
  io::DType dtype = io::DType::kF32;
  std::vector<int64_t> shape;
  std::vector<float> data;
  std::string bytes;  // as stored
};
using Tensors = std::map<std::string, Values>;

Values FromView(const io::TensorView& t) {
  Values v{t.dtype, t.shape, std::vector<float>(t.num_elements()), {}};
  io::CopyToF32(t, v.data.data());
  v.bytes.assign(static_cast<const char*>(t.data), t.nbytes);
  return v;
}

Tensors ReadFile(const std::string& path) {
  Tensors out;
  auto f = io::SafetensorsFile::Open(path);
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return out;
  for (const io::TensorView& t : (*f)->tensors()) out[t.name] = FromView(t);
  return out;
}

Tensors ReadModel(const std::string& dir) {
  Tensors out;
  auto m = io::SafetensorsModel::Open(dir);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return out;
  for (const std::string& name : (*m)->names()) out[name] = FromView(*(*m)->Find(name));
  return out;
}

// Writes `tensors` converted to `dtype` (F32, BF16 or F16).
void WriteTensors(const std::string& path, const Tensors& tensors, io::DType dtype) {
  std::vector<io::TensorToWrite> out;
  std::vector<std::vector<uint16_t>> narrow;
  narrow.reserve(tensors.size());
  for (const auto& [name, v] : tensors) {
    io::TensorToWrite w{name, dtype, v.shape, v.data.data(), v.data.size() * sizeof(float)};
    if (dtype != io::DType::kF32) {
      narrow.emplace_back(v.data.size());
      for (size_t i = 0; i < v.data.size(); ++i) {
        narrow.back()[i] = dtype == io::DType::kBF16 ? numeric::Fp32ToBf16(v.data[i])
                                                     : numeric::Fp32ToF16(v.data[i]);
      }
      w.data = narrow.back().data();
      w.nbytes = v.data.size() * sizeof(uint16_t);
    }
    out.push_back(std::move(w));
  }
  ASSERT_TRUE(io::WriteSafetensors(path, out, {{"format", "pt"}}).ok()) << path;
}

std::string GoldenLora(const std::string& c) {
  return mobius::testing::SourcePath("test/reference/golden_lora/" + c);
}
std::string BaseOf(const std::string& c) {
  return mobius::testing::SourcePath(
      std::string("test/reference/golden/") + (c.rfind("gpt2", 0) == 0 ? "gpt2" : "llama_gqa"));
}

// An adapter directory as PEFT's save_pretrained leaves it after training: the case's
// adapter_config.json (base_model_name_or_path made absolute, then `edit`) and the trained
// adapter as adapter_model.safetensors (or `tensors` when given).
std::string MakeAdapter(const TempDir& tmp, const std::string& c,
                        const std::function<void(Json&)>& edit = {},
                        const Tensors* tensors = nullptr, const std::string& name = "adapter") {
  const std::string dir = tmp / name;
  fs::create_directories(dir);
  Json config = Json::parse(ReadAll(GoldenLora(c) + "/adapter_config.json"));
  config["base_model_name_or_path"] = BaseOf(c);
  if (edit) edit(config);
  WriteAll(dir + "/adapter_config.json", config.dump(2));
  if (tensors != nullptr) {
    WriteTensors(dir + "/adapter_model.safetensors", *tensors, io::DType::kF32);
  } else {
    fs::copy_file(GoldenLora(c) + "/final_adapter.safetensors", dir + "/adapter_model.safetensors");
  }
  return dir;
}

// A copy of a golden base (config.json + model.safetensors only) with its tensors in `dtype`.
std::string MakeBase(const TempDir& tmp, const std::string& c, io::DType dtype,
                     const std::string& name = "base") {
  const std::string dir = tmp / name;
  fs::create_directories(dir);
  fs::copy_file(BaseOf(c) + "/config.json", dir + "/config.json");
  WriteTensors(dir + "/model.safetensors", ReadFile(BaseOf(c) + "/model.safetensors"), dtype);
  return dir;
}

absl::StatusOr<MergeAdapterSummary> Merge(const std::string& adapter, const std::string& out,
                                          std::optional<io::DType> dtype,
                                          const std::string& base = "",
                                          int64_t max_shard_bytes = kDefaultMaxShardBytes) {
  MergeAdapterOptions o;
  o.adapter_dir = adapter;
  o.out_dir = out;
  o.base_dir = base;
  o.dtype = dtype;
  o.max_shard_bytes = max_shard_bytes;
  return MergeAdapter(o);
}

double MaxAbsDiff(const Values& a, const Values& b) {
  double worst = 0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(a.data[i]) - b.data[i]));
  }
  return worst;
}

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

// --- against PEFT ---------------------------------------------------------------------------

class GoldenMerge : public ::testing::TestWithParam<const char*> {};

TEST_P(GoldenMerge, MatchesPeftMergeAndUnload) {
  const std::string c = GetParam();
  TempDir tmp;
  const std::string adapter = MakeAdapter(tmp, c);
  auto summary = Merge(adapter, tmp / "merged", io::DType::kF32);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->base_dir, BaseOf(c));
  EXPECT_EQ(summary->scaling, 2.0);
  EXPECT_THAT(Entries(tmp / "merged"),
              ::testing::ElementsAre("config.json", "model.safetensors"));
  EXPECT_EQ(ReadAll(tmp / "merged/config.json"), ReadAll(BaseOf(c) + "/config.json"));

  const Tensors got = ReadModel(tmp / "merged");
  const Tensors peft = ReadFile(GoldenLora(c) + "/merged.safetensors");
  const Tensors base = ReadFile(BaseOf(c) + "/model.safetensors");
  ASSERT_EQ(got.size(), peft.size());
  double worst = 0;
  int changed = 0;
  for (const auto& [name, want] : peft) {
    ASSERT_TRUE(got.contains(name)) << name;
    const Values& v = got.at(name);
    ASSERT_EQ(v.dtype, io::DType::kF32) << name;
    ASSERT_EQ(v.shape, want.shape) << name;
    const double diff = MaxAbsDiff(v, want);
    EXPECT_LE(diff, kTolerance) << c << " " << name;
    worst = std::max(worst, diff);
    if (v.bytes != base.at(name).bytes) {
      ++changed;
    }
  }
  EXPECT_EQ(changed, summary->merged_modules) << "only adapted weights change";
  std::printf("%s: %lld tensors, %lld merged, max |ours - PEFT| = %.3g\n", c.c_str(),
              static_cast<long long>(summary->tensors),
              static_cast<long long>(summary->merged_modules), worst);
}

INSTANTIATE_TEST_SUITE_P(AllCases, GoldenMerge,
                         ::testing::Values("gpt2", "gpt2_c_attn", "llama_gqa", "llama_gqa_qv"));

TEST(MergeAdapterTest, BaseFlagOverridesTheConfigsPath) {
  TempDir tmp;
  const std::string adapter = MakeAdapter(tmp, "llama_gqa_qv", [](Json& j) {
    j["base_model_name_or_path"] = "meta-llama/Llama-3.1-8B";  // a Hub name: not a directory
  });
  auto missing = Merge(adapter, tmp / "a", io::DType::kF32);
  ASSERT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_THAT(missing.status().message(), HasSubstr("meta-llama/Llama-3.1-8B"));
  EXPECT_THAT(missing.status().message(), HasSubstr("--base"));
  auto merged = Merge(adapter, tmp / "b", io::DType::kF32, BaseOf("llama_gqa_qv"));
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(ReadModel(tmp / "b").at("model.layers.1.self_attn.q_proj.weight").bytes,
            ReadFile(GoldenLora("llama_gqa_qv") + "/merged.safetensors")
                .at("model.layers.1.self_attn.q_proj.weight")
                .bytes);
}

// --- dtypes ---------------------------------------------------------------------------------

// A bitsandbytes QLoRA base (test/reference/golden_bnb4bit/nf4, written by bitsandbytes) merges
// exactly as the bf16 directory of its dequantised weights does (bitsandbytes' dequantize_4bit),
// without the 4-bit companions and without quantization_config, and says so.
TEST(MergeAdapterTest, BitsandbytesBaseMergesAsItsDequantisedWeights) {
  TempDir tmp;
  const std::string bnb = mobius::testing::SourcePath("test/reference/golden_bnb4bit/nf4");
  // The dequantised base: the original tensors with every linear as bitsandbytes dequantises it.
  const std::string plain = tmp / "plain";
  fs::create_directories(plain);
  Json config = Json::parse(ReadAll(bnb + "/config.json"));
  config.erase("quantization_config");
  WriteAll(plain + "/config.json", config.dump(2));
  Tensors base = ReadFile(mobius::testing::SourcePath(
      "test/reference/golden_bnb4bit/original.safetensors"));
  for (auto& [name, v] : ReadFile(bnb + "/dequantized.safetensors")) base[name] = v;
  WriteTensors(plain + "/model.safetensors", base, io::DType::kBF16);
  // An adapter on q_proj and v_proj of both layers (r = 4), seeded values.
  Tensors adapter;
  uint32_t seed = 7;
  auto next = [&] { return (seed = seed * 1664525u + 1013904223u) / 4294967296.0f - 0.5f; };
  for (int layer = 0; layer < 2; ++layer) {
    for (const auto& [module, out] : {std::pair<std::string, int64_t>{"q_proj", 64}, {"v_proj", 32}}) {
      const std::string prefix = "base_model.model.model.layers." + std::to_string(layer) +
                                 ".self_attn." + module;
      Values a{io::DType::kF32, {4, 64}, std::vector<float>(256), {}};
      Values b{io::DType::kF32, {out, 4}, std::vector<float>(out * 4), {}};
      for (float& x : a.data) x = next();
      for (float& x : b.data) x = 0.1f * next();
      adapter[prefix + ".lora_A.weight"] = a;
      adapter[prefix + ".lora_B.weight"] = b;
    }
  }
  const std::string dir = MakeAdapter(
      tmp, "llama_gqa_qv", [&](Json& c) { c["base_model_name_or_path"] = bnb; }, &adapter);
  auto from_bnb = Merge(dir, tmp / "from_bnb", std::nullopt, bnb);
  ASSERT_TRUE(from_bnb.ok()) << from_bnb.status();
  auto from_plain = Merge(dir, tmp / "from_plain", io::DType::kBF16, plain);
  ASSERT_TRUE(from_plain.ok()) << from_plain.status();
  EXPECT_EQ(from_bnb->merged_modules, 4);
  ASSERT_EQ(from_bnb->warnings.size(), 1u);
  EXPECT_THAT(from_bnb->warnings[0], HasSubstr("bitsandbytes 4-bit checkpoint: its 14 quantised"));
  const Tensors got = ReadModel(tmp / "from_bnb"), want = ReadModel(tmp / "from_plain");
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, v] : want) {
    ASSERT_TRUE(got.contains(name)) << name;
    EXPECT_EQ(got.at(name).dtype, io::DType::kBF16) << name;
    EXPECT_EQ(got.at(name).shape, v.shape) << name;
    EXPECT_TRUE(got.at(name).bytes == v.bytes) << name;
  }
  EXPECT_FALSE(Json::parse(ReadAll(tmp / "from_bnb" + "/config.json")).contains("quantization_config"));
}

TEST(MergeAdapterTest, Bf16IsTheFp32MergeRoundedToNearestEven) {
  TempDir tmp;
  const std::string adapter = MakeAdapter(tmp, "gpt2");
  ASSERT_TRUE(Merge(adapter, tmp / "fp32", io::DType::kF32).ok());
  auto summary = Merge(adapter, tmp / "bf16", io::DType::kBF16);
  ASSERT_TRUE(summary.ok()) << summary.status();
  const Tensors fp32 = ReadModel(tmp / "fp32"), bf16 = ReadModel(tmp / "bf16");
  ASSERT_EQ(fp32.size(), bf16.size());
  int64_t checked = 0;
  for (const auto& [name, v] : fp32) {
    const Values& b = bf16.at(name);
    ASSERT_EQ(b.dtype, io::DType::kBF16) << name;
    ASSERT_EQ(b.shape, v.shape) << name;
    for (size_t i = 0; i < v.data.size(); ++i) {
      uint16_t stored;
      std::memcpy(&stored, b.bytes.data() + 2 * i, 2);
      ASSERT_EQ(stored, numeric::Fp32ToBf16(v.data[i])) << name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 10000);
}

// "auto" writes each tensor in the base's dtype: unchanged tensors bit for bit, merged weights as
// the fp32 merge over the widened base rounded to that dtype (fp16 too).
TEST(MergeAdapterTest, AutoKeepsABf16OrF16BasesDtype) {
  for (io::DType dtype : {io::DType::kBF16, io::DType::kF16, io::DType::kF32}) {
    SCOPED_TRACE(io::DTypeName(dtype));
    TempDir tmp;
    const std::string base = MakeBase(tmp, "llama_gqa", dtype);
    const std::string adapter = MakeAdapter(tmp, "llama_gqa");
    ASSERT_TRUE(Merge(adapter, tmp / "fp32", io::DType::kF32, base).ok());
    auto summary = Merge(adapter, tmp / "auto", std::nullopt, base);
    ASSERT_TRUE(summary.ok()) << summary.status();
    const Tensors in = ReadModel(base), fp32 = ReadModel(tmp / "fp32"),
                  out = ReadModel(tmp / "auto");
    int merged = 0;
    for (const auto& [name, v] : out) {
      ASSERT_EQ(v.dtype, dtype) << name;
      const bool adapted = name.find("_proj.weight") != std::string::npos;
      if (!adapted) {
        EXPECT_EQ(v.bytes, in.at(name).bytes) << name;
        continue;
      }
      ++merged;
      const std::vector<float>& want = fp32.at(name).data;
      for (size_t i = 0; i < want.size(); ++i) {
        uint16_t stored = 0;
        float stored32 = 0;
        if (dtype == io::DType::kF32) {
          std::memcpy(&stored32, v.bytes.data() + 4 * i, 4);
          ASSERT_EQ(stored32, want[i]) << name << "[" << i << "]";
          continue;
        }
        std::memcpy(&stored, v.bytes.data() + 2 * i, 2);
        ASSERT_EQ(stored, dtype == io::DType::kBF16 ? numeric::Fp32ToBf16(want[i])
                                                    : numeric::Fp32ToF16(want[i]))
            << name << "[" << i << "]";
      }
    }
    EXPECT_EQ(merged, 14);
  }
}

// --- layout ---------------------------------------------------------------------------------

TEST(MergeAdapterTest, ShardsLikeACheckpointAndReadsShardedBases) {
  TempDir tmp;
  const std::string adapter = MakeAdapter(tmp, "gpt2");
  ASSERT_TRUE(Merge(adapter, tmp / "single", io::DType::kF32).ok());
  auto sharded = Merge(adapter, tmp / "sharded", io::DType::kF32, "", /*max_shard_bytes=*/30000);
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  const Tensors one = ReadModel(tmp / "single"), many = ReadModel(tmp / "sharded");
  // The checkpoint's rule (PlanTensorSet), cut in name order.
  TensorShapes order;
  for (const auto& [name, v] : one) order.emplace_back(name, v.shape);
  const TensorSetPlan plan = PlanTensorSet("model", order, io::DType::kF32, 30000);
  std::vector<std::string> want = {"config.json", plan.index_file};
  for (const TensorSetShard& shard : plan.shards) want.push_back(shard.file);
  std::sort(want.begin(), want.end());
  EXPECT_GT(plan.shards.size(), 2u);
  EXPECT_EQ(Entries(tmp / "sharded"), want);
  EXPECT_EQ(ReadAll(tmp / "sharded/model.safetensors.index.json"), plan.index_json);
  ASSERT_EQ(one.size(), many.size());
  for (const auto& [name, v] : one) EXPECT_EQ(many.at(name).bytes, v.bytes) << name;

  // The sharded result as the base of another merge reads like the single file.
  ASSERT_TRUE(Merge(adapter, tmp / "twice_single", io::DType::kF32, tmp / "single").ok());
  ASSERT_TRUE(Merge(adapter, tmp / "twice_sharded", io::DType::kF32, tmp / "sharded").ok());
  const Tensors a = ReadModel(tmp / "twice_single"), b = ReadModel(tmp / "twice_sharded");
  for (const auto& [name, v] : a) EXPECT_EQ(b.at(name).bytes, v.bytes) << name;
}

TEST(MergeAdapterTest, CopiesTokenizerFromTheAdapterElseTheBaseAndGenerationConfig) {
  TempDir tmp;
  const std::string base = MakeBase(tmp, "gpt2", io::DType::kF32);
  WriteAll(base + "/generation_config.json", "{\"eos_token_id\": 63}\n");
  WriteAll(base + "/tokenizer.json", "base tokenizer");
  WriteAll(base + "/merges.txt", "base merges");
  const std::string adapter = MakeAdapter(tmp, "gpt2");
  ASSERT_TRUE(Merge(adapter, tmp / "from_base", std::nullopt, base).ok());
  EXPECT_THAT(Entries(tmp / "from_base"),
              ::testing::ElementsAre("config.json", "generation_config.json", "merges.txt",
                                     "model.safetensors", "tokenizer.json"));
  EXPECT_EQ(ReadAll(tmp / "from_base/tokenizer.json"), "base tokenizer");

  // An adapter saved with its tokenizer (added tokens, a chat template) brings its own set.
  WriteAll(adapter + "/tokenizer.json", "adapter tokenizer");
  WriteAll(adapter + "/tokenizer_config.json", "{}");
  ASSERT_TRUE(Merge(adapter, tmp / "from_adapter", std::nullopt, base).ok());
  EXPECT_THAT(Entries(tmp / "from_adapter"),
              ::testing::ElementsAre("config.json", "generation_config.json", "model.safetensors",
                                     "tokenizer.json", "tokenizer_config.json"));
  EXPECT_EQ(ReadAll(tmp / "from_adapter/tokenizer.json"), "adapter tokenizer");
}

TEST(MergeAdapterTest, OutputMayBeAnEmptyDirectoryNeverANonEmptyOne) {
  TempDir tmp;
  const std::string adapter = MakeAdapter(tmp, "gpt2_c_attn");
  fs::create_directories(tmp / "empty");
  ASSERT_TRUE(Merge(adapter, tmp / "empty", io::DType::kBF16).ok());
  EXPECT_TRUE(fs::exists(tmp / "empty/model.safetensors"));

  fs::create_directories(tmp / "taken");
  WriteAll(tmp / "taken/keep.txt", "mine");
  auto st = Merge(adapter, tmp / "taken", io::DType::kBF16);
  ASSERT_TRUE(absl::IsAlreadyExists(st.status())) << st.status();
  EXPECT_THAT(st.status().message(), HasSubstr(tmp / "taken"));
  EXPECT_THAT(Entries(tmp / "taken"), ::testing::ElementsAre("keep.txt"));

  WriteAll(tmp / "file", "x");
  EXPECT_TRUE(absl::IsAlreadyExists(Merge(adapter, tmp / "file", std::nullopt).status()));
  // Nested output directories are created; nothing temporary is left anywhere.
  ASSERT_TRUE(Merge(adapter, tmp / "a/b/c", std::nullopt).ok());
  for (const std::string& dir : {tmp.path(), tmp / "a/b"}) {
    for (const std::string& name : Entries(dir)) {
      EXPECT_EQ(name.find(".tmp-"), std::string::npos) << dir << "/" << name;
    }
  }
}

// --- refusals -------------------------------------------------------------------------------

// Each bad input: INVALID_ARGUMENT (unless said) whose message has every `needles`, and no output.
struct BadCase {
  const char* what;
  std::function<std::string(const TempDir&)> make_adapter;  // returns the adapter directory
  std::vector<std::string> needles;
  std::function<std::string(const TempDir&)> make_base;  // empty: the config's base
};

Tensors GoldenAdapterTensors(const std::string& c) {
  return ReadFile(GoldenLora(c) + "/final_adapter.safetensors");
}

TEST(MergeAdapterTest, RefusesBadInputsNamingTheFileAndTensor) {
  const std::string a0 = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight";
  const std::string b0 = "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight";
  const std::vector<BadCase> cases = {
      {"wrong peft_type",
       [](const TempDir& t) {
         return MakeAdapter(t, "llama_gqa_qv", [](Json& j) { j["peft_type"] = "PREFIX_TUNING"; });
       },
       {"adapter_config.json", "peft_type", "PREFIX_TUNING", "LORA"}},
      {"regex target_modules",
       [](const TempDir& t) {
         return MakeAdapter(t, "llama_gqa_qv",
                            [](Json& j) { j["target_modules"] = ".*\\.(q|v)_proj"; });
       },
       {"adapter_config.json", "target_modules", "regular expression", "list the module names"}},
      {"unknown target module",
       [](const TempDir& t) {
         return MakeAdapter(t, "llama_gqa_qv",
                            [](Json& j) { j["target_modules"] = {"q_proj", "c_attn"}; });
       },
       {"adapter_config.json", "target_modules[1]", "c_attn"}},
      {"DoRA",
       [](const TempDir& t) {
         return MakeAdapter(t, "llama_gqa_qv", [](Json& j) { j["use_dora"] = true; });
       },
       {"use_dora", "not supported"}},
      {"missing lora_B",
       [&](const TempDir& t) {
         Tensors ts = GoldenAdapterTensors("llama_gqa_qv");
         ts.erase(b0);
         return MakeAdapter(t, "llama_gqa_qv", {}, &ts);
       },
       {"adapter_model.safetensors", "lora_B missing", "model.layers.0.self_attn.q_proj", b0}},
      {"shape mismatch",
       [&](const TempDir& t) {
         Tensors ts = GoldenAdapterTensors("llama_gqa_qv");
         ts[a0].shape = {4, 16};
         ts[a0].data.resize(64);
         return MakeAdapter(t, "llama_gqa_qv", {}, &ts);
       },
       {"adapter_model.safetensors", a0, "[4, 16]", "expected [4, 32]", "shape mismatch"}},
      {"r mismatch",
       [](const TempDir& t) {
         return MakeAdapter(t, "llama_gqa_qv", [](Json& j) { j["r"] = 8; });
       },
       {"adapter_model.safetensors", "rank 4", a0, "r = 8"}},
      {"a tensor of no module",
       [](const TempDir& t) {
         Tensors ts = GoldenAdapterTensors("gpt2_c_attn");
         ts["base_model.model.lm_head.lora_A.weight"] = {io::DType::kF32, {4, 32},
                                                         std::vector<float>(128), {}};
         return MakeAdapter(t, "gpt2_c_attn", {}, &ts);
       },
       {"adapter_model.safetensors", "base_model.model.lm_head.lora_A.weight", "matches no module",
        "c_attn"}},
      {"a target module without tensors",
       [](const TempDir& t) {
         return MakeAdapter(t, "gpt2_c_attn",
                            [](Json& j) { j["target_modules"] = {"c_attn", "c_fc"}; });
       },
       {"adapter_model.safetensors", "transformer.h.0.mlp.c_fc", "no tensors"}},
      {"a missing base weight",
       [](const TempDir& t) { return MakeAdapter(t, "llama_gqa_qv"); },
       {"base model", "missing tensor model.layers.1.self_attn.v_proj.weight"},
       [](const TempDir& t) {
         const std::string dir = t / "base";
         fs::create_directories(dir);
         fs::copy_file(BaseOf("llama_gqa") + "/config.json", dir + "/config.json");
         Tensors ts = ReadFile(BaseOf("llama_gqa") + "/model.safetensors");
         ts.erase("model.layers.1.self_attn.v_proj.weight");
         WriteTensors(dir + "/model.safetensors", ts, io::DType::kF32);
         return dir;
       }},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.what);
    TempDir tmp;
    const std::string adapter = c.make_adapter(tmp);
    const std::string base = c.make_base ? c.make_base(tmp) : "";
    auto st = Merge(adapter, tmp / "out", io::DType::kF32, base);
    ASSERT_FALSE(st.ok());
    EXPECT_TRUE(absl::IsInvalidArgument(st.status())) << st.status();
    for (const std::string& needle : c.needles) {
      EXPECT_THAT(st.status().message(), HasSubstr(needle));
    }
    EXPECT_FALSE(fs::exists(tmp / "out"));
    for (const std::string& name : Entries(tmp.path())) {
      EXPECT_EQ(name.find(".tmp-"), std::string::npos) << name;
    }
  }
}

TEST(MergeAdapterTest, MissingInputsAreNotFound) {
  TempDir tmp;
  EXPECT_TRUE(absl::IsNotFound(Merge(tmp / "nope", tmp / "out", std::nullopt).status()));
  fs::create_directories(tmp / "empty");
  auto st = Merge(tmp / "empty", tmp / "out", std::nullopt);
  EXPECT_TRUE(absl::IsNotFound(st.status())) << st.status();
  EXPECT_THAT(st.status().message(), HasSubstr("adapter_config.json"));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseMergeDType("fp16").status()));
}

// --- adapter_config.json ----------------------------------------------------------------------

TEST(AdapterConfigTest, ScalingAndPeftsOptionalKeys) {
  auto c = ParseLoraAdapterConfig(
      R"({"peft_type": "LORA", "r": 16, "lora_alpha": 32, "target_modules": ["q_proj"],
          "use_rslora": null, "bias": "none", "rank_pattern": {}, "alpha_pattern": {},
          "layers_to_transform": null, "modules_to_save": null, "use_dora": false})",
      "a.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->scaling(), 2.0);
  EXPECT_FALSE(c->fan_in_fan_out);
  EXPECT_TRUE(c->base_model_name_or_path.empty());
  c = ParseLoraAdapterConfig(
      R"({"peft_type": "LORA", "r": 16, "lora_alpha": 8.5, "use_rslora": true,
          "fan_in_fan_out": true, "target_modules": ["c_attn"], "base_model_name_or_path": "/m"})",
      "a.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->scaling(), 8.5 / 4);
  EXPECT_TRUE(c->fan_in_fan_out);
  EXPECT_EQ(c->base_model_name_or_path, "/m");
}

TEST(AdapterConfigTest, RefusalsNameTheField) {
  const std::string ok = R"("peft_type": "LORA", "lora_alpha": 8, "target_modules": ["q_proj"])";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[]", "not a JSON object"},
      {R"({"r": 4, "lora_alpha": 8, "target_modules": ["q_proj"]})", "\"peft_type\": missing"},
      {"{" + ok + "}", "\"r\": must be an integer >= 1"},
      {"{" + ok + R"(, "r": 0})", "\"r\""},
      {"{" + ok + R"(, "r": 4.5})", "\"r\""},
      {R"({"peft_type": "LORA", "r": 4, "target_modules": ["q_proj"]})", "\"lora_alpha\""},
      {R"({"peft_type": "LORA", "r": 4, "lora_alpha": 8})", "\"target_modules\": missing"},
      {R"({"peft_type": "LORA", "r": 4, "lora_alpha": 8, "target_modules": [1]})",
       "\"target_modules[0]\""},
      {"{" + ok + R"(, "r": 4, "use_rslora": "yes"})", "\"use_rslora\": must be true or false"},
      {"{" + ok + R"(, "r": 4, "rank_pattern": {"q_proj": 8}})", "\"rank_pattern\": is set"},
      {"{" + ok + R"(, "r": 4, "alpha_pattern": {"q_proj": 8}})", "\"alpha_pattern\""},
      {"{" + ok + R"(, "r": 4, "layers_to_transform": [0]})", "\"layers_to_transform\""},
      {"{" + ok + R"(, "r": 4, "modules_to_save": ["lm_head"]})", "\"modules_to_save\""},
      {"{" + ok + R"(, "r": 4, "bias": "all"})", "\"bias\""},
  };
  for (const auto& [text, needle] : cases) {
    auto c = ParseLoraAdapterConfig(text, "x/adapter_config.json");
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_TRUE(absl::IsInvalidArgument(c.status())) << c.status();
    EXPECT_THAT(c.status().message(), HasSubstr("x/adapter_config.json: "));
    EXPECT_THAT(c.status().message(), HasSubstr(needle)) << text;
  }
}

// --- TensorSetWriter --------------------------------------------------------------------------

TEST(TensorSetWriterTest, WritesWhatWriteTensorSetWrites) {
  reference::Parameters params;
  TensorShapes order;
  for (int i = 0; i < 5; ++i) {
    const std::string name = "t" + std::to_string(4 - i);  // not in name order
    const std::vector<int64_t> shape = {3 + i, 100};
    reference::Tensor& t = params.tensors[name];
    t.shape = shape;
    t.data.resize(100 * (3 + i));
    for (size_t k = 0; k < t.data.size(); ++k) t.data[k] = 0.001f * k - i;
    order.emplace_back(name, shape);
  }
  for (io::DType dtype : {io::DType::kF32, io::DType::kBF16}) {
    for (int64_t shard : {int64_t{1} << 30, int64_t{2500}}) {
      SCOPED_TRACE(::testing::Message() << io::DTypeName(dtype) << " shard " << shard);
      TempDir tmp;
      fs::create_directories(tmp / "a");
      fs::create_directories(tmp / "b");
      auto files = WriteTensorSet(tmp / "a", "model", params, order, dtype, shard);
      ASSERT_TRUE(files.ok()) << files.status();
      std::vector<TensorSetWriter::Tensor> plan;
      for (const auto& [name, shape] : order) plan.push_back({name, dtype, shape});
      auto w = TensorSetWriter::Create(tmp / "b", "model", plan, shard);
      ASSERT_TRUE(w.ok()) << w.status();
      for (const auto& [name, shape] : order) {
        const std::vector<float>& data = params.at(name).data;
        std::vector<uint16_t> narrow(data.size());
        numeric::Fp32ToBf16(data.data(), narrow.data(), data.size());
        const char* bytes = dtype == io::DType::kF32 ? reinterpret_cast<const char*>(data.data())
                                                     : reinterpret_cast<const char*>(narrow.data());
        const uint64_t n = data.size() * io::DTypeSize(dtype);
        // Two pieces, the second first.
        ASSERT_TRUE((*w)->Write(name, n / 2, bytes + n / 2, n - n / 2).ok());
        ASSERT_TRUE((*w)->Write(name, 0, bytes, n / 2).ok());
      }
      EXPECT_TRUE(absl::IsInvalidArgument((*w)->Write("t0", 1, "xx", 100000)));  // past the end
      auto written = (*w)->Finish();
      ASSERT_TRUE(written.ok()) << written.status();
      EXPECT_EQ(*written, *files);
      for (const std::string& f : *files) {
        EXPECT_EQ(ReadAll(tmp / ("b/" + f)), ReadAll(tmp / ("a/" + f))) << f;
      }
    }
  }
}

TEST(TensorSetWriterTest, FinishRefusesAnIncompleteTensor) {
  TempDir tmp;
  auto w = TensorSetWriter::Create(tmp.path(), "model",
                                   {{"a", io::DType::kF32, {4}}, {"b", io::DType::kBF16, {2}}},
                                   int64_t{1} << 30);
  ASSERT_TRUE(w.ok()) << w.status();
  const float a[4] = {1, 2, 3, 4};
  ASSERT_TRUE((*w)->Write("a", 0, a, sizeof a).ok());
  EXPECT_TRUE(absl::IsInvalidArgument((*w)->Write("c", 0, a, 4)));
  EXPECT_TRUE(absl::IsInvalidArgument((*w)->Write("b", 2, a, 4)));  // past its 4 bytes
  auto st = (*w)->Finish();
  ASSERT_TRUE(absl::IsFailedPrecondition(st.status())) << st.status();
  EXPECT_THAT(st.status().message(), HasSubstr("tensor b: 0 of 4 bytes"));
}

}  // namespace
}  // namespace mobius::checkpoint
