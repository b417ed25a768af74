#include "worker/runtime/pipeline_worker.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <ctime>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/numeric/bf16.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "worker/runtime/numa_affinity.h"
#include "worker/runtime/pipeline_state.h"
#include "worker/runtime/rank_backend.h"
#include "worker/train/lora_setup.h"

namespace mobius::runtime {

using backend::DeviceBuffer;

namespace {

using State = PipelineWorker::State;

// Device buffer sizes of one rank: its two slots (each sized for its largest pass, weights,
// adapters and gradients together: SlotBytes; resident: one slot, for its only stage) and one
// microbatch's activations and workspace.
struct DeviceNeeds {
  uint64_t slot_bytes = 0, workspace = 0;
  int64_t max_units = 1;
  uint64_t tokens = 0, hidden = 0;  // [mb, T] int32; one bf16 boundary activation

  uint64_t activation_bytes() const {
    return 2 * tokens + 4 + 2 * hidden + (max_units - 1) * hidden + 2 * 2 * hidden + workspace;
  }
};

DeviceNeeds Needs(const State& s) {
  DeviceNeeds d;
  for (const Pass& p : s.passes) {
    const StageRange& range = s.range(p);
    d.slot_bytes = std::max(d.slot_bytes, SlotBytes(s, range));
    d.max_units = std::max(d.max_units, range.end - range.begin);
    for (int64_t u = range.begin; u < range.end; ++u) {
      d.workspace = std::max(d.workspace, s.runners[u]->WorkspaceBytes(s.mb, s.t));
    }
  }
  d.tokens = 4 * static_cast<uint64_t>(s.mb * s.t);
  d.hidden = 2 * s.layout.boundary_elements;
  return d;
}

absl::Status Allocate(State& s, const DeviceNeeds& d) {
  for (int i = 0; i < 2; ++i) {
    Slot& slot = s.slots[i];
    const bool used = i == 0 || s.resident == nullptr;  // resident: the stage never moves
    MOBIUS_ASSIGN_OR_RETURN(slot.arena, s.backend->Allocate(used ? d.slot_bytes : 0,
                                                            absl::StrCat("slot", i)));
    MOBIUS_ASSIGN_OR_RETURN(slot.loaded, s.backend->CreateEvent());
    MOBIUS_ASSIGN_OR_RETURN(slot.saved, s.backend->CreateEvent());
  }
  const uint64_t hidden = d.hidden;
  MOBIUS_ASSIGN_OR_RETURN(s.tokens, s.backend->Allocate(d.tokens, "tokens"));
  MOBIUS_ASSIGN_OR_RETURN(s.targets, s.backend->Allocate(d.tokens, "targets"));
  MOBIUS_ASSIGN_OR_RETURN(s.loss, s.backend->Allocate(4, "loss"));
  MOBIUS_ASSIGN_OR_RETURN(s.stage_in, s.backend->Allocate(hidden, "stage.input"));
  MOBIUS_ASSIGN_OR_RETURN(s.out, s.backend->Allocate(hidden, "stage.output"));
  for (int j = 0; j + 1 < d.max_units; ++j) {
    MOBIUS_ASSIGN_OR_RETURN(DeviceBuffer h,
                            s.backend->Allocate(hidden, absl::StrCat("stage.interior", j)));
    s.hidden.push_back(std::move(h));
  }
  for (DeviceBuffer& dh : s.dh) {
    MOBIUS_ASSIGN_OR_RETURN(dh, s.backend->Allocate(2 * hidden, "stage.dhidden"));
  }
  MOBIUS_ASSIGN_OR_RETURN(s.workspace, s.backend->Allocate(d.workspace, "workspace"));
  if (s.resident != nullptr) MOBIUS_RETURN_IF_ERROR(ResidentAllocate(s));
  return absl::OkStatus();
}

// The store lays out a unit's adapters as its runner reads them (store_layout.h, adapter.h):
// checked, since the two are computed on either side of the process boundary.
absl::Status CheckAdapterLayout(const State& s, int64_t u) {
  if (!s.layout.lora) return absl::OkStatus();
  const units::UnitAdapter& a = s.runners[u]->adapter();
  bool same = a.num_elements == s.layout.unit_adapter_elements[u];
  for (const units::UnitAdapter::Module& m : a.modules) {
    const auto at = s.layout.tensors.find(m.module.a_name());
    const auto bt = s.layout.tensors.find(m.module.b_name());
    same = same && at != s.layout.tensors.end() && bt != s.layout.tensors.end() &&
           at->second.master == s.layout.unit_adapters[u] + 4 * static_cast<uint64_t>(m.a) &&
           bt->second.master == s.layout.unit_adapters[u] + 4 * static_cast<uint64_t>(m.b);
  }
  if (!same) {
    return absl::InternalError(absl::StrCat("unit ", u, ": the store's adapter layout is not the "
                                            "unit runner's (store_layout.cc vs adapter.cc)"));
  }
  return absl::OkStatus();
}

uint32_t MonotonicSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint32_t>(ts.tv_sec);
}

// Before the backend, the store's first touch and the optimizer thread exist, so all of them stay
// on the node (threads already running, e.g. OpenBLAS's pool, are moved too). A failure to pin is
// logged, not fatal: it costs locality, not correctness.
void PinToNumaNode(const State& s) {
  if (static_cast<size_t>(s.rank) >= s.run.rank_cpus.size() ||
      s.run.rank_cpus[s.rank].empty()) {
    return;
  }
  const std::vector<int>& node = s.run.rank_cpus[s.rank];
  absl::StatusOr<std::vector<int>> allowed = AllowedCpus();
  if (!allowed.ok()) {
    LOG(WARNING) << "rank " << s.rank << ": not pinned: " << allowed.status();
    return;
  }
  const std::vector<int> cpus = UsableCpus(node, *allowed);
  if (cpus.empty()) {
    LOG(INFO) << "rank " << s.rank << ": not pinned: its NUMA node's CPUs " << FormatCpuList(node)
              << " are not among this machine's usable CPUs " << FormatCpuList(*allowed);
    return;
  }
  absl::Status pinned = PinAllThreads(cpus);
  if (!pinned.ok()) {
    LOG(WARNING) << "rank " << s.rank << ": not pinned: " << pinned;
    return;
  }
  LOG(INFO) << "rank " << s.rank << ": pinned to CPUs " << FormatCpuList(cpus)
            << " (its GPU's NUMA node)";
}

// Before `range` computes (with W_k): unless `next` needs the same weights (same slot), its
// weights W_next_k are prefetched into the other slot if they are ready, `range`'s own loaded
// first if they are not yet.
absl::Status PrefetchNext(State& s, const StageRange& range, uint32_t k, const StageRange& next,
                          uint32_t next_k) {
  if (next.begin == range.begin && next.end == range.end && next_k == k) {
    return absl::OkStatus();
  }
  const Slot* current = nullptr;
  for (const Slot& slot : s.slots) {
    if (slot.Holds(range, k)) current = &slot;
  }
  if (current == nullptr) {
    MOBIUS_ASSIGN_OR_RETURN(current, EnsureLoaded(s, range, k));
  }
  return Prefetch(s, current, next, next_k);
}

// Whether run-local step r + 1 exists.
bool HasNextStep(const State& s, uint32_t r) {
  return s.start.step + static_cast<int64_t>(r) < s.run.training.steps;
}

// Several nodes: keeps rows [first_row, + rows) of the global batch, this node's microbatches.
void TakeMicrobatches(data::Batch& batch, int64_t first_row, int64_t rows) {
  const int64_t t = batch.t;
  batch.tokens.assign(batch.tokens.begin() + first_row * t,
                      batch.tokens.begin() + (first_row + rows) * t);
  batch.targets.assign(batch.targets.begin() + first_row * t,
                       batch.targets.begin() + (first_row + rows) * t);
  batch.b = rows;
}

absl::Status RunPass(State& s, const Pass& pass, uint32_t r, const data::Batch& batch,
                     const std::vector<float>& shares, std::vector<float>& losses) {
  ++s.passes_run;
  return pass.backward ? BackwardPass(s, pass.stage, r, batch, shares, losses)
                       : ForwardPass(s, pass.stage, r, batch);
}

// The passes of step r in this rank's order (mobius: forward ascending, backward descending;
// roundrobin: its positions of the pass stream). While a pass computes, the next one's weights are
// prefetched into the other slot, unless it runs on the same units (same slot).
absl::Status RunPasses(State& s, uint32_t r, const data::Batch& batch,
                       const std::vector<float>& shares, std::vector<float>& losses) {
  // Roundrobin: the rotation carries over steps (run_config.h PassRank).
  const bool varies = RankOfPassVaries(s.run);
  const std::vector<Pass> passes = varies ? PassesOfRank(s.run, s.rank, r) : s.passes;
  const uint32_t k = ComputeIndex(s, r);
  for (size_t i = 0; i < passes.size(); ++i) {
    const StageRange& range = s.range(passes[i]);
    if (i + 1 < passes.size()) {
      MOBIUS_RETURN_IF_ERROR(PrefetchNext(s, range, k, s.range(passes[i + 1]), k));
    } else if (HasNextStep(s, r) && s.resident == nullptr) {  // resident: one slot, no uploads
      // The next step's first pass, if its weights are ready already (with optimizer staleness
      // they usually are: that step computes with an older update).
      const std::vector<Pass> next = varies ? PassesOfRank(s.run, s.rank, r + 1) : passes;
      if (!next.empty()) {
        MOBIUS_RETURN_IF_ERROR(
            PrefetchNext(s, range, k, s.range(next.front()), ComputeIndex(s, r + 1)));
      }
    }
    MOBIUS_RETURN_IF_ERROR(RunPass(s, passes[i], r, batch, shares, losses));
  }
  return DrainTransport(s);  // this step's gradient sends are received
}

// Pool dispatch: the pass stream is a ticket counter in the store, ticket t = pass t mod P of step
// t / P + 1 (P passes per step). A rank claims the next ticket when it starts computing its
// current pass (its weights are on the device; the other slot is free) and prefetches that pass's
// weights, so each pass goes to the rank that is ready for it first. Tickets are claimed in stream order and every rank runs
// its tickets in order, so the lowest unfinished pass always runs on some rank: no deadlock. A
// claim of a later step is kept for that step (pool_claim).
absl::Status RunPoolPasses(State& s, uint32_t r, const data::Batch& batch,
                           const std::vector<float>& shares, std::vector<float>& losses) {
  auto* counter = s.store->at<std::atomic<uint64_t>>(s.layout.pool_ticket);
  auto claim = [&] { return counter->fetch_add(1, std::memory_order_acq_rel); };
  const uint64_t per_step = s.layout.num_forward_stages + s.layout.num_backward_stages;
  const uint64_t first = (r - 1) * per_step, end = r * per_step;
  const uint32_t k = ComputeIndex(s, r);
  uint64_t t = s.pool_claim != UINT64_MAX ? s.pool_claim : claim();
  while (t < end) {
    const Pass pass = PassAt(s.run, static_cast<int>(t - first));
    // Its weights on the device first (their update, then the upload): only when it starts
    // computing is this rank ready to take another pass into its other slot.
    MOBIUS_ASSIGN_OR_RETURN(Slot * slot, EnsureLoaded(s, s.range(pass), k));
    const Clock::time_point t0 = Clock::now();
    MOBIUS_RETURN_IF_ERROR(s.backend->Synchronize(*slot->loaded));
    s.stall += Since(t0);
    const uint64_t next = claim();
    if (next < end || (next < end + per_step && HasNextStep(s, r))) {
      const bool later = next >= end;
      const StageRange& after =
          s.range(PassAt(s.run, static_cast<int>(next - (later ? end : first))));
      MOBIUS_RETURN_IF_ERROR(
          PrefetchNext(s, s.range(pass), k, after, later ? ComputeIndex(s, r + 1) : k));
    }
    MOBIUS_RETURN_IF_ERROR(RunPass(s, pass, r, batch, shares, losses));
    t = next;
  }
  s.pool_claim = t;
  return absl::OkStatus();
}

// Sends the held step reports of steps <= `upto`, in order, each with its gradient norm and the
// optimizer time since the previous report, once the optimizer thread is through the step (its
// tasks' partials, with clipping its updates): the rank that summed the norm knows it (the others
// report 0; the launcher takes the maximum). Without `wait` it sends only those whose step the
// optimizer is through now (optimizer staleness: the rest go out at a later step's end). The
// optimizer's error, if it failed.
absl::Status SendReports(State& s, uint32_t upto, bool wait,
                         const std::function<void(const WorkerStepReport&)>& on_step) {
  while (!s.reports.empty() && s.reports.front().r <= upto) {
    PendingReport& p = s.reports.front();
    {
      std::unique_lock<std::mutex> lock(s.mu);
      if (!wait && s.steps_handed < p.r && s.optimizer_error.ok()) return absl::OkStatus();
      s.cv.wait(lock, [&] { return s.steps_handed >= p.r || !s.optimizer_error.ok(); });
      if (!s.optimizer_error.ok()) return s.optimizer_error;
      if (auto it = s.summed_norms.find(p.r); it != s.summed_norms.end()) {
        p.report.grad_norm = it->second;
        s.summed_norms.erase(it);
      }
      if (auto it = s.summed_scales.find(p.r); it != s.summed_scales.end()) {
        p.report.loss_scale = it->second.first;
        p.report.skipped = it->second.second;
        s.summed_scales.erase(it);
      }
      p.report.optimizer_seconds = s.optimizer_seconds - s.optimizer_reported;
      s.optimizer_reported = s.optimizer_seconds;
    }
    // A checkpoint completed by now goes with the newest report sent now (the step's own, for
    // the last step's).
    const bool newest = s.reports.size() == 1 || s.reports[1].r > upto;
    if (auto finished = newest ? TakeFinishedCheckpoint(s) : std::nullopt) {
      p.report.checkpoint = finished->first;
      p.report.checkpoint_step = finished->second;
    }
    on_step(p.report);
    s.reports.pop_front();
  }
  return absl::OkStatus();
}

}  // namespace

PipelineWorker::PipelineWorker(std::unique_ptr<State> state) : s_(std::move(state)) {}

PipelineWorker::~PipelineWorker() {
  if (s_ && s_->backend) {
    backend::Queue* comm = s_->transport ? s_->transport->comm.get() : nullptr;
    for (auto* q : {s_->compute.get(), s_->h2d.get(), s_->d2h.get(), comm}) {
      if (q != nullptr) s_->backend->Synchronize(*q).IgnoreError();
    }
    if (s_->store) s_->backend->UnregisterHost(s_->store->base()).IgnoreError();
  }
}

absl::StatusOr<std::unique_ptr<PipelineWorker>> PipelineWorker::Create(const RunConfig& run,
                                                                       int rank) {
  auto s = std::make_unique<State>();
  s->run = run;
  s->rank = rank;
  if (rank < 0 || rank >= run.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is not in [0, ",
                                                   run.num_workers, ")"));
  }
  MOBIUS_RETURN_IF_ERROR(train::ValidateTrainerOptions(s->run.training));
  PinToNumaNode(*s);
  const train::TrainerOptions& o = s->run.training;
  // Config, data and the resume position only: the tensors go from the files straight into this
  // rank's share of the store (FillStore), never through a copy of the whole model.
  MOBIUS_ASSIGN_OR_RETURN(s->start, train::LoadTrainingStart(o, /*parameters=*/false));
  MOBIUS_ASSIGN_OR_RETURN(s->layout, MakeStoreLayout(s->start.config, s->run));
  s->passes = PassesOfRank(s->run, rank);
  for (const Pass& p : s->passes) {
    (p.backward ? s->backward_stages : s->forward_stages).push_back(p.stage);
  }
  std::sort(s->forward_stages.begin(), s->forward_stages.end());
  std::sort(s->backward_stages.begin(), s->backward_stages.end());
  s->pool = PoolDispatch(s->run);
  if (s->pool || RankOfPassVaries(s->run)) {
    // Any pass of the stream may come to this rank: slots and runners for all.
    s->passes.clear();
    const size_t total = s->run.forward_stages.size() + s->run.backward_stages.size();
    for (size_t j = 0; j < total; ++j) s->passes.push_back(PassAt(s->run, static_cast<int>(j)));
  }
  s->mb = o.microbatch;
  s->t = o.seq;
  s->first_microbatch = static_cast<int64_t>(s->run.nodes.rank) * s->layout.num_microbatches;
  const int64_t num_units = static_cast<int64_t>(s->layout.units.size());
  s->head_forward = s->layout.num_forward_stages - 1;
  s->head_backward = s->layout.num_backward_stages - 1;
  s->tied = s->start.config.tie_word_embeddings;
  s->half = o.precision == "fp16" ? backend::DType::kF16 : backend::DType::kBf16;
  MOBIUS_ASSIGN_OR_RETURN(s->initial_scaler, train::LossScaler::ForOptions(o));
  if (s->start.loss_scale > 0) {
    MOBIUS_RETURN_IF_ERROR(
        s->initial_scaler.Restore(s->start.loss_scale, s->start.loss_scale_good_steps));
  }
  if (s->half == backend::DType::kF16 && Traits(s->run.schedule).weights_resident) {
    return absl::InvalidArgumentError(
        "training.precision fp16 runs with the mobius and roundrobin schedules (resident keeps "
        "bf16: its optimizer runs on the GPU without a loss scaler yet)");
  }
  MOBIUS_ASSIGN_OR_RETURN(s->store,
                          s->run.store_fd >= 0
                              ? HostStore::OpenFd(s->run.store_fd, s->layout.total_bytes)
                              : HostStore::Open(s->run.store_path, s->layout.total_bytes));
  if (!s->run.links.empty()) {
    s->links = std::make_unique<LinkEmulator>(s->run, s->layout, s->store.get(), rank);
  }
  MOBIUS_ASSIGN_OR_RETURN(RankBackend made, CreateRankBackend(s->run, rank, s->links.get()));
  LOG(INFO) << made.description;
  s->backend = std::move(made.backend);
  MOBIUS_ASSIGN_OR_RETURN(s->compute, s->backend->CreateQueue(backend::QueueKind::kCompute, 1));
  MOBIUS_ASSIGN_OR_RETURN(s->h2d, s->backend->CreateQueue(backend::QueueKind::kHostToDevice, 0));
  MOBIUS_ASSIGN_OR_RETURN(s->d2h, s->backend->CreateQueue(backend::QueueKind::kDeviceToHost, 0));
  if (o.adapter.enabled()) {
    if (Traits(s->run.schedule).weights_resident) {
      return absl::InvalidArgumentError(
          "schedule resident does not train adapters yet (use mobius or roundrobin)");
    }
    MOBIUS_ASSIGN_OR_RETURN(s->lora, train::MakeLoraRun(o, s->start.config));
  }
  s->runners.resize(num_units);
  for (const Pass& p : s->passes) {
    for (int64_t u = s->range(p).begin; u < s->range(p).end; ++u) {
      if (s->runners[u] != nullptr) continue;
      MOBIUS_ASSIGN_OR_RETURN(s->runners[u],
                              units::UnitRunner::Create(s->start.config, u, s->backend.get(),
                                                        s->lora ? &s->lora->spec : nullptr,
                                                        s->run.training.chunk_tokens, s->half));
      MOBIUS_RETURN_IF_ERROR(CheckAdapterLayout(*s, u));
    }
  }
  const DeviceNeeds needs = Needs(*s);
  if (Traits(s->run.schedule).weights_resident) {
    // ValidateRunConfig: one stage per rank.
    if (s->backward_stages.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("schedule resident: rank ", rank, " runs ",
                                                     s->backward_stages.size(), " stages, not 1"));
    }
    s->resident = std::make_unique<ResidentStage>();
    s->resident->stage = s->backward_stages.front();
    MOBIUS_RETURN_IF_ERROR(CheckResidentFits(*s, needs.activation_bytes()));
  }
  absl::Status alloc = Allocate(*s, needs);
  if (absl::IsResourceExhausted(alloc)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "rank ", rank, ": device memory ", o.device_memory_bytes, " bytes cannot hold ",
        s->resident != nullptr ? "the resident stage's model state" : "two stage slots",
        " and one microbatch: ", alloc.message()));
  }
  MOBIUS_RETURN_IF_ERROR(alloc);
  MOBIUS_ASSIGN_OR_RETURN(s->adamw, train::MakeAdamW(o));
  MOBIUS_ASSIGN_OR_RETURN(optim::LrSchedule schedule, train::MakeLrSchedule(o));
  s->schedule = schedule;
  return std::unique_ptr<PipelineWorker>(new PipelineWorker(std::move(s)));
}

absl::Status PipelineWorker::Run(const std::function<void(const WorkerStepReport&)>& on_step) {
  State& s = *s_;
  const train::TrainerOptions& o = s.run.training;
  // Heartbeats for the launcher's watchdog, from the start (filling the store can take a while).
  std::atomic<bool> beating{true};
  std::thread heartbeat([&s, &beating] {
    while (beating) {
      s.store->Publish(s.layout.heartbeat_word(s.rank), MonotonicSeconds());
      for (int i = 0; i < 10 && beating; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  });
  struct StopHeartbeat {
    std::atomic<bool>& beating;
    std::thread& thread;
    ~StopHeartbeat() {
      beating = false;
      thread.join();
    }
  } stop_heartbeat{beating, heartbeat};
  if (absl::Status filled = FillStore(s); !filled.ok()) {
    s.store->Abort(3);  // the other ranks would wait at the barrier for this one
    return filled;
  }
  if (s.rank == 0) InitLossScales(s);
  MOBIUS_RETURN_IF_ERROR(s.store->Barrier(s.run.num_workers));
  // Pinned once per worker (cudaHostRegister on CUDA), after every rank first-touched its stages:
  // registering faults pages in, which must not decide their NUMA node.
  if (absl::Status pinned = s.backend->RegisterHost(s.store->base(), s.store->size_bytes());
      !pinned.ok()) {
    // Correct without it, slower: copies from pageable memory are staged by the driver.
    LOG(WARNING) << "rank " << s.rank << ": the host store is not pinned: " << pinned;
  }
  // Every rank is here (the barrier above): agree on the gradient transport and set it up.
  MOBIUS_RETURN_IF_ERROR(SetUpTransport(s));
  if (s.run.nodes.count > 1) {  // several nodes: meet rank `rank` of every other node
    absl::StatusOr<std::unique_ptr<NodeCollective>> nodes =
        NodeCollective::Connect(s.run, s.rank, s.start.step, s.store.get(), &s.layout);
    if (!nodes.ok()) {
      s.store->Abort(3);
      return nodes.status();
    }
    s.nodes = *std::move(nodes);
  }
  MOBIUS_RETURN_IF_ERROR(StartCheckpointWriter(s));
  std::thread optimizer([&s] { OptimizerLoop(s); });
  auto finish = [&](absl::Status st) {
    {
      std::lock_guard<std::mutex> lock(s.mu);
      s.stop = true;
      // The optimizer's or the checkpoint writer's own error explains an ABORTED wait better
      // than the wait does.
      if (!s.optimizer_error.ok()) st = s.optimizer_error;
    }
    if (absl::Status written = CheckpointError(s); !written.ok() && absl::IsAborted(st)) {
      st = written;
    }
    s.cv.notify_all();
    const bool stopped = absl::IsAborted(st) && s.store->aborted() == 0;
    if (!st.ok() && !stopped) s.store->Abort(3);
    optimizer.join();
    StopCheckpointWriter(s);
    if (st.ok()) {
      std::lock_guard<std::mutex> lock(s.mu);
      st = s.optimizer_error;
    }
    if (st.ok()) st = CheckpointError(s);
    if (!st.ok() && !stopped) s.store->Abort(3);
    LOG(INFO) << absl::StrFormat(
        "rank %d: device memory peak %.1f MB of %.1f MB (%s)", s.rank, s.backend->peak_bytes() / 1e6,
        s.backend->capacity_bytes() / 1e6,
        s.backend->name() == "cpu" ? "CPU backend: host memory" : s.backend->name());
    return st;
  };
  // Resident: the stage's weights and optimizer state go to the device once, from the filled store.
  if (s.resident != nullptr) {
    absl::Status loaded = ResidentLoad(s);
    if (!loaded.ok()) return finish(loaded);
  }
  const int64_t steps_left = o.steps - s.start.step;
  for (uint32_t r = 1; r <= static_cast<uint32_t>(steps_left); ++r) {
    const Clock::time_point step_start = Clock::now();
    s.stall = s.compute_wait = 0;
    s.uploads_on_demand = 0;
    s.ran_head = false;
    s.passes_run = 0;
    const int64_t global_step = s.start.step + r;
    absl::StatusOr<data::Batch> batch = s.start.loader->NextTrainBatch();
    if (!batch.ok()) return finish(batch.status());
    // Each microbatch's share of the batch's counted targets (ResidentModel::Step's scaling).
    // Several nodes: the batch is the global batch, every node counts all of it (so the shares
    // are of the global batch) and runs its own microbatches (TakeMicrobatches).
    const int M = s.layout.num_microbatches;
    const int64_t rows = s.mb * s.t;
    const int64_t global_m = batch->b / s.mb;
    std::vector<float> shares(M, 0.0f), losses(M, 0.0f);
    std::vector<int64_t> counts(global_m, 0);
    int64_t total = 0;
    for (int64_t m = 0; m < global_m; ++m) {
      for (int64_t j = 0; j < rows; ++j) counts[m] += batch->targets[m * rows + j] != -100;
      total += counts[m];
    }
    for (int m = 0; m < M; ++m) {
      shares[m] = total == 0 ? 0.0f : static_cast<float>(counts[s.first_microbatch + m]) / total;
    }
    if (s.nodes != nullptr) TakeMicrobatches(*batch, s.first_microbatch * s.mb, M * s.mb);
    absl::Status st = s.pool ? RunPoolPasses(s, r, *batch, shares, losses)
                             : RunPasses(s, r, *batch, shares, losses);
    if (st.ok() && s.resident != nullptr) st = ResidentUpdate(s, r);  // the device optimizer
    if (!st.ok()) return finish(st);
    HandOverStep(s, r);  // every optimizer task of step r is queued
    const bool last = global_step == o.steps;
    // Checkpoint and stop (pipeline_worker.h): rank 0 answers a request with the next step and
    // then marks step r decided; the others learn step r's fate once step r-1 is decided.
    // Several nodes: a request on any node stops every node after the same step (rank 0 of every
    // node takes the maximum each step, so the nodes' control sequences stay aligned).
    if (s.rank == 0) {
      uint32_t request = s.store->Load(StoreLayout::kStopAtWord) == 0 &&
                         s.store->Load(StoreLayout::kStopRequestWord) != 0;
      if (s.nodes != nullptr) {
        absl::StatusOr<uint32_t> any = s.nodes->MaxUint32(request);
        if (!any.ok()) return finish(any.status());
        request = *any;
      }
      if (request != 0 && s.store->Load(StoreLayout::kStopAtWord) == 0) {
        s.store->Publish(StoreLayout::kStopAtWord, r + 1);
      }
      s.store->Publish(s.layout.decided_word(), r);
    } else if (absl::Status d = Await(s, s.layout.decided_word(), r - 1); !d.ok()) {
      return finish(d);
    }
    const bool stop_here = s.store->Load(StoreLayout::kStopAtWord) == r && !last;
    // The step ends for this rank when its backward stages are updated. With optimizer staleness
    // it ends at once, except at sync steps: its updates overlap the next step, whose own waits
    // keep them at most a step behind (a stage's next gradient lands only after its update, and
    // the step after next computes with it).
    const bool sync = train::IsSyncStep(o, global_step) || stop_here;
    if (sync) {
      for (int stage : s.backward_stages) {
        absl::Status w = Await(s, s.layout.updated_word(stage), r);
        if (!w.ok()) return finish(w);
      }
    }
    std::optional<float> eval_loss;
    // Several nodes: node 0 evaluates (every node holds the same weights).
    if (o.eval_every > 0 && (global_step % o.eval_every == 0 || last) && s.run.nodes.rank == 0) {
      absl::StatusOr<std::optional<float>> eval = EvalPass(s, r);
      if (!eval.ok()) return finish(eval.status());
      eval_loss = *eval;
    }
    WorkerStepReport rep;
    rep.rank = s.rank;
    rep.eval_loss = eval_loss;
    rep.step = global_step;
    rep.total_steps = o.steps;
    rep.lr = s.schedule->At(global_step);
    rep.tokens = o.batch * o.seq;
    if (s.ran_head) {
      double loss = 0;
      for (int m = 0; m < M; ++m) loss += double{shares[m]} * losses[m];
      if (s.nodes != nullptr) {  // the other nodes' shares of the global batch's loss
        absl::StatusOr<double> global = s.nodes->SumDouble(loss);
        if (!global.ok()) return finish(global.status());
        loss = *global;
      }
      rep.loss = static_cast<float>(loss);
    }
    rep.compute_seconds = s.compute_wait;
    rep.stall_seconds = s.stall;
    rep.passes = s.passes_run;
    rep.uploads_on_demand = s.uploads_on_demand;
    if (s.checkpoints != nullptr &&
        ((o.checkpoint_every > 0 && global_step % o.checkpoint_every == 0) || last || stop_here)) {
      // This rank's stages are updated: its writer streams them from the store while the next
      // steps run (pipeline_state.h has the consistency rule). Resident ranks first bring their
      // device state back to the store, once the previous checkpoint no longer reads it.
      absl::Status b = s.resident != nullptr ? AwaitCheckpoints(s) : CheckpointError(s);
      if (b.ok() && s.resident != nullptr) b = ResidentWriteBack(s);
      if (!b.ok()) return finish(b);
      RequestCheckpoint(s, r, global_step, s.start.loader->position());
      // The run ends here: its last checkpoint is complete before the last report.
      if (last || stop_here) {
        if (absl::Status w = AwaitCheckpoints(s); !w.ok()) return finish(w);
      }
    }
    rep.step_seconds = Since(step_start);
    // Every copy since the previous report (before step 1: resident's one-time upload).
    rep.h2d_bytes = std::exchange(s.h2d_bytes, 0);
    rep.d2h_bytes = std::exchange(s.d2h_bytes, 0);
    rep.peer_bytes = std::exchange(s.peer_bytes, 0);
    if (s.nodes != nullptr) {  // sent by the optimizer thread since the last report
      const uint64_t sent = s.nodes->sent_bytes();
      rep.internode_bytes = sent - std::exchange(s.internode_reported, sent);
    }
    s.reports.push_back({r, std::move(rep)});
    if (absl::Status sent = SendReports(s, r, /*wait=*/sync, on_step); !sent.ok()) {
      return finish(absl::OkStatus());  // the optimizer's error
    }
    if (stop_here) {
      return finish(absl::AbortedError(absl::StrCat(
          "stopped on request after step ", global_step,
          o.checkpoint_dir.empty() ? " (no checkpoint directory)" : ", checkpoint written")));
    }
  }
  return finish(absl::OkStatus());
}

}  // namespace mobius::runtime
