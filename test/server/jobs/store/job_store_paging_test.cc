// ListJobs: keyset pagination covers every job exactly once, with and without filters, and
// while jobs are being created; bad page tokens and sizes are INVALID_ARGUMENT.
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/jobs/store/job_store.h"
#include "test/server/jobs/store/store_test_util.h"

namespace mobius::jobs {
namespace {

using ::testing::HasSubstr;
using testing::NewJob;
using testing::TempDir;

constexpr int kJobs = 257;

class PagingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    JobStoreOptions options;
    options.fsync_every_commit = false;  // 257 creates; durability is not what this tests
    auto store = JobStore::Open(dir_.File("jobs.db"), options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    // uid cycles 1000..1002; states: every 5th running, every 7th cancelled, else queued.
    for (int i = 0; i < kJobs; ++i) {
      auto created = store_->CreateJob(NewJob(1000 + i % 3, "s" + std::to_string(i)));
      ASSERT_TRUE(created.ok()) << created.status();
      JobRecord job = created->job;
      if (i % 5 == 0) {
        ASSERT_TRUE(store_->Transition(job.id, JobState::kRunning, "", 1).ok());
        job.state = JobState::kRunning;
      } else if (i % 7 == 0) {
        ASSERT_TRUE(store_->Transition(job.id, JobState::kCancelled, "", 1).ok());
        job.state = JobState::kCancelled;
      }
      all_.push_back(job);
    }
  }

  // Pages through with `page_size`; fails the test on any error.
  std::vector<std::string> Walk(const ListJobsFilter& filter, int page_size, int* pages) {
    std::vector<std::string> ids;
    std::string token;
    *pages = 0;
    do {
      auto page = store_->ListJobs(filter, page_size, token);
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok()) break;
      ++*pages;
      EXPECT_LE(static_cast<int>(page->jobs.size()), page_size);
      if (!page->next_page_token.empty()) {
        EXPECT_EQ(static_cast<int>(page->jobs.size()), page_size);
      }
      for (const JobRecord& job : page->jobs) ids.push_back(job.id);
      token = page->next_page_token;
    } while (!token.empty() && *pages < 10000);
    return ids;
  }

  std::vector<std::string> Expected(const ListJobsFilter& filter) const {
    std::vector<std::string> ids;
    for (const JobRecord& job : all_) {
      if (filter.uid.has_value() && job.uid != *filter.uid) continue;
      if (!filter.states.empty() && !filter.states.Contains(job.state)) continue;
      ids.push_back(job.id);
    }
    return ids;
  }

  TempDir dir_;
  std::unique_ptr<JobStore> store_;
  std::vector<JobRecord> all_;
};

TEST_F(PagingTest, EveryJobExactlyOnceInCreationOrder) {
  for (int page_size : {1, 10, 100, 256, 257, 1000}) {
    int pages = 0;
    const std::vector<std::string> ids = Walk({}, page_size, &pages);
    EXPECT_EQ(ids, Expected({})) << "page_size " << page_size;
    EXPECT_EQ(pages, (kJobs + page_size - 1) / page_size) << "page_size " << page_size;
  }
}

TEST_F(PagingTest, FiltersByUserAndState) {
  std::vector<ListJobsFilter> filters;
  for (uint32_t uid : {1000u, 1001u, 1002u, 4242u}) {
    ListJobsFilter f;
    f.uid = uid;
    filters.push_back(f);
  }
  for (JobStateSet states :
       {JobStateSet{JobState::kRunning}, JobStateSet{JobState::kQueued, JobState::kRunning},
        JobStateSet{JobState::kCancelled}, JobStateSet{JobState::kSucceeded}, JobStateSet::All()}) {
    ListJobsFilter f;
    f.states = states;
    filters.push_back(f);
    f.uid = 1001;
    filters.push_back(f);
  }
  for (const ListJobsFilter& filter : filters) {
    int pages = 0;
    const std::vector<std::string> want = Expected(filter);
    EXPECT_EQ(Walk(filter, 7, &pages), want)
        << "uid " << filter.uid.value_or(0) << " states " << filter.states.mask();
    const std::set<std::string> unique(want.begin(), want.end());
    EXPECT_EQ(unique.size(), want.size());
  }
  // Each returned record is complete, not just its id.
  ListJobsFilter running;
  running.states = {JobState::kRunning};
  auto page = store_->ListJobs(running, 1);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->jobs.at(0), *store_->GetJob(page->jobs.at(0).id));
}

TEST_F(PagingTest, JobsCreatedWhilePagingAreNeitherSkippedNorRepeated) {
  std::vector<std::string> seen;
  std::string token;
  int added = 0;
  do {
    auto page = store_->ListJobs({}, 50, token);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const JobRecord& job : page->jobs) seen.push_back(job.id);
    token = page->next_page_token;
    if (added < 3) {  // new jobs land after the cursor
      auto created = store_->CreateJob(NewJob(1, "late" + std::to_string(added++)));
      ASSERT_TRUE(created.ok());
      all_.push_back(created->job);
    }
  } while (!token.empty());
  EXPECT_EQ(seen, Expected({}));
}

TEST_F(PagingTest, DefaultAndClampedPageSizes) {
  auto page = store_->ListJobs({}, 0);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->jobs.size(), static_cast<size_t>(kDefaultPageSize));
  page = store_->ListJobs({}, 1000000);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->jobs.size(), static_cast<size_t>(kJobs));
  EXPECT_TRUE(page->next_page_token.empty());
  auto negative = store_->ListJobs({}, -1);
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(negative.status().message(), HasSubstr("page_size"));
}

TEST_F(PagingTest, BadTokensAreInvalidArgument) {
  for (const std::string& token :
       {std::string("garbage"), std::string("AAAA"), std::string(5000, 'x')}) {
    auto page = store_->ListJobs({}, 10, token);
    EXPECT_EQ(page.status().code(), absl::StatusCode::kInvalidArgument) << token;
    EXPECT_THAT(page.status().message(), HasSubstr("page_token"));
  }
  auto first = store_->ListJobs({}, 10);
  ASSERT_TRUE(first.ok());
  ListJobsFilter other;
  other.uid = 1000;
  auto mismatched = store_->ListJobs(other, 10, first->next_page_token);
  EXPECT_EQ(mismatched.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(mismatched.status().message(), HasSubstr("different filter"));
}

TEST_F(PagingTest, EmptyStoreHasOneEmptyPage) {
  TempDir empty_dir;
  auto empty = JobStore::Open(empty_dir.File("empty.db"));
  ASSERT_TRUE(empty.ok());
  auto page = (*empty)->ListJobs({}, 10);
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->jobs.empty());
  EXPECT_TRUE(page->next_page_token.empty());
}

}  // namespace
}  // namespace mobius::jobs
