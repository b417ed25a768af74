#include "server/jobs/store/job_types.h"

#include "gtest/gtest.h"
#include "server/jobs/store/page_token.h"

namespace mobius::jobs {
namespace {

constexpr JobState kAll[] = {JobState::kQueued, JobState::kRunning, JobState::kSucceeded,
                             JobState::kFailed, JobState::kCancelled};

TEST(JobStateTest, NamesRoundTrip) {
  for (JobState s : kAll) {
    auto parsed = ParseJobState(JobStateName(s));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_EQ(JobStateName(JobState::kCancelled), "CANCELLED");
  auto bad = ParseJobState("queued");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'queued'"), absl::string_view::npos);
}

TEST(JobStateTest, TerminalStates) {
  EXPECT_FALSE(IsTerminal(JobState::kQueued));
  EXPECT_FALSE(IsTerminal(JobState::kRunning));
  EXPECT_TRUE(IsTerminal(JobState::kSucceeded));
  EXPECT_TRUE(IsTerminal(JobState::kFailed));
  EXPECT_TRUE(IsTerminal(JobState::kCancelled));
}

TEST(JobStateTest, TransitionTableIsExactlyTheDocumentedOne) {
  using S = JobState;
  auto legal = [](S from, S to) {
    if (from == S::kQueued) return to == S::kRunning || to == S::kCancelled || to == S::kFailed;
    if (from == S::kRunning) {
      return to == S::kQueued || to == S::kSucceeded || to == S::kFailed || to == S::kCancelled;
    }
    return false;
  };
  int legal_count = 0;
  for (S from : kAll) {
    for (S to : kAll) {
      EXPECT_EQ(IsLegalTransition(from, to), legal(from, to))
          << JobStateName(from) << " -> " << JobStateName(to);
      absl::Status status = CheckTransition("j-000001", from, to);
      EXPECT_EQ(status.ok(), legal(from, to));
      if (!status.ok()) {
        EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
        EXPECT_NE(status.message().find("j-000001"), absl::string_view::npos) << status;
      }
      legal_count += legal(from, to);
    }
  }
  EXPECT_EQ(legal_count, 7);
  EXPECT_EQ(CheckTransition("j-000009", JobState::kSucceeded, JobState::kRunning).message(),
            "job j-000009: illegal transition SUCCEEDED -> RUNNING (the job is already finished)");
}

TEST(JobStateSetTest, Membership) {
  JobStateSet set{JobState::kQueued, JobState::kRunning};
  EXPECT_TRUE(set.Contains(JobState::kQueued));
  EXPECT_TRUE(set.Contains(JobState::kRunning));
  EXPECT_FALSE(set.Contains(JobState::kFailed));
  EXPECT_EQ(set.states(), (std::vector<JobState>{JobState::kQueued, JobState::kRunning}));
  EXPECT_TRUE(JobStateSet().empty());
  EXPECT_EQ(JobStateSet::All().states().size(), 5u);
  EXPECT_EQ(JobStateSet::FromMask(0xffffffff), JobStateSet::All());
}

TEST(JobIdTest, FormatAndParse) {
  EXPECT_EQ(FormatJobId(123), "j-000123");
  EXPECT_EQ(FormatJobId(1234567), "j-1234567");
  EXPECT_EQ(*ParseJobId("j-000123"), 123);
  EXPECT_EQ(*ParseJobId("j-1234567"), 1234567);
  for (const char* bad :
       {"", "j-", "j-123", "j-0000123", "J-000123", "j-00012a", "j-+00123", "j- 00123", "j-000000",
        "j--00001", "000123", "j-000123 ", "j-99999999999999999999999"}) {
    auto parsed = ParseJobId(bad);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << "'" << bad << "'";
  }
  // Control bytes are escaped in the message.
  const absl::Status control = ParseJobId(std::string("j-00\0"
                                                      "01",
                                                      7))
                                   .status();
  EXPECT_NE(control.message().find("j-00\\x00"), absl::string_view::npos) << control;
}

TEST(PageTokenTest, RoundTripAndFilterBinding) {
  ListJobsFilter mine;
  mine.uid = 1000;
  mine.states = {JobState::kQueued};
  const std::string token = EncodePageToken(42, mine);
  auto decoded = DecodePageToken(token, mine);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, 42);
  EXPECT_EQ(*DecodePageToken("", mine), 0);

  ListJobsFilter other = mine;
  other.uid = 1001;
  auto wrong = DecodePageToken(token, other);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("page_token"), absl::string_view::npos);
  other = mine;
  other.states.Add(JobState::kRunning);
  EXPECT_EQ(DecodePageToken(token, other).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PageTokenTest, GarbageIsInvalidArgument) {
  ListJobsFilter any;
  for (const std::string& bad :
       {std::string("x"), std::string("!!!!"), std::string(1000, 'A'), std::string("djE6MTI="),
        EncodePageToken(0, any), EncodePageToken(-5, any), std::string("\0\1\2", 3)}) {
    auto decoded = DecodePageToken(bad, any);
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(decoded.status().message().find("page_token"), absl::string_view::npos);
  }
  // Every truncation of a real token is rejected or decodes to a valid cursor; none crashes.
  const std::string token = EncodePageToken(123456, any);
  for (size_t n = 0; n < token.size(); ++n) (void)DecodePageToken(token.substr(0, n), any);
}

}  // namespace
}  // namespace mobius::jobs
