// Lists the services a gRPC server exposes through server reflection, one per line.
//   reflection_probe SOCKET_PATH | tcp://HOST:PORT
// Exit 0 when the reflection call succeeded; 1 otherwise. Always plaintext: over tcp:// it is the
// plaintext client that mobiusd's TLS-only TCP port must refuse (tcp_tls_test.py).
#include <chrono>
#include <iostream>

#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "reflection_subset.grpc.pb.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: reflection_probe SOCKET_PATH | tcp://HOST:PORT\n";
    return 2;
  }
  const std::string arg = argv[1];
  const std::string target = arg.rfind("tcp://", 0) == 0 ? arg.substr(6) : "unix:" + arg;
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto stub = grpc::reflection::v1alpha::ServerReflection::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  auto stream = stub->ServerReflectionInfo(&ctx);
  grpc::reflection::v1alpha::ServerReflectionRequest req;
  req.set_list_services("");
  if (!stream->Write(req)) {
    std::cerr << "reflection_probe: write failed\n";
    return 1;
  }
  stream->WritesDone();
  grpc::reflection::v1alpha::ServerReflectionResponse resp;
  bool got = false;
  while (stream->Read(&resp)) {
    for (const auto& s : resp.list_services_response().service()) std::cout << s.name() << "\n";
    got = true;
  }
  grpc::Status status = stream->Finish();
  if (!status.ok() || !got) {
    std::cerr << "reflection_probe: " << status.error_message() << "\n";
    return 1;
  }
  return 0;
}
