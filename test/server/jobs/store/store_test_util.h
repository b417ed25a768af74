// Helpers for the job store tests: a temporary directory removed afterwards, and job records.
#ifndef MOBIUS_TEST_SERVER_JOBS_STORE_STORE_TEST_UTIL_H_
#define MOBIUS_TEST_SERVER_JOBS_STORE_STORE_TEST_UTIL_H_

#include <stdlib.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "server/jobs/store/job_types.h"

namespace mobius::jobs::testing {

class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "/mobius_store_XXXXXX";
    char* dir = mkdtemp(pattern.data());
    EXPECT_NE(dir, nullptr) << pattern;
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline JobRecord NewJob(uint32_t uid, const std::string& submission_id,
                        const std::string& spec_json = R"({"model":"gpt2","steps":100})") {
  JobRecord job;
  job.uid = uid;
  job.user = "user" + std::to_string(uid);
  job.submission_id = submission_id;
  job.name = "job-" + submission_id;
  job.priority = 5;
  job.spec_json = spec_json;
  job.state_reason = "waiting for GPUs";
  job.created_unix_ms = 1700000000000;
  job.total_steps = 100;
  return job;
}

}  // namespace mobius::jobs::testing

#endif  // MOBIUS_TEST_SERVER_JOBS_STORE_STORE_TEST_UTIL_H_
