#include "worker/generate/generate_command.h"

#include <malloc.h>
#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/data/chat_template.h"
#include "common/data/sp_tokenizer.h"
#include "common/init.h"
#include "common/model/lora.h"
#include "common/numeric/bf16.h"
#include "common/numeric/nf4.h"
#include "common/run/unit_params.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"
#include "worker/backend/backend_choice.h"
#include "worker/checkpoint/adapter_checkpoint.h"
#include "worker/checkpoint/adapter_config.h"
#include "worker/checkpoint/model_init.h"
#include "worker/checkpoint/worker_flags.h"
#include "worker/generate/generate.h"

namespace mobius::generate {
namespace {

constexpr char kPrefix[] = "mobius-worker generate: ";

int Fail(const absl::Status& s) {
  std::cerr << kPrefix << s.message() << std::endl;
  const bool bad_input = absl::IsInvalidArgument(s) || absl::IsNotFound(s) ||
                         absl::IsPermissionDenied(s) || absl::IsFailedPrecondition(s) ||
                         absl::IsOutOfRange(s);
  return bad_input ? 2 : 1;
}

// The status with `context: ` in front, same code.
absl::Status Prefixed(const std::string& context, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(context, ": ", s.message()));
}

absl::StatusOr<std::vector<int32_t>> ParseIds(const std::string& text, int64_t vocab_size) {
  std::vector<int32_t> ids;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    part = absl::StripAsciiWhitespace(part);
    int32_t id = 0;
    if (!absl::SimpleAtoi(part, &id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--prompt_ids: \"", part, "\" is not a token id (want e.g. 1,2,3)"));
    }
    if (id < 0 || id >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("--prompt_ids: id ", id, " at index ",
                                                     ids.size(), " is outside the model's vocabulary [0, ",
                                                     vocab_size, ")"));
    }
    ids.push_back(id);
  }
  return ids;
}

// The adapter's spec and tensors, checked against the model (errors name --adapter and the file).
struct Adapter {
  units::LoraSpec spec;
  reference::Parameters tensors;
};
absl::StatusOr<Adapter> LoadAdapter(const std::string& dir, const model::ModelConfig& config) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("--adapter ", dir, ": not a directory"));
  }
  const std::string where = absl::StrCat("--adapter ", dir);
  absl::StatusOr<checkpoint::LoraAdapterConfig> c = checkpoint::LoadLoraAdapterConfig(dir);
  if (!c.ok()) return Prefixed(where, c.status());
  Adapter a;
  absl::Status valid = model::ValidateLora(config, c->r, c->target_modules,
                                           "adapter_config.json r",
                                           "adapter_config.json target_modules");
  if (!valid.ok()) return Prefixed(where + " does not fit the model", valid);
  MOBIUS_ASSIGN_OR_RETURN(a.spec.modules, model::LoraModules(config, c->target_modules));
  a.spec.rank = c->r;
  a.spec.scale = static_cast<float>(c->scaling());
  absl::StatusOr<reference::Parameters> t = checkpoint::ReadPeftAdapter(
      dir, c->r, c->target_modules, checkpoint::AdapterShapes(a.spec.modules, c->r));
  if (!t.ok()) return Prefixed(where + " does not fit the model", t.status());
  a.tensors = *std::move(t);
  return a;
}

// --chat: the conversation (--system, then --prompt as the user's message) rendered with the
// model's template and the generation prompt, and what ends an assistant turn.
struct ChatPrompt {
  std::string text, end_of_turn, origin;
};
absl::StatusOr<ChatPrompt> RenderChatPrompt(const std::string& model_dir,
                                            const std::string& prompt) {
  absl::StatusOr<data::ChatTemplate> t = data::LoadChatTemplate(model_dir);
  if (!t.ok()) return Prefixed("--chat", t.status());
  absl::StatusOr<std::map<std::string, std::string>> kwargs =
      data::ParseChatTemplateKwargs(absl::GetFlag(FLAGS_chat_template_kwargs));
  if (!kwargs.ok()) return Prefixed("--chat_template_kwargs", kwargs.status());
  nlohmann::json messages = nlohmann::json::array();
  if (const std::string system = absl::GetFlag(FLAGS_system); !system.empty()) {
    messages.push_back({{"role", "system"}, {"content", system}});
  }
  messages.push_back({{"role", "user"}, {"content", prompt}});
  data::ChatRenderOptions options;
  options.prompt = true;
  options.kwargs_json = data::ChatTemplateKwargsJson(*kwargs);
  absl::StatusOr<std::vector<data::RenderedConversation>> r =
      data::RenderConversations(*t, {nlohmann::json{{"messages", messages}}.dump()}, options);
  if (!r.ok()) return Prefixed("--chat", r.status());
  if (!r->front().error.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--chat: ", t->origin, ": ", r->front().error));
  }
  return ChatPrompt{r->front().text, r->front().end_of_turn, t->origin};
}

absl::StatusOr<std::unique_ptr<backend::Backend>> MakeBackend() {
  const std::string name = absl::GetFlag(FLAGS_backend);
  const uint64_t cap = absl::GetFlag(FLAGS_device_memory_bytes);
  backend::ChooseBackendOptions options;
  options.cpu.backend.capacity_bytes = cap;
  const int32_t threads = absl::GetFlag(FLAGS_threads);  // 0: all cores
  options.cpu.op_threads =
      threads > 0 ? threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  absl::StatusOr<backend::ChosenBackend> chosen =
      backend::ChooseBackend(name, {.device = 0, .capacity_bytes = cap}, options);
  if (!chosen.ok()) return Prefixed("--backend", chosen.status());
  if (chosen->kind == backend::BackendKind::kCuda) {
    LOG(INFO) << "generate: CUDA backend on " << chosen->backend->name();
  } else if (chosen->fell_back()) {
    LOG(INFO) << "generate: " << backend::FallbackDescription(chosen->fallback_reason);
  }
  return std::move(chosen->backend);
}

// Whether the adapter was trained over an NF4 base: --lora_base nf4, or its checkpoint's
// trainer_state.json (adapter_checkpoint.h) says so.
absl::StatusOr<bool> AdapterBaseIsNf4(const std::string& adapter_dir) {
  const std::string flag = absl::GetFlag(FLAGS_lora_base);
  if (flag != "bf16" && flag != "nf4") {
    return absl::InvalidArgumentError(
        absl::StrCat("--lora_base must be bf16 or nf4 (got \"", flag, "\")"));
  }
  if (flag == "nf4") return true;
  if (adapter_dir.empty()) return false;
  absl::StatusOr<std::string> text =
      checkpoint::ReadSmallFile(adapter_dir + "/trainer_state.json", int64_t{1} << 20);
  if (!text.ok()) return false;  // a plain PEFT adapter directory
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("base_quantization") && j["base_quantization"] == "nf4";
}

// The base as an NF4 run computes with it: each linear quantised (from its bf16 values, as a bf16
// run quantises) and dequantised; weights the checkpoint stores in NF4 already are those values.
absl::Status UseNf4Base(checkpoint::LoadedModelBf16& model) {
  MOBIUS_ASSIGN_OR_RETURN(std::vector<std::string> names, units::Nf4BaseWeights(model.config));
  for (const std::string& name : names) {
    if (model.nf4_names.contains(name)) continue;
    std::vector<uint16_t>& bits = model.tensors.at(name);
    const numeric::Nf4Tensor q = numeric::QuantizeNf4(bits.data(), static_cast<int64_t>(bits.size()));
    numeric::DequantizeNf4ToBf16(q, bits.data());
  }
  LOG(INFO) << "generate: the adapter was trained over an NF4 base: " << names.size()
            << " linear weights quantised and dequantised as training saw them";
  return absl::OkStatus();
}

absl::StatusOr<Decoder::Options::Experts> ExpertResidency(const model::ModelConfig& config) {
  using Experts = Decoder::Options::Experts;
  const std::string flag = absl::GetFlag(FLAGS_expert_residency);
  Experts e = Experts::kAuto;
  if (flag == "resident") {
    e = Experts::kResident;
  } else if (flag == "routed") {
    e = Experts::kRouted;
  } else if (flag != "auto") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--expert_residency must be auto, resident or routed (got \"", flag, "\")"));
  }
  if (e == Experts::kRouted && !config.moe.enabled()) {
    return absl::InvalidArgumentError(
        "--expert_residency routed: the model has no experts (config.json model_type " +
        config.model_type + ")");
  }
  if (absl::GetFlag(FLAGS_expert_cache_bytes) > 0 && e == Experts::kResident) {
    return absl::InvalidArgumentError("--expert_cache_bytes needs routed experts");
  }
  return e;
}

std::string ResidencyWhy(Decoder::Options::Experts asked, const Decoder& d,
                         const backend::Backend& be) {
  if (asked == Decoder::Options::Experts::kRouted) return "--expert_residency routed";
  return absl::StrCat("the resident model needs ", d.resident_bytes(), " bytes, the device has ",
                      be.capacity_bytes());
}

absl::Status Run(const std::string& model_dir) {
  const std::string prompt_text = absl::GetFlag(FLAGS_prompt);
  const std::string prompt_ids = absl::GetFlag(FLAGS_prompt_ids);
  if (prompt_text.empty() == prompt_ids.empty()) {
    return absl::InvalidArgumentError("give exactly one of --prompt TEXT and --prompt_ids 1,2,3");
  }
  if (absl::GetFlag(FLAGS_chat) && prompt_text.empty()) {
    return absl::InvalidArgumentError("--chat needs --prompt (the user's message)");
  }
  GenerateOptions options;
  options.max_new_tokens = absl::GetFlag(FLAGS_max_new_tokens);
  options.sampling = {.temperature = absl::GetFlag(FLAGS_temperature),
                      .top_p = absl::GetFlag(FLAGS_top_p),
                      .seed = absl::GetFlag(FLAGS_seed)};
  if (options.max_new_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_new_tokens must be >= 1, got ", options.max_new_tokens));
  }
  MOBIUS_RETURN_IF_ERROR(ValidateSampling(options.sampling));
  std::error_code ec;
  if (!std::filesystem::is_directory(model_dir, ec)) {
    return absl::NotFoundError(absl::StrCat("model directory ", model_dir, " does not exist"));
  }
  // Read straight to bf16, what the decoder computes with: 2 bytes a parameter at the peak. Every
  // block of 128 KiB or more is its own mapping, so that a tensor freed once it is on the device
  // or in the pinned expert store goes back to the system at once: glibc's threshold otherwise
  // rises with the first large free and later tensors land in the heap, which keeps their pages
  // (measured: a 0.85B MoE's experts then counted twice, 3.8 GB instead of 2.3).
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  absl::StatusOr<checkpoint::LoadedModelBf16> model = checkpoint::ReadModelDirectoryBf16(model_dir);
  if (!model.ok()) return Prefixed("model directory " + model_dir, model.status());
  const model::ModelConfig& config = model->config;
  MOBIUS_ASSIGN_OR_RETURN(options.stop_ids, StopTokenIds(model_dir, config.vocab_size));

  // The tokenizer: required for --prompt, optional (the text line) for --prompt_ids.
  absl::StatusOr<std::unique_ptr<data::Tokenizer>> tokenizer = data::LoadTokenizer(model_dir);
  std::vector<int32_t> prompt;
  if (!prompt_text.empty()) {
    if (!tokenizer.ok()) {
      return Prefixed(absl::StrCat("--prompt needs the tokenizer of ", model_dir,
                                   " (or pass --prompt_ids)"),
                      tokenizer.status());
    }
    std::string text = prompt_text;
    bool add_special = true;
    if (absl::GetFlag(FLAGS_chat)) {
      // The model's template writes the special tokens (BOS) itself.
      MOBIUS_ASSIGN_OR_RETURN(ChatPrompt chat, RenderChatPrompt(model_dir, prompt_text));
      text = chat.text;
      add_special = false;
      const int32_t end = (*tokenizer)->TokenToId(chat.end_of_turn);
      if (end >= 0 && end < config.vocab_size) {
        if (std::find(options.stop_ids.begin(), options.stop_ids.end(), end) ==
            options.stop_ids.end()) {
          options.stop_ids.push_back(end);
        }
      } else {
        LOG(WARNING) << "generate --chat: the template's end of turn \"" << chat.end_of_turn
                     << "\" is not one token; stopping at eos_token_id only";
      }
      LOG(INFO) << "generate --chat: " << chat.origin << ", end of turn \"" << chat.end_of_turn
                << "\"";
    } else if (!absl::GetFlag(FLAGS_system).empty()) {
      return absl::InvalidArgumentError("--system needs --chat");
    }
    absl::StatusOr<std::vector<int32_t>> ids = (*tokenizer)->Encode(text, add_special);
    if (!ids.ok()) return Prefixed("--prompt", ids.status());
    prompt = *std::move(ids);
    for (int32_t id : prompt) {
      if (id >= config.vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--prompt: the tokenizer gives id ", id, ", outside the model's vocabulary [0, ",
            config.vocab_size, ") (config.json vocab_size)"));
      }
    }
  } else {
    MOBIUS_ASSIGN_OR_RETURN(prompt, ParseIds(prompt_ids, config.vocab_size));
  }
  if (prompt.empty()) return absl::InvalidArgumentError("--prompt encodes to no tokens");
  const int64_t capacity = static_cast<int64_t>(prompt.size()) + options.max_new_tokens;
  if (config.position == model::PositionKind::kLearned &&
      capacity > config.max_position_embeddings) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the prompt (", prompt.size(), " tokens) + --max_new_tokens (", options.max_new_tokens,
        ") exceed the model's ", config.max_position_embeddings, " positions"));
  }

  std::optional<Adapter> adapter;
  const std::string adapter_dir = absl::GetFlag(FLAGS_adapter);
  if (!adapter_dir.empty()) {
    MOBIUS_ASSIGN_OR_RETURN(Adapter a, LoadAdapter(adapter_dir, config));
    adapter = std::move(a);
  }
  MOBIUS_ASSIGN_OR_RETURN(const bool nf4_base, AdapterBaseIsNf4(adapter_dir));
  if (nf4_base) {
    if (absl::Status s = UseNf4Base(*model); !s.ok()) return Prefixed("--lora_base nf4", s);
  }
  MOBIUS_ASSIGN_OR_RETURN(const Decoder::Options::Experts residency,
                          ExpertResidency(config));
  MOBIUS_ASSIGN_OR_RETURN(std::unique_ptr<backend::Backend> be, MakeBackend());
  Decoder::Options decoder_options{.capacity = capacity,
                                   .lora = std::nullopt,
                                   .experts = residency,
                                   .expert_cache_bytes = absl::GetFlag(FLAGS_expert_cache_bytes)};
  if (adapter) decoder_options.lora = adapter->spec;
  absl::StatusOr<std::unique_ptr<Decoder>> created =
      Decoder::Create(config, be.get(), decoder_options);
  if (!created.ok() && absl::IsResourceExhausted(created.status()) && config.moe.enabled() &&
      residency == Decoder::Options::Experts::kResident) {
    return absl::ResourceExhaustedError(absl::StrCat(
        created.status().message(), "; --expert_residency routed (or auto) keeps the experts in "
        "host memory and uploads only those each step's tokens are routed to"));
  }
  if (!created.ok()) return created.status();
  std::unique_ptr<Decoder> decoder = *std::move(created);
  if (const ExpertCache* cache = decoder->expert_cache(); cache != nullptr) {
    LOG(INFO) << "generate: routed experts (" << ResidencyWhy(residency, *decoder, *be)
              << "): " << cache->slots() << " expert slots of " << cache->slot_bytes()
              << " bytes on the device";
  }
  MOBIUS_RETURN_IF_ERROR(decoder->SetWeights(std::move(model->tensors)));
  if (adapter) MOBIUS_RETURN_IF_ERROR(decoder->SetAdapters(adapter->tensors));
  if (const ExpertCache* cache = decoder->expert_cache(); cache != nullptr && !cache->pinned()) {
    LOG(WARNING) << "generate: routed experts: " << cache->host_bytes()
                 << " bytes of experts stay in pageable host memory (" << cache->pin_error()
                 << "): slower copies";
  }

  const auto start = std::chrono::steady_clock::now();
  MOBIUS_ASSIGN_OR_RETURN(GenerateResult result, Generate(*decoder, prompt, options));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  LOG(INFO) << "generate: " << prompt.size() << " prompt tokens, " << result.tokens.size()
            << " new (" << (result.stopped ? "stopped at eos" : "max_new_tokens") << ") in "
            << seconds << " s on " << be->name();
  if (const ExpertCache* cache = decoder->expert_cache(); cache != nullptr) {
    const ExpertCache::Stats& s = cache->stats();
    LOG(INFO) << "generate: routed experts: " << s.fetched << " experts ran in " << s.calls
              << " MoE block forwards, " << s.uploaded << " uploaded ("
              << absl::StrFormat("%.1f MiB", s.uploaded_bytes / 1048576.0) << "); copying every "
              << "expert of each block would have moved "
              << absl::StrFormat("%.1f MiB (%.1fx)", s.all_experts_bytes / 1048576.0,
                                 s.uploaded_bytes == 0
                                     ? 0.0
                                     : static_cast<double>(s.all_experts_bytes) /
                                           static_cast<double>(s.uploaded_bytes));
  }

  std::optional<std::string> text;
  if (tokenizer.ok()) {
    // A model's vocabulary may be padded past its tokenizer's (Qwen's is): such ids have no text.
    std::vector<int32_t> known;
    for (int32_t id : result.tokens) {
      if (id < (*tokenizer)->vocab_size()) known.push_back(id);
    }
    if (known.size() < result.tokens.size()) {
      LOG(WARNING) << "generate: " << result.tokens.size() - known.size()
                   << " new ids are past the tokenizer's " << (*tokenizer)->vocab_size()
                   << " tokens: no text for them";
    }
    absl::StatusOr<std::string> decoded = (*tokenizer)->Decode(known, true);
    if (!decoded.ok()) return Prefixed("decoding the new tokens", decoded.status());
    text = *std::move(decoded);
  }
  if (!prompt_text.empty()) {
    std::cout << *text << std::endl;
  } else {
    std::cout << "ids: " << absl::StrJoin(result.tokens, " ") << "\n";
    if (text) std::cout << "text: " << *text << "\n";
    std::cout << std::flush;
  }
  return absl::OkStatus();
}

}  // namespace

int RunGenerateCommand(const std::vector<std::string>& args) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (args.size() != 3) {
    std::cerr << kPrefix << (args.size() < 3 ? "missing MODEL_DIR" : "unexpected arguments")
              << "\nusage: " << kGenerateUsage << std::endl;
    return 2;
  }
  LOG(INFO) << "generate configuration:\n" << EffectiveFlags("worker/checkpoint/worker_flags");
  const absl::Status s = Run(args[2]);
  return s.ok() ? 0 : Fail(s);
}

}  // namespace mobius::generate
