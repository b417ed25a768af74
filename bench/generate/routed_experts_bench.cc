// Generating with a mixture of experts that does not fit the device: routed experts (a step
// uploads only the experts its token is routed to, into an LRU cache of --cache_share of the
// model's experts: worker/generate/expert_cache.h) against the block-streaming baseline (every
// expert of a block copied at every forward: what an offloader streaming the model block by
// block moves) and the resident model (no expert copies: the compute floor), on the CPU backend
// with its host-to-device copies through an emulated link of --link_gbs GB/s. Variants alternate
// in every rep (bench/README.md); the same seeded random prompt and fed tokens (see main), and every
// variant's argmax at every step is checked equal (the routed decoder is bitwise the resident).
//
// Variants: resident; routed with --cache_share of the experts in slots; routed with one block's
// experts in slots (the least it runs with: nearly every routed expert is a copy); block
// streaming. Per variant: decode ms per new token (median over reps, min-max), expert MiB uploaded per new
// token, and the prediction: the resident decode time + the bytes x (1 / link + 1 / copy), where
// copy is the backend's own host copy rate measured here (the emulated copy sleeps for the link,
// then memcpys; on a GPU the DMA is the link time alone). Ratios: routed / block streaming.
//
//   build/bin/mobius-worker init-model --family qwen3_moe ... --out /tmp/moe
//   build/bin/routed_experts_bench --model /tmp/moe [--prompt 32 --new 32 --reps 3]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "common/numeric/bf16.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/backend/link_model.h"
#include "worker/checkpoint/model_init.h"
#include "worker/generate/decoder.h"
#include "worker/generate/generate.h"

ABSL_FLAG(std::string, model, "", "a mixture-of-experts model directory (init-model's)");
ABSL_FLAG(int64_t, prompt, 32, "prompt tokens (ids 1..N, prefilled, not timed per token)");
ABSL_FLAG(int64_t, new_tokens, 32, "greedy new tokens, timed");
ABSL_FLAG(int, reps, 3, "repetitions of each variant, alternating");
ABSL_FLAG(double, link_gbs, 25.0, "emulated host-to-device link, GB/s (PCIe 4.0 x16 ~ 25)");
ABSL_FLAG(double, cache_share, 0.25, "routed: the device's expert slots, a share of all experts");
ABSL_FLAG(int, threads, 2, "the CPU backend's op threads");

#define RETURN_IF_ERROR_BENCH(expr)              \
  do {                                           \
    if (absl::Status st_ = (expr); !st_.ok()) return st_; \
  } while (0)

namespace {

using Clock = std::chrono::steady_clock;
using mobius::generate::Decoder;
using mobius::generate::ExpertCache;

// One emulated link in one direction: a chunk waits for the link to be free, then holds it for
// bytes / rate (a FIFO in wall time); device-to-host is not emulated (a logits row per token).
class FixedRateLink final : public mobius::backend::LinkModel {
 public:
  explicit FixedRateLink(double bytes_per_second) : rate_(bytes_per_second) {}
  // A sleep overshoots by tens of microseconds; the link's clock may trail the wall clock by up to
  // kSlack (200 us), so the next chunks make up for an overshoot instead of the link idling through it
  // (thousands of small expert copies per token would otherwise run slower than the link).
  void OnChunk(mobius::backend::CopyDirection d, uint64_t bytes) override {
    if (!enabled || d != mobius::backend::CopyDirection::kHostToDevice) return;
    constexpr std::chrono::microseconds kSlack{200};
    const Clock::time_point now = Clock::now();
    free_ = std::max(free_, now - kSlack) + std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double>(bytes / rate_));
    if (free_ > now) std::this_thread::sleep_until(free_);
  }
  bool enabled = true;

 private:
  double rate_;
  Clock::time_point free_{};
};

struct Sample {
  double prefill_s = 0, decode_s = 0;
  uint64_t decode_bytes = 0;  // experts uploaded while decoding
  int64_t decode_uploads = 0, decode_fetched = 0;
  std::vector<int32_t> tokens;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Fail(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "routed_experts_bench: %s: %s\n", what.c_str(), s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int64_t prompt_n = absl::GetFlag(FLAGS_prompt), new_n = absl::GetFlag(FLAGS_new_tokens);
  auto loaded = mobius::checkpoint::ReadModelDirectory(absl::GetFlag(FLAGS_model));
  if (!loaded.ok()) return Fail("--model", loaded.status());
  const mobius::model::ModelConfig config = loaded->config;
  if (!config.moe.enabled()) return Fail("--model", absl::InvalidArgumentError("no experts"));
  std::map<std::string, std::vector<uint16_t>> bf16;
  for (auto it = loaded->params.tensors.begin(); it != loaded->params.tensors.end();) {
    std::vector<uint16_t>& bits = bf16[it->first];
    bits.resize(it->second.data.size());
    mobius::numeric::Fp32ToBf16(it->second.data.data(), bits.data(), bits.size());
    it = loaded->params.tensors.erase(it);
  }

  FixedRateLink link(absl::GetFlag(FLAGS_link_gbs) * 1e9);
  mobius::backend::CpuBackendOptions bo;
  bo.op_threads = absl::GetFlag(FLAGS_threads);
  bo.backend.link_model = &link;
  auto backend = mobius::backend::CpuBackend::Create(bo);
  if (!backend.ok()) return Fail("backend", backend.status());

  // The backend's own host copy rate (no link) in the cache's pattern: one expert tensor at a
  // time from 512 MiB of host memory into a 32-slot device arena, round robin; best of 3.
  double copy_rate = 0;
  auto measure_copy_rate = [&](uint64_t piece) -> absl::Status {
    link.enabled = false;
    const uint64_t host_bytes = uint64_t{512} << 20, slots = 32;
    std::vector<uint8_t> host(host_bytes, 1);
    auto q = (*backend)->CreateQueue(mobius::backend::QueueKind::kCompute, 0);
    if (!q.ok()) return q.status();
    auto dev = (*backend)->Allocate(slots * piece, "copy_rate");
    if (!dev.ok()) return dev.status();
    const uint64_t pieces = host_bytes / piece;
    for (int i = 0; i < 3; ++i) {
      const Clock::time_point t0 = Clock::now();
      for (uint64_t p = 0; p < pieces; ++p) {
        RETURN_IF_ERROR_BENCH((*backend)->CopyToDevice(**q, host.data() + p * piece, *dev,
                                                       (p % slots) * piece, piece));
      }
      RETURN_IF_ERROR_BENCH((*backend)->Synchronize(**q));
      copy_rate = std::max(copy_rate, pieces * piece /
                                          std::chrono::duration<double>(Clock::now() - t0).count());
    }
    link.enabled = true;
    return absl::OkStatus();
  };

  const int64_t capacity = prompt_n + new_n;
  struct Variant {
    const char* name;
    Decoder::Options options;
    std::unique_ptr<Decoder> decoder;
    std::vector<Sample> samples;
  };
  std::vector<Variant> variants;
  auto options = [&](Decoder::Options::Experts experts, bool upload_all) {
    Decoder::Options o;
    o.capacity = capacity;
    o.experts = experts;
    o.upload_all_experts = upload_all;
    return o;
  };
  using Experts = Decoder::Options::Experts;
  variants.push_back({"resident", options(Experts::kResident, false), nullptr, {}});
  variants.push_back({"routed", options(Experts::kRouted, false), nullptr, {}});
  variants.push_back({"routed, one block's slots", options(Experts::kRouted, false), nullptr, {}});
  variants.push_back({"block streaming", options(Experts::kRouted, true), nullptr, {}});
  uint64_t all_expert_bytes = 0;
  int64_t experts_total = 0;
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    if (config.moe.IsMoeLayer(layer)) experts_total += config.moe.num_experts;
  }
  for (const auto& [name, bits] : bf16) {
    if (name.find(".experts.") != std::string::npos) all_expert_bytes += 2 * bits.size();
  }
  const uint64_t expert_bytes = all_expert_bytes / experts_total;
  if (absl::Status st = measure_copy_rate(expert_bytes / 3); !st.ok()) return Fail("copy rate", st);
  const int64_t block_experts = config.moe.num_experts;
  uint64_t slot_bytes = 0;  // an expert's slot (its span, aligned): from a decoder without weights
  {
    auto probe = Decoder::Create(config, backend->get(), variants[3].options);
    if (!probe.ok()) return Fail("probe", probe.status());
    slot_bytes = (*probe)->expert_cache()->slot_bytes();
  }
  const int64_t share_slots =
      static_cast<int64_t>(absl::GetFlag(FLAGS_cache_share) * static_cast<double>(experts_total));
  variants[1].options.expert_cache_bytes = std::max(share_slots, block_experts) * slot_bytes;
  variants[2].options.expert_cache_bytes = block_experts * slot_bytes;
  variants[3].options.expert_cache_bytes = block_experts * slot_bytes;
  for (Variant& v : variants) {
    auto d = Decoder::Create(config, backend->get(), v.options);
    if (!d.ok()) return Fail(v.name, d.status());
    if (absl::Status s = (*d)->SetWeights(bf16); !s.ok()) return Fail(v.name, s);
    v.decoder = *std::move(d);
  }
  bf16.clear();

  // Prompt and decoded tokens drawn at random (seeded): a random model's greedy output repeats
  // itself, and repeated tokens route to the same experts (cache hits a real text would not
  // give); steps are teacher-forced with these tokens, each step's argmax recorded.
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> id(1, static_cast<int32_t>(config.vocab_size - 1));
  std::vector<int32_t> prompt(prompt_n), fed(new_n);
  for (int32_t& t : prompt) t = id(rng);
  for (int32_t& t : fed) t = id(rng);
  for (int rep = 0; rep < absl::GetFlag(FLAGS_reps); ++rep) {
    for (Variant& v : variants) {
      Decoder& d = *v.decoder;
      const ExpertCache* cache = d.expert_cache();
      Sample s;
      d.Reset();
      const Clock::time_point t0 = Clock::now();
      auto logits = d.Append(prompt.data(), prompt_n);
      if (!logits.ok()) return Fail(v.name, logits.status());
      const Clock::time_point t1 = Clock::now();
      const ExpertCache::Stats before = cache ? cache->stats() : ExpertCache::Stats{};
      for (int64_t i = 0; i < new_n; ++i) {
        s.tokens.push_back(static_cast<int32_t>(
            std::max_element(logits->begin(), logits->end()) - logits->begin()));
        logits = d.Append(&fed[i], 1);
        if (!logits.ok()) return Fail(v.name, logits.status());
      }
      const Clock::time_point t2 = Clock::now();
      if (cache) {
        s.decode_bytes = cache->stats().uploaded_bytes - before.uploaded_bytes;
        s.decode_uploads = cache->stats().uploaded - before.uploaded;
        s.decode_fetched = cache->stats().fetched - before.fetched;
      }
      s.prefill_s = std::chrono::duration<double>(t1 - t0).count();
      s.decode_s = std::chrono::duration<double>(t2 - t1).count();
      v.samples.push_back(std::move(s));
    }
  }

  std::printf("model: %s, %d layers, %lld experts per MoE block (top %lld), expert %.2f MiB, all experts %.0f MiB\n",
              config.model_type.c_str(), static_cast<int>(config.num_layers),
              static_cast<long long>(block_experts), static_cast<long long>(config.moe.experts_per_token),
              expert_bytes / 1048576.0, all_expert_bytes / 1048576.0);
  std::printf("link %.1f GB/s (emulated), backend host copy %.1f GB/s (measured), %lld prompt + %lld new tokens, %d reps\n",
              absl::GetFlag(FLAGS_link_gbs), copy_rate / 1e9, static_cast<long long>(prompt_n),
              static_cast<long long>(new_n), absl::GetFlag(FLAGS_reps));
  bool same_tokens = true;
  for (const Variant& v : variants) {
    for (const Sample& s : v.samples) same_tokens = same_tokens && s.tokens == variants[0].samples[0].tokens;
  }
  std::printf("same argmax at every step in every variant and rep: %s\n", same_tokens ? "yes" : "NO");
  const double resident_ms = 1e3 * Median([&] {
    std::vector<double> t;
    for (const Sample& s : variants[0].samples) t.push_back(s.decode_s / new_n);
    return t;
  }());
  std::printf("| variant | expert slots | decode ms/token (min-max) | expert MiB/token | experts uploaded/run | predicted ms/token | measured/predicted |\n|---|---:|---:|---:|---:|---:|---:|\n");
  std::vector<double> medians;
  for (const Variant& v : variants) {
    std::vector<double> t;
    for (const Sample& s : v.samples) t.push_back(1e3 * s.decode_s / new_n);
    const double med = Median(t);
    medians.push_back(med);
    const Sample& last = v.samples.back();
    const double mib = last.decode_bytes / 1048576.0 / new_n;
    const double predicted = resident_ms + 1e3 * (last.decode_bytes / static_cast<double>(new_n)) *
                                               (1.0 / (absl::GetFlag(FLAGS_link_gbs) * 1e9) + 1.0 / copy_rate);
    const ExpertCache* cache = v.decoder->expert_cache();
    std::printf("| %s | %lld | %.1f (%.1f-%.1f) | %.2f | %lld of %lld | %.1f | %.2f |\n", v.name,
                static_cast<long long>(cache ? cache->slots() : experts_total), med,
                *std::min_element(t.begin(), t.end()), *std::max_element(t.begin(), t.end()), mib,
                static_cast<long long>(last.decode_uploads), static_cast<long long>(last.decode_fetched),
                predicted, med / predicted);
  }
  for (int v = 1; v <= 2; ++v) {
    std::printf("%s / block streaming: time %.3f, expert bytes %.4f\n", variants[v].name,
                medians[v] / medians[3],
                static_cast<double>(variants[v].samples.back().decode_bytes) /
                    static_cast<double>(variants[3].samples.back().decode_bytes));
  }
  return same_tokens ? 0 : 1;
}
