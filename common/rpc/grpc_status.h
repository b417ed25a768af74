// The one place where absl::Status and grpc::Status are converted into each other.
//
// absl's canonical codes and gRPC's codes are numerically identical; the message is carried
// unchanged. Only */rpc/ and client/ code may include this header (it pulls in gRPC).
#ifndef MOBIUS_COMMON_RPC_GRPC_STATUS_H_
#define MOBIUS_COMMON_RPC_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace mobius {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace mobius

#endif  // MOBIUS_COMMON_RPC_GRPC_STATUS_H_
