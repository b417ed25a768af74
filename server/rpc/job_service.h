// gRPC adapters of the job service (jobs::JobManager): mobius.v1.JobService and AdminService.
// Each method resolves the caller from the connection (PeerListener: SO_PEERCRED uid; admin when
// the uid is 0, in the configured admin uids, or the user is in the configured admin group),
// converts the request to domain types, calls the manager and converts back. Errors go through
// ToGrpcStatus only. An unidentifiable caller (a connection that did not come through the
// listener) gets UNAUTHENTICATED.
//
// Thread-safety: gRPC calls the methods concurrently; the manager is thread-safe.
#ifndef MOBIUS_SERVER_RPC_JOB_SERVICE_H_
#define MOBIUS_SERVER_RPC_JOB_SERVICE_H_

#include <sys/types.h>

#include <functional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "mobius/v1/job.grpc.pb.h"
#include "server/jobs/service/job_manager.h"
#include "server/rpc/peer_listener.h"

namespace mobius {

struct AccessConfig {
  std::set<uid_t> admin_uids;  // root is always an admin
  gid_t admin_gid = static_cast<gid_t>(-1);  // members of this group are admins; -1: none
};

// The caller of `context`'s call, or UNAUTHENTICATED.
absl::StatusOr<jobs::Caller> ResolveCaller(const PeerListener& peers, const AccessConfig& access,
                                           const std::string& peer);

v1::Job JobToProto(const jobs::JobView& view);
v1::StepReport StepToProto(const jobs::StepReportRow& row, bool emulated);

// Called with "JobService.SubmitJob" and the seconds a call took (metrics); may be empty.
using RpcObserver = std::function<void(const std::string& method, double seconds)>;

class JobServiceImpl final : public v1::JobService::Service {
 public:
  // Not owned; all must outlive the service.
  JobServiceImpl(jobs::JobManager* manager, const PeerListener* peers, AccessConfig access,
                 RpcObserver on_rpc = {})
      : manager_(manager), peers_(peers), access_(std::move(access)), on_rpc_(std::move(on_rpc)) {}

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

 private:
  jobs::JobManager* manager_;
  const PeerListener* peers_;
  AccessConfig access_;
  RpcObserver on_rpc_;
};

class AdminServiceImpl final : public v1::AdminService::Service {
 public:
  AdminServiceImpl(jobs::JobManager* manager, const PeerListener* peers, AccessConfig access,
                 RpcObserver on_rpc = {})
      : manager_(manager), peers_(peers), access_(std::move(access)), on_rpc_(std::move(on_rpc)) {}

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
  const PeerListener* peers_;
  AccessConfig access_;
  RpcObserver on_rpc_;
};

}  // namespace mobius

#endif  // MOBIUS_SERVER_RPC_JOB_SERVICE_H_
