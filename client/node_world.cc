#include "client/node_world.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

extern char** environ;

namespace mobius::cli {
namespace {

using Env = absl::flat_hash_map<std::string, std::string>;

constexpr int64_t kMaxHosts = 65536;

// A value as it appears in a message: quoted, escaped, cut at 80 characters.
std::string Quote(absl::string_view v) {
  const bool cut = v.size() > 80;
  return absl::StrCat("\"", absl::CHexEscape(v.substr(0, 80)), cut ? "...\"" : "\"");
}

// Unset and "" are the same: a manifest or script that clears a variable means "not given".
std::optional<std::string> Get(const Env& env, absl::string_view name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

// Decimal digits with an optional '-', nothing else (no spaces, no '+', no hex).
std::optional<int> ParseInt(absl::string_view s) {
  int v = 0;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, v);
  if (s.empty() || ec != std::errc() || p != end) return std::nullopt;
  return v;
}

absl::StatusOr<int> IntVar(const Env& env, absl::string_view name) {
  const std::string value = Get(env, name).value_or("");
  std::optional<int> v = ParseInt(value);
  if (!v.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(name, "=", Quote(value), " is not an integer"));
  }
  return *v;
}

absl::Status CheckNodes(int nodes, absl::string_view what) {
  if (nodes >= 1 && nodes <= kMaxNodes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, " is outside 1..", kMaxNodes));
}

// "--node-rank 3 is outside 0..1 for --nodes 2"
absl::Status CheckRank(int rank, int nodes, absl::string_view rank_what,
                       absl::string_view nodes_what) {
  if (rank >= 0 && rank < nodes) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(rank_what, " is outside 0..", nodes - 1, " for ", nodes_what));
}

// Job keys travel to the rendezvous store; keep them to a plain, printable alphabet.
absl::Status CheckJobKey(absl::string_view key, absl::string_view what) {
  bool plain = key.size() <= 128;
  for (char c : key) {
    plain = plain && (absl::ascii_isalnum(c) || c == '.' || c == '_' || c == ':' || c == '+' ||
                      c == '-');
  }
  if (plain) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      what, "=", Quote(key), " must be at most 128 letters, digits and . _ : + -"));
}

bool IsHostChar(char c) { return absl::ascii_isalnum(c) || c == '-' || c == '.' || c == '_'; }

absl::StatusOr<int> ParsePort(absl::string_view text, absl::string_view what,
                              absl::string_view whole) {
  std::optional<int> port = ParseInt(text);
  if (!port.has_value() || *port < 1 || *port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(what, "=", Quote(whole), ": the port ",
                                                   Quote(text), " is not in 1..65535"));
  }
  return *port;
}

// HOST, HOST:PORT, [IPV6] or [IPV6]:PORT.
absl::Status ParseHostPort(absl::string_view text, absl::string_view what, int default_port,
                           std::string* host, int* port) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(what, "=", Quote(text), ": ", why));
  };
  absl::string_view h = text, p;
  bool has_port = false;
  if (absl::StartsWith(text, "[")) {
    const size_t close = text.find(']');
    if (close == absl::string_view::npos) return bad("no ']' after the IPv6 address");
    h = text.substr(1, close - 1);
    absl::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return bad("expected HOST:PORT or [IPV6]:PORT");
      p = rest.substr(1);
      has_port = true;
    }
    if (h.empty()) return bad("empty host");
    for (char c : h) {
      if (!absl::ascii_isxdigit(c) && c != ':' && c != '.') return bad("not an IPv6 address");
    }
  } else {
    const size_t colon = text.find(':');
    if (colon != absl::string_view::npos) {
      if (text.find(':', colon + 1) != absl::string_view::npos) {
        return bad("put an IPv6 address in brackets: [ADDRESS]:PORT");
      }
      h = text.substr(0, colon);
      p = text.substr(colon + 1);
      has_port = true;
    }
    if (h.empty()) return bad("empty host");
    if (h.size() > 253) return bad("host name longer than 253 characters");
    for (char c : h) {
      if (!IsHostChar(c)) return bad("a host name has only letters, digits and . - _");
    }
  }
  *host = std::string(h);
  if (!has_port) {
    *port = default_port;
    return absl::OkStatus();
  }
  absl::StatusOr<int> parsed = ParsePort(p, what, text);
  if (!parsed.ok()) return parsed.status();
  *port = *parsed;
  return absl::OkStatus();
}

// --- Slurm host lists ----------------------------------------------------------------------------

struct Range {
  uint64_t lo = 0, hi = 0;
  size_t width = 0;  // digits of `lo` as written: "08" pads to 2
};
// One host name pattern: literal text and bracket groups in order ("r[1-2]n[3-4]-ib").
struct Part {
  std::string text;           // a literal, when `ranges` is empty
  std::vector<Range> ranges;  // a bracket group
};
using Pattern = std::vector<Part>;

std::string Number(uint64_t v, size_t width) {
  std::string s = std::to_string(v);
  if (s.size() < width) s.insert(0, width - s.size(), '0');
  return s;
}

absl::StatusOr<std::vector<Range>> ParseBracket(absl::string_view body, absl::string_view whole) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("Slurm host list ", Quote(whole), ": ", why));
  };
  if (body.empty()) return bad("empty []");
  std::vector<Range> ranges;
  size_t start = 0;
  while (start <= body.size()) {
    size_t comma = body.find(',', start);
    if (comma == absl::string_view::npos) comma = body.size();
    const absl::string_view item = body.substr(start, comma - start);
    const size_t dash = item.find('-');
    const absl::string_view lo = item.substr(0, dash);
    const absl::string_view hi = dash == absl::string_view::npos ? lo : item.substr(dash + 1);
    for (absl::string_view n : {lo, hi}) {
      if (n.empty() || n.size() > 18) return bad(absl::StrCat("bad range ", Quote(item)));
      for (char c : n) {
        if (!absl::ascii_isdigit(c)) return bad(absl::StrCat("bad range ", Quote(item)));
      }
    }
    Range r;
    std::from_chars(lo.data(), lo.data() + lo.size(), r.lo);
    std::from_chars(hi.data(), hi.data() + hi.size(), r.hi);
    r.width = lo.size();
    if (r.hi < r.lo) return bad(absl::StrCat("range ", Quote(item), " runs backwards"));
    ranges.push_back(r);
    start = comma + 1;
  }
  return ranges;
}

// Checks the whole expression: host names of letters, digits, '.', '-', '_' and bracket groups
// of numbers and ranges, separated by commas.
absl::StatusOr<std::vector<Pattern>> ParseHostlist(absl::string_view s) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("Slurm host list ", Quote(s), ": ", why));
  };
  if (s.empty()) return bad("empty");
  std::vector<Pattern> patterns(1);
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    Pattern& pattern = patterns.back();
    if (c == ',') {
      if (pattern.empty()) return bad("an empty host name");
      patterns.emplace_back();
    } else if (c == '[') {
      const size_t close = s.find(']', i + 1);
      if (close == absl::string_view::npos) return bad("no ']' for the '['");
      const absl::string_view body = s.substr(i + 1, close - i - 1);
      if (body.find('[') != absl::string_view::npos) return bad("nested '['");
      absl::StatusOr<std::vector<Range>> ranges = ParseBracket(body, s);
      if (!ranges.ok()) return ranges.status();
      pattern.push_back(Part{.text = "", .ranges = *std::move(ranges)});
      i = close;
    } else if (c == ']') {
      return bad("a ']' without '['");
    } else if (IsHostChar(c)) {
      if (pattern.empty() || !pattern.back().ranges.empty()) pattern.emplace_back();
      pattern.back().text.push_back(c);
    } else {
      return bad(absl::StrCat("unexpected character ", Quote(absl::string_view(&c, 1))));
    }
  }
  if (patterns.back().empty()) return bad("an empty host name");
  return patterns;
}

// Hosts of one pattern, or kMaxHosts + 1 when there are more (no overflow).
int64_t CountHosts(const Pattern& pattern) {
  int64_t n = 1;
  for (const Part& part : pattern) {
    if (part.ranges.empty()) continue;
    int64_t group = 0;
    for (const Range& r : part.ranges) {
      group += static_cast<int64_t>(std::min<uint64_t>(r.hi - r.lo + 1, kMaxHosts + 1));
      if (group > kMaxHosts) return kMaxHosts + 1;
    }
    n *= group;
    if (n > kMaxHosts) return kMaxHosts + 1;
  }
  return n;
}

void Expand(const Pattern& pattern, size_t part, std::string prefix,
            std::vector<std::string>* out) {
  if (part == pattern.size()) {
    out->push_back(std::move(prefix));
    return;
  }
  const Part& p = pattern[part];
  if (p.ranges.empty()) {
    Expand(pattern, part + 1, prefix + p.text, out);
    return;
  }
  for (const Range& r : p.ranges) {
    for (uint64_t v = r.lo;; ++v) {
      Expand(pattern, part + 1, prefix + Number(v, r.width), out);
      if (v == r.hi) break;
    }
  }
}

// --- the sources, in precedence order ------------------------------------------------------------

// What a source found; `nodes_what` names the node count in later messages ("MOBIUS_NODES=2").
struct Found {
  int nodes = 1;
  int rank = 0;
  std::string source;
  std::string nodes_what;
};

absl::StatusOr<Found> FromFlags(const NodeWorldFlags& flags) {
  if (flags.nodes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--node-rank ", flags.node_rank, " needs --nodes"));
  }
  Found f{.nodes = flags.nodes, .rank = 0, .source = "flags",
          .nodes_what = absl::StrCat("--nodes ", flags.nodes)};
  if (absl::Status s = CheckNodes(flags.nodes, f.nodes_what); !s.ok()) return s;
  if (flags.node_rank == -1) {
    if (flags.nodes > 1) {
      return absl::InvalidArgumentError(absl::StrCat(f.nodes_what, " needs --node-rank (0..",
                                                     flags.nodes - 1, ")"));
    }
    return f;
  }
  f.rank = flags.node_rank;
  if (absl::Status s = CheckRank(f.rank, f.nodes, absl::StrCat("--node-rank ", f.rank),
                                 f.nodes_what);
      !s.ok()) {
    return s;
  }
  return f;
}

// MOBIUS_NODES with MOBIUS_NODE_RANK, or with a Kubernetes Indexed Job's JOB_COMPLETION_INDEX.
absl::StatusOr<Found> FromMobiusEnv(const Env& env) {
  absl::StatusOr<int> nodes = IntVar(env, "MOBIUS_NODES");
  if (!nodes.ok()) return nodes.status();
  Found f{.nodes = *nodes, .rank = 0, .source = "MOBIUS_*",
          .nodes_what = absl::StrCat("MOBIUS_NODES=", *nodes)};
  if (absl::Status s = CheckNodes(f.nodes, f.nodes_what); !s.ok()) return s;
  const char* rank_var = nullptr;
  if (Get(env, "MOBIUS_NODE_RANK")) {
    rank_var = "MOBIUS_NODE_RANK";
  } else if (f.nodes > 1 && Get(env, "JOB_COMPLETION_INDEX")) {
    rank_var = "JOB_COMPLETION_INDEX";
    f.source = "kubernetes";
  }
  if (rank_var == nullptr) {
    if (f.nodes == 1) return f;
    return absl::InvalidArgumentError(
        absl::StrCat(f.nodes_what, " but no node rank: set MOBIUS_NODE_RANK (0..", f.nodes - 1,
                     "), or run as a Kubernetes Indexed Job (JOB_COMPLETION_INDEX)"));
  }
  absl::StatusOr<int> rank = IntVar(env, rank_var);
  if (!rank.ok()) return rank.status();
  f.rank = *rank;
  if (absl::Status s = CheckRank(f.rank, f.nodes, absl::StrCat(rank_var, "=", f.rank),
                                 f.nodes_what);
      !s.ok()) {
    return s;
  }
  return f;
}

// A Slurm job step with one task per node.
absl::StatusOr<Found> FromSlurm(const Env& env) {
  if (!Get(env, "SLURM_NTASKS")) {
    return absl::InvalidArgumentError(
        "SLURM_PROCID is set but SLURM_NTASKS is not: run `mobius run` as a Slurm job step "
        "(srun)");
  }
  absl::StatusOr<int> ntasks = IntVar(env, "SLURM_NTASKS");
  if (!ntasks.ok()) return ntasks.status();
  Found f{.nodes = *ntasks, .rank = 0, .source = "slurm",
          .nodes_what = absl::StrCat("SLURM_NTASKS=", *ntasks)};
  if (absl::Status s = CheckNodes(f.nodes, f.nodes_what); !s.ok()) return s;
  if (f.nodes == 1) return f;
  if (!Get(env, "SLURM_PROCID")) {
    return absl::InvalidArgumentError(absl::StrCat(
        f.nodes_what, " but SLURM_PROCID is unset: start one `mobius run` per node with srun"));
  }
  absl::StatusOr<int> procid = IntVar(env, "SLURM_PROCID");
  if (!procid.ok()) return procid.status();
  // A step on part of the allocation has SLURM_STEP_NUM_NODES; SLURM_NNODES is the allocation's.
  const char* nnodes_var = Get(env, "SLURM_STEP_NUM_NODES") ? "SLURM_STEP_NUM_NODES"
                                                             : "SLURM_NNODES";
  if (!Get(env, nnodes_var)) {
    return absl::InvalidArgumentError(
        absl::StrCat(f.nodes_what, " but SLURM_NNODES is unset: run `mobius run` as a Slurm job "
                                   "step (srun --ntasks-per-node=1)"));
  }
  absl::StatusOr<int> nnodes = IntVar(env, nnodes_var);
  if (!nnodes.ok()) return nnodes.status();
  if (*nnodes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(nnodes_var, "=", *nnodes, " is not positive"));
  }
  if (*nnodes != f.nodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        f.nodes_what, " tasks on ", nnodes_var, "=", *nnodes,
        " nodes: run one `mobius run` per node (srun --ntasks-per-node=1; each uses all of its "
        "node's GPUs)"));
  }
  f.rank = *procid;
  if (absl::Status s = CheckRank(f.rank, f.nodes, absl::StrCat("SLURM_PROCID=", f.rank),
                                 f.nodes_what);
      !s.ok()) {
    return s;
  }
  return f;
}

absl::StatusOr<Found> FindWorld(const NodeWorldFlags& flags, const Env& env) {
  if (flags.nodes != 0 || flags.node_rank != -1) return FromFlags(flags);
  if (Get(env, "MOBIUS_NODES")) return FromMobiusEnv(env);
  if (std::optional<std::string> rank = Get(env, "MOBIUS_NODE_RANK")) {
    return absl::InvalidArgumentError(
        absl::StrCat("MOBIUS_NODE_RANK=", Quote(*rank), " needs MOBIUS_NODES"));
  }
  if (Get(env, "SLURM_JOB_ID") && (Get(env, "SLURM_NTASKS") || Get(env, "SLURM_PROCID"))) {
    return FromSlurm(env);
  }
  // Independent single-node runs in an Indexed Job (a sweep) say so with MOBIUS_NODES=1; without
  // it, N pods would each train the whole job into the same checkpoint directory.
  if (std::optional<std::string> index = Get(env, "JOB_COMPLETION_INDEX")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "JOB_COMPLETION_INDEX=", Quote(*index),
        " (a Kubernetes Indexed Job) but MOBIUS_NODES is unset: set MOBIUS_NODES to the Job's "
        "completions (MOBIUS_NODES=1 for independent single-node runs)"));
  }
  return Found{.nodes = 1, .rank = 0, .source = "single", .nodes_what = ""};
}

absl::Status ResolveRendezvous(const NodeWorldFlags& flags, const Env& env, const Found& found,
                               NodeWorld* world) {
  int default_port = kDefaultRendezvousPort;
  if (std::optional<std::string> port = Get(env, "MOBIUS_RENDEZVOUS_PORT")) {
    absl::StatusOr<int> p = ParsePort(*port, "MOBIUS_RENDEZVOUS_PORT", *port);
    if (!p.ok()) return p.status();
    default_port = *p;
  }
  if (!flags.rendezvous.empty()) {
    return ParseHostPort(flags.rendezvous, "--rendezvous", default_port, &world->rendezvous_host,
                         &world->rendezvous_port);
  }
  if (std::optional<std::string> r = Get(env, "MOBIUS_RENDEZVOUS")) {
    return ParseHostPort(*r, "MOBIUS_RENDEZVOUS", default_port, &world->rendezvous_host,
                         &world->rendezvous_port);
  }
  if (found.source == "slurm") {
    // Task 0 runs on the step's first node (srun's default block distribution).
    for (const char* var : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
      std::optional<std::string> list = Get(env, var);
      if (!list.has_value()) continue;
      absl::StatusOr<std::string> first = FirstSlurmHost(*list);
      if (!first.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(var, ": ", first.status().message()));
      }
      world->rendezvous_host = *first;
      world->rendezvous_port = default_port;
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(
        absl::StrCat(found.nodes_what, " but no rendezvous: SLURM_JOB_NODELIST is unset; set "
                                       "MOBIUS_RENDEZVOUS=HOST:PORT"));
  }
  if (found.source == "flags") {
    return absl::InvalidArgumentError(
        absl::StrCat(found.nodes_what, " but no rendezvous: pass --rendezvous HOST:PORT or set "
                                       "MOBIUS_RENDEZVOUS=HOST:PORT"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(found.nodes_what, " but no rendezvous: set MOBIUS_RENDEZVOUS=HOST:PORT"));
}

}  // namespace

absl::StatusOr<NodeWorld> ResolveNodeWorld(const NodeWorldFlags& flags, const Env& env) {
  absl::StatusOr<Found> found = FindWorld(flags, env);
  if (!found.ok()) return found.status();
  NodeWorld world;
  world.nodes = found->nodes;
  world.node_rank = found->rank;
  world.source = found->source;
  if (std::optional<std::string> key = Get(env, "MOBIUS_JOB_KEY")) {
    if (absl::Status s = CheckJobKey(*key, "MOBIUS_JOB_KEY"); !s.ok()) return s;
    world.job_key = *key;
  } else if (std::optional<std::string> id = Get(env, "SLURM_JOB_ID")) {
    if (absl::Status s = CheckJobKey(*id, "SLURM_JOB_ID"); !s.ok()) return s;
    world.job_key = "slurm-" + *id;
  }
  if (world.nodes > 1) {
    if (absl::Status s = ResolveRendezvous(flags, env, *found, &world); !s.ok()) return s;
  }
  return world;
}

absl::StatusOr<int> ParseRunNodesFlag(absl::string_view text) {
  if (text.empty()) return 0;
  std::optional<int> n = ParseInt(text);
  if (!n.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--nodes ", Quote(text), " is not one node count (mobius run takes one number; a list is "
                                 "for mobius plan --nodes)"));
  }
  if (absl::Status s = CheckNodes(*n, absl::StrCat("--nodes ", *n)); !s.ok()) return s;
  return *n;
}

absl::StatusOr<std::string> FirstSlurmHost(absl::string_view nodelist) {
  absl::StatusOr<std::vector<Pattern>> patterns = ParseHostlist(nodelist);
  if (!patterns.ok()) return patterns.status();
  std::string host;
  for (const Part& part : patterns->front()) {
    host += part.ranges.empty() ? part.text
                                : Number(part.ranges.front().lo, part.ranges.front().width);
  }
  return host;
}

absl::StatusOr<std::vector<std::string>> ExpandSlurmHostlist(absl::string_view nodelist) {
  absl::StatusOr<std::vector<Pattern>> patterns = ParseHostlist(nodelist);
  if (!patterns.ok()) return patterns.status();
  int64_t total = 0;
  for (const Pattern& p : *patterns) {
    total += CountHosts(p);
    if (total > kMaxHosts) {
      return absl::InvalidArgumentError(absl::StrCat("Slurm host list ", Quote(nodelist),
                                                     ": more than ", kMaxHosts, " hosts"));
    }
  }
  std::vector<std::string> hosts;
  hosts.reserve(total);
  for (const Pattern& p : *patterns) Expand(p, 0, "", &hosts);
  return hosts;
}

absl::flat_hash_map<std::string, std::string> ProcessEnvironment() {
  Env env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const absl::string_view entry(*e);
    const size_t eq = entry.find('=');
    if (eq == absl::string_view::npos) continue;
    env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

}  // namespace mobius::cli
