// Routed experts (worker/generate/expert_cache.h, Decoder::Options::experts) on the golden tiny
// mixtures of experts (Qwen3-MoE with a dense layer, Mixtral; with PEFT adapters on every
// expert): the decoder holding only the experts a step routes to gives the resident decoder's
// logits bit for bit (the same ops on the same values), with the smallest cache (one block's
// experts: every step evicts) and with the baseline that copies every expert of a block at each
// forward; a one-token step uploads exactly the k experts its token was routed to per MoE block
// (fewer when cached); kAuto routes exactly when the resident model does not fit the device cap.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "test/testing/paths.h"
#include "test/worker/generate/golden_adapter.h"
#include "test/worker/model/units_test_util.h"
#include "test/worker/reference/tensor_compare.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/generate/decoder.h"
#include "worker/generate/generate.h"

namespace mobius::generate {
namespace {

using Experts = Decoder::Options::Experts;

struct Case {
  std::string base;
  std::string adapter;  // test/reference/golden_lora/<adapter>, or empty
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.base << "/" << c.adapter; }

class RoutedExpertsTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    auto golden = units::testing::LoadGolden(GetParam().base);
    ASSERT_TRUE(golden.ok()) << golden.status();
    g_ = *std::move(golden);
    backend_ = MakeBackend(0);
    if (!GetParam().adapter.empty()) {
      auto a = testing::LoadGoldenAdapter(g_.config, GetParam().adapter);
      ASSERT_TRUE(a.ok()) << a.status();
      lora_ = a->spec;
      adapters_ = std::move(a->tensors);
    }
  }

  static std::unique_ptr<backend::CpuBackend> MakeBackend(uint64_t cap) {
    backend::CpuBackendOptions options;
    options.op_threads = 2;
    options.backend.capacity_bytes = cap;
    return *backend::CpuBackend::Create(options);
  }

  absl::StatusOr<std::unique_ptr<Decoder>> Make(backend::Backend* be, Decoder::Options o) {
    o.lora = lora_;
    auto d = Decoder::Create(g_.config, be, o);
    if (!d.ok()) return d.status();
    if (absl::Status s = (*d)->SetWeights(g_.bf16); !s.ok()) return s;
    if (lora_) {
      if (absl::Status s = (*d)->SetAdapters(adapters_); !s.ok()) return s;
    }
    return d;
  }

  // The logits of a prefill of half the golden sequence (every row), then of each later token
  // fed one at a time.
  std::vector<std::vector<float>> TeacherForced(Decoder& d) {
    const std::vector<int32_t> seq(g_.tokens.begin(), g_.tokens.begin() + g_.t);
    std::vector<std::vector<float>> out;
    auto logits = d.Append(seq.data(), g_.t / 2, /*all_rows=*/true);
    EXPECT_TRUE(logits.ok()) << logits.status();
    if (!logits.ok()) return out;
    out.push_back(*logits);
    for (int64_t pos = g_.t / 2; pos < g_.t; ++pos) {
      auto step = d.Append(&seq[pos], 1);
      EXPECT_TRUE(step.ok()) << step.status();
      if (!step.ok()) return out;
      out.push_back(*step);
    }
    return out;
  }

  int64_t MoeBlocks() const {
    int64_t n = 0;
    for (int64_t layer = 0; layer < g_.config.num_layers; ++layer) {
      n += g_.config.moe.IsMoeLayer(layer) ? 1 : 0;
    }
    return n;
  }
  int64_t E() const { return g_.config.moe.num_experts; }
  int64_t K() const { return g_.config.moe.experts_per_token; }

  units::testing::Golden g_;
  std::optional<units::LoraSpec> lora_;
  reference::Parameters adapters_;
  std::unique_ptr<backend::CpuBackend> backend_;
};

TEST_P(RoutedExpertsTest, LogitsAreBitwiseTheResidentDecodersWithTheSmallestCacheAndTheBaseline) {
  auto resident = Make(backend_.get(), {.capacity = g_.t, .experts = Experts::kResident});
  ASSERT_TRUE(resident.ok()) << resident.status();
  EXPECT_EQ((*resident)->expert_cache(), nullptr);
  const std::vector<std::vector<float>> want = TeacherForced(**resident);

  // One block's experts: a step routed elsewhere than the last block evicts.
  auto probe = Make(backend_.get(), {.capacity = g_.t, .experts = Experts::kRouted});
  ASSERT_TRUE(probe.ok()) << probe.status();
  const uint64_t slot = (*probe)->expert_cache()->slot_bytes();
  probe->reset();
  for (const bool all : {false, true}) {
    auto routed = Make(backend_.get(), {.capacity = g_.t,
                                        .experts = Experts::kRouted,
                                        .expert_cache_bytes = E() * slot,
                                        .upload_all_experts = all});
    ASSERT_TRUE(routed.ok()) << routed.status();
    const ExpertCache* cache = (*routed)->expert_cache();
    ASSERT_NE(cache, nullptr);
    EXPECT_EQ(cache->slots(), E());
    const std::vector<std::vector<float>> got = TeacherForced(**routed);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i], want[i]) << (all ? "upload_all, " : "") << "call " << i;
    }
    const ExpertCache::Stats& s = cache->stats();
    const int64_t calls = static_cast<int64_t>(want.size()) * MoeBlocks();
    EXPECT_EQ(s.calls, calls);
    if (all) {
      EXPECT_EQ(s.uploaded, calls * E());
      EXPECT_EQ(s.uploaded_bytes, s.all_experts_bytes);
    } else {
      EXPECT_LE(s.uploaded, s.fetched);
      EXPECT_LT(s.uploaded_bytes, s.all_experts_bytes);
    }
    std::printf("%s%s: %lld MoE forwards, %lld experts asked, %lld uploaded, %llu of %llu bytes\n",
                GetParam().base.c_str(), all ? " (upload all)" : "",
                static_cast<long long>(s.calls), static_cast<long long>(s.fetched),
                static_cast<long long>(s.uploaded),
                static_cast<unsigned long long>(s.uploaded_bytes),
                static_cast<unsigned long long>(s.all_experts_bytes));
  }
}

TEST_P(RoutedExpertsTest, AOneTokenStepUploadsOnlyItsRoutedExpertsAndACachedRerunNone) {
  auto d = Make(backend_.get(), {.capacity = g_.t, .experts = Experts::kRouted});
  ASSERT_TRUE(d.ok()) << d.status();
  const ExpertCache* cache = (*d)->expert_cache();
  ASSERT_NE(cache, nullptr);
  EXPECT_EQ(cache->slots(), E() * MoeBlocks());  // room for all: at most the model's experts
  uint64_t expert_host_bytes = 0;  // every expert tensor of the model, held once on the host
  for (const auto& [name, bits] : g_.bf16) {
    if (name.find(".experts.") != std::string::npos) expert_host_bytes += 2 * bits.size();
  }
  EXPECT_EQ(cache->host_bytes(), expert_host_bytes);
  EXPECT_TRUE(cache->pinned()) << cache->pin_error();  // one pinned allocation, the map's freed
  const std::vector<int32_t> seq(g_.tokens.begin(), g_.tokens.begin() + g_.t);
  // One token: k experts in each MoE block, all uploaded (a cold cache).
  ASSERT_TRUE((*d)->Append(seq.data(), 1).ok());
  ExpertCache::Stats s = cache->stats();
  EXPECT_EQ(s.calls, MoeBlocks());
  EXPECT_EQ(s.fetched, K() * MoeBlocks());
  EXPECT_EQ(s.uploaded, K() * MoeBlocks());
  const uint64_t expert_bytes = s.all_experts_bytes / (MoeBlocks() * E());
  EXPECT_EQ(s.uploaded_bytes, s.uploaded * expert_bytes);
  for (int64_t pos = 1; pos < g_.t; ++pos) ASSERT_TRUE((*d)->Append(&seq[pos], 1).ok());
  s = cache->stats();
  EXPECT_EQ(s.fetched, K() * MoeBlocks() * g_.t);
  EXPECT_LE(s.uploaded, E() * MoeBlocks());  // each expert once at most: nothing evicted
  // The same sequence again: every expert it routes to is on the device.
  (*d)->Reset();
  for (int64_t pos = 0; pos < g_.t; ++pos) ASSERT_TRUE((*d)->Append(&seq[pos], 1).ok());
  EXPECT_EQ(cache->stats().uploaded, s.uploaded);
  EXPECT_EQ(cache->stats().fetched, 2 * s.fetched);
}

TEST_P(RoutedExpertsTest, AutoRoutesExactlyWhenTheResidentModelDoesNotFit) {
  auto probe = Make(backend_.get(), {.capacity = g_.t});
  ASSERT_TRUE(probe.ok()) << probe.status();
  const uint64_t resident = (*probe)->resident_bytes();
  probe->reset();
  {
    std::unique_ptr<backend::CpuBackend> fits = MakeBackend(resident);
    auto d = Make(fits.get(), {.capacity = g_.t});
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ((*d)->expert_cache(), nullptr);
    EXPECT_TRUE((*d)->Append(g_.tokens.data(), g_.t).ok());  // the reserve was enough
  }
  std::unique_ptr<backend::CpuBackend> tight = MakeBackend(resident - 1);
  auto d = Make(tight.get(), {.capacity = g_.t});
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_NE((*d)->expert_cache(), nullptr);
  EXPECT_GE((*d)->expert_cache()->slots(), E());
  EXPECT_TRUE((*d)->Append(g_.tokens.data(), g_.t).ok());
  // Too little for one block's experts: a clear error, not a failure in a later step.
  auto bad = Make(backend_.get(), {.capacity = g_.t, .experts = Experts::kRouted,
                                   .expert_cache_bytes = (*d)->expert_cache()->slot_bytes()});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kResourceExhausted) << bad.status();
  EXPECT_NE(bad.status().message().find("routed experts need device memory for one block's"),
            std::string::npos)
      << bad.status();
}

INSTANTIATE_TEST_SUITE_P(Golden, RoutedExpertsTest,
                         ::testing::Values(Case{"qwen3_moe", ""}, Case{"mixtral_aux", ""},
                                           Case{"qwen3_moe", "qwen3_moe_experts"},
                                           Case{"mixtral_aux", "mixtral_experts"},
                                           Case{"gpt_oss", ""}),
                         [](const auto& info) {
                           return info.param.adapter.empty() ? info.param.base
                                                             : info.param.adapter + "_lora";
                         });

}  // namespace
}  // namespace mobius::generate
