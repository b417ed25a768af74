#include "client/daemon_client.h"

#include <sys/stat.h>

#include <chrono>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/paths.h"
#include "common/rpc/grpc_status.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "mobius/v1/node.grpc.pb.h"

namespace mobius::cli {
namespace {

class GrpcDaemonClient : public DaemonClient {
 public:
  GrpcDaemonClient(std::string socket_path, absl::Duration timeout)
      : socket_path_(std::move(socket_path)), timeout_(timeout) {
    channel_ = grpc::CreateChannel(absl::StrCat("unix:", socket_path_),
                                   grpc::InsecureChannelCredentials());
    node_ = v1::NodeService::NewStub(channel_);
    health_ = grpc::health::v1::Health::NewStub(channel_);
  }

  absl::StatusOr<v1::GetTopologyResponse> GetTopology(bool include_hwloc_xml) override {
    if (absl::Status s = CheckSocket(); !s.ok()) return s;
    v1::GetTopologyRequest req;
    req.set_include_hwloc_xml(include_hwloc_xml);
    v1::GetTopologyResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    if (absl::Status s = Explain(node_->GetTopology(&ctx, req, &resp)); !s.ok()) return s;
    return resp;
  }

  absl::StatusOr<std::string> Health() override {
    if (absl::Status s = CheckSocket(); !s.ok()) return s;
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    if (absl::Status s = Explain(health_->Check(&ctx, req, &resp)); !s.ok()) return s;
    return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(resp.status());
  }

 private:
  void SetDeadline(grpc::ClientContext* ctx) const {
    ctx->set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout_));
  }

  absl::Status CheckSocket() const { return CheckDaemonSocket(socket_path_); }
  absl::Status Explain(const grpc::Status& status) const {
    return ExplainDaemonError(FromGrpcStatus(status), socket_path_, timeout_);
  }

  std::string socket_path_;
  absl::Duration timeout_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::NodeService::Stub> node_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

}  // namespace

std::unique_ptr<DaemonClient> DaemonClient::ForSocket(const std::string& socket_path,
                                                      absl::Duration timeout) {
  return std::make_unique<GrpcDaemonClient>(socket_path, timeout);
}

namespace {
std::string Hint() {
  return absl::StrCat("is mobiusd running? pass --socket or set ", kSocketEnvVar);
}
}  // namespace

absl::Status CheckDaemonSocket(const std::string& socket_path) {
  struct stat st;
  if (stat(socket_path.c_str(), &st) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach mobiusd: no socket at ", socket_path, " (", Hint(), ")"));
  }
  return absl::OkStatus();
}

absl::Status ExplainDaemonError(absl::Status s, const std::string& socket_path,
                                absl::Duration timeout) {
  if (s.code() == absl::StatusCode::kUnavailable) {
    return absl::UnavailableError(absl::StrCat("cannot reach mobiusd at ", socket_path, ": ",
                                               s.message(), " (", Hint(), ")"));
  }
  if (s.code() == absl::StatusCode::kDeadlineExceeded) {
    return absl::DeadlineExceededError(absl::StrCat("mobiusd at ", socket_path,
                                                    " did not answer within ",
                                                    absl::FormatDuration(timeout)));
  }
  return s;
}

std::string ResolveSocketPath(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  const char* env = std::getenv(kSocketEnvVar);
  if (env != nullptr && *env != '\0') return env;
  return kDefaultSocketPath;
}

}  // namespace mobius::cli
