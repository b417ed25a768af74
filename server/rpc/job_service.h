// gRPC adapters of the job service (jobs::JobManager): mobius.v1.JobService and AdminService.
// Each method resolves the caller (CallerResolver: the unix socket's SO_PEERCRED uid, or the TCP
// call's certificate or bearer token; caller_resolver.h), converts the request to domain types,
// calls the manager and converts back. Errors go through ToGrpcStatus only. An unidentifiable
// caller gets UNAUTHENTICATED.
//
// Thread-safety: gRPC calls the methods concurrently; the manager is thread-safe.
#ifndef MOBIUS_SERVER_RPC_JOB_SERVICE_H_
#define MOBIUS_SERVER_RPC_JOB_SERVICE_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "mobius/v1/job.grpc.pb.h"
#include "server/jobs/service/job_manager.h"
#include "server/rpc/caller_resolver.h"

namespace mobius {

// The spec of a stored job as a proto, converted from its canonical JSON once: a job's spec never
// changes, and parsing it was most of ListJobs' time (bench/rpc: ~0.1 ms per job, 100 per page).
// Keyed by job id and checked against the JSON's hash; holds at most `capacity` specs (cleared
// when full). Thread-safe.
class SpecProtoCache {
 public:
  explicit SpecProtoCache(size_t capacity = 20000) : capacity_(capacity) {}
  // Sets `out` to the spec of job `id` (left empty when the JSON does not parse).
  void Get(const std::string& id, const std::string& spec_json, v1::JobSpec* out);

 private:
  struct Entry {
    size_t json_hash = 0;
    std::shared_ptr<const v1::JobSpec> spec;  // null: the JSON did not parse
  };
  const size_t capacity_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

// `cache` may be null (the spec is converted every time).
v1::Job JobToProto(const jobs::JobView& view, SpecProtoCache* cache = nullptr);
v1::StepReport StepToProto(const jobs::StepReportRow& row, bool emulated);

// Called with "JobService.SubmitJob" and the seconds a call took (metrics); may be empty.
using RpcObserver = std::function<void(const std::string& method, double seconds)>;

class JobServiceImpl final : public v1::JobService::Service {
 public:
  // Not owned; all must outlive the service.
  JobServiceImpl(jobs::JobManager* manager, const CallerResolver* callers, RpcObserver on_rpc = {})
      : manager_(manager), callers_(callers), on_rpc_(std::move(on_rpc)) {}

  grpc::Status SubmitJob(grpc::ServerContext* context, const v1::SubmitJobRequest* request,
                         v1::Job* response) override;
  grpc::Status GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                      v1::Job* response) override;
  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override;
  grpc::Status CancelJob(grpc::ServerContext* context, const v1::CancelJobRequest* request,
                         v1::Job* response) override;
  grpc::Status WatchJob(grpc::ServerContext* context, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobEvent>* writer) override;
  grpc::Status StreamLogs(grpc::ServerContext* context, const v1::StreamLogsRequest* request,
                          grpc::ServerWriter<v1::LogLine>* writer) override;
  grpc::Status GetUsage(grpc::ServerContext* context, const v1::GetUsageRequest* request,
                        v1::GetUsageResponse* response) override;

 private:
  jobs::JobManager* manager_;
  const CallerResolver* callers_;
  RpcObserver on_rpc_;
  SpecProtoCache specs_;
};

class AdminServiceImpl final : public v1::AdminService::Service {
 public:
  AdminServiceImpl(jobs::JobManager* manager, const CallerResolver* callers,
                   RpcObserver on_rpc = {})
      : manager_(manager), callers_(callers), on_rpc_(std::move(on_rpc)) {}

  grpc::Status Drain(grpc::ServerContext* context, const v1::DrainRequest* request,
                     v1::DrainResponse* response) override;
  grpc::Status Undrain(grpc::ServerContext* context, const v1::UndrainRequest* request,
                       v1::UndrainResponse* response) override;
  grpc::Status SetQuota(grpc::ServerContext* context, const v1::SetQuotaRequest* request,
                        v1::Quota* response) override;
  grpc::Status GetQuotas(grpc::ServerContext* context, const v1::GetQuotasRequest* request,
                         v1::GetQuotasResponse* response) override;

 private:
  jobs::JobManager* manager_;
  const CallerResolver* callers_;
  RpcObserver on_rpc_;
};

}  // namespace mobius

#endif  // MOBIUS_SERVER_RPC_JOB_SERVICE_H_
