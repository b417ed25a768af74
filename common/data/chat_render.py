"""Renders chat conversations with a model's own Jinja chat template, as Hugging Face transformers'
apply_chat_template does, and finds the characters an assistant turn trains on.

Run by common/data/chat_template.cc (the tokenizer child, as the job's user) as
`python3 -I -c <this file> REQUEST_FD`; also runnable as a file. The request (JSON, read from the
descriptor) is
  {"template": str, "origin": str, "special_tokens": {name: str | [str]}, "kwargs": {...},
   "mode": "train" | "prompt", "conversations": [{"messages": [...], "tools": [...]?}, ...]}
and stdout gets one JSON line per conversation, in order:
  train:  {"text": str, "spans": [[begin, end], ...]}   UTF-8 byte offsets into text
  prompt: {"text": str, "end_of_turn": str}             rendered with add_generation_prompt
  either: {"error": str, "message": int, "skip": bool}  message -1: the whole conversation;
                                                        skip: a conversation with nothing to train
A request that cannot be used at all (the template does not compile) is one line
{"fatal": str} and exit status 2.

The environment is transformers': an immutable sandbox, trim_blocks and lstrip_blocks, the
loopcontrols extension, `raise_exception`, `strftime_now`, a `tojson` that keeps non-ASCII, and
the `{% generation %}` block. The template gets `messages`, `tools` (when the conversation has
them), `add_generation_prompt`, the tokenizer's special tokens (bos_token, eos_token, ...) and the
job's kwargs (e.g. enable_thinking).

What an assistant turn trains on (mode train):
- where the template marks it with {% generation %} ... {% endgeneration %}: exactly that;
- otherwise from the message's place in the rendering: it starts after the generation prompt
  (what the template renders for the conversation before the turn with add_generation_prompt,
  after the previous message's content: its end-of-turn marker and the assistant header, e.g.
  "<|im_end|>\n<|im_start|>assistant\n"), matched against the full rendering as far as the two
  agree (a template may render a turn's header differently once later turns follow, as Qwen3
  does with an empty think block); it ends after what the template renders behind the message's
  content when it is the last message, trailing whitespace removed: the end-of-turn token(s)
  (e.g. "<|im_end|>", "<|eot_id|>", "</s>", "<end_of_turn>") and anything the model generates
  there (e.g. tool calls). Contents are located by private-use probe characters appended to
  them (before trailing whitespace, so templates that trim or split contents are followed; a
  template whose output changes otherwise with them is refused for that conversation).
"""
import json
import os
import re
import sys
from datetime import datetime

try:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError as e:  # the caller turns this into a clear error naming the package
    print(json.dumps({"fatal": "python3 cannot import jinja2 (%s): install python3-jinja2" % e}))
    sys.exit(2)

GEN_BEGIN = "\ue000"
GEN_END = "\ue001"
PROBE = "\ue002"
RESERVED = (GEN_BEGIN, GEN_END, PROBE)
GENERATION_TAG = re.compile(r"\{%-?\s*generation\s*-?%\}")


class TemplateRaised(Exception):
    pass


class GenerationBlock(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: renders its body between two markers when the
    environment's `mark_generation` is set (the marks become the turn's span), plain otherwise."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        text = caller()
        return GEN_BEGIN + text + GEN_END if self.environment.mark_generation else text


def raise_exception(message):
    raise TemplateRaised(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def compile_template(source):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationBlock, jinja2.ext.loopcontrols])
    env.mark_generation = False
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env, env.from_string(source)


class Renderer:
    def __init__(self, request):
        self.env, self.template = compile_template(request["template"])
        self.has_generation = GENERATION_TAG.search(request["template"]) is not None
        self.base = {}
        for name, value in (request.get("special_tokens") or {}).items():
            self.base[name] = value
        self.base.update(request.get("kwargs") or {})

    def render(self, messages, tools, add_generation_prompt, mark=False):
        args = dict(self.base)
        args["messages"] = messages
        if tools is not None:
            args["tools"] = tools
        args["add_generation_prompt"] = add_generation_prompt
        self.env.mark_generation = mark
        try:
            return self.template.render(**args)
        finally:
            self.env.mark_generation = False


def byte_spans(text, spans):
    """Character spans -> UTF-8 byte spans (each boundary's prefix encoded once, in order)."""
    points = sorted({p for span in spans for p in span})
    at, chars, nbytes = {}, 0, 0
    for p in points:
        nbytes += len(text[chars:p].encode("utf-8"))
        chars = p
        at[p] = nbytes
    return [[at[b], at[e]] for b, e in spans]


def probe_id(j):
    return chr(0xF0000 + j)  # a supplementary private-use character per message


def with_probes(messages, which):
    """Copies of the messages whose string contents in `which` carry PROBE + their index at the
    end of their text, before any trailing whitespace (a template that trims keeps trimming)."""
    out = []
    for j, m in enumerate(messages):
        if j in which and isinstance(m.get("content"), str):
            m = dict(m)
            text = m["content"]
            body = text.rstrip()
            m["content"] = body + PROBE + probe_id(j) + text[len(body):]
        out.append(m)
    return out


def find_probes(probed):
    """(the text without probes, {message index: position of its probe in that text})."""
    clean, where, i = [], {}, 0
    n = 0
    while True:
        k = probed.find(PROBE, i)
        if k < 0 or k + 1 >= len(probed):
            clean.append(probed[i:])
            break
        clean.append(probed[i:k])
        n += k - i
        where[ord(probed[k + 1]) - 0xF0000] = n
        i = k + 2
    return "".join(clean), where


def common_prefix(a, b):
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class ConversationError(Exception):
    def __init__(self, message, index=-1, skip=False):
        super().__init__(message)
        self.index = index
        self.skip = skip


def generation_spans(r, messages, tools):
    marked = r.render(messages, tools, False, mark=True)
    spans, text, pos = [], [], 0
    begin = None
    for ch in marked:
        if ch == GEN_BEGIN:
            begin = pos
        elif ch == GEN_END:
            if begin is not None and pos > begin:
                spans.append((begin, pos))
            begin = None
        else:
            text.append(ch)
            pos += 1
    return "".join(text), spans


def probed_spans(r, messages, tools, full):
    spans = []
    cursor = 0
    strings = {j for j, m in enumerate(messages) if isinstance(m.get("content"), str)}
    clean, ends = find_probes(r.render(with_probes(messages, strings), tools, False))
    if clean != full:
        raise ConversationError("the template renders the conversation differently when a "
                                "marker follows a message's content; it cannot be masked")
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        if not isinstance(m.get("content"), str):
            raise ConversationError("an assistant message needs a string \"content\"", i)
        if i not in ends:
            raise ConversationError("the template does not render this message's content", i)
        content_end = ends[i]
        # The start: the generation prompt after the previous rendered message's content.
        prev = [j for j in sorted(ends) if j < i]
        try:
            if prev:
                p = prev[-1]
                prompt, at = find_probes(r.render(with_probes(messages[:i], {p}), tools, True))
                header, anchor = (prompt[at[p]:], ends[p]) if p in at else (prompt, 0)
            else:
                header, anchor = r.render(messages[:i], tools, True), 0
            last, at = find_probes(r.render(with_probes(messages[:i + 1], {i}), tools, False))
        except (TemplateRaised, jinja2.TemplateError) as e:
            raise ConversationError("rendering the conversation up to it: %s" % e, i)
        start = max(anchor + common_prefix(full[anchor:], header), cursor)
        # The end: what the template renders behind the content when the turn is the last
        # message (its end-of-turn token(s)), trailing whitespace left out.
        tail = last[at[i]:].rstrip() if i in at else ""
        end = content_end + len(tail) if full.startswith(tail, content_end) else content_end
        start = min(start, content_end)
        if end > start:
            spans.append((start, end))
        cursor = max(cursor, end)
    return spans


def render_train(r, conv):
    messages = conv.get("messages")
    tools = conv.get("tools")
    if not isinstance(messages, list) or not messages:
        raise ConversationError("\"messages\" must be a non-empty list")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ConversationError("a message needs a string \"role\"", i)
        content = m.get("content")
        if isinstance(content, str) and any(c in content for c in RESERVED):
            raise ConversationError("the content holds a private-use character U+E000..U+E002 "
                                    "that the renderer reserves", i)

    if len(messages) > 0xFFFD:
        raise ConversationError("more than 65533 messages")
    if not any(m["role"] == "assistant" for m in messages):
        raise ConversationError("no assistant message", -1, skip=True)
    if r.has_generation:
        text, spans = generation_spans(r, messages, tools)
    else:
        text = r.render(messages, tools, False)
        spans = probed_spans(r, messages, tools, text)
    if not spans:
        raise ConversationError("no assistant text to train on", -1, skip=True)
    return {"text": text, "spans": byte_spans(text, spans)}


def render_prompt(r, conv):
    messages = conv.get("messages")
    tools = conv.get("tools")
    if not isinstance(messages, list) or not messages:
        raise ConversationError("\"messages\" must be a non-empty list")
    text = r.render(messages, tools, True)
    # The end-of-turn marker: what the template puts after an assistant reply when it is last.
    probe = with_probes(messages + [{"role": "assistant", "content": "x"}], {len(messages)})
    end_of_turn = ""
    try:
        rendered, at = find_probes(r.render(probe, tools, False))
        if len(messages) in at:
            end_of_turn = rendered[at[len(messages)]:].strip()
    except (TemplateRaised, jinja2.TemplateError):
        pass
    return {"text": text, "end_of_turn": end_of_turn}


def failing_message(r, conv):
    """The first message whose addition makes the template fail (-1 when none does alone)."""
    messages = conv.get("messages") if isinstance(conv, dict) else None
    if not isinstance(messages, list):
        return -1
    for k in range(1, len(messages) + 1):
        try:
            r.render(messages[:k], conv.get("tools"), False)
        except Exception:  # noqa: BLE001 - any failure of the prefix locates the message
            return k - 1
    return -1


def main():
    source = sys.argv[1] if len(sys.argv) > 1 else "-"
    if source.startswith("fd:"):
        with os.fdopen(int(source[3:]), "r", encoding="utf-8") as f:
            request = json.load(f)
    elif source == "-":
        request = json.load(sys.stdin)
    else:
        with open(source, encoding="utf-8") as f:
            request = json.load(f)
    try:
        r = Renderer(request)
    except jinja2.TemplateSyntaxError as e:
        print(json.dumps({"fatal": "%s: line %d: %s" % (request.get("origin", "template"),
                                                        e.lineno, e.message)}))
        return 2
    except jinja2.TemplateError as e:
        print(json.dumps({"fatal": "%s: %s" % (request.get("origin", "template"), e)}))
        return 2
    mode = request.get("mode", "train")
    out = sys.stdout
    for conv in request.get("conversations", []):
        try:
            if not isinstance(conv, dict):
                raise ConversationError("a conversation must be a JSON object")
            result = render_prompt(r, conv) if mode == "prompt" else render_train(r, conv)
        except ConversationError as e:
            result = {"error": str(e), "message": e.index, "skip": e.skip}
        except TemplateRaised as e:
            result = {"error": "the template raised: %s" % e,
                      "message": failing_message(r, conv), "skip": False}
        except jinja2.TemplateError as e:
            result = {"error": "Jinja: %s" % e, "message": failing_message(r, conv),
                      "skip": False}
        except (TypeError, ValueError, KeyError, AttributeError, IndexError,
                RecursionError) as e:
            result = {"error": "rendering failed: %s: %s" % (type(e).__name__, e),
                      "message": failing_message(r, conv), "skip": False}
        out.write(json.dumps(result, ensure_ascii=False))
        out.write("\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
