#include "client/node_run.h"

#include <atomic>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

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
  std::atomic<bool> stopped{false};  // the destructor: the watcher thread ends
  std::thread watcher;
  bool finished = false;

  std::string prefix;  // RendezvousKeyPrefix(token, job_key)
  std::string Key(const std::string& what) const { return absl::StrCat(prefix, "launch/", what); }

  // Beats once a second until the NodeRun goes away (also while it finishes: a node deciding
  // which peers went silent must not take this one for dead), and until this node finishes or a
  // failure was reported, watches for another node's failure.
  void Watch() {
    const std::string failed = Key("failed");
    const std::string beat = Key(absl::StrCat("beat/", options.node_rank));
    bool watching = true;
    auto gone = [&](const absl::Status& why) {
      if (watching && !finishing && !stopped) {
        on_peer_failure(absl::StrCat("node 0 (the rendezvous host ", options.rendezvous_host, ":",
                                     options.rendezvous_port, ") is gone: ", why.message()));
      }
      watching = false;
    };
    while (!stopped) {
      if (absl::Status st = watch->Add(beat, 1).status(); !st.ok()) gone(st);
      if (!watching || finishing) {
        for (int i = 0; i < 10 && !stopped; ++i) absl::SleepFor(absl::Milliseconds(100));
        continue;
      }
      absl::StatusOr<std::string> v = watch->Get(failed, absl::Seconds(1));
      if (finishing || stopped) continue;
      if (v.ok()) {
        on_peer_failure(*v);
        watching = false;
      } else if (!absl::IsDeadlineExceeded(v.status())) {
        gone(v.status());
      }
    }
  }
};

absl::StatusOr<std::unique_ptr<NodeRun>> NodeRun::Start(
    const NodeRunOptions& options, std::function<void(const std::string&)> on_peer_failure) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  MOBIUS_ASSIGN_OR_RETURN(impl->prefix,
                          runtime::RendezvousKeyPrefix(options.token, options.job_key));
  impl->on_peer_failure = std::move(on_peer_failure);
  if (options.node_rank == 0) {
    absl::StatusOr<std::unique_ptr<runtime::RendezvousServer>> server =
        runtime::RendezvousServer::Start("", options.rendezvous_port);
    if (!server.ok()) {
      return absl::UnavailableError(
          absl::StrCat("node 0 cannot host the rendezvous on port ", options.rendezvous_port, ": ",
                       server.status().message(),
                       " (another job on this port? set MOBIUS_RENDEZVOUS or "
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
  if (absl::Status st = impl->client->Set(impl->Key(absl::StrCat("beat/", options.node_rank)), "0");
      !st.ok()) {
    return st;
  }
  Impl* raw = impl.get();
  impl->watcher = std::thread([raw] { raw->Watch(); });
  return std::unique_ptr<NodeRun>(new NodeRun(std::move(impl)));
}

NodeRun::NodeRun(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

int NodeRun::port() const { return impl_->server ? impl_->server->port() : 0; }

std::string NodeRun::Finish(const absl::Status& outcome) {
  Impl& m = *impl_;
  if (m.finished) return "";
  m.finished = true;
  m.finishing = true;
  const NodeRunOptions& o = m.options;
  std::string silent;
  if (!outcome.ok()) {
    // Which other nodes went silent: no heartbeat over the window and no outcome published. A
    // node whose run merely stopped because of another's failure publishes its outcome first.
    auto beats = [&] {
      std::vector<std::optional<std::string>> b(o.nodes);
      for (int n = 0; n < o.nodes; ++n) {
        if (n == o.node_rank) continue;
        absl::StatusOr<std::optional<std::string>> v =
            m.client->TryGet(m.Key(absl::StrCat("beat/", n)));
        if (v.ok()) b[n] = *v;
      }
      return b;
    };
    const std::vector<std::optional<std::string>> before = beats();
    absl::SleepFor(kSilenceWindow);
    const std::vector<std::optional<std::string>> after = beats();
    for (int n = 0; n < o.nodes; ++n) {
      if (n == o.node_rank || after[n] != before[n]) continue;
      absl::StatusOr<std::optional<std::string>> done =
          m.client->TryGet(m.Key(absl::StrCat("done/", n)));
      if (done.ok() && done->has_value()) continue;
      absl::StrAppend(&silent, silent.empty() ? "" : ", ", "node ", n);
    }
    if (!silent.empty()) {
      absl::StrAppend(&silent, " stopped responding (no heartbeat for ",
                      absl::FormatDuration(kSilenceWindow), " and no outcome): the likely cause");
    }
    // The first failing node's error is the one every node reports.
    absl::StatusOr<int64_t> first = m.client->Add(m.Key("failures"), 1);
    if (first.ok() && *first == 1) {
      m.client
          ->Set(m.Key("failed"),
                absl::StrCat("node ", o.node_rank, " failed",
                             silent.empty() ? "" : " (" + silent + ")", ": ", outcome.message()))
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
  return silent;
}

NodeRun::~NodeRun() {
  impl_->finishing = true;
  impl_->stopped = true;
  impl_->watch->Shutdown();
  if (impl_->watcher.joinable()) impl_->watcher.join();
}

}  // namespace mobius::cli
