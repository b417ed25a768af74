#include "common/jobspec/json.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/jobspec/fields.h"

namespace mobius::jobspec {
namespace {

using json = nlohmann::json;

// nlohmann::json's default object is a std::map: keys come out sorted, which is the canonical
// order.
class JsonWriter {
 public:
  json root = json::object();

  template <typename T>
  void Int(const char* key, const T& v) { (*cur_)[key] = v; }
  void UInt(const char* key, const uint64_t& v) { (*cur_)[key] = v; }
  // nlohmann writes a non-finite double as null; a validated spec has none, and JobSpecFromJson
  // reports a null as a wrong type rather than taking the default.
  void Double(const char* key, const double& v) { (*cur_)[key] = v; }
  void String(const char* key, const std::string& v) { (*cur_)[key] = v; }
  void Bool(const char* key, const bool& v) { (*cur_)[key] = v; }
  void Path(const char* key, const std::string& v) { (*cur_)[key] = v; }
  void PathList(const char* key, const std::vector<std::string>& v) { (*cur_)[key] = v; }
  void Gpus(const char* key, const int& v) { (*cur_)[key] = v; }
  void Bytes(const char* key, const int64_t& v) { (*cur_)[key] = v; }
  void Labels(const char* key, const std::map<std::string, std::string>& v) {
    (*cur_)[key] = json::object();
    for (const auto& [k, value] : v) (*cur_)[key][k] = value;
  }
  void StringList(const char* key, const std::vector<std::string>& v) { (*cur_)[key] = v; }
  template <typename Fn>
  void Section(const char* key, Fn fn) {
    json* saved = cur_;
    cur_ = &((*cur_)[key] = json::object());
    fn();
    cur_ = saved;
  }
  // Written only when present, so that adding an optional section leaves the canonical text of
  // every spec without it (and so the job store's idempotency check) unchanged.
  template <typename T, typename Fn>
  void OptionalSection(const char* key, const std::optional<T>& v, Fn fn) {
    if (!v.has_value()) return;
    Section(key, [&] { fn(*v); });
  }

 private:
  json* cur_ = &root;
};

std::string Show(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

// Reads fields back, collecting every problem ("field.path: what").
class JsonReader {
 public:
  std::vector<std::string> problems;

  explicit JsonReader(const json& root) { levels_.push_back({"", &root, {}}); }

  template <typename T>
  void Int(const char* key, T& out) {
    const json* v = Find(key);
    if (v == nullptr) return;
    if (v->is_number_unsigned()) {
      const uint64_t u = v->get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<T>::max())) {
        out = static_cast<T>(u);
        return;
      }
    } else if (v->is_number_integer() && !std::is_unsigned_v<T>) {
      const int64_t i = v->get<int64_t>();
      if (i >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
          i <= static_cast<int64_t>(std::numeric_limits<T>::max())) {
        out = static_cast<T>(i);
        return;
      }
    }
    Fail(key, *v, absl::StrCat("must be an integer in [", std::numeric_limits<T>::min(), ", ",
                               std::numeric_limits<T>::max(), "]"));
  }
  void UInt(const char* key, uint64_t& out) { Int(key, out); }
  void Double(const char* key, double& out) {
    const json* v = Find(key);
    if (v == nullptr) return;
    if (!v->is_number()) return Fail(key, *v, "must be a number");
    out = v->get<double>();
  }
  void String(const char* key, std::string& out) {
    const json* v = Find(key);
    if (v == nullptr) return;
    if (!v->is_string()) return Fail(key, *v, "must be a string");
    out = v->get<std::string>();
  }
  void Bool(const char* key, bool& out) {
    const json* v = Find(key);
    if (v == nullptr) return;
    if (!v->is_boolean()) return Fail(key, *v, "must be true or false");
    out = v->get<bool>();
  }
  void Path(const char* key, std::string& out) { String(key, out); }
  void PathList(const char* key, std::vector<std::string>& out) {
    const json* v = Find(key);
    if (v == nullptr) return;
    if (!v->is_array()) return Fail(key, *v, "must be an array of strings");
    out.clear();
    for (size_t i = 0; i < v->size(); ++i) {
      if (!(*v)[i].is_string()) {
        problems.push_back(absl::StrCat(Prefix(), key, "[", i, "]: must be a string (got ",
                                        Show((*v)[i]), ")"));
        continue;
      }
      out.push_back((*v)[i].get<std::string>());
    }
  }
  void StringList(const char* key, std::vector<std::string>& out) { PathList(key, out); }
  void Gpus(const char* key, int& out) { Int(key, out); }
  void Bytes(const char* key, int64_t& out) { Int(key, out); }
  void Labels(const char* key, std::map<std::string, std::string>& out) {
    const json* v = Find(key);
    if (v == nullptr) return;
    if (!v->is_object()) return Fail(key, *v, "must be an object of strings");
    for (const auto& [k, value] : v->items()) {
      if (!value.is_string()) {
        problems.push_back(absl::StrCat(Prefix(), key, ".", k, ": must be a string (got ",
                                        Show(value), ")"));
        continue;
      }
      out[k] = value.get<std::string>();
    }
  }
  template <typename Fn>
  void Section(const char* key, Fn fn) {
    const json* v = Find(key);
    static const json kEmpty = json::object();
    if (v != nullptr && !v->is_object()) {
      Fail(key, *v, "must be an object");
      v = nullptr;
    }
    levels_.push_back({absl::StrCat(Prefix(), key, "."), v != nullptr ? v : &kEmpty, {}});
    fn();
    Leave();
  }
  // Absent: nullopt. Present (an object): emplaced, absent keys take T's defaults.
  template <typename T, typename Fn>
  void OptionalSection(const char* key, std::optional<T>& out, Fn fn) {
    const json* v = Find(key);
    if (v == nullptr) return;
    if (!v->is_object()) return Fail(key, *v, "must be an object");
    out.emplace();
    levels_.push_back({absl::StrCat(Prefix(), key, "."), v, {}});
    fn(*out);
    Leave();
  }

  void Leave() {
    const Level& level = levels_.back();
    for (const auto& [k, value] : level.object->items()) {
      if (level.known.count(k) == 0) problems.push_back(absl::StrCat(level.prefix, k, ": unknown key"));
    }
    levels_.pop_back();
  }

 private:
  struct Level {
    std::string prefix;
    const json* object;
    std::set<std::string> known;
  };

  const std::string& Prefix() const { return levels_.back().prefix; }

  const json* Find(const char* key) {
    Level& level = levels_.back();
    level.known.insert(key);
    auto it = level.object->find(key);
    if (it == level.object->end()) return nullptr;
    return &*it;
  }

  void Fail(const char* key, const json& v, absl::string_view what) {
    problems.push_back(absl::StrCat(Prefix(), key, ": ", what, " (got ", Show(v), ")"));
  }

  std::vector<Level> levels_;
};

}  // namespace

std::string JobSpecToJson(const JobSpec& spec) {
  JobSpec normalized = spec;
  Normalize(normalized);
  JsonWriter writer;
  internal::VisitJobSpec(static_cast<const JobSpec&>(normalized), writer);
  return writer.root.dump(-1, ' ', false, json::error_handler_t::replace);
}

absl::StatusOr<JobSpec> JobSpecFromJson(absl::string_view json_text) {
  json root = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return absl::InvalidArgumentError("job spec JSON: not valid JSON");
  if (!root.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("job spec JSON: not an object (got ", Show(root), ")"));
  }
  JobSpec spec;
  JsonReader reader(root);
  internal::VisitJobSpec(spec, reader);
  reader.Leave();
  if (!reader.problems.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job spec JSON: ", absl::StrJoin(reader.problems, "; ")));
  }
  Normalize(spec);
  return spec;
}

bool SameJobSpec(const JobSpec& a, const JobSpec& b) { return JobSpecToJson(a) == JobSpecToJson(b); }

}  // namespace mobius::jobspec
