// Test helper: parses the Prometheus text exposition format (what DaemonMetrics::Serialize() and a
// scrape of /metrics return) into samples, so tests assert on values rather than on strings.
//
// Handles what prometheus-cpp writes: "# HELP" / "# TYPE" comments, samples
// `name{label="value",...} value [timestamp]` with \\, \" and \n escapes in label values, and the
// special values +Inf, -Inf and NaN. A line it cannot parse is a test failure (Parse returns the
// problem), never silently skipped.
//
// Value types and pure functions; thread-compatible.
#ifndef MOBIUS_TEST_SERVER_METRICS_EXPOSITION_H_
#define MOBIUS_TEST_SERVER_METRICS_EXPOSITION_H_

#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mobius::testing {

using Labels = std::map<std::string, std::string>;

struct Sample {
  std::string name;
  Labels labels;
  double value = 0;
};

struct Exposition {
  std::vector<Sample> samples;
  std::map<std::string, std::string> types;  // family name -> counter | gauge | histogram | ...
  std::string error;                         // empty when every line parsed

  // The value of the sample with exactly these labels, if present.
  std::optional<double> Value(const std::string& name, const Labels& labels = {}) const {
    for (const Sample& s : samples) {
      if (s.name == name && s.labels == labels) return s.value;
    }
    return std::nullopt;
  }
  // Samples of `name` whose labels include all of `subset`.
  std::vector<Sample> Matching(const std::string& name, const Labels& subset = {}) const {
    std::vector<Sample> out;
    for (const Sample& s : samples) {
      if (s.name != name) continue;
      bool ok = true;
      for (const auto& [k, v] : subset) {
        auto it = s.labels.find(k);
        if (it == s.labels.end() || it->second != v) ok = false;
      }
      if (ok) out.push_back(s);
    }
    return out;
  }
  // A histogram bucket's cumulative count, `le` compared numerically.
  std::optional<double> Bucket(const std::string& family, Labels labels, double le) const {
    for (const Sample& s : samples) {
      if (s.name != family + "_bucket") continue;
      auto it = s.labels.find("le");
      if (it == s.labels.end()) continue;
      Labels rest = s.labels;
      rest.erase("le");
      if (rest != labels) continue;
      const double bound = std::strtod(it->second.c_str(), nullptr);
      if (bound == le || (std::isinf(le) && std::isinf(bound))) return s.value;
    }
    return std::nullopt;
  }
  // True if any sample carries label `key` = `value`.
  bool AnyLabel(const std::string& key, const std::string& value) const {
    for (const Sample& s : samples) {
      auto it = s.labels.find(key);
      if (it != s.labels.end() && it->second == value) return true;
    }
    return false;
  }
};

namespace exposition_internal {

inline bool IsNameChar(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
         (!first && c >= '0' && c <= '9');
}

// Parses `{k="v",...}` starting at line[pos] == '{'; leaves pos after '}'.
inline bool ParseLabels(const std::string& line, size_t& pos, Labels& labels) {
  ++pos;  // '{'
  while (pos < line.size() && line[pos] != '}') {
    size_t start = pos;
    while (pos < line.size() && IsNameChar(line[pos], pos == start)) ++pos;
    if (pos == start || pos + 1 >= line.size() || line[pos] != '=' || line[pos + 1] != '"') {
      return false;
    }
    const std::string key = line.substr(start, pos - start);
    pos += 2;
    std::string value;
    for (;;) {
      if (pos >= line.size()) return false;
      const char c = line[pos++];
      if (c == '"') break;
      if (c == '\\') {
        if (pos >= line.size()) return false;
        const char e = line[pos++];
        value += e == 'n' ? '\n' : e;
      } else {
        value += c;
      }
    }
    if (!labels.emplace(key, value).second) return false;  // duplicate label
    if (pos < line.size() && line[pos] == ',') ++pos;
  }
  if (pos >= line.size()) return false;
  ++pos;  // '}'
  return true;
}

inline bool ParseValue(const std::string& text, double& value) {
  if (text == "+Inf" || text == "Inf") {
    value = INFINITY;
    return true;
  }
  if (text == "-Inf") {
    value = -INFINITY;
    return true;
  }
  if (text == "NaN" || text == "Nan") {
    value = NAN;
    return true;
  }
  char* end = nullptr;
  value = std::strtod(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size();
}

}  // namespace exposition_internal

inline Exposition ParseExposition(const std::string& text) {
  namespace in = exposition_internal;
  Exposition out;
  size_t line_no = 0;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    ++line_no;
    auto fail = [&](const char* why) {
      if (out.error.empty()) {
        out.error = "line " + std::to_string(line_no) + ": " + why + ": " + line;
      }
    };
    if (line.empty()) continue;
    if (line[0] == '#') {
      if (line.rfind("# TYPE ", 0) == 0) {
        const std::string rest = line.substr(7);
        const size_t sp = rest.find(' ');
        if (sp == std::string::npos) {
          fail("malformed TYPE");
          continue;
        }
        out.types[rest.substr(0, sp)] = rest.substr(sp + 1);
      }
      continue;
    }
    Sample s;
    size_t pos = 0;
    while (pos < line.size() && in::IsNameChar(line[pos], pos == 0)) ++pos;
    if (pos == 0) {
      fail("no metric name");
      continue;
    }
    s.name = line.substr(0, pos);
    if (pos < line.size() && line[pos] == '{' && !in::ParseLabels(line, pos, s.labels)) {
      fail("malformed labels");
      continue;
    }
    if (pos >= line.size() || line[pos] != ' ') {
      fail("no value");
      continue;
    }
    std::string value = line.substr(pos + 1);
    if (const size_t sp = value.find(' '); sp != std::string::npos) value.resize(sp);  // timestamp
    if (!in::ParseValue(value, s.value)) {
      fail("malformed value");
      continue;
    }
    out.samples.push_back(std::move(s));
  }
  return out;
}

}  // namespace mobius::testing

#endif  // MOBIUS_TEST_SERVER_METRICS_EXPOSITION_H_
