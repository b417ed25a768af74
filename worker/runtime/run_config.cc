#include "worker/runtime/run_config.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "nlohmann/json.hpp"

namespace mobius::runtime {

using nlohmann::json;

absl::Status ValidateRunConfig(const RunConfig& c, int64_t num_units) {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (c.num_workers < 1) return bad("num_workers must be >= 1 (got ", c.num_workers, ")");
  if (c.stages.empty()) return bad("stages: empty");
  int64_t next = 0;
  for (size_t s = 0; s < c.stages.size(); ++s) {
    const StageRange& r = c.stages[s];
    if (r.begin != next || r.end <= r.begin) {
      return bad("stages[", s, "] = [", r.begin, ", ", r.end, ") does not continue at unit ", next,
                 " (stages must cover the model's units in order, each non-empty)");
    }
    next = r.end;
  }
  if (next != num_units) {
    return bad("stages cover units [0, ", next, ") but the model has ", num_units,
               " layer units (embedding + blocks + head)");
  }
  if (c.stage_rank.size() != c.stages.size()) {
    return bad("stage_rank has ", c.stage_rank.size(), " entries for ", c.stages.size(), " stages");
  }
  std::vector<int> per_rank(c.num_workers, 0);
  for (size_t s = 0; s < c.stage_rank.size(); ++s) {
    const int r = c.stage_rank[s];
    if (r < 0 || r >= c.num_workers) {
      return bad("stage_rank[", s, "] = ", r, " is not a rank in [0, ", c.num_workers, ")");
    }
    ++per_rank[r];
  }
  for (int r = 0; r < c.num_workers; ++r) {
    if (per_rank[r] == 0) return bad("rank ", r, " runs no stage (fewer stages than GPUs?)");
  }
  if (c.schedule != "mobius" && c.schedule != "resident") {
    return bad("schedule must be mobius or resident (got \"", c.schedule,
               "\"; the runtime does not implement roundrobin yet)");
  }
  if (c.schedule == "resident" && c.stages.size() != static_cast<size_t>(c.num_workers)) {
    return bad("schedule resident needs one stage per GPU (", c.stages.size(), " stages, ",
               c.num_workers, " GPUs)");
  }
  if (!c.rank_links.empty() && c.rank_links.size() != static_cast<size_t>(c.num_workers)) {
    return bad("rank_links has ", c.rank_links.size(), " entries for ", c.num_workers, " ranks");
  }
  for (size_t r = 0; r < c.rank_links.size(); ++r) {
    for (int l : c.rank_links[r]) {
      if (l < 0 || l >= static_cast<int>(c.links.size())) {
        return bad("rank_links[", r, "] names link ", l, " of ", c.links.size());
      }
    }
  }
  for (size_t l = 0; l < c.links.size(); ++l) {
    if (!(c.links[l].bytes_per_second > 0)) {
      return bad("links[", l, "] (", c.links[l].name, "): bytes_per_second must be positive");
    }
  }
  if (c.store_path.empty()) return bad("store_path is empty");
  return absl::OkStatus();
}

std::string RunConfigToJson(const RunConfig& c) {
  const train::TrainerOptions& t = c.training;
  json training = {
      {"model_dir", t.model_dir}, {"data_path", t.data_path}, {"data_raw_bytes", t.data_raw_bytes},
      {"steps", t.steps}, {"batch", t.batch}, {"microbatch", t.microbatch}, {"seq", t.seq},
      {"lr", t.lr}, {"min_lr", t.min_lr}, {"warmup", t.warmup}, {"schedule", t.schedule},
      {"weight_decay", t.weight_decay}, {"grad_clip", t.grad_clip}, {"beta1", t.beta1},
      {"beta2", t.beta2}, {"eps", t.eps}, {"seed", t.seed}, {"checkpoint_dir", t.checkpoint_dir},
      {"checkpoint_every", t.checkpoint_every}, {"resume", t.resume},
      {"device_memory_bytes", t.device_memory_bytes}, {"threads", t.threads},
      {"eval_every", t.eval_every}, {"eval_fraction", t.eval_fraction}};
  json stages = json::array();
  for (const StageRange& s : c.stages) stages.push_back({s.begin, s.end});
  json links = json::array();
  for (const EmulatedLink& l : c.links) {
    links.push_back({{"name", l.name}, {"bytes_per_second", l.bytes_per_second}});
  }
  json j = {{"job_id", c.job_id},         {"training", training},
            {"stages", stages},           {"stage_rank", c.stage_rank},
            {"num_workers", c.num_workers}, {"schedule", c.schedule},
            {"store_path", c.store_path}, {"links", links},
            {"rank_links", c.rank_links}, {"link_scale", c.link_scale},
            {"rank_gpu", c.rank_gpu}, {"rank_cpus", c.rank_cpus}};
  return j.dump(2);
}

absl::StatusOr<RunConfig> RunConfigFromJson(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("run config: not a JSON object");
  }
  RunConfig c;
  std::string field;
  try {
    auto get = [&](const json& o, const char* key, auto& out, const std::string& prefix) {
      field = prefix + key;
      if (o.contains(key)) o.at(key).get_to(out);
    };
    get(j, "job_id", c.job_id, "");
    get(j, "num_workers", c.num_workers, "");
    get(j, "schedule", c.schedule, "");
    get(j, "store_path", c.store_path, "");
    get(j, "stage_rank", c.stage_rank, "");
    get(j, "rank_links", c.rank_links, "");
    get(j, "link_scale", c.link_scale, "");
    get(j, "rank_gpu", c.rank_gpu, "");
    get(j, "rank_cpus", c.rank_cpus, "");
    field = "stages";
    for (const json& s : j.value("stages", json::array())) {
      c.stages.push_back({s.at(0).get<int64_t>(), s.at(1).get<int64_t>()});
    }
    field = "links";
    for (const json& l : j.value("links", json::array())) {
      c.links.push_back({l.at("name").get<std::string>(), l.at("bytes_per_second").get<double>()});
    }
    field = "training";
    const json& t = j.at("training");
    train::TrainerOptions& o = c.training;
    const std::string p = "training.";
    get(t, "model_dir", o.model_dir, p);
    get(t, "data_path", o.data_path, p);
    get(t, "data_raw_bytes", o.data_raw_bytes, p);
    get(t, "steps", o.steps, p);
    get(t, "batch", o.batch, p);
    get(t, "microbatch", o.microbatch, p);
    get(t, "seq", o.seq, p);
    get(t, "lr", o.lr, p);
    get(t, "min_lr", o.min_lr, p);
    get(t, "warmup", o.warmup, p);
    get(t, "schedule", o.schedule, p);
    get(t, "weight_decay", o.weight_decay, p);
    get(t, "grad_clip", o.grad_clip, p);
    get(t, "beta1", o.beta1, p);
    get(t, "beta2", o.beta2, p);
    get(t, "eps", o.eps, p);
    get(t, "seed", o.seed, p);
    get(t, "checkpoint_dir", o.checkpoint_dir, p);
    get(t, "checkpoint_every", o.checkpoint_every, p);
    get(t, "resume", o.resume, p);
    get(t, "device_memory_bytes", o.device_memory_bytes, p);
    get(t, "threads", o.threads, p);
    get(t, "eval_every", o.eval_every, p);
    get(t, "eval_fraction", o.eval_fraction, p);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("run config: field ", field, ": ", e.what()));
  }
  return c;
}

absl::Status WriteRunConfig(const std::string& path, const RunConfig& config) {
  std::ofstream out(path, std::ios::trunc);
  out << RunConfigToJson(config) << "\n";
  out.close();
  if (!out) return MOBIUS_ERRNO_ERROR(absl::StrCat("write ", path));
  return absl::OkStatus();
}

absl::StatusOr<RunConfig> ReadRunConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("run config ", path, " cannot be read"));
  std::ostringstream s;
  s << in.rdbuf();
  absl::StatusOr<RunConfig> c = RunConfigFromJson(s.str());
  if (!c.ok()) return absl::Status(c.status().code(), absl::StrCat(path, ": ", c.status().message()));
  return c;
}

std::vector<int> StagesOfRank(const RunConfig& config, int rank) {
  std::vector<int> out;
  for (size_t s = 0; s < config.stage_rank.size(); ++s) {
    if (config.stage_rank[s] == rank) out.push_back(static_cast<int>(s));
  }
  return out;
}

}  // namespace mobius::runtime
