#include "client/stream_watchdog.h"

#include <utility>

namespace mobius::cli {
namespace {

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

StreamWatchdog::StreamWatchdog(grpc::ClientContext* context, absl::Duration idle_limit,
                               std::function<bool()> interrupt)
    : context_(context),
      idle_limit_(idle_limit),
      interrupt_(std::move(interrupt)),
      last_alive_ms_(SteadyMs()) {
  thread_ = std::thread([this] { Run(); });
}

StreamWatchdog::~StreamWatchdog() {
  done_ = true;
  thread_.join();
}

void StreamWatchdog::Alive() { last_alive_ms_ = SteadyMs(); }

void StreamWatchdog::Run() {
  const int64_t limit_ms = absl::ToInt64Milliseconds(idle_limit_);
  while (!done_) {
    if (interrupt_ && interrupt_()) {
      context_->TryCancel();
      return;
    }
    if (limit_ms > 0 && SteadyMs() - last_alive_ms_ > limit_ms) {
      fired_ = true;
      context_->TryCancel();
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace mobius::cli
