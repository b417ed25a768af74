#include "worker/runtime/node_collective.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/run/rendezvous.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "gloo/allreduce.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/store.h"
#include "gloo/transport/tcp/device.h"
#include "worker/runtime/link_emulator.h"

namespace mobius::runtime {
namespace {

// gloo's Store interface over our rendezvous client, keys under a prefix. Gloo reports failures
// by exception; so does this adapter (gloo::IoException), and NodeCollective turns them into a
// Status at its boundary.
class RendezvousGlooStore final : public gloo::rendezvous::Store {
 public:
  RendezvousGlooStore(RendezvousClient* client, std::string prefix, absl::Duration timeout)
      : client_(client), prefix_(std::move(prefix)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    Check(client_->Set(prefix_ + key, std::string(data.begin(), data.end())));
  }
  std::vector<char> get(const std::string& key) override {
    absl::StatusOr<std::string> v = client_->Get(prefix_ + key, timeout_);
    Check(v.status());
    return std::vector<char>(v->begin(), v->end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, kDefaultTimeout); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) override {
    std::vector<std::string> full;
    for (const std::string& k : keys) full.push_back(prefix_ + k);
    Check(client_->Wait(full, timeout_));
  }

 private:
  static void Check(const absl::Status& st) {
    if (!st.ok()) throw gloo::IoException(std::string(st.message()));
  }
  RendezvousClient* client_;
  std::string prefix_;
  absl::Duration timeout_;
};

// The local address that routes to the rendezvous host: what the other nodes can reach us at
// (a connected UDP socket sends nothing; getsockname gives the source address the kernel chose).
absl::StatusOr<std::string> RouteAddressTo(const HostPort& to) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(to.host.c_str(), std::to_string(to.port).c_str(), &hints, &res);
      rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve the rendezvous host \"", to.host, "\": ", gai_strerror(rc)));
  }
  std::string address;
  for (addrinfo* a = res; a != nullptr && address.empty(); a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      char buf[INET6_ADDRSTRLEN] = {};
      const void* in =
          local.ss_family == AF_INET
              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
              : &reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr;
      if (inet_ntop(local.ss_family, in, buf, sizeof(buf)) != nullptr) address = buf;
    }
    close(fd);
  }
  freeaddrinfo(res);
  if (address.empty()) {
    return absl::UnavailableError(
        absl::StrCat("no route from this machine to the rendezvous host ", to.host));
  }
  return address;
}

template <typename F>
absl::Status Guard(const std::string& what, int node, F&& f) {
  try {
    f();
    return absl::OkStatus();
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    const bool timeout = msg.find("imeout") != std::string::npos;
    const std::string text = absl::StrCat("node ", node, ": ", what,
                                          " across nodes failed (a peer node died, hung or is "
                                          "unreachable): ",
                                          msg);
    return timeout ? absl::DeadlineExceededError(text) : absl::UnavailableError(text);
  }
}

}  // namespace

struct NodeCollective::Impl {
  const RunConfig* run = nullptr;
  int nodes = 1, node = 0, rank = 0;
  std::unique_ptr<RendezvousClient> client;
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> gradients, control;
  HostStore* store = nullptr;
  const StoreLayout* layout = nullptr;
  int64_t bucket_elements = 0;
  double link_rate = 0, link_latency = 0;
  std::atomic<uint64_t> sent{0};
  std::chrono::milliseconds timeout{0};
};

std::string NodeGroupFingerprint(const RunConfig& run) {
  RunConfig c = run;
  c.nodes.rank = 0;
  c.store_fd = -1;
  c.store_path.clear();
  c.rank_cpus.clear();
  // Paths may differ between nodes (each node's copy of the model and data, its dataset cache);
  // sizes, shapes and every option may not.
  c.training.checkpoint_dir.clear();
  c.training.model_dir.clear();
  c.training.data_path.clear();
  c.training.tokenizer_dir.clear();
  const std::string json = RunConfigToJson(c);
  // FNV-1a 64: a digest to compare configs, not a security boundary.
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : json) h = (h ^ ch) * 1099511628211ULL;
  return absl::StrFormat("%016x", h);
}

absl::StatusOr<std::unique_ptr<NodeCollective>> NodeCollective::Connect(const RunConfig& run,
                                                                        int rank,
                                                                        int64_t start_step,
                                                                        HostStore* store,
                                                                        const StoreLayout* layout) {
  auto impl = std::make_unique<Impl>();
  const NodeGroup& g = run.nodes;
  impl->nodes = g.count;
  impl->node = g.rank;
  impl->rank = rank;
  impl->store = store;
  impl->layout = layout;
  impl->bucket_elements = std::max<int64_t>(1024, g.bucket_bytes / 4);
  impl->link_rate = store != nullptr && layout != nullptr ? g.link_bytes_per_second : 0;
  impl->link_latency = g.link_latency_seconds;
  impl->timeout = std::chrono::milliseconds(static_cast<int64_t>(g.timeout_seconds * 1000));
  const absl::Duration timeout = absl::Seconds(g.timeout_seconds);
  MOBIUS_ASSIGN_OR_RETURN(const HostPort at, ParseHostPort(g.rendezvous));
  MOBIUS_ASSIGN_OR_RETURN(impl->client, RendezvousClient::Connect(at.host, at.port, timeout));
  // The job's secret, if it has one, from this process's environment (rendezvous.h).
  const char* token = std::getenv(kRendezvousTokenVariable);
  MOBIUS_ASSIGN_OR_RETURN(const std::string job_prefix,
                          RendezvousKeyPrefix(token != nullptr ? token : "", g.job_key));
  const std::string prefix = absl::StrCat(job_prefix, "rank", rank, "/");

  // Every node's run config must be this one's (but for the node's own fields).
  // ... and the same data: the token file's size stands in for its content (cheap to get).
  std::error_code ec;
  const uintmax_t data_size = std::filesystem::file_size(run.training.data_path, ec);
  // ... and the same start (a resumed run: every node read the same checkpoint step).
  const std::string mine = absl::StrCat(NodeGroupFingerprint(run), ", data ", ec ? 0 : data_size,
                                        " bytes, starting after step ", start_step);
  MOBIUS_RETURN_IF_ERROR(impl->client->Set(absl::StrCat(prefix, "config/", g.rank), mine));
  for (int n = 0; n < g.count; ++n) {
    if (n == g.rank) continue;
    absl::StatusOr<std::string> theirs =
        impl->client->Get(absl::StrCat(prefix, "config/", n), timeout);
    if (!theirs.ok()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "node ", g.rank, " rank ", rank, ": node ", n, " did not join the rendezvous at ",
          g.rendezvous, " within ", g.timeout_seconds, " s (", theirs.status().message(), ")"));
    }
    if (*theirs != mine) {
      return absl::FailedPreconditionError(
          absl::StrCat("node ", g.rank, " and node ", n, " run different jobs (node ", g.rank,
                       ": run config ", mine, "; node ", n, ": ", *theirs,
                       "): every node needs the same spec, model shape, data, "
                       "resume checkpoint and plan (the same GPU count and topology)"));
    }
  }

  MOBIUS_ASSIGN_OR_RETURN(const std::string address, RouteAddressTo(at));
  absl::Status st = Guard("connecting", g.rank, [&] {
    gloo::transport::tcp::attr attr;
    attr.hostname = address;
    impl->device = gloo::transport::tcp::CreateDevice(attr);
    for (auto [name, ctx] :
         {std::pair{"gradients", &impl->gradients}, std::pair{"control", &impl->control}}) {
      *ctx = std::make_shared<gloo::rendezvous::Context>(g.rank, g.count);
      (*ctx)->setTimeout(impl->timeout);
      RendezvousGlooStore gs(impl->client.get(), absl::StrCat(prefix, name, "/"), timeout);
      (*ctx)->connectFullMesh(gs, impl->device);
    }
  });
  MOBIUS_RETURN_IF_ERROR(st);
  LOG(INFO) << "node " << g.rank << " rank " << rank << ": connected to its peers on "
            << g.count - 1 << " other node(s) (Gloo TCP at " << address << ", rendezvous "
            << g.rendezvous << ")";
  return std::unique_ptr<NodeCollective>(new NodeCollective(std::move(impl)));
}

NodeCollective::NodeCollective(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NodeCollective::~NodeCollective() = default;

int NodeCollective::nodes() const { return impl_->nodes; }
int NodeCollective::node() const { return impl_->node; }
uint64_t NodeCollective::sent_bytes() const { return impl_->sent.load(); }

absl::Status NodeCollective::AllReduceSum(float* data, size_t n) {
  Impl& m = *impl_;
  const int N = m.nodes;
  for (size_t begin = 0; begin < n; begin += m.bucket_elements) {
    const size_t count = std::min<size_t>(m.bucket_elements, n - begin);
    const uint64_t bytes = 4 * count;
    const uint64_t ring_bytes = 2 * (N - 1) * bytes / N;
    uint64_t until = 0;
    if (m.link_rate > 0) {  // the emulated NIC: the ring's time, FIFO with this node's ranks
      const double seconds = ring_bytes / m.link_rate + 2.0 * (N - 1) * m.link_latency;
      until = std::max(
          ReserveLink(m.store, *m.layout, m.layout->internode_link, 0, seconds, ring_bytes),
          ReserveLink(m.store, *m.layout, m.layout->internode_link, 1, seconds, ring_bytes));
    }
    MOBIUS_RETURN_IF_ERROR(Guard("the gradient all-reduce", m.node, [&] {
      gloo::AllreduceOptions opts(m.gradients);
      opts.setOutput(data + begin, count);
      opts.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      opts.setTimeout(m.timeout);
      gloo::allreduce(opts);
    }));
    if (until > 0) SleepUntilNs(until);
    m.sent += ring_bytes;
  }
  return absl::OkStatus();
}

absl::StatusOr<double> NodeCollective::SumDouble(double value) {
  Impl& m = *impl_;
  MOBIUS_RETURN_IF_ERROR(Guard("the step's loss sum", m.node, [&] {
    gloo::AllreduceOptions opts(m.control);
    opts.setOutput(&value, 1);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<double>));
    opts.setTimeout(m.timeout);
    gloo::allreduce(opts);
  }));
  return value;
}

absl::StatusOr<uint32_t> NodeCollective::MaxUint32(uint32_t value) {
  Impl& m = *impl_;
  MOBIUS_RETURN_IF_ERROR(Guard("the stop decision", m.node, [&] {
    gloo::AllreduceOptions opts(m.control);
    opts.setOutput(&value, 1);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<uint32_t>));
    opts.setTimeout(m.timeout);
    gloo::allreduce(opts);
  }));
  return value;
}

}  // namespace mobius::runtime
