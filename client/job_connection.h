// Internal to the CLI's daemon verbs (job_commands.cc, usage_command.cc): the connection to
// mobiusd (stubs, deadlines, error explanations) and the shared output helpers. Not a public
// interface: it includes gRPC, so only the verbs' .cc files include it.
#ifndef MOBIUS_CLIENT_JOB_CONNECTION_H_
#define MOBIUS_CLIENT_JOB_CONNECTION_H_

#include <chrono>
#include <memory>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/daemon_channel.h"
#include "client/daemon_client.h"
#include "client/exit_codes.h"
#include "client/job_commands.h"
#include "client/stream_watchdog.h"
#include "common/rpc/grpc_status.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "mobius/v1/job.grpc.pb.h"
#include "mobius/v1/node.grpc.pb.h"

namespace mobius::cli {

struct Connection {
  DaemonEndpoint endpoint;
  absl::Duration timeout;      // each unary call
  absl::Duration stream_idle;  // a stream that receives nothing this long fails
  absl::Status init;  // unusable TLS files
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::JobService::Stub> jobs;
  std::unique_ptr<v1::AdminService::Stub> admin;
  std::unique_ptr<v1::NodeService::Stub> node;

  Connection(const JobCommandOptions& o)
      : endpoint(o.daemon), timeout(o.timeout), stream_idle(o.stream_idle) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> made = MakeDaemonChannel(endpoint);
    if (made.ok()) {
      channel = *std::move(made);
    } else {
      init = made.status();
      channel = grpc::CreateChannel("unix:/nonexistent", grpc::InsecureChannelCredentials());
    }
    jobs = v1::JobService::NewStub(channel);
    admin = v1::AdminService::NewStub(channel);
    node = v1::NodeService::NewStub(channel);
  }
  void Deadline(grpc::ClientContext* ctx) const {
    ctx->set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
  }
  absl::Status Check() const { return init.ok() ? CheckDaemonSocket(endpoint) : init; }
  absl::Status Explain(const grpc::Status& g) const {
    return ExplainDaemonError(FromGrpcStatus(g), endpoint, timeout);
  }
  // A stream's end: the watchdog's verdict when it cancelled the call, else Explain's.
  absl::Status ExplainStream(const grpc::Status& g, const StreamWatchdog& dog,
                             const std::string& what_now) const {
    if (!dog.fired()) return Explain(g);
    return absl::DeadlineExceededError(
        absl::StrCat("mobiusd at ", endpoint.display(), " sent nothing for ",
                     absl::FormatDuration(dog.idle_limit()),
                     " (it sends a heartbeat every 10s): it stopped answering; ", what_now,
                     " (--stream-idle-seconds sets the limit)"));
  }
};

// "mobius VERB: MESSAGE" on `err`; the exit code for the status (exit_codes.h).
inline int Fail(std::ostream& err, const std::string& verb, const absl::Status& s) {
  err << "mobius " << verb << ": " << s.message() << "\n";
  return ExitCodeFor(s);
}

// protobuf's JSON mapping, indented, with the proto's field names.
inline std::string ToJson(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = true;
  o.preserve_proto_field_names = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  return out;
}

}  // namespace mobius::cli

#endif  // MOBIUS_CLIENT_JOB_CONNECTION_H_
