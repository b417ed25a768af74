#include "common/run/measured_profile.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace mobius::planner {
namespace {

uint64_t Fnv1a(const std::string& text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// Lower-case letters, digits, '.' and '_' kept; everything else becomes '_'.
std::string FileSafe(const std::string& text) {
  std::string out;
  for (char c : absl::AsciiStrToLower(text)) {
    out += absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ? c : '_';
  }
  return out.empty() ? "_" : out;
}

absl::Status FieldError(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("field ", field, ": ", what));
}

absl::Status CheckSeconds(const std::string& field, double v) {
  if (!std::isfinite(v) || v < 0) {
    return FieldError(field, absl::StrCat("must be a finite number >= 0 seconds (got ", v, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckBytes(const std::string& field, int64_t v) {
  if (v < 0) return FieldError(field, absl::StrCat("must be >= 0 bytes (got ", v, ")"));
  return absl::OkStatus();
}

absl::Status CheckRate(const std::string& field, double v) {
  if (!std::isfinite(v) || v < 0) {
    return FieldError(field, absl::StrCat("must be a finite rate >= 0 bytes/s (got ", v, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

const UnitKindMeasurement* MeasuredProfile::Find(const std::string& kind) const {
  for (const UnitKindMeasurement& k : kinds) {
    if (k.kind == kind) return &k;
  }
  return nullptr;
}

std::string ModelConfigHash(const model::ModelConfig& c) {
  const std::string canonical = absl::StrCat(
      "family=", model::FamilyName(c.family), ";vocab=", c.vocab_size, ";hidden=", c.hidden_size,
      ";layers=", c.num_layers, ";heads=", c.num_heads, ";kv_heads=", c.num_kv_heads,
      ";head_dim=", c.head_dim, ";intermediate=", c.intermediate_size,
      ";positions=", c.max_position_embeddings, ";norm=", static_cast<int>(c.norm),
      ";mlp=", static_cast<int>(c.mlp), ";position=", static_cast<int>(c.position),
      ";rope_theta=", absl::StrFormat("%.17g", c.rope_theta),
      ";rope_scaling=", static_cast<int>(c.rope_scaling.type), ",",
      absl::StrFormat("%.17g", c.rope_scaling.factor), ";tie=", c.tie_word_embeddings,
      ";attention_bias=", c.attention_bias, ";attention_output_bias=", c.attention_output_bias,
      ";mlp_bias=", c.mlp_bias, ";qk_norm=", c.qk_norm, ";sliding_window=", c.sliding_window);
  return absl::StrFormat("%016x", Fnv1a(canonical));
}

std::string ProfileCacheKey(const std::string& model_hash, const MicrobatchShape& shape,
                            const std::string& backend, const std::string& device,
                            const std::string& build_version, const std::string& precision) {
  return absl::StrCat(FileSafe(model_hash), "-b", shape.microbatch_size, "-t", shape.seq_len, "-",
                      FileSafe(backend), "-", FileSafe(device), "-v", FileSafe(build_version),
                      precision == "bf16" ? "" : "-" + FileSafe(precision));
}

absl::Status ValidateMeasuredProfile(const MeasuredProfile& p) {
  if (p.version != kMeasuredProfileVersion) {
    return FieldError("version",
                      absl::StrCat("unsupported profile version ", p.version, " (this build reads ",
                                   kMeasuredProfileVersion, "); profile again"));
  }
  if (p.shape.microbatch_size <= 0 || p.shape.seq_len <= 0) {
    return FieldError("shape", absl::StrCat("microbatch and seq_len must be > 0 (got ",
                                            p.shape.microbatch_size, " x ", p.shape.seq_len, ")"));
  }
  if (p.num_units < 3) {
    return FieldError("model.units", absl::StrCat("must be >= 3 (got ", p.num_units, ")"));
  }
  if (p.repetitions < 1) {
    return FieldError("repetitions", absl::StrCat("must be >= 1 (got ", p.repetitions, ")"));
  }
  if (p.precision != "bf16" && p.precision != "fp16") {
    return FieldError("precision", absl::StrCat("must be bf16 or fp16 (got \"", p.precision, "\")"));
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < p.kinds.size(); ++i) {
    const UnitKindMeasurement& k = p.kinds[i];
    const std::string f = absl::StrCat("units[", i, "]");
    if (k.kind != "embedding" && k.kind != "block" && k.kind != "head") {
      return FieldError(f + ".kind",
                        absl::StrCat("must be embedding, block or head (got \"", k.kind, "\")"));
    }
    if (!seen.insert(k.kind).second) {
      return FieldError(f + ".kind", absl::StrCat("\"", k.kind, "\" measured twice"));
    }
    if (k.unit_index < 0 || k.unit_index >= p.num_units) {
      return FieldError(f + ".unit",
                        absl::StrCat("must be in [0, ", p.num_units, ") (got ", k.unit_index, ")"));
    }
    absl::Status s = CheckSeconds(f + ".forward_seconds", k.forward_seconds);
    if (s.ok()) s = CheckSeconds(f + ".backward_seconds", k.backward_seconds);
    if (s.ok()) s = CheckBytes(f + ".parameter_bytes", k.parameter_bytes);
    if (s.ok()) s = CheckBytes(f + ".gradient_bytes", k.gradient_bytes);
    if (s.ok()) s = CheckBytes(f + ".boundary_bytes", k.boundary_bytes);
    if (s.ok()) s = CheckBytes(f + ".saved_activation_bytes", k.saved_activation_bytes);
    if (s.ok()) s = CheckBytes(f + ".workspace_bytes", k.workspace_bytes);
    if (!s.ok()) return s;
  }
  for (size_t i = 0; i < p.links.size(); ++i) {
    const LinkMeasurement& l = p.links[i];
    const std::string f = absl::StrCat("links[", i, "]");
    if (l.group_size < 1) {
      return FieldError(f + ".group_size", absl::StrCat("must be >= 1 (got ", l.group_size, ")"));
    }
    absl::Status s = CheckRate(f + ".h2d_bytes_per_s", l.h2d_bytes_per_s);
    if (s.ok()) s = CheckRate(f + ".d2h_bytes_per_s", l.d2h_bytes_per_s);
    if (s.ok()) s = CheckRate(f + ".duplex_h2d_bytes_per_s", l.duplex_h2d_bytes_per_s);
    if (s.ok()) s = CheckRate(f + ".duplex_d2h_bytes_per_s", l.duplex_d2h_bytes_per_s);
    if (s.ok()) s = CheckRate(f + ".group_h2d_bytes_per_s", l.group_h2d_bytes_per_s);
    if (s.ok()) s = CheckRate(f + ".group_d2h_bytes_per_s", l.group_d2h_bytes_per_s);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace mobius::planner
