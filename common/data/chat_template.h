// A model's own chat template, rendered as Hugging Face transformers renders it.
//
// Where it comes from (LoadChatTemplate): `chat_template.jinja` in the model directory, else the
// `chat_template` of its tokenizer_config.json (a string, or a list of {"name", "template"}: the
// one named "default" unless a name is given). The special tokens the template may use
// (bos_token, eos_token, unk_token, pad_token, ..., additional_special_tokens) come from
// tokenizer_config.json as transformers passes them (strings; an {"content": ...} object gives
// its content; null ones are left undefined).
//
// How it is rendered (RenderConversations): by Python's jinja2 (Debian's python3-jinja2), the
// engine transformers itself uses, in a child process running common/data/chat_render.py (built
// into this library; its header says the environment, the protocol and how an assistant turn's
// trained span is found). A home-made Jinja subset would drift from what serving stacks render;
// a C++ port (minja, jinja2cpp) is not in Debian. The child runs as the calling process's user
// (the tokenizer child is the job's user), reads its request from a sealed memory file and can
// only write lines to a pipe: a template that loops or raises ends that conversation or that
// child, never the caller.
//
// Thread-safety: the functions are reentrant; each call starts its own children.
#ifndef MOBIUS_COMMON_DATA_CHAT_TEMPLATE_H_
#define MOBIUS_COMMON_DATA_CHAT_TEMPLATE_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace mobius::data {

struct ChatTemplate {
  std::string source;               // the Jinja text
  std::string origin;               // "DIR/tokenizer_config.json (chat_template \"default\")"
  std::string special_tokens_json;  // a JSON object: {"bos_token": "<s>", ...}
};

// The template of `model_dir` (`name` empty: chat_template.jinja, else the config's default or
// only template). NOT_FOUND when the directory has none (the message names what was looked for
// and the fix: dataset.chat_template chatml or plain); INVALID_ARGUMENT for an unreadable or
// malformed tokenizer_config.json or an unknown name (the available names listed).
absl::StatusOr<ChatTemplate> LoadChatTemplate(const std::string& model_dir,
                                              const std::string& name = "");

struct RenderedConversation {
  std::string text;  // the whole rendering (train: add_generation_prompt false; prompt: true)
  std::vector<std::pair<int64_t, int64_t>> spans;  // train: byte ranges [begin, end) trained on
  std::string end_of_turn;  // prompt: what ends an assistant turn ("<|im_end|>"; "" if unknown)
  // A conversation that could not be rendered: the message, the message's index (-1: the whole
  // conversation) and whether it is merely empty of training text (no assistant turn).
  std::string error;
  int64_t message = -1;
  bool skip = false;
};

struct ChatRenderOptions {
  std::string kwargs_json = "{}";  // extra template variables, e.g. {"enable_thinking": false}
  bool prompt = false;             // render for generation (add_generation_prompt)
  // The interpreter; empty: $MOBIUS_PYTHON, else /usr/bin/python3.
  std::string python;
  // Renderer children running at once; 0: one per core. Each renders a slice of at most 8192
  // conversations or 16 MiB (a child's memory is bounded, whatever the dataset's size).
  int processes = 0;
};

// Renders each conversation (a JSON object with "messages" and optionally "tools", as text);
// results in order, one per conversation. A conversation's own problem is in its result; the
// status is an error only when nothing could be rendered: FAILED_PRECONDITION when Python or
// jinja2 is missing (naming the packages), INVALID_ARGUMENT when the template does not compile
// (origin, line, Jinja's message) or kwargs_json is not an object, INTERNAL when the child died.
absl::StatusOr<std::vector<RenderedConversation>> RenderConversations(
    const ChatTemplate& chat_template, const std::vector<std::string>& conversations,
    const ChatRenderOptions& options = {});

// Job-spec template variables (strings) as a JSON object: "true"/"false" become booleans, "null"
// null, an integer or decimal number a number, anything else stays a string.
std::string ChatTemplateKwargsJson(const std::map<std::string, std::string>& kwargs);

// "k=v,k2=v2" (the CLI's --chat_template_kwargs) -> a map; INVALID_ARGUMENT naming a malformed
// entry.
absl::StatusOr<std::map<std::string, std::string>> ParseChatTemplateKwargs(
    const std::string& text);

// The renderer's Python source (chat_render.py, embedded at build time).
const char* ChatRenderScript();

}  // namespace mobius::data

#endif  // MOBIUS_COMMON_DATA_CHAT_TEMPLATE_H_
