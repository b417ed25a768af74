#include "client/daemon_client.h"

#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "client/daemon_channel.h"
#include "common/paths.h"
#include "common/rpc/grpc_status.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "mobius/v1/node.grpc.pb.h"

namespace mobius::cli {
namespace {

absl::StatusOr<std::string> ReadPem(const char* flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": cannot open: ", std::strerror(errno)));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, ": not a PEM file"));
  }
  return ss.str();
}

class GrpcDaemonClient : public DaemonClient {
 public:
  GrpcDaemonClient(DaemonEndpoint endpoint, absl::Duration timeout)
      : endpoint_(std::move(endpoint)), timeout_(timeout) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = MakeDaemonChannel(endpoint_);
    if (!channel.ok()) {
      init_ = channel.status();
      return;
    }
    channel_ = *std::move(channel);
    node_ = v1::NodeService::NewStub(channel_);
    health_ = grpc::health::v1::Health::NewStub(channel_);
  }

  absl::StatusOr<v1::GetTopologyResponse> GetTopology(bool include_hwloc_xml) override {
    if (absl::Status s = Check(); !s.ok()) return s;
    v1::GetTopologyRequest req;
    req.set_include_hwloc_xml(include_hwloc_xml);
    v1::GetTopologyResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    if (absl::Status s = Explain(node_->GetTopology(&ctx, req, &resp)); !s.ok()) return s;
    return resp;
  }

  absl::StatusOr<std::string> Health() override {
    if (absl::Status s = Check(); !s.ok()) return s;
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

  absl::Status Check() const {
    if (!init_.ok()) return init_;
    return CheckDaemonSocket(endpoint_);
  }
  absl::Status Explain(const grpc::Status& status) const {
    return ExplainDaemonError(FromGrpcStatus(status), endpoint_, timeout_);
  }

  DaemonEndpoint endpoint_;
  absl::Duration timeout_;
  absl::Status init_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::NodeService::Stub> node_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

std::string Hint(const DaemonEndpoint& e) {
  if (e.is_tcp()) {
    return absl::StrCat("is mobiusd listening there (--listen_tcp)? a TLS handshake failure means "
                        "the daemon's certificate is not signed by --tls_ca or the client "
                        "certificate is not trusted by the daemon");
  }
  return absl::StrCat("is mobiusd running? pass --socket or --daemon, or set ", kSocketEnvVar,
                      " or ", kDaemonEnvVar);
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeDaemonChannel(const DaemonEndpoint& e) {
  if (!e.is_tcp()) {
    return grpc::CreateChannel(absl::StrCat("unix:", e.address), grpc::InsecureChannelCredentials());
  }
  grpc::SslCredentialsOptions ssl;
  if (!e.tls_ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadPem("--tls_ca", e.tls_ca_file);
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *std::move(ca);
  }
  if (!e.tls_cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadPem("--tls_cert", e.tls_cert_file);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem("--tls_key", e.tls_key_file);
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *std::move(cert);
    ssl.pem_private_key = *std::move(key);
  }
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::SslCredentials(ssl);
  if (!e.token.empty()) {
    // "authorization: Bearer TOKEN" on every call; gRPC sends call credentials over TLS only.
    creds = grpc::CompositeChannelCredentials(creds, grpc::AccessTokenCredentials(e.token));
  }
  grpc::ChannelArguments args;
  if (!e.tls_server_name.empty()) args.SetSslTargetNameOverride(e.tls_server_name);
  return grpc::CreateCustomChannel(e.target(), creds, args);
}

std::unique_ptr<DaemonClient> DaemonClient::For(const DaemonEndpoint& endpoint,
                                                absl::Duration timeout) {
  return std::make_unique<GrpcDaemonClient>(endpoint, timeout);
}

absl::Status CheckDaemonSocket(const DaemonEndpoint& e) {
  if (e.is_tcp()) return absl::OkStatus();
  struct stat st;
  if (stat(e.address.c_str(), &st) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach mobiusd: no socket at ", e.address, " (", Hint(e), ")"));
  }
  return absl::OkStatus();
}

absl::Status ExplainDaemonError(absl::Status s, const DaemonEndpoint& e, absl::Duration timeout) {
  if (s.code() == absl::StatusCode::kUnavailable) {
    return absl::UnavailableError(absl::StrCat("cannot reach mobiusd at ", e.display(), ": ",
                                               s.message(), " (", Hint(e), ")"));
  }
  if (s.code() == absl::StatusCode::kDeadlineExceeded) {
    return absl::DeadlineExceededError(
        absl::StrCat("mobiusd at ", e.display(), " did not answer in ",
                     absl::FormatDuration(timeout), " (--timeout-seconds sets the limit)"));
  }
  if (s.code() == absl::StatusCode::kUnauthenticated && e.is_tcp()) {
    return absl::UnauthenticatedError(absl::StrCat(
        "mobiusd at ", e.display(), " refused the credentials: ", s.message(),
        " (pass --token_file or set ", kTokenEnvVar, ", or --tls_cert and --tls_key)"));
  }
  return s;
}

}  // namespace mobius::cli
