#include "client/node_run.h"

#include <atomic>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/run/rendezvous.h"
#include "common/status_macros.h"

namespace mobius::cli {

struct NodeRun::Impl {
  NodeRunOptions options;
  std::unique_ptr<runtime::RendezvousServer> server;  // node 0
  std::unique_ptr<runtime::RendezvousClient> client, watch;
  std::function<void(const std::string&)> on_peer_failure;
  std::atomic<bool> finishing{false};
  std::thread watcher;
  bool finished = false;

  std::string Key(const std::string& what) const {
    return absl::StrCat(options.job_key, "/launch/", what);
  }

  void Watch() {
    const std::string failed = Key("failed");
    while (!finishing) {
      absl::StatusOr<std::string> v = watch->Get(failed, absl::Seconds(1));
      if (finishing) return;
      if (v.ok()) {
        on_peer_failure(*v);
        return;
      }
      if (absl::IsDeadlineExceeded(v.status())) continue;
      on_peer_failure(absl::StrCat("node 0 (the rendezvous host ", options.rendezvous_host, ":",
                                   options.rendezvous_port, ") is gone: ", v.status().message()));
      return;
    }
  }
};

absl::StatusOr<std::unique_ptr<NodeRun>> NodeRun::Start(
    const NodeRunOptions& options, std::function<void(const std::string&)> on_peer_failure) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->on_peer_failure = std::move(on_peer_failure);
  if (options.node_rank == 0) {
    absl::StatusOr<std::unique_ptr<runtime::RendezvousServer>> server =
        runtime::RendezvousServer::Start("", options.rendezvous_port);
    if (!server.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "node 0 cannot host the rendezvous on port ", options.rendezvous_port, ": ",
          server.status().message(), " (another job on this port? set MOBIUS_RENDEZVOUS or "
          "--rendezvous to another port on every node)"));
    }
    impl->server = *std::move(server);
  }
  for (auto* c : {&impl->client, &impl->watch}) {
    absl::StatusOr<std::unique_ptr<runtime::RendezvousClient>> made =
        runtime::RendezvousClient::Connect(options.rendezvous_host, options.rendezvous_port,
                                           options.timeout);
    if (!made.ok()) {
      return absl::Status(made.status().code(),
                          absl::StrCat("node ", options.node_rank, ": ", made.status().message()));
    }
    *c = *std::move(made);
  }
  Impl* raw = impl.get();
  impl->watcher = std::thread([raw] { raw->Watch(); });
  return std::unique_ptr<NodeRun>(new NodeRun(std::move(impl)));
}

NodeRun::NodeRun(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

int NodeRun::port() const { return impl_->server ? impl_->server->port() : 0; }

void NodeRun::Finish(const absl::Status& outcome) {
  Impl& m = *impl_;
  if (m.finished) return;
  m.finished = true;
  m.finishing = true;
  const NodeRunOptions& o = m.options;
  if (!outcome.ok()) {
    // The first failing node's error is the one every node reports.
    absl::StatusOr<int64_t> first = m.client->Add(m.Key("failures"), 1);
    if (first.ok() && *first == 1) {
      m.client->Set(m.Key("failed"), absl::StrCat("node ", o.node_rank, " failed: ",
                                                  outcome.message()))
          .IgnoreError();
    }
  }
  m.client->Set(m.Key(absl::StrCat("done/", o.node_rank)), outcome.ok() ? "ok" : "failed")
      .IgnoreError();
  if (o.node_rank == 0) {
    std::vector<std::string> done;
    for (int n = 1; n < o.nodes; ++n) done.push_back(m.Key(absl::StrCat("done/", n)));
    // Bounded: a node that died publishes nothing. After a failure only briefly: long enough for
    // the other nodes' watchers to read it, whose own runs stop within their poll interval.
    m.client->Wait(done, outcome.ok() ? o.timeout : std::min(o.timeout, absl::Seconds(3)))
        .IgnoreError();
  }
}

NodeRun::~NodeRun() {
  impl_->finishing = true;
  impl_->watch->Shutdown();
  if (impl_->watcher.joinable()) impl_->watcher.join();
}

}  // namespace mobius::cli
