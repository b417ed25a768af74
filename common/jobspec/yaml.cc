#include "common/jobspec/yaml.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/errors.h"
#include "common/jobspec/byte_size.h"
#include "common/jobspec/fields.h"
#include "common/jobspec/utf8.h"
#include "common/status_macros.h"

namespace mobius::jobspec {
namespace {

struct Position {
  int line = -1;    // 1-based; -1: unknown
  int column = -1;  // 1-based
};

Position At(const YAML::Mark& m) {
  if (m.is_null() || m.line < 0) return {};
  return {m.line + 1, m.column + 1};
}

struct Problem {
  std::string field;  // empty: the document itself (syntax)
  std::string message;
  Position pos;
};

std::string FormatProblem(absl::string_view origin, const Problem& p) {
  std::string out(origin);
  if (p.pos.line > 0) absl::StrAppend(&out, ":", p.pos.line, ":", p.pos.column);
  absl::StrAppend(&out, ": ");
  if (!p.field.empty()) absl::StrAppend(&out, p.field, ": ");
  absl::StrAppend(&out, p.message);
  return out;
}

absl::Status ProblemsToStatus(absl::string_view origin, const std::vector<Problem>& problems) {
  return absl::InvalidArgumentError(
      absl::StrJoin(problems, "\n", [&](std::string* out, const Problem& p) {
        out->append(FormatProblem(origin, p));
      }));
}

std::string Quote(const std::string& s) {
  std::string shown = s.size() > 60 ? s.substr(0, 57) + "..." : s;
  return absl::StrCat("\"", absl::CHexEscape(shown), "\"");
}

// What a node is, for "(got ...)".
std::string Describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Scalar:
      return n.Tag() == "!" ? absl::StrCat("the quoted string ", Quote(n.Scalar()))
                            : Quote(n.Scalar());
    case YAML::NodeType::Sequence: return "a sequence";
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Null: return "null";
    default: return "nothing";
  }
}

bool IsPlainScalar(const YAML::Node& n) { return n.IsScalar() && n.Tag() != "!"; }

enum class NumberResult { kOk, kNotANumber, kOutOfRange };

// [+-]?[0-9]+ (YAML 1.2's core integers without the 0x/0o forms).
template <typename T>
NumberResult ParseInteger(const std::string& s, T& out) {
  size_t start = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
  if (start == s.size()) return NumberResult::kNotANumber;
  if (!std::all_of(s.begin() + start, s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return NumberResult::kNotANumber;
  }
  if (std::is_unsigned_v<T> && s[0] == '-') return NumberResult::kOutOfRange;
  const char* first = s.data() + (s[0] == '+' ? 1 : 0);
  auto [ptr, ec] = std::from_chars(first, s.data() + s.size(), out);
  if (ec == std::errc::result_out_of_range) return NumberResult::kOutOfRange;
  if (ec != std::errc() || ptr != s.data() + s.size()) return NumberResult::kNotANumber;
  return NumberResult::kOk;
}

// Decimal or exponent notation: 3e-4, 0.1, .5, 10, -1.5E+3. No .inf/.nan (a spec has no use for
// them) and no hexadecimal floats.
NumberResult ParseDouble(const std::string& s, double& out) {
  size_t i = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
  size_t digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  }
  if (digits == 0) return NumberResult::kNotANumber;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    size_t exp_digits = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++exp_digits;
    if (exp_digits == 0) return NumberResult::kNotANumber;
  }
  if (i != s.size()) return NumberResult::kNotANumber;
  const char* first = s.data() + (s[0] == '+' ? 1 : 0);
  auto [ptr, ec] = std::from_chars(first, s.data() + s.size(), out, std::chars_format::general);
  if (ec == std::errc::result_out_of_range) return NumberResult::kOutOfRange;
  if (ec != std::errc() || ptr != s.data() + s.size()) return NumberResult::kNotANumber;
  return NumberResult::kOk;
}

// Optimal-string-alignment distance: edits plus adjacent transpositions ("stpes" -> "steps": 1).
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// Every field path of the schema ("training.steps"), for "did you mean" hints.
class PathCollector {
 public:
  std::vector<std::string> paths;
  template <typename T>
  void Int(const char* key, T&) { Add(key); }
  void UInt(const char* key, const uint64_t&) { Add(key); }
  void Double(const char* key, const double&) { Add(key); }
  void String(const char* key, const std::string&) { Add(key); }
  void Bool(const char* key, const bool&) { Add(key); }
  void Path(const char* key, const std::string&) { Add(key); }
  void PathList(const char* key, const std::vector<std::string>&) { Add(key); }
  void Gpus(const char* key, const int&) { Add(key); }
  void Bytes(const char* key, const int64_t&) { Add(key); }
  void StringList(const char* key, const std::vector<std::string>&) { Add(key); }
  void Labels(const char* key, const std::map<std::string, std::string>&) { Add(key); }
  template <typename Fn>
  void Section(const char* key, Fn fn) {
    Add(key);
    const std::string saved = prefix_;
    prefix_ = absl::StrCat(prefix_, key, ".");
    fn();
    prefix_ = saved;
  }
  template <typename T, typename Fn>
  void OptionalSection(const char* key, const std::optional<T>&, Fn fn) {
    T fields;
    Section(key, [&] { fn(fields); });
  }

 private:
  void Add(const char* key) { paths.push_back(prefix_ + key); }
  std::string prefix_;
};

const std::vector<std::string>& AllFieldPaths() {
  static const std::vector<std::string>* paths = [] {
    const JobSpec spec;
    PathCollector c;
    internal::VisitJobSpec(spec, c);
    return new std::vector<std::string>(std::move(c.paths));
  }();
  return *paths;
}

// Reads a YAML mapping tree into a JobSpec through VisitJobSpec, collecting every problem.
class YamlReader {
 public:
  YamlReader(std::string base_dir, std::vector<Problem>& problems,
             std::map<std::string, Position>& positions)
      : base_dir_(std::move(base_dir)), problems_(problems), positions_(positions) {}

  void Read(const YAML::Node& root, JobSpec& spec) {
    if (!root.IsNull() && !root.IsMap()) {
      problems_.push_back({"", absl::StrCat("a job spec is a mapping of fields (got ",
                                            Describe(root), ")"),
                           At(root.Mark())});
      return;
    }
    Enter(root, "");
    internal::VisitJobSpec(spec, *this);
    Leave();
  }

  // --- The visitor interface (fields.h). ---
  template <typename T>
  void Int(const char* key, T& out) {
    const YAML::Node* v = Take(key);
    if (v != nullptr) ReadInteger(key, *v, out);
  }
  void UInt(const char* key, uint64_t& out) {
    const YAML::Node* v = Take(key);
    if (v != nullptr) ReadInteger(key, *v, out);
  }
  void Double(const char* key, double& out) {
    const YAML::Node* v = Take(key);
    if (v == nullptr) return;
    if (!IsPlainScalar(*v)) return Fail(key, *v, "must be a number");
    switch (ParseDouble(v->Scalar(), out)) {
      case NumberResult::kOk: return;
      case NumberResult::kNotANumber: return Fail(key, *v, "must be a number");
      case NumberResult::kOutOfRange: return Fail(key, *v, "is out of range");
    }
  }
  void String(const char* key, std::string& out) {
    const YAML::Node* v = Take(key);
    if (v == nullptr) return;
    if (!v->IsScalar()) return Fail(key, *v, "must be a string");
    out = v->Scalar();
  }
  void Bool(const char* key, bool& out) {
    const YAML::Node* v = Take(key);
    if (v == nullptr) return;
    const std::string text = IsPlainScalar(*v) ? v->Scalar() : "";
    if (text == "true" || text == "True" || text == "TRUE") {
      out = true;
    } else if (text == "false" || text == "False" || text == "FALSE") {
      out = false;
    } else {
      Fail(key, *v, "must be true or false");
    }
  }
  void Path(const char* key, std::string& out) {
    String(key, out);
    Resolve(out);
  }
  // A sequence of paths, or one path as a scalar.
  void PathList(const char* key, std::vector<std::string>& out) {
    const YAML::Node* v = Take(key);
    if (v == nullptr) return;
    if (v->IsScalar()) {
      out = {v->Scalar()};
      Resolve(out.back());
      return;
    }
    if (!v->IsSequence()) return Fail(key, *v, "must be a list of paths");
    out.clear();
    for (size_t i = 0; i < v->size(); ++i) {
      const YAML::Node item = (*v)[i];
      const std::string field = absl::StrCat(Path(key), "[", i, "]");
      positions_[field] = At(item.Mark());
      if (!item.IsScalar()) {
        Add(field, absl::StrCat("must be a path (got ", Describe(item), ")"), item);
        continue;
      }
      out.push_back(item.Scalar());
      Resolve(out.back());
    }
  }
  // A sequence of strings (not a single scalar: a list field written as one name is a mistake
  // more often than a shorthand, and PEFT reads a string target_modules as a regular expression).
  void StringList(const char* key, std::vector<std::string>& out) {
    const YAML::Node* v = Take(key);
    if (v == nullptr) return;
    if (!v->IsSequence()) return Fail(key, *v, "must be a list of strings");
    out.clear();
    for (size_t i = 0; i < v->size(); ++i) {
      const YAML::Node item = (*v)[i];
      const std::string field = absl::StrCat(Path(key), "[", i, "]");
      positions_[field] = At(item.Mark());
      if (!item.IsScalar()) {
        Add(field, absl::StrCat("must be a string (got ", Describe(item), ")"), item);
        continue;
      }
      out.push_back(item.Scalar());
    }
  }
  void Gpus(const char* key, int& out) {
    const YAML::Node* v = Take(key);
    if (v == nullptr) return;
    if (v->IsScalar() && v->Scalar() == "all") {
      out = 0;
      return;
    }
    if (!IsPlainScalar(*v) || ParseInteger(v->Scalar(), out) != NumberResult::kOk) {
      return Fail(key, *v, "must be a GPU count or \"all\"");
    }
  }
  void Bytes(const char* key, int64_t& out) {
    const YAML::Node* v = Take(key);
    if (v == nullptr) return;
    if (!v->IsScalar()) return Fail(key, *v, "must be a byte count or a size such as 20GiB");
    // A plain integer is bytes (a negative one is left for the validator to report).
    if (IsPlainScalar(*v) && ParseInteger(v->Scalar(), out) == NumberResult::kOk) return;
    absl::StatusOr<int64_t> bytes = ParseByteSize(v->Scalar());
    if (!bytes.ok()) return Add(Path(key), std::string(bytes.status().message()), *v);
    out = *bytes;
  }
  void Labels(const char* key, std::map<std::string, std::string>& out) {
    const YAML::Node* v = Take(key);
    if (v == nullptr) return;
    if (!v->IsMap()) return Fail(key, *v, "must be a mapping of names to strings");
    Enter(*v, key);
    for (Entry& e : levels_.back().entries) {
      e.used = true;
      const std::string field = Path(e.key);
      positions_[field] = At(e.value.Mark());
      if (!e.value.IsScalar()) {
        Add(field, absl::StrCat("label values must be strings (got ", Describe(e.value), ")"),
            e.value);
        continue;
      }
      out[e.key] = e.value.Scalar();
    }
    Leave();
  }
  template <typename Fn>
  void Section(const char* key, Fn fn) {
    const YAML::Node* v = Take(key);
    const YAML::Node empty;
    if (v != nullptr && !v->IsMap()) {
      Fail(key, *v, "must be a mapping of fields");
      v = nullptr;
    }
    Enter(v != nullptr ? *v : empty, key);
    fn();
    Leave();
  }
  // Absent or null: stays nullopt. A mapping (even an empty one) makes it present, with the
  // defaults of T for the keys it does not have.
  template <typename T, typename Fn>
  void OptionalSection(const char* key, std::optional<T>& out, Fn fn) {
    const YAML::Node* v = Take(key);
    if (v == nullptr) return;
    if (!v->IsMap()) return Fail(key, *v, "must be a mapping of fields");
    out.emplace();
    Enter(*v, key);
    fn(*out);
    Leave();
  }

 private:
  struct Entry {
    std::string key;
    YAML::Node key_node;
    YAML::Node value;
    bool used = false;
  };
  struct Level {
    std::string prefix;  // "" or "training."
    std::vector<Entry> entries;
    std::vector<std::string> known;
  };

  std::string Path(const std::string& key) const { return levels_.back().prefix + key; }

  // A relative path is relative to the spec file's directory.
  void Resolve(std::string& out) const {
    if (out.empty() || out.front() == '/' || base_dir_.empty()) return;
    out = (std::filesystem::path(base_dir_) / out).lexically_normal().string();
    if (out.size() > 1 && out.back() == '/') out.pop_back();  // "dir/." normalizes to "dir/"
  }

  void Add(const std::string& field, std::string message, const YAML::Node& at) {
    problems_.push_back({field, std::move(message), At(at.Mark())});
  }
  void Fail(const char* key, const YAML::Node& v, absl::string_view what) {
    Add(Path(key), absl::StrCat(what, " (got ", Describe(v), ")"), v);
  }

  template <typename T>
  void ReadInteger(const char* key, const YAML::Node& v, T& out) {
    if (!IsPlainScalar(v)) return Fail(key, v, "must be an integer");
    switch (ParseInteger(v.Scalar(), out)) {
      case NumberResult::kOk: return;
      case NumberResult::kNotANumber: return Fail(key, v, "must be an integer");
      case NumberResult::kOutOfRange:
        return Fail(key, v,
                    absl::StrCat("is out of range [", std::numeric_limits<T>::min(), ", ",
                                 std::numeric_limits<T>::max(), "]"));
    }
  }

  // Indexes a mapping's entries: keys must be scalars, each at most once.
  void Enter(const YAML::Node& map, absl::string_view key) {
    Level level;
    level.prefix = levels_.empty() ? "" : absl::StrCat(levels_.back().prefix, key, ".");
    if (map.IsMap()) {
      std::set<std::string> seen;
      for (auto it = map.begin(); it != map.end(); ++it) {
        const YAML::Node k = it->first;
        if (!k.IsScalar()) {
          problems_.push_back({level.prefix.empty() ? "" : level.prefix.substr(0, level.prefix.size() - 1),
                               absl::StrCat("keys must be strings (got ", Describe(k), ")"),
                               At(k.Mark())});
          continue;
        }
        if (!seen.insert(k.Scalar()).second) {
          Add(level.prefix + k.Scalar(), "duplicate key", k);
          continue;
        }
        level.entries.push_back({k.Scalar(), k, it->second});
      }
    }
    levels_.push_back(std::move(level));
  }

  // Reports the keys nobody asked for.
  void Leave() {
    Level& level = levels_.back();
    for (const Entry& e : level.entries) {
      if (e.used) continue;
      Add(level.prefix + e.key, absl::StrCat("unknown key", Hint(level, e.key)), e.key_node);
    }
    levels_.pop_back();
  }

  // " (did you mean "steps"?)": a close key of the same mapping, or the same key in another
  // mapping; else the keys this mapping may have.
  static std::string Hint(const Level& level, const std::string& key) {
    if (key.size() > 64) return "";  // not a typo; keep the distance computation small
    std::string best;
    size_t best_distance = std::max<size_t>(1, std::min<size_t>(2, key.size() / 3));
    for (const std::string& k : level.known) {
      const size_t d = EditDistance(key, k);
      if (d <= best_distance && (best.empty() || d < best_distance)) best = k, best_distance = d;
    }
    if (!best.empty()) return absl::StrCat(" (did you mean \"", best, "\"?)");
    for (const std::string& path : AllFieldPaths()) {
      const size_t dot = path.rfind('.');
      const std::string prefix = dot == std::string::npos ? "" : path.substr(0, dot + 1);
      if (path.substr(prefix.size()) != key || prefix == level.prefix) continue;
      return prefix.empty() ? absl::StrCat(" (", key, " is a top-level field)")
                            : absl::StrCat(" (did you mean ", path, "?)");
    }
    return absl::StrCat("; expected one of ", absl::StrJoin(level.known, ", "));
  }

  // The value of `key` in the current mapping; nullptr when absent or null.
  const YAML::Node* Take(const char* key) {
    Level& level = levels_.back();
    level.known.push_back(key);
    for (Entry& e : level.entries) {
      if (e.key != key) continue;
      e.used = true;
      positions_[level.prefix + key] = At(e.value.Mark());
      if (e.value.IsNull()) return nullptr;
      return &e.value;
    }
    return nullptr;
  }

  std::string base_dir_;
  std::vector<Problem>& problems_;
  std::map<std::string, Position>& positions_;
  std::vector<Level> levels_;
};

// The position of a field for a validation error: its own, else its section's (a required field
// missing from a section that is there).
Position PositionOf(const std::map<std::string, Position>& positions, const std::string& field) {
  std::string f = field;
  while (true) {
    auto it = positions.find(f);
    if (it != positions.end()) return it->second;
    const size_t dot = f.rfind('.');
    if (dot == std::string::npos) return {};
    f.resize(dot);
  }
}

// Records where each document starts and ignores everything else.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> starts;
  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// The first document of `text`. yaml-cpp 0.7's LoadAll loops forever, allocating, when a token
// cannot start a node (a stray "," at the top level: jbeder/yaml-cpp#1040, fixed upstream in
// 2024 by #1318/#1319): the parser returns an empty document without consuming the token, again
// and again. So the documents are counted here with a cap of two, a second document starting
// where the first did is that stuck token (a syntax error), and only then is the first one built.
// Throws yaml-cpp's exceptions; nullopt with `problem` set for a stream that is not one document.
std::optional<YAML::Node> LoadOneDocument(const std::string& text, Problem& problem) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts docs;
  while (docs.starts.size() < 2 && parser.HandleNextDocument(docs)) {
  }
  if (docs.starts.size() == 2) {
    const YAML::Mark& first = docs.starts[0];
    const YAML::Mark& second = docs.starts[1];
    if (second.pos == first.pos) {
      const size_t at = static_cast<size_t>(std::max(0, second.pos));
      const std::string token = at < text.size() ? text.substr(at, 1) : "";
      problem = {"", absl::StrCat("YAML syntax error: unexpected ", Quote(token)), At(second)};
    } else {
      problem = {"", "one YAML document expected (got more)", At(second)};
    }
    return std::nullopt;
  }
  return YAML::Load(text);
}

// YAML's character set (1.2, "c-printable") in UTF-8: no C0 controls but tab, LF and CR, no DEL,
// no C1 controls but NEL, no U+FFFE/U+FFFF. Checked before yaml-cpp sees the text (utf8.h).
std::optional<Problem> CheckCharacters(absl::string_view text) {
  const std::string_view s(text.data(), text.size());
  int line = 1, column = 1;
  uint32_t cp = 0;
  for (size_t i = 0; i < s.size(); ++column) {
    const int len = internal::DecodeUtf8(s, i, &cp);
    if (len == 0) {
      return Problem{"", absl::StrCat("not valid UTF-8 (byte 0x",
                                      absl::Hex(static_cast<unsigned char>(s[i]), absl::kZeroPad2),
                                      ")"),
                     {line, column}};
    }
    const bool allowed = cp == '\t' || cp == '\n' || cp == '\r' || (cp >= 0x20 && cp < 0x7F) ||
                         cp == 0x85 || (cp >= 0xA0 && cp != 0xFFFE && cp != 0xFFFF);
    if (!allowed) {
      return Problem{"", absl::StrCat("character U+",
                                      absl::AsciiStrToUpper(absl::StrCat(absl::Hex(cp, absl::kZeroPad4))),
                                      " is not allowed in YAML"),
                     {line, column}};
    }
    if (cp == '\n') ++line, column = 0;
    i += len;
  }
  return std::nullopt;
}

absl::StatusOr<JobSpec> Parse(absl::string_view text, const YamlOptions& options,
                              absl::string_view origin) {
  if (static_cast<int64_t>(text.size()) > kMaxJobSpecBytes) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": larger than ", kMaxJobSpecBytes,
                                                   " bytes (", text.size(), ")"));
  }
  if (std::optional<Problem> bad = CheckCharacters(text)) return ProblemsToStatus(origin, {*bad});
  std::vector<Problem> problems;
  std::map<std::string, Position> positions;
  JobSpec spec;
  try {
    Problem not_one;
    std::optional<YAML::Node> doc = LoadOneDocument(std::string(text), not_one);
    if (!doc) {
      problems.push_back(std::move(not_one));
    } else {
      YamlReader reader(options.base_dir, problems, positions);
      reader.Read(*doc, spec);
    }
  } catch (const YAML::DeepRecursion& e) {
    problems.push_back({"", "YAML nested too deeply", At(e.mark)});
  } catch (const YAML::ParserException& e) {
    problems.push_back({"", absl::StrCat("YAML syntax error: ", e.msg), At(e.mark)});
  } catch (const YAML::Exception& e) {
    problems.push_back({"", absl::StrCat("cannot read YAML: ", e.msg), At(e.mark)});
  } catch (const std::exception& e) {
    problems.push_back({"", absl::StrCat("cannot read YAML: ", e.what()), {}});
  } catch (...) {
    problems.push_back({"", "cannot read YAML: unknown error", {}});
  }
  if (!problems.empty()) return ProblemsToStatus(origin, problems);

  Normalize(spec);
  if (options.validate) {
    for (const FieldError& e : FindJobSpecErrors(spec, options.validate_options)) {
      problems.push_back({e.field, e.message, PositionOf(positions, e.field)});
    }
    if (!problems.empty()) return ProblemsToStatus(origin, problems);
  }
  return spec;
}

}  // namespace

absl::StatusOr<JobSpec> ParseJobSpec(absl::string_view yaml_text, const YamlOptions& options) {
  return Parse(yaml_text, options, options.origin.empty() ? "job spec" : options.origin);
}

absl::StatusOr<JobSpec> ParseJobSpecFile(const std::string& path, YamlOptions options) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return MOBIUS_ERRNO_ERROR(absl::StrCat("job spec ", path));
  struct stat st;
  std::string text;
  absl::Status status;
  if (fstat(fd, &st) != 0) {
    status = MOBIUS_ERRNO_ERROR(absl::StrCat("job spec ", path));
  } else if (!S_ISREG(st.st_mode)) {
    status = absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  } else if (st.st_size > kMaxJobSpecBytes) {
    status = absl::InvalidArgumentError(absl::StrCat(path, ": larger than ", kMaxJobSpecBytes,
                                                     " bytes (", st.st_size, ")"));
  } else {
    char buf[65536];
    while (true) {
      const ssize_t n = read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        status = MOBIUS_ERRNO_ERROR(absl::StrCat("reading job spec ", path));
        break;
      }
      if (n == 0) break;
      text.append(buf, static_cast<size_t>(n));
      if (static_cast<int64_t>(text.size()) > kMaxJobSpecBytes) break;  // grew while reading
    }
  }
  close(fd);
  MOBIUS_RETURN_IF_ERROR(status);
  if (options.origin.empty()) options.origin = path;
  if (options.base_dir.empty()) {
    std::error_code ec;
    std::filesystem::path dir = std::filesystem::path(path).parent_path();
    std::filesystem::path abs = std::filesystem::absolute(dir.empty() ? "." : dir, ec);
    options.base_dir = ec ? dir.string() : abs.lexically_normal().string();
  }
  return Parse(text, options, options.origin);
}

}  // namespace mobius::jobspec
