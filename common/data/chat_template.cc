#include "common/data/chat_template.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/subprocess.h"
#include "nlohmann/json.hpp"

namespace mobius::data {
namespace internal {
extern const char kChatRenderScript[];
}  // namespace internal

const char* ChatRenderScript() { return internal::kChatRenderScript; }

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

absl::StatusOr<std::string> ReadSmallFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) return absl::InvalidArgumentError(absl::StrCat(path.string(), ": cannot read"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// transformers' special_tokens_map: the *_token entries and additional_special_tokens.
std::string SpecialTokens(const json& config) {
  json out = json::object();
  auto text = [](const json& v) -> const json* {
    if (v.is_string()) return &v;
    if (v.is_object() && v.contains("content") && v["content"].is_string()) return &v["content"];
    return nullptr;
  };
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                          "cls_token", "mask_token"}) {
    if (!config.contains(key)) continue;
    if (const json* t = text(config[key])) out[key] = *t;
  }
  if (config.contains("additional_special_tokens") &&
      config["additional_special_tokens"].is_array()) {
    json list = json::array();
    for (const json& v : config["additional_special_tokens"]) {
      if (const json* t = text(v)) list.push_back(*t);
    }
    out["additional_special_tokens"] = list;
  }
  return out.dump();
}

// Reads all of both pipes (so neither fills while the other is read), then reaps the child.
absl::Status Collect(const SpawnedProcess& child, std::string* out, std::string* err,
                     int* status) {
  pollfd fds[2] = {{child.out_fd, POLLIN, 0}, {child.err_fd, POLLIN, 0}};
  std::string* sinks[2] = {out, err};
  int open = 2;
  char buf[65536];
  while (open > 0) {
    const int n = ::poll(fds, 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        sinks[i]->append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  for (const pollfd& p : fds) {
    if (p.fd >= 0) ::close(p.fd);
  }
  while (::waitpid(child.pid, status, 0) < 0 && errno == EINTR) {
  }
  return absl::OkStatus();
}

absl::StatusOr<RenderedConversation> ParseResult(const std::string& line) {
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InternalError(absl::StrCat("chat renderer: unreadable result line: ", line));
  }
  RenderedConversation r;
  if (j.contains("error")) {
    r.error = j.value("error", std::string("error"));
    r.message = j.value("message", int64_t{-1});
    r.skip = j.value("skip", false);
    return r;
  }
  r.text = j.value("text", std::string());
  r.end_of_turn = j.value("end_of_turn", std::string());
  if (j.contains("spans")) {
    for (const json& s : j["spans"]) {
      const int64_t b = s.at(0).get<int64_t>(), e = s.at(1).get<int64_t>();
      if (b < 0 || e < b || e > static_cast<int64_t>(r.text.size())) {
        return absl::InternalError(absl::StrCat("chat renderer: span [", b, ", ", e,
                                                ") outside the rendered text"));
      }
      r.spans.emplace_back(b, e);
    }
  }
  return r;
}

}  // namespace

std::string ChatTemplateKwargsJson(const std::map<std::string, std::string>& kwargs) {
  json out = json::object();
  for (const auto& [key, value] : kwargs) {
    if (value == "true" || value == "false") {
      out[key] = value == "true";
    } else if (value == "null") {
      out[key] = nullptr;
    } else {
      json number = json::parse(value, nullptr, /*allow_exceptions=*/false);
      if (!value.empty() && !number.is_discarded() && number.is_number()) {
        out[key] = number;
      } else {
        out[key] = value;
      }
    }
  }
  return out.dump();
}

absl::StatusOr<std::map<std::string, std::string>> ParseChatTemplateKwargs(
    const std::string& text) {
  std::map<std::string, std::string> out;
  for (absl::string_view entry : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    const size_t eq = entry.find('=');
    if (eq == absl::string_view::npos || eq == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "chat template kwargs: \"", entry, "\" is not NAME=VALUE (e.g. enable_thinking=false)"));
    }
    out[std::string(entry.substr(0, eq))] = std::string(entry.substr(eq + 1));
  }
  return out;
}

absl::StatusOr<ChatTemplate> LoadChatTemplate(const std::string& model_dir,
                                              const std::string& name) {
  const fs::path dir(model_dir);
  const fs::path jinja = dir / "chat_template.jinja";
  const fs::path config_path = dir / "tokenizer_config.json";
  ChatTemplate t;
  json config = json::object();
  std::error_code ec;
  if (fs::exists(config_path, ec)) {
    absl::StatusOr<std::string> text = ReadSmallFile(config_path);
    if (!text.ok()) return text.status();
    config = json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (config.is_discarded() || !config.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(config_path.string(), ": not a JSON object"));
    }
  }
  t.special_tokens_json = SpecialTokens(config);
  if (name.empty() && fs::exists(jinja, ec)) {
    absl::StatusOr<std::string> text = ReadSmallFile(jinja);
    if (!text.ok()) return text.status();
    t.source = *std::move(text);
    t.origin = jinja.string();
    return t;
  }
  const json* ct = config.contains("chat_template") ? &config["chat_template"] : nullptr;
  if (ct != nullptr && ct->is_string() && name.empty()) {
    t.source = ct->get<std::string>();
    t.origin = absl::StrCat(config_path.string(), " (chat_template)");
    return t;
  }
  if (ct != nullptr && ct->is_array()) {
    const std::string want = name.empty() ? "default" : name;
    std::vector<std::string> names;
    for (const json& e : *ct) {
      if (!e.is_object() || !e.contains("name") || !e["name"].is_string() ||
          !e.contains("template") || !e["template"].is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(
            config_path.string(), ": chat_template: a list entry needs string fields \"name\" "
                                  "and \"template\""));
      }
      names.push_back(e["name"].get<std::string>());
      if (names.back() == want) {
        t.source = e["template"].get<std::string>();
        t.origin = absl::StrCat(config_path.string(), " (chat_template \"", want, "\")");
        return t;
      }
    }
    return absl::InvalidArgumentError(absl::StrCat(config_path.string(),
                                                   ": no chat template named \"", want,
                                                   "\" (it has: ", absl::StrJoin(names, ", "),
                                                   ")"));
  }
  if (ct != nullptr && !ct->is_null() && !ct->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(
        config_path.string(), ": chat_template must be a string or a list of named templates"));
  }
  if (!name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        model_dir, " has no named chat templates (asked for \"", name, "\")"));
  }
  return absl::NotFoundError(absl::StrCat(
      "the model ", model_dir, " has no chat template (neither chat_template.jinja nor a "
      "chat_template in tokenizer_config.json); set dataset.chat_template to chatml or plain, "
      "or add the model's template"));
}

namespace {

// One renderer child over conversations [begin, end): `head` is the request up to its
// conversations list.
absl::StatusOr<std::vector<RenderedConversation>> RenderSlice(
    const std::string& head, const std::vector<std::string>& conversations, size_t begin,
    size_t end, const std::string& python) {
  std::string request = head;
  for (size_t i = begin; i < end; ++i) {
    if (i > begin) request += ',';
    request += conversations[i];
  }
  request += "]}";
  absl::StatusOr<int> fd = TextDescriptor("mobius-chat-request", request);
  if (!fd.ok()) return fd.status();
  request.clear();
  request.shrink_to_fit();
  SpawnOptions spawn;
  spawn.inherit = {{*fd, 3}};
  spawn.die_with_parent = true;
  absl::StatusOr<SpawnedProcess> child =
      SpawnWithPipes({python, "-I", "-c", ChatRenderScript(), "fd:3"}, spawn);
  ::close(*fd);
  if (!child.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot start ", python, " to render the chat template (", child.status().message(),
        "); it needs Python 3 with jinja2 (Debian: python3 python3-jinja2)"));
  }
  std::string out, err;
  int status = 0;
  if (absl::Status s = Collect(*child, &out, &err, &status); !s.ok()) return s;
  std::vector<absl::string_view> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  if (!lines.empty() && absl::StartsWith(lines.front(), "{\"fatal\"")) {
    json j = json::parse(lines.front(), nullptr, /*allow_exceptions=*/false);
    const std::string what =
        j.is_object() ? j.value("fatal", std::string(lines.front())) : std::string(lines.front());
    if (what.find("jinja2") != std::string::npos && what.find("import") != std::string::npos) {
      return absl::FailedPreconditionError(what);
    }
    return absl::InvalidArgumentError(absl::StrCat("chat template ", what));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || lines.size() != end - begin) {
    return absl::InternalError(absl::StrCat(
        "the chat renderer (", python, ") ",
        WIFEXITED(status) ? absl::StrCat("exited with status ", WEXITSTATUS(status))
                          : "was killed by a signal",
        " after ", lines.size(), " of ", end - begin, " conversations",
        err.empty() ? "" : ": ", err.substr(err.size() > 2000 ? err.size() - 2000 : 0)));
  }
  std::vector<RenderedConversation> results;
  results.reserve(lines.size());
  for (absl::string_view line : lines) {
    absl::StatusOr<RenderedConversation> r = ParseResult(std::string(line));
    if (!r.ok()) return r.status();
    results.push_back(*std::move(r));
  }
  return results;
}

}  // namespace

absl::StatusOr<std::vector<RenderedConversation>> RenderConversations(
    const ChatTemplate& chat_template, const std::vector<std::string>& conversations,
    const ChatRenderOptions& options) {
  json kwargs = json::parse(options.kwargs_json.empty() ? "{}" : options.kwargs_json, nullptr,
                            /*allow_exceptions=*/false);
  if (kwargs.is_discarded() || !kwargs.is_object()) {
    return absl::InvalidArgumentError("chat template kwargs: not a JSON object");
  }
  json special = json::parse(chat_template.special_tokens_json.empty()
                                 ? "{}"
                                 : chat_template.special_tokens_json,
                             nullptr, /*allow_exceptions=*/false);
  if (special.is_discarded()) special = json::object();
  for (size_t i = 0; i < conversations.size(); ++i) {
    if (!json::accept(conversations[i])) {
      return absl::InvalidArgumentError(absl::StrCat("conversation ", i, ": invalid JSON"));
    }
  }
  json request = {{"template", chat_template.source},
                  {"origin", chat_template.origin},
                  {"special_tokens", special},
                  {"kwargs", kwargs},
                  {"mode", options.prompt ? "prompt" : "train"}};
  std::string head = request.dump();
  head.pop_back();  // the closing brace: the conversations follow
  head += ",\"conversations\":[";
  std::string python = options.python;
  if (python.empty()) {
    const char* env = std::getenv("MOBIUS_PYTHON");
    python = env != nullptr && *env != '\0' ? env : "/usr/bin/python3";
  }
  // Slices of at most kSliceConversations conversations or kSliceBytes of JSON (a child's memory
  // stays bounded whatever the dataset's size), rendered by up to `processes` children at once.
  constexpr size_t kSliceConversations = 8192, kSliceBytes = 16 << 20;
  const size_t n = conversations.size();
  std::vector<std::pair<size_t, size_t>> slices;
  for (size_t begin = 0, bytes = 0, i = 0; i < n; ++i) {
    bytes += conversations[i].size() + 1;
    if (i + 1 == n || i + 1 - begin == kSliceConversations || bytes >= kSliceBytes) {
      slices.emplace_back(begin, i + 1);
      begin = i + 1;
      bytes = 0;
    }
  }
  // Small inputs: split further so every child has work (at least 64 conversations each).
  const size_t cores = options.processes > 0
                           ? static_cast<size_t>(options.processes)
                           : std::max<size_t>(1, std::thread::hardware_concurrency());
  if (slices.size() == 1 && cores > 1) {
    const size_t parts = std::max<size_t>(1, std::min(cores, n / 64));
    slices.clear();
    for (size_t c = 0; c < parts; ++c) slices.emplace_back(n * c / parts, n * (c + 1) / parts);
  }
  std::vector<absl::StatusOr<std::vector<RenderedConversation>>> parts(
      slices.size(), absl::InternalError("not rendered"));
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  for (size_t t = 0; t < std::min(cores, slices.size()); ++t) {
    threads.emplace_back([&] {
      for (size_t k = next++; k < slices.size() && !failed; k = next++) {
        parts[k] = RenderSlice(head, conversations, slices[k].first, slices[k].second, python);
        if (!parts[k].ok()) failed = true;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<RenderedConversation> results;
  results.reserve(n);
  for (auto& part : parts) {
    if (!part.ok() && !absl::IsInternal(part.status())) return part.status();
  }
  for (auto& part : parts) {
    if (!part.ok()) return part.status();
    for (RenderedConversation& r : *part) results.push_back(std::move(r));
  }
  return results;
}

}  // namespace mobius::data
