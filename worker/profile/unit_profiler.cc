#include "worker/profile/unit_profiler.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/numeric/bf16.h"
#include "common/numeric/f16.h"
#include "common/status_macros.h"
#include "worker/model/unit_runner.h"

namespace mobius::profile {
namespace {

using backend::Backend;
using backend::DeviceBuffer;
using backend::HostBuffer;
using backend::Queue;
using backend::QueueKind;
using Clock = std::chrono::steady_clock;

constexpr uint8_t kPattern = 0xA5;
constexpr uint64_t kLine = 64;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Seconds of one call of `fn` (which enqueues work and waits for it).
absl::StatusOr<double> TimeOnce(const std::function<absl::Status()>& fn) {
  const Clock::time_point start = Clock::now();
  MOBIUS_RETURN_IF_ERROR(fn());
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// `warmup` untimed calls, then the median of `repetitions` timed ones.
absl::StatusOr<double> MedianSeconds(const ProfilerOptions& o,
                                     const std::function<absl::Status()>& fn) {
  for (int i = 0; i < o.warmup; ++i) MOBIUS_RETURN_IF_ERROR(fn());
  std::vector<double> times;
  for (int i = 0; i < o.repetitions; ++i) {
    MOBIUS_ASSIGN_OR_RETURN(double t, TimeOnce(fn));
    times.push_back(t);
  }
  return Median(std::move(times));
}

absl::StatusOr<DeviceBuffer> Upload(Backend& b, Queue& q, const void* src, uint64_t bytes,
                                    const std::string& tag) {
  MOBIUS_ASSIGN_OR_RETURN(DeviceBuffer d, b.Allocate(bytes, tag));
  if (bytes > 0) {
    MOBIUS_RETURN_IF_ERROR(b.CopyToDevice(q, src, d, 0, bytes));
    MOBIUS_RETURN_IF_ERROR(b.Synchronize(q));
  }
  return d;
}

std::vector<uint16_t> RandomHalf(size_t n, backend::DType type, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-0.05f, 0.05f);
  std::vector<uint16_t> v(n);
  for (uint16_t& x : v) {
    x = type == backend::DType::kF16 ? numeric::Fp32ToF16(dist(rng))
                                     : numeric::Fp32ToBf16(dist(rng));
  }
  return v;
}

std::vector<float> RandomF32(size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> dist(-1e-3f, 1e-3f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<int32_t> RandomIds(size_t n, int64_t vocab, std::mt19937_64& rng) {
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = dist(rng);
  return v;
}

// Bytes of the workspace a forward writes: fill with a pattern, run it, count changed lines.
absl::StatusOr<int64_t> ForwardWrittenBytes(Backend& b, Queue& q,
                                            const std::function<absl::Status()>& forward,
                                            const DeviceBuffer& ws) {
  const uint64_t n = ws.size_bytes();
  if (n == 0) return 0;
  std::vector<uint8_t> host(n, kPattern);
  MOBIUS_RETURN_IF_ERROR(b.CopyToDevice(q, host.data(), ws, 0, n));
  MOBIUS_RETURN_IF_ERROR(b.Synchronize(q));
  MOBIUS_RETURN_IF_ERROR(forward());
  MOBIUS_RETURN_IF_ERROR(b.CopyToHost(q, ws, 0, host.data(), n));
  MOBIUS_RETURN_IF_ERROR(b.Synchronize(q));
  int64_t written = 0;
  for (uint64_t line = 0; line < n; line += kLine) {
    const uint64_t end = std::min(n, line + kLine);
    for (uint64_t i = line; i < end; ++i) {
      if (host[i] != kPattern) {
        written += static_cast<int64_t>(end - line);
        break;
      }
    }
  }
  return written;
}

}  // namespace

absl::StatusOr<planner::UnitKindMeasurement> MeasureUnit(const model::ModelDescription& model,
                                                         int64_t unit,
                                                         const planner::MicrobatchShape& shape,
                                                         const BackendFactory& factory,
                                                         const ProfilerOptions& o) {
  if (unit < 0 || unit >= model.num_units()) {
    return absl::InvalidArgumentError(absl::StrCat("unit ", unit, " out of range"));
  }
  if (shape.microbatch_size <= 0 || shape.seq_len <= 0 || o.repetitions < 1 || o.warmup < 0) {
    return absl::InvalidArgumentError("profile: shape and repetitions must be positive");
  }
  MOBIUS_ASSIGN_OR_RETURN(std::unique_ptr<Backend> b, factory(0));
  MOBIUS_ASSIGN_OR_RETURN(std::unique_ptr<units::UnitRunner> runner,
                          units::UnitRunner::Create(model.config, unit, b.get(),
                                                    /*lora=*/nullptr, /*chunk_tokens=*/0,
                                                    o.precision));
  MOBIUS_ASSIGN_OR_RETURN(std::unique_ptr<Queue> q, b->CreateQueue(QueueKind::kCompute, 0));
  const model::UnitKind kind = model.units[unit].kind;
  const int64_t bt = shape.tokens(), c = model.config.hidden_size, v = model.config.vocab_size;
  const units::UnitParamLayout& layout = runner->layout();
  std::mt19937_64 rng(o.seed + static_cast<uint64_t>(unit));

  planner::UnitKindMeasurement m;
  m.kind = model::UnitKindName(kind);
  m.unit_index = unit;
  for (const units::UnitParam& p : layout.params) {
    m.parameter_bytes += 2 * p.num_elements;
    m.gradient_bytes += 4 * p.num_elements;
  }
  {
    // The device buffers of one unit run, in the order a stage would hold them.
    const std::vector<uint16_t> w = RandomHalf(layout.total_elements, o.precision, rng);
    MOBIUS_ASSIGN_OR_RETURN(DeviceBuffer weights,
                            Upload(*b, *q, w.data(), layout.weight_bytes(), "profile.weights"));
    const std::vector<float> zeros(layout.total_elements, 0.0f);
    MOBIUS_ASSIGN_OR_RETURN(DeviceBuffer grads,
                            Upload(*b, *q, zeros.data(), layout.grad_bytes(), "profile.grads"));
    DeviceBuffer input, targets;
    if (kind == model::UnitKind::kEmbedding) {
      const std::vector<int32_t> ids = RandomIds(bt, v, rng);
      MOBIUS_ASSIGN_OR_RETURN(input, Upload(*b, *q, ids.data(), 4 * bt, "profile.input"));
    } else {
      const std::vector<uint16_t> h = RandomHalf(bt * c, o.precision, rng);
      MOBIUS_ASSIGN_OR_RETURN(input, Upload(*b, *q, h.data(), 2 * bt * c, "profile.input"));
    }
    if (kind == model::UnitKind::kHead) {
      const std::vector<int32_t> ids = RandomIds(bt, v, rng);
      MOBIUS_ASSIGN_OR_RETURN(targets, Upload(*b, *q, ids.data(), 4 * bt, "profile.targets"));
    }
    m.boundary_bytes = static_cast<int64_t>(input.size_bytes());
    const uint64_t counted =
        weights.size_bytes() + grads.size_bytes() + input.size_bytes() + targets.size_bytes();

    const uint64_t out_bytes = kind == model::UnitKind::kHead ? 4 : 2 * bt * c;
    MOBIUS_ASSIGN_OR_RETURN(DeviceBuffer out, b->Allocate(out_bytes, "profile.output"));
    DeviceBuffer dout, dinp;
    if (kind != model::UnitKind::kHead) {
      const std::vector<float> d = RandomF32(bt * c, rng);
      MOBIUS_ASSIGN_OR_RETURN(dout, Upload(*b, *q, d.data(), 4 * bt * c, "profile.dout"));
    }
    if (kind != model::UnitKind::kEmbedding) {
      MOBIUS_ASSIGN_OR_RETURN(dinp, b->Allocate(4 * bt * c, "profile.dinp"));
    }
    MOBIUS_ASSIGN_OR_RETURN(DeviceBuffer ws,
                            runner->AllocateWorkspace(shape.microbatch_size, shape.seq_len));

    units::MicroBatch mb;
    mb.b = shape.microbatch_size;
    mb.t = shape.seq_len;
    mb.input = input.data();
    mb.targets = static_cast<const int32_t*>(targets.data());
    auto forward = [&]() -> absl::Status {
      MOBIUS_RETURN_IF_ERROR(runner->Forward(*q, mb, weights, out.data(), ws));
      return b->Synchronize(*q);
    };
    auto backward = [&]() -> absl::Status {
      MOBIUS_RETURN_IF_ERROR(runner->Backward(*q, mb, weights, grads,
                                              static_cast<const float*>(dout.data()),
                                              static_cast<float*>(dinp.data()), 1.0f, ws,
                                              /*recompute=*/true));
      return b->Synchronize(*q);
    };
    MOBIUS_ASSIGN_OR_RETURN(m.saved_activation_bytes, ForwardWrittenBytes(*b, *q, forward, ws));
    MOBIUS_ASSIGN_OR_RETURN(m.forward_seconds, MedianSeconds(o, forward));
    MOBIUS_ASSIGN_OR_RETURN(m.backward_seconds, MedianSeconds(o, backward));
    const uint64_t peak = b->peak_bytes();
    const uint64_t kept = counted + static_cast<uint64_t>(m.saved_activation_bytes);
    m.workspace_bytes = peak > kept ? static_cast<int64_t>(peak - kept) : 0;
  }
  return m;
}

namespace {

// One device's copy machinery: a pinned host buffer and a device buffer per direction.
struct CopyRig {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Queue> h2d, d2h;
  HostBuffer host_in, host_out;
  DeviceBuffer dev_in, dev_out;
  uint64_t bytes = 0;

  absl::Status CopyIn() {
    MOBIUS_RETURN_IF_ERROR(backend->CopyToDevice(*h2d, host_in.data(), dev_in, 0, bytes));
    return backend->Synchronize(*h2d);
  }
  absl::Status CopyOut() {
    MOBIUS_RETURN_IF_ERROR(backend->CopyToHost(*d2h, dev_out, 0, host_out.data(), bytes));
    return backend->Synchronize(*d2h);
  }
};

absl::StatusOr<CopyRig> MakeRig(const BackendFactory& factory, int device, uint64_t bytes) {
  CopyRig r;
  MOBIUS_ASSIGN_OR_RETURN(r.backend, factory(device));
  // Two device buffers must fit the device with room to spare.
  r.bytes = std::max<uint64_t>(kLine, std::min(bytes, r.backend->capacity_bytes() / 4));
  MOBIUS_ASSIGN_OR_RETURN(r.h2d, r.backend->CreateQueue(QueueKind::kHostToDevice, 0));
  MOBIUS_ASSIGN_OR_RETURN(r.d2h, r.backend->CreateQueue(QueueKind::kDeviceToHost, 0));
  MOBIUS_ASSIGN_OR_RETURN(r.host_in, r.backend->AllocateHost(r.bytes));
  MOBIUS_ASSIGN_OR_RETURN(r.host_out, r.backend->AllocateHost(r.bytes));
  MOBIUS_ASSIGN_OR_RETURN(r.dev_in, r.backend->Allocate(r.bytes, "profile.copy_in"));
  MOBIUS_ASSIGN_OR_RETURN(r.dev_out, r.backend->Allocate(r.bytes, "profile.copy_out"));
  std::memset(r.host_in.data(), 1, r.bytes);  // touch the pages before timing
  std::memset(r.host_out.data(), 2, r.bytes);
  MOBIUS_RETURN_IF_ERROR(r.CopyIn());
  MOBIUS_RETURN_IF_ERROR(r.CopyOut());
  return r;
}

// Runs the given copies at once, one thread each; returns each one's seconds.
absl::StatusOr<std::vector<double>> Concurrent(std::vector<std::function<absl::Status()>> copies) {
  std::vector<double> seconds(copies.size(), 0);
  std::vector<absl::Status> status(copies.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < copies.size(); ++i) {
    threads.emplace_back([&, i] {
      absl::StatusOr<double> t = TimeOnce(copies[i]);
      status[i] = t.status();
      if (t.ok()) seconds[i] = *t;
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : status) MOBIUS_RETURN_IF_ERROR(s);
  return seconds;
}

// Median over repetitions (after warmup) of bytes / seconds of copy i in each concurrent round.
absl::StatusOr<std::vector<double>> ConcurrentRates(
    const ProfilerOptions& o, const std::vector<std::function<absl::Status()>>& copies,
    const std::vector<uint64_t>& bytes) {
  std::vector<std::vector<double>> rates(copies.size());
  for (int rep = 0; rep < o.warmup + o.repetitions; ++rep) {
    MOBIUS_ASSIGN_OR_RETURN(std::vector<double> s, Concurrent(copies));
    if (rep < o.warmup) continue;
    for (size_t i = 0; i < copies.size(); ++i) {
      rates[i].push_back(static_cast<double>(bytes[i]) / std::max(s[i], 1e-12));
    }
  }
  std::vector<double> out;
  for (auto& r : rates) out.push_back(Median(std::move(r)));
  return out;
}

}  // namespace

absl::StatusOr<std::vector<planner::LinkMeasurement>> MeasureLinks(const BackendFactory& factory,
                                                                   const ProfilerOptions& o) {
  if (o.num_devices < 1) return absl::InvalidArgumentError("profile: need at least one device");
  std::vector<CopyRig> rigs;
  for (int d = 0; d < o.num_devices; ++d) {
    MOBIUS_ASSIGN_OR_RETURN(CopyRig r, MakeRig(factory, d, o.copy_bytes));
    rigs.push_back(std::move(r));
  }
  std::vector<planner::LinkMeasurement> out(o.num_devices);
  for (int d = 0; d < o.num_devices; ++d) {
    CopyRig& r = rigs[d];
    planner::LinkMeasurement& l = out[d];
    l.device = d;
    l.group_size = o.num_devices;
    const double bytes = static_cast<double>(r.bytes);
    MOBIUS_ASSIGN_OR_RETURN(double in, MedianSeconds(o, [&] { return r.CopyIn(); }));
    MOBIUS_ASSIGN_OR_RETURN(double outs, MedianSeconds(o, [&] { return r.CopyOut(); }));
    l.h2d_bytes_per_s = bytes / std::max(in, 1e-12);
    l.d2h_bytes_per_s = bytes / std::max(outs, 1e-12);
    MOBIUS_ASSIGN_OR_RETURN(
        std::vector<double> duplex,
        ConcurrentRates(o, {[&] { return r.CopyIn(); }, [&] { return r.CopyOut(); }},
                        {r.bytes, r.bytes}));
    l.duplex_h2d_bytes_per_s = duplex[0];
    l.duplex_d2h_bytes_per_s = duplex[1];
  }
  std::vector<std::function<absl::Status()>> ins, outs;
  std::vector<uint64_t> bytes;
  for (CopyRig& r : rigs) {
    ins.push_back([&r] { return r.CopyIn(); });
    outs.push_back([&r] { return r.CopyOut(); });
    bytes.push_back(r.bytes);
  }
  MOBIUS_ASSIGN_OR_RETURN(std::vector<double> group_in, ConcurrentRates(o, ins, bytes));
  MOBIUS_ASSIGN_OR_RETURN(std::vector<double> group_out, ConcurrentRates(o, outs, bytes));
  for (int d = 0; d < o.num_devices; ++d) {
    out[d].group_h2d_bytes_per_s = group_in[d];
    out[d].group_d2h_bytes_per_s = group_out[d];
  }
  return out;
}

absl::StatusOr<planner::MeasuredProfile> MeasureProfile(
    const model::ModelDescription& model, const planner::MicrobatchShape& shape,
    const BackendFactory& factory, const std::string& backend_name, const std::string& device_name,
    const std::string& build_version, const ProfilerOptions& o) {
  planner::MeasuredProfile p;
  p.model_hash = planner::ModelConfigHash(model.config);
  p.model_type = model.config.model_type;
  p.num_units = model.num_units();
  p.shape = shape;
  p.backend = backend_name;
  p.device = device_name;
  p.build_version = build_version;
  p.precision = o.precision == backend::DType::kF16 ? "fp16" : "bf16";
  p.warmup = o.warmup;
  p.repetitions = o.repetitions;
  p.copy_bytes = static_cast<int64_t>(o.copy_bytes);
  // One representative per kind: the embedding, the first block, the head.
  for (int64_t unit : {int64_t{0}, int64_t{1}, model.num_units() - 1}) {
    MOBIUS_ASSIGN_OR_RETURN(planner::UnitKindMeasurement m,
                            MeasureUnit(model, unit, shape, factory, o));
    p.kinds.push_back(std::move(m));
  }
  if (o.measure_links) {
    MOBIUS_ASSIGN_OR_RETURN(p.links, MeasureLinks(factory, o));
  }
  MOBIUS_RETURN_IF_ERROR(planner::ValidateMeasuredProfile(p));
  return p;
}

}  // namespace mobius::profile
