// Conversion between the job spec domain struct (common/jobspec/spec.h) and its wire form
// (mobius.v1.JobSpec, proto/mobius/v1/job.proto).
//
// ToProto writes every field explicitly (optional fields included), so the server sees exactly
// what the client parsed. FromProto maps absent optional fields and empty enumerated strings to
// the struct's defaults and otherwise copies values unchecked: the caller runs ValidateJobSpec on
// the result (out-of-range values, unknown strings). FromProto(ToProto(s)) == s for every s whose
// enumerated strings are not empty (an empty one is invalid in the struct and reads back as the
// default). The adapter section travels as the AdapterSpec submessage: present exactly when the
// struct's optional is (its type is copied as is, an empty one included).
// Only */rpc/ and client/ code includes this header (it pulls in protobuf).
//
// Thread-safe: pure functions.
#ifndef MOBIUS_COMMON_RPC_JOBSPEC_CONVERT_H_
#define MOBIUS_COMMON_RPC_JOBSPEC_CONVERT_H_

#include "common/jobspec/spec.h"
#include "mobius/v1/job.pb.h"

namespace mobius {

v1::JobSpec JobSpecToProto(const jobspec::JobSpec& spec);
jobspec::JobSpec JobSpecFromProto(const v1::JobSpec& proto);

}  // namespace mobius

#endif  // MOBIUS_COMMON_RPC_JOBSPEC_CONVERT_H_
