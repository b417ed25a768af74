// raw_submit SOCKET SPEC.yaml: submits a job spec straight over gRPC, without the CLI's own checks
// of the spec's files (the YAML is parsed without them): what a user with any gRPC client can send.
// The tenancy test uses it to prove that the daemon's checks, not the CLI's, refuse what the
// caller cannot read. Prints "OK <job id>" or "<CODE_NAME> <message>"; exits 0 either way, 2 for
// bad arguments.
#include <iostream>
#include <string>

#include "absl/status/status.h"
#include "common/jobspec/yaml.h"
#include "common/rpc/jobspec_convert.h"
#include "grpcpp/grpcpp.h"
#include "mobius/v1/job.grpc.pb.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: raw_submit SOCKET SPEC.yaml\n";
    return 2;
  }
  absl::StatusOr<mobius::jobspec::JobSpec> spec = mobius::jobspec::ParseJobSpecFile(argv[2]);
  if (!spec.ok()) {
    std::cerr << "raw_submit: " << spec.status() << "\n";
    return 2;
  }
  auto channel =
      grpc::CreateChannel(std::string("unix:") + argv[1], grpc::InsecureChannelCredentials());
  auto stub = mobius::v1::JobService::NewStub(channel);
  mobius::v1::SubmitJobRequest request;
  *request.mutable_spec() = mobius::JobSpecToProto(*spec);
  mobius::v1::Job job;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  const grpc::Status st = stub->SubmitJob(&context, request, &job);
  if (st.ok()) {
    std::cout << "OK " << job.id() << "\n";
  } else {
    std::cout << absl::StatusCodeToString(static_cast<absl::StatusCode>(st.error_code())) << " "
              << st.error_message() << "\n";
  }
  return 0;
}
