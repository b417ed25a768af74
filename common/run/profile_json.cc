#include "common/run/profile_json.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace mobius::planner {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// Typed field access with the field's path in every error; no exceptions escape.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  absl::Status Error(const std::string& field, const std::string& what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("profile ", source_, ": field ", field, ": ", what));
  }

  absl::Status Object(const json& j, const std::string& field) const {
    return j.is_object() ? absl::OkStatus() : Error(field, "must be an object");
  }

  const json* Get(const json& j, const std::string& key) const {
    auto it = j.find(key);
    return it == j.end() ? nullptr : &*it;
  }

  absl::Status String(const json& j, const std::string& key, const std::string& path,
                      std::string* out) const {
    const json* v = Get(j, key);
    if (v == nullptr) return Error(path, "missing");
    if (!v->is_string()) return Error(path, absl::StrCat("must be a string (got ", v->dump(), ")"));
    *out = v->get<std::string>();
    return absl::OkStatus();
  }

  absl::Status Int(const json& j, const std::string& key, const std::string& path,
                   int64_t* out) const {
    const json* v = Get(j, key);
    if (v == nullptr) return Error(path, "missing");
    if (!v->is_number_integer()) {
      return Error(path, absl::StrCat("must be an integer (got ", v->dump(), ")"));
    }
    *out = v->get<int64_t>();
    return absl::OkStatus();
  }

  absl::Status Double(const json& j, const std::string& key, const std::string& path,
                      double* out) const {
    const json* v = Get(j, key);
    if (v == nullptr) return Error(path, "missing");
    if (!v->is_number()) return Error(path, absl::StrCat("must be a number (got ", v->dump(), ")"));
    *out = v->get<double>();
    return absl::OkStatus();
  }

  const std::string& source() const { return source_; }

 private:
  std::string source_;
};

#define MOBIUS_JSON_TRY(expr) \
  do {                        \
    absl::Status _s = (expr); \
    if (!_s.ok()) return _s;  \
  } while (0)

absl::Status ParseUnit(const Reader& r, const json& j, const std::string& f,
                       UnitKindMeasurement* k) {
  MOBIUS_JSON_TRY(r.Object(j, f));
  MOBIUS_JSON_TRY(r.String(j, "kind", f + ".kind", &k->kind));
  MOBIUS_JSON_TRY(r.Int(j, "unit", f + ".unit", &k->unit_index));
  MOBIUS_JSON_TRY(r.Double(j, "forward_seconds", f + ".forward_seconds", &k->forward_seconds));
  MOBIUS_JSON_TRY(r.Double(j, "backward_seconds", f + ".backward_seconds", &k->backward_seconds));
  MOBIUS_JSON_TRY(r.Int(j, "parameter_bytes", f + ".parameter_bytes", &k->parameter_bytes));
  MOBIUS_JSON_TRY(r.Int(j, "gradient_bytes", f + ".gradient_bytes", &k->gradient_bytes));
  MOBIUS_JSON_TRY(r.Int(j, "boundary_bytes", f + ".boundary_bytes", &k->boundary_bytes));
  MOBIUS_JSON_TRY(r.Int(j, "saved_activation_bytes", f + ".saved_activation_bytes",
                        &k->saved_activation_bytes));
  MOBIUS_JSON_TRY(r.Int(j, "workspace_bytes", f + ".workspace_bytes", &k->workspace_bytes));
  return absl::OkStatus();
}

absl::Status ParseLink(const Reader& r, const json& j, const std::string& f, LinkMeasurement* l) {
  MOBIUS_JSON_TRY(r.Object(j, f));
  int64_t device = 0, group = 1;
  MOBIUS_JSON_TRY(r.Int(j, "device", f + ".device", &device));
  MOBIUS_JSON_TRY(r.Int(j, "group_size", f + ".group_size", &group));
  if (device < 0 || device > 1 << 16) return r.Error(f + ".device", "out of range");
  if (group < 1 || group > 1 << 16) return r.Error(f + ".group_size", "must be in [1, 65536]");
  l->device = static_cast<int>(device);
  l->group_size = static_cast<int>(group);
  MOBIUS_JSON_TRY(r.Double(j, "h2d_bytes_per_s", f + ".h2d_bytes_per_s", &l->h2d_bytes_per_s));
  MOBIUS_JSON_TRY(r.Double(j, "d2h_bytes_per_s", f + ".d2h_bytes_per_s", &l->d2h_bytes_per_s));
  MOBIUS_JSON_TRY(r.Double(j, "duplex_h2d_bytes_per_s", f + ".duplex_h2d_bytes_per_s",
                           &l->duplex_h2d_bytes_per_s));
  MOBIUS_JSON_TRY(r.Double(j, "duplex_d2h_bytes_per_s", f + ".duplex_d2h_bytes_per_s",
                           &l->duplex_d2h_bytes_per_s));
  MOBIUS_JSON_TRY(r.Double(j, "group_h2d_bytes_per_s", f + ".group_h2d_bytes_per_s",
                           &l->group_h2d_bytes_per_s));
  MOBIUS_JSON_TRY(r.Double(j, "group_d2h_bytes_per_s", f + ".group_d2h_bytes_per_s",
                           &l->group_d2h_bytes_per_s));
  return absl::OkStatus();
}

absl::Status Parse(const Reader& r, const json& j, MeasuredProfile* p) {
  MOBIUS_JSON_TRY(r.Object(j, "(top level)"));
  std::string format;
  MOBIUS_JSON_TRY(r.String(j, "format", "format", &format));
  if (format != "mobius-profile") {
    return r.Error("format", absl::StrCat("must be \"mobius-profile\" (got \"", format, "\")"));
  }
  int64_t version = 0, b = 0, t = 0, warmup = 0, reps = 0;
  MOBIUS_JSON_TRY(r.Int(j, "version", "version", &version));
  if (version != kMeasuredProfileVersion) {
    return r.Error("version", absl::StrCat("unsupported version ", version, " (this build reads ",
                                           kMeasuredProfileVersion, "); profile again"));
  }
  p->version = static_cast<int>(version);
  const json* model = r.Get(j, "model");
  if (model == nullptr) return r.Error("model", "missing");
  MOBIUS_JSON_TRY(r.Object(*model, "model"));
  MOBIUS_JSON_TRY(r.String(*model, "hash", "model.hash", &p->model_hash));
  MOBIUS_JSON_TRY(r.String(*model, "model_type", "model.model_type", &p->model_type));
  MOBIUS_JSON_TRY(r.Int(*model, "units", "model.units", &p->num_units));
  const json* shape = r.Get(j, "shape");
  if (shape == nullptr) return r.Error("shape", "missing");
  MOBIUS_JSON_TRY(r.Object(*shape, "shape"));
  MOBIUS_JSON_TRY(r.Int(*shape, "microbatch", "shape.microbatch", &b));
  MOBIUS_JSON_TRY(r.Int(*shape, "seq_len", "shape.seq_len", &t));
  p->shape = {b, t};
  MOBIUS_JSON_TRY(r.String(j, "backend", "backend", &p->backend));
  MOBIUS_JSON_TRY(r.String(j, "device", "device", &p->device));
  MOBIUS_JSON_TRY(r.String(j, "build_version", "build_version", &p->build_version));
  if (r.Get(j, "precision") != nullptr) {  // absent: bf16 (profiles written before the field)
    MOBIUS_JSON_TRY(r.String(j, "precision", "precision", &p->precision));
  }
  MOBIUS_JSON_TRY(r.Int(j, "warmup", "warmup", &warmup));
  MOBIUS_JSON_TRY(r.Int(j, "repetitions", "repetitions", &reps));
  if (warmup < 0 || warmup > 1 << 20) return r.Error("warmup", "out of range");
  if (reps < 0 || reps > 1 << 20) return r.Error("repetitions", "out of range");
  p->warmup = static_cast<int>(warmup);
  p->repetitions = static_cast<int>(reps);
  MOBIUS_JSON_TRY(r.Int(j, "copy_bytes", "copy_bytes", &p->copy_bytes));
  const json* units = r.Get(j, "units");
  if (units == nullptr || !units->is_array()) return r.Error("units", "must be an array");
  for (size_t i = 0; i < units->size(); ++i) {
    UnitKindMeasurement k;
    MOBIUS_JSON_TRY(ParseUnit(r, (*units)[i], absl::StrCat("units[", i, "]"), &k));
    p->kinds.push_back(std::move(k));
  }
  const json* links = r.Get(j, "links");
  if (links != nullptr) {
    if (!links->is_array()) return r.Error("links", "must be an array");
    for (size_t i = 0; i < links->size(); ++i) {
      LinkMeasurement l;
      MOBIUS_JSON_TRY(ParseLink(r, (*links)[i], absl::StrCat("links[", i, "]"), &l));
      p->links.push_back(l);
    }
  }
  absl::Status valid = ValidateMeasuredProfile(*p);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("profile ", r.source(), ": ", valid.message()));
  }
  return absl::OkStatus();
}

}  // namespace

std::string MeasuredProfileToJson(const MeasuredProfile& p) {
  ordered_json j;
  j["format"] = "mobius-profile";
  j["version"] = p.version;
  j["model"] = {{"hash", p.model_hash}, {"model_type", p.model_type}, {"units", p.num_units}};
  j["shape"] = {{"microbatch", p.shape.microbatch_size}, {"seq_len", p.shape.seq_len}};
  j["backend"] = p.backend;
  j["device"] = p.device;
  j["build_version"] = p.build_version;
  j["precision"] = p.precision;
  j["warmup"] = p.warmup;
  j["repetitions"] = p.repetitions;
  j["copy_bytes"] = p.copy_bytes;
  ordered_json units = ordered_json::array();
  for (const UnitKindMeasurement& k : p.kinds) {
    units.push_back({{"kind", k.kind},
                     {"unit", k.unit_index},
                     {"forward_seconds", k.forward_seconds},
                     {"backward_seconds", k.backward_seconds},
                     {"parameter_bytes", k.parameter_bytes},
                     {"gradient_bytes", k.gradient_bytes},
                     {"boundary_bytes", k.boundary_bytes},
                     {"saved_activation_bytes", k.saved_activation_bytes},
                     {"workspace_bytes", k.workspace_bytes}});
  }
  j["units"] = units;
  ordered_json links = ordered_json::array();
  for (const LinkMeasurement& l : p.links) {
    links.push_back({{"device", l.device},
                     {"h2d_bytes_per_s", l.h2d_bytes_per_s},
                     {"d2h_bytes_per_s", l.d2h_bytes_per_s},
                     {"duplex_h2d_bytes_per_s", l.duplex_h2d_bytes_per_s},
                     {"duplex_d2h_bytes_per_s", l.duplex_d2h_bytes_per_s},
                     {"group_size", l.group_size},
                     {"group_h2d_bytes_per_s", l.group_h2d_bytes_per_s},
                     {"group_d2h_bytes_per_s", l.group_d2h_bytes_per_s}});
  }
  j["links"] = links;
  return j.dump(2) + "\n";
}

absl::StatusOr<MeasuredProfile> MeasuredProfileFromJson(const std::string& text,
                                                        const std::string& source) {
  json j = json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile ", source, ": not valid JSON (a mobius-worker profile file?)"));
  }
  MeasuredProfile p;
  Reader r(source);
  absl::Status s = Parse(r, j, &p);
  if (!s.ok()) return s;
  return p;
}

std::string BuildVersion() { return MOBIUS_VERSION; }

}  // namespace mobius::planner
