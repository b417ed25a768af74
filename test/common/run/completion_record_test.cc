// The completion record (completion_record.h): a round trip, atomic replacement with no temporary
// file left behind, and the refusals: no record, a symbolic link or a FIFO in its place, an
// oversized file, malformed content, a missing directory.
#include "common/run/completion_record.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace mobius::runtime {
namespace {

namespace fs = std::filesystem;

class CompletionRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("completion-record-test-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void WriteRaw(const std::string& text) { std::ofstream(dir_ / kCompletionRecordFile) << text; }

  fs::path dir_;
};

CompletionRecord Sample() {
  return {.job_id = "j-000042",
          .steps_done = 400,
          .final_checkpoint = "/ckpt/checkpoint-00000400",
          .finished_unix_ms = 1700000000123};
}

TEST_F(CompletionRecordTest, RoundTrips) {
  ASSERT_TRUE(WriteCompletionRecord(dir_, Sample()).ok());
  absl::StatusOr<CompletionRecord> read = ReadCompletionRecord(dir_);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, Sample());
  EXPECT_EQ(CompletionRecordPath(dir_), (dir_ / "COMPLETED.json").string());
  EXPECT_EQ(DescribeCompletionRecord(*read),
            "job j-000042, 400 steps, final checkpoint /ckpt/checkpoint-00000400, finished "
            "2023-11-14T22:13:20Z");
}

TEST_F(CompletionRecordTest, ReplacesAnOlderRecordAndLeavesNoTemporaryFile) {
  ASSERT_TRUE(WriteCompletionRecord(dir_, Sample()).ok());
  // A temporary file left by a writer that died with this pid is replaced, not an error.
  std::ofstream(dir_ / ("COMPLETED.json.tmp-" + std::to_string(getpid()))) << "partial";
  CompletionRecord newer = Sample();
  newer.job_id = "j-000043";
  newer.final_checkpoint.clear();
  ASSERT_TRUE(WriteCompletionRecord(dir_, newer).ok());
  EXPECT_EQ(*ReadCompletionRecord(dir_), newer);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) {
    ++files;
    EXPECT_EQ(e.path().filename(), "COMPLETED.json");
  }
  EXPECT_EQ(files, 1);
  EXPECT_NE(DescribeCompletionRecord(newer).find("no checkpoint"), std::string::npos);
}

TEST_F(CompletionRecordTest, RefusesBadInput) {
  CompletionRecord r = Sample();
  r.job_id.clear();
  EXPECT_EQ(WriteCompletionRecord(dir_, r).code(), absl::StatusCode::kInvalidArgument);
  r = Sample();
  r.steps_done = -1;
  EXPECT_EQ(WriteCompletionRecord(dir_, r).code(), absl::StatusCode::kInvalidArgument);
  absl::Status missing = WriteCompletionRecord((dir_ / "missing").string(), Sample());
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
}

TEST_F(CompletionRecordTest, NotFoundWithoutARecordOrDirectory) {
  EXPECT_EQ(ReadCompletionRecord(dir_).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadCompletionRecord((dir_ / "missing").string()).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(CompletionRecordTest, RefusesALinkAFifoAndAnOversizedFile) {
  fs::create_directories(dir_ / "real");
  ASSERT_TRUE(WriteCompletionRecord((dir_ / "real").string(), Sample()).ok());
  fs::create_symlink(dir_ / "real/COMPLETED.json", dir_ / "COMPLETED.json");
  absl::StatusOr<CompletionRecord> r = ReadCompletionRecord(dir_);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  // The writer replaces the link itself (rename), never writes through it.
  ASSERT_TRUE(WriteCompletionRecord(dir_, Sample()).ok());
  EXPECT_FALSE(fs::is_symlink(dir_ / "COMPLETED.json"));
  fs::remove(dir_ / "COMPLETED.json");

  ASSERT_EQ(mkfifo((dir_ / "COMPLETED.json").c_str(), 0600), 0);
  r = ReadCompletionRecord(dir_);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  fs::remove(dir_ / "COMPLETED.json");

  WriteRaw(std::string(kMaxCompletionRecordBytes + 1, ' '));
  r = ReadCompletionRecord(dir_);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
}

TEST_F(CompletionRecordTest, MalformedContentIsDataLoss) {
  for (const char* text :
       {"", "not json", "[1, 2]", R"({"job_id": "j-1", "steps_done": 3, "final_checkpoint": ""})",
        R"({"job_id": 7, "steps_done": 3, "final_checkpoint": "", "finished_unix_ms": 1})",
        R"({"job_id": "j-1", "steps_done": "3", "final_checkpoint": "", "finished_unix_ms": 1})",
        R"({"job_id": "", "steps_done": 3, "final_checkpoint": "", "finished_unix_ms": 1})"}) {
    WriteRaw(text);
    absl::StatusOr<CompletionRecord> r = ReadCompletionRecord(dir_);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << text << ": " << r.status();
  }
  // Unknown keys are ignored.
  WriteRaw(R"({"job_id": "j-1", "steps_done": 3, "final_checkpoint": "", "finished_unix_ms": 1,
               "newer_field": true})");
  ASSERT_TRUE(ReadCompletionRecord(dir_).ok());
  EXPECT_EQ(ReadCompletionRecord(dir_)->steps_done, 3);
}

}  // namespace
}  // namespace mobius::runtime
