#include "common/run/run_config.h"

#include <algorithm>
#include <fstream>
#include <utility>
#include <sstream>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace mobius::runtime {

using nlohmann::json;

namespace {

template <typename... Parts>
absl::Status Bad(const Parts&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(parts...));
}

// `ranges` (the field `name`) cover [0, num_units) in order, each non-empty.
absl::Status CheckCover(const char* name, const std::vector<StageRange>& ranges,
                        int64_t num_units) {
  if (ranges.empty()) return Bad(name, ": empty");
  int64_t next = 0;
  for (size_t s = 0; s < ranges.size(); ++s) {
    const StageRange& r = ranges[s];
    if (r.begin != next || r.end <= r.begin) {
      return Bad(name, "[", s, "] = [", r.begin, ", ", r.end, ") does not continue at unit ", next,
                 " (stages must cover the model's units in order, each non-empty)");
    }
    next = r.end;
  }
  if (next != num_units) {
    return Bad(name, " cover units [0, ", next, ") but the model has ", num_units,
               " layer units (embedding + blocks + head)");
  }
  return absl::OkStatus();
}

// `ranks` (the field `name`, one per `what`) are valid and give every rank at least one.
absl::Status CheckRanks(const char* name, const char* what, const std::vector<int>& ranks,
                        size_t expected, int num_workers) {
  if (ranks.size() != expected) {
    return Bad(name, " has ", ranks.size(), " entries for ", expected, " ", what, "s");
  }
  std::vector<int> per_rank(num_workers, 0);
  for (size_t i = 0; i < ranks.size(); ++i) {
    const int r = ranks[i];
    if (r < 0 || r >= num_workers) {
      return Bad(name, "[", i, "] = ", r, " is not a rank in [0, ", num_workers, ")");
    }
    ++per_rank[r];
  }
  for (int r = 0; r < num_workers; ++r) {
    if (per_rank[r] == 0) {
      return Bad("rank ", r, " runs no ", what, " (fewer ", what, "s than GPUs?)");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateSchedule(const RunConfig& c, int64_t num_units) {
  const ScheduleTraits& traits = Traits(c.schedule);
  if (!traits.runs_on_pipeline_runtime) {
    return Bad("schedule ", traits.name,
               " is a planner baseline; the runtime runs mobius, resident or roundrobin");
  }
  if (traits.separate_pass_partitions) {
    if (!c.stages.empty() || !c.stage_rank.empty()) {
      return Bad("schedule roundrobin takes forward_stages, backward_stages and pass_rank; "
                 "stages and stage_rank must be empty");
    }
    MOBIUS_RETURN_IF_ERROR(CheckCover("forward_stages", c.forward_stages, num_units));
    MOBIUS_RETURN_IF_ERROR(CheckCover("backward_stages", c.backward_stages, num_units));
    if (c.dispatch != "static" && c.dispatch != "pool") {
      return Bad("dispatch must be static or pool (got \"", c.dispatch, "\")");
    }
    if (c.dispatch == "pool" && (c.transport == "nccl" || c.transport == "emulated")) {
      return Bad("dispatch pool decides at run time which rank runs a pass, so activation "
                 "gradients go through the host store: transport must be host or auto (got \"",
                 c.transport, "\")");
    }
    return CheckRanks("pass_rank", "pass", c.pass_rank,
                      c.forward_stages.size() + c.backward_stages.size(), c.num_workers);
  }
  if (c.dispatch != "static") {
    return Bad("dispatch ", c.dispatch, " is for schedule roundrobin only (schedule is ",
               traits.name, ")");
  }
  if (!c.forward_stages.empty() || !c.backward_stages.empty() || !c.pass_rank.empty()) {
    return Bad("forward_stages, backward_stages and pass_rank are for schedule roundrobin only "
               "(schedule is ", traits.name, ")");
  }
  MOBIUS_RETURN_IF_ERROR(CheckCover("stages", c.stages, num_units));
  MOBIUS_RETURN_IF_ERROR(
      CheckRanks("stage_rank", "stage", c.stage_rank, c.stages.size(), c.num_workers));
  if (traits.weights_resident && c.training.optimizer_staleness != 0) {
    return Bad("training.optimizer_staleness ", c.training.optimizer_staleness,
               " is for the host optimizer; schedule resident updates on the GPU, synchronously");
  }
  if (traits.weights_resident && c.stages.size() != static_cast<size_t>(c.num_workers)) {
    return Bad("schedule resident needs one stage per GPU (", c.stages.size(), " stages, ",
               c.num_workers, " GPUs)");
  }
  return absl::OkStatus();
}

// Several nodes: the group itself, and what the runtime does not do across nodes.
absl::Status ValidateNodeGroup(const RunConfig& c) {
  const NodeGroup& n = c.nodes;
  if (n.count < 1 || n.count > 1024) return Bad("nodes.count must be in 1..1024 (got ", n.count, ")");
  if (n.rank < 0 || n.rank >= n.count) {
    return Bad("nodes.rank ", n.rank, " is outside 0..", n.count - 1);
  }
  if (n.count == 1) return absl::OkStatus();
  if (n.rendezvous.empty()) return Bad("nodes.rendezvous is empty (", n.count, " nodes)");
  if (!(n.timeout_seconds > 0)) return Bad("nodes.timeout_seconds must be positive");
  if (n.bucket_bytes < 4096) return Bad("nodes.bucket_bytes must be >= 4096 (got ", n.bucket_bytes, ")");
  if (n.link_bytes_per_second < 0 || n.link_latency_seconds < 0) {
    return Bad("nodes.link_bytes_per_second and nodes.link_latency_seconds must be >= 0");
  }
  const train::TrainerOptions& t = c.training;
  const int64_t mb = t.EffectiveMicrobatch();
  if (mb <= 0 || t.batch % (mb * n.count) != 0) {
    return Bad("training.batch ", t.batch, " (the global batch) does not split into ", n.count,
               " nodes of whole microbatches of ", mb);
  }
  if (Traits(c.schedule).weights_resident) {
    return Bad("schedule resident keeps gradients and the optimizer on the GPUs; several nodes "
               "all-reduce gradients in host memory: use mobius or roundrobin");
  }
  if (c.dispatch == "pool") {
    return Bad("dispatch pool decides at run time which rank updates a stage, so the ranks of "
               "different nodes would not meet in the same all-reduce: use dispatch static with "
               "several nodes");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateRunConfig(const RunConfig& c, int64_t num_units) {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (c.num_workers < 1) return bad("num_workers must be >= 1 (got ", c.num_workers, ")");
  MOBIUS_RETURN_IF_ERROR(ValidateSchedule(c, num_units));
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
  if (c.backend != "auto" && c.backend != "cpu" && c.backend != "cuda") {
    return bad("backend must be auto, cpu or cuda (got \"", c.backend, "\")");
  }
  if (c.transport != "auto" && c.transport != "host" && c.transport != "nccl" &&
      c.transport != "emulated") {
    return bad("transport must be auto, host, nccl or emulated (got \"", c.transport, "\")");
  }
  if (c.transport == "emulated" && c.backend == "cuda") {
    return bad("transport emulated is the CPU backend's stand-in for nccl (backend is cuda)");
  }
  if (!c.rank_device.empty() && c.rank_device.size() != static_cast<size_t>(c.num_workers)) {
    return bad("rank_device has ", c.rank_device.size(), " entries for ", c.num_workers, " ranks");
  }
  for (size_t r = 0; r < c.rank_device.size(); ++r) {
    if (c.rank_device[r] < 0) return bad("rank_device[", r, "] = ", c.rank_device[r], " < 0");
  }
  return ValidateNodeGroup(c);
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
      {"checkpoint_keep_last", t.checkpoint_keep_last},
      {"checkpoint_group", t.checkpoint_group},
      {"checkpoint_export", t.checkpoint_export}, {"tokenizer_dir", t.tokenizer_dir},
      {"device_memory_bytes", t.device_memory_bytes}, {"threads", t.threads},
      {"eval_every", t.eval_every}, {"eval_fraction", t.eval_fraction},
      {"optimizer_staleness", t.optimizer_staleness}, {"chunk_tokens", t.chunk_tokens},
      {"precision", t.precision}, {"loss_scale_init", t.loss_scale_init},
      {"loss_scale_window", t.loss_scale_window},
      {"adapter",
       {{"type", t.adapter.type}, {"rank", t.adapter.rank}, {"alpha", t.adapter.alpha},
        {"dropout", t.adapter.dropout}, {"target_modules", t.adapter.target_modules},
        {"init_dir", t.adapter.init_dir},
        {"base_quantization", t.adapter.base_quantization}}}};
  auto ranges = [](const std::vector<StageRange>& v) {
    json out = json::array();
    for (const StageRange& s : v) out.push_back({s.begin, s.end});
    return out;
  };
  json links = json::array();
  for (const EmulatedLink& l : c.links) {
    links.push_back({{"name", l.name}, {"bytes_per_second", l.bytes_per_second}});
  }
  json j = {{"job_id", c.job_id},         {"training", training},
            {"stages", ranges(c.stages)}, {"stage_rank", c.stage_rank},
            {"forward_stages", ranges(c.forward_stages)},
            {"backward_stages", ranges(c.backward_stages)}, {"pass_rank", c.pass_rank},
            {"dispatch", c.dispatch},
            {"num_workers", c.num_workers}, {"schedule", ScheduleName(c.schedule)},
            {"store_path", c.store_path}, {"store_fd", c.store_fd}, {"links", links},
            {"rank_links", c.rank_links}, {"link_scale", c.link_scale},
            {"rank_gpu", c.rank_gpu}, {"rank_cpus", c.rank_cpus},
            {"backend", c.backend}, {"rank_device", c.rank_device},
            {"transport", c.transport},
            {"nodes", {{"count", c.nodes.count}, {"rank", c.nodes.rank},
                       {"rendezvous", c.nodes.rendezvous}, {"job_key", c.nodes.job_key},
                       {"timeout_seconds", c.nodes.timeout_seconds},
                       {"bucket_bytes", c.nodes.bucket_bytes},
                       {"link_bytes_per_second", c.nodes.link_bytes_per_second},
                       {"link_latency_seconds", c.nodes.link_latency_seconds}}}};
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
    std::string schedule = ScheduleName(c.schedule);
    get(j, "schedule", schedule, "");
    if (absl::StatusOr<Schedule> parsed = ParseSchedule(schedule); parsed.ok()) {
      c.schedule = *parsed;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("run config: field schedule: ", parsed.status().message()));
    }
    get(j, "store_path", c.store_path, "");
    get(j, "store_fd", c.store_fd, "");
    get(j, "stage_rank", c.stage_rank, "");
    get(j, "rank_links", c.rank_links, "");
    get(j, "link_scale", c.link_scale, "");
    get(j, "rank_gpu", c.rank_gpu, "");
    get(j, "rank_cpus", c.rank_cpus, "");
    get(j, "backend", c.backend, "");
    get(j, "rank_device", c.rank_device, "");
    get(j, "transport", c.transport, "");
    get(j, "pass_rank", c.pass_rank, "");
    get(j, "dispatch", c.dispatch, "");
    if (j.contains("nodes")) {
      const json& n = j.at("nodes");
      field = "nodes";
      if (!n.is_object()) throw std::invalid_argument("not an object");
      get(n, "count", c.nodes.count, "nodes.");
      get(n, "rank", c.nodes.rank, "nodes.");
      get(n, "rendezvous", c.nodes.rendezvous, "nodes.");
      get(n, "job_key", c.nodes.job_key, "nodes.");
      get(n, "timeout_seconds", c.nodes.timeout_seconds, "nodes.");
      get(n, "bucket_bytes", c.nodes.bucket_bytes, "nodes.");
      get(n, "link_bytes_per_second", c.nodes.link_bytes_per_second, "nodes.");
      get(n, "link_latency_seconds", c.nodes.link_latency_seconds, "nodes.");
    }
    for (auto [key, out] : {std::pair{"stages", &c.stages},
                            std::pair{"forward_stages", &c.forward_stages},
                            std::pair{"backward_stages", &c.backward_stages}}) {
      field = key;
      for (const json& s : j.value(key, json::array())) {
        out->push_back({s.at(0).get<int64_t>(), s.at(1).get<int64_t>()});
      }
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
    get(t, "checkpoint_keep_last", o.checkpoint_keep_last, p);
    get(t, "checkpoint_group", o.checkpoint_group, p);
    get(t, "checkpoint_export", o.checkpoint_export, p);
    get(t, "tokenizer_dir", o.tokenizer_dir, p);
    get(t, "device_memory_bytes", o.device_memory_bytes, p);
    get(t, "threads", o.threads, p);
    get(t, "eval_every", o.eval_every, p);
    get(t, "eval_fraction", o.eval_fraction, p);
    get(t, "optimizer_staleness", o.optimizer_staleness, p);
    get(t, "chunk_tokens", o.chunk_tokens, p);
    get(t, "precision", o.precision, p);
    get(t, "loss_scale_init", o.loss_scale_init, p);
    get(t, "loss_scale_window", o.loss_scale_window, p);
    if (t.contains("adapter")) {
      const json& a = t.at("adapter");
      const std::string q = "training.adapter.";
      get(a, "type", o.adapter.type, q);
      get(a, "rank", o.adapter.rank, q);
      get(a, "alpha", o.adapter.alpha, q);
      get(a, "dropout", o.adapter.dropout, q);
      get(a, "target_modules", o.adapter.target_modules, q);
      get(a, "init_dir", o.adapter.init_dir, q);
      get(a, "base_quantization", o.adapter.base_quantization, q);
    }
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

std::vector<int> StagesOfRank(const RunConfig& config, int rank) {
  std::vector<int> out;
  for (size_t s = 0; s < config.stage_rank.size(); ++s) {
    if (config.stage_rank[s] == rank) out.push_back(static_cast<int>(s));
  }
  return out;
}

const std::vector<StageRange>& ForwardStages(const RunConfig& config) {
  return Traits(config.schedule).separate_pass_partitions ? config.forward_stages : config.stages;
}

const std::vector<StageRange>& BackwardStages(const RunConfig& config) {
  return Traits(config.schedule).separate_pass_partitions ? config.backward_stages : config.stages;
}

Pass PassAt(const RunConfig& config, int pass) {
  const int sf = static_cast<int>(config.forward_stages.size());
  const int total = sf + static_cast<int>(config.backward_stages.size());
  return pass < sf ? Pass{false, pass} : Pass{true, total - 1 - pass};
}

int PassRank(const RunConfig& config, int pass, uint32_t step) {
  const int n = config.num_workers;
  const uint64_t passes = config.pass_rank.size();
  const int phase = static_cast<int>((static_cast<uint64_t>(step - 1) * passes) % n);
  return (config.pass_rank[pass] + phase) % n;
}

bool RankOfPassVaries(const RunConfig& config) {
  return Traits(config.schedule).separate_pass_partitions && config.num_workers > 1 &&
         config.pass_rank.size() % config.num_workers != 0;
}

std::vector<Pass> PassesOfRank(const RunConfig& config, int rank, uint32_t step) {
  std::vector<Pass> out;
  if (Traits(config.schedule).separate_pass_partitions) {
    for (size_t j = 0; j < config.pass_rank.size(); ++j) {
      if (PassRank(config, static_cast<int>(j), step) == rank) {
        out.push_back(PassAt(config, static_cast<int>(j)));
      }
    }
    return out;
  }
  const std::vector<int> stages = StagesOfRank(config, rank);
  for (int s : stages) out.push_back({false, s});
  for (auto it = stages.rbegin(); it != stages.rend(); ++it) out.push_back({true, *it});
  return out;
}

std::vector<int64_t> CheckpointUnits(const RunConfig& config) {
  std::vector<int64_t> units;
  for (const auto* p : {&ForwardStages(config), &BackwardStages(config)}) {
    for (const StageRange& r : *p) {
      if (r.begin > 0) units.push_back(r.begin);
    }
  }
  std::sort(units.begin(), units.end());
  units.erase(std::unique(units.begin(), units.end()), units.end());
  return units;
}

int BackwardRank(const RunConfig& config, int b, uint32_t step) {
  if (Traits(config.schedule).separate_pass_partitions) {
    const int sf = static_cast<int>(config.forward_stages.size());
    const int sb = static_cast<int>(config.backward_stages.size());
    return PassRank(config, sf + sb - 1 - b, step);  // backward stage b: pass S_F + S_B - 1 - b
  }
  return config.stage_rank[b];
}

bool PoolDispatch(const RunConfig& config) {
  return Traits(config.schedule).separate_pass_partitions && config.dispatch == "pool";
}

std::vector<PeerChannel> DgradChannels(const RunConfig& config) {
  std::vector<PeerChannel> out;
  if (PoolDispatch(config)) return out;
  const int sb = static_cast<int>(BackwardStages(config).size());
  // The rotation's phase repeats after at most num_workers steps.
  const uint32_t phases = RankOfPassVaries(config) ? config.num_workers : 1;
  for (uint32_t step = 1; step <= phases; ++step) {
    for (int b = 1; b < sb; ++b) {
      const PeerChannel c{BackwardRank(config, b, step), BackwardRank(config, b - 1, step)};
      if (c.from != c.to && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    }
  }
  std::sort(out.begin(), out.end(), [](const PeerChannel& a, const PeerChannel& b) {
    return a.from != b.from ? a.from < b.from : a.to < b.to;
  });
  return out;
}

}  // namespace mobius::runtime
