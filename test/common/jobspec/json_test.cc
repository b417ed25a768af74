#include "common/jobspec/json.h"

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "common/jobspec/yaml.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/paths.h"

namespace mobius::jobspec {
namespace {

using ::testing::HasSubstr;

JobSpec GoodSpec(const std::string& name) {
  absl::StatusOr<JobSpec> spec =
      ParseJobSpecFile(testing::SourcePath("test/data/specs/good/" + name));
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : JobSpec{};
}

TEST(JobSpecJsonTest, EveryGoodSpecRoundTrips) {
  for (const auto& entry :
       std::filesystem::directory_iterator(testing::SourcePath("test/data/specs/good"))) {
    const JobSpec spec = GoodSpec(entry.path().filename().string());
    const std::string text = JobSpecToJson(spec);
    absl::StatusOr<JobSpec> back = JobSpecFromJson(text);
    ASSERT_TRUE(back.ok()) << entry.path() << ": " << back.status();
    EXPECT_EQ(*back, spec) << entry.path();
    EXPECT_EQ(JobSpecToJson(*back), text);
  }
}

TEST(JobSpecJsonTest, CanonicalText) {
  JobSpec s;
  s.model_dir = "/m";
  s.dataset.path = "/d";
  s.training.steps = 10;
  s.training.global_batch = 8;
  s.training.seq_len = 16;
  s.labels = {{"z", "1"}, {"a", "2"}};
  EXPECT_EQ(JobSpecToJson(s),
            R"({"checkpoint":{"dir":"","every_steps":0,"group":"","keep_last":3},)"
            R"("dataset":{"chat_template":"","chat_template_kwargs":{},"completion_field":"completion",)"
            R"("eval_fraction":0.0,"format":"tokens","messages_field":"messages","path":"/d",)"
            R"("paths":[],"prompt_field":"prompt","skip_bad_lines":false,"text_field":"text",)"
            R"("tokenizer":""},)"
            R"("labels":{"a":"2","z":"1"},"max_restarts":1,"model_dir":"/m","name":"",)"
            R"("plan":{"dispatch":"static","mapper":"cross","partitioner":"exact",)"
            R"("schedule":"mobius","stages":0},)"
            R"("priority":0,"resources":{"device_memory_bytes":0,"gpus":0},)"
            R"("training":{"beta1":0.9,"beta2":0.95,"epochs":0,"eps":1e-08,"eval_every":0,)"
            R"("global_batch":8,"grad_clip":1.0,"lr":0.0003,"lr_schedule":"cosine",)"
            R"("microbatch":8,"min_lr":0.0,"optimizer_staleness":0,"precision":"bf16","seed":0,"seq_len":16,)"
            R"("steps":10,)"
            R"("warmup_steps":0,"weight_decay":0.0}})");
}

// The adapter section is written only when the spec has one: the text above, that of every spec
// stored before the section existed, is unchanged, so their resubmissions still dedup. Present, it
// is written whole, its empty target_modules kept empty (the family's default is resolved where
// the model is known).
TEST(JobSpecJsonTest, AdapterSectionOnlyWhenPresent) {
  JobSpec s = GoodSpec("minimal.yaml");
  const std::string without = JobSpecToJson(s);
  EXPECT_EQ(without.find("adapter"), std::string::npos) << without;
  s.adapter = AdapterSpec{.type = "lora"};
  const std::string with = JobSpecToJson(s);
  EXPECT_THAT(with, HasSubstr(R"({"adapter":{"alpha":8.0,"base_quantization":"","dropout":0.0,"init_from":"","rank":8,)"
                              R"("target_modules":[],"type":"lora"},"checkpoint":)"));
  EXPECT_EQ(with.substr(with.find(R"("checkpoint":)")), without.substr(1));
  absl::StatusOr<JobSpec> back = JobSpecFromJson(with);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, s);
  back = JobSpecFromJson(without);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->adapter.has_value());
  // Present with every key absent is an adapter with the defaults (and an empty type, which the
  // validator refuses): not the same spec as none.
  back = JobSpecFromJson(R"({"adapter":{}})");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->adapter, AdapterSpec{});
  JobSpec other = s;
  other.adapter->target_modules = {"q_proj", "v_proj"};  // the Llama default, written out
  EXPECT_FALSE(SameJobSpec(s, other));
}

TEST(JobSpecJsonTest, SameSpecMeansSameAfterDefaults) {
  JobSpec a = GoodSpec("minimal.yaml");
  JobSpec b = a;
  b.training.microbatch = 0;  // = global_batch
  EXPECT_TRUE(SameJobSpec(a, b));
  b.training.microbatch = 16;
  EXPECT_FALSE(SameJobSpec(a, b));
  b = a;
  b.dataset.format = "jsonl";
  JobSpec c = b;
  c.dataset.tokenizer = c.model_dir;  // the default tokenizer, written out
  EXPECT_TRUE(SameJobSpec(b, c));
  c.labels["x"] = "";
  EXPECT_FALSE(SameJobSpec(b, c));
  c = a;
  c.training.lr = 3.0000000000000003e-4;  // one ulp away: different
  EXPECT_FALSE(SameJobSpec(a, c));
}

TEST(JobSpecJsonTest, ExtremeValuesRoundTrip) {
  JobSpec s = GoodSpec("every-field.yaml");
  s.training.seed = 18446744073709551615ull;
  s.training.lr = 1.2345678901234567e-7;
  s.training.min_lr = 5e-324;
  s.resources.device_memory_bytes = 9223372036854775807;
  s.labels["unicode"] = "caf\xc3\xa9 \xe2\x9c\x93";
  absl::StatusOr<JobSpec> back = JobSpecFromJson(JobSpecToJson(s));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, s);
}

TEST(JobSpecJsonTest, MissingKeysTakeDefaults) {
  absl::StatusOr<JobSpec> s = JobSpecFromJson(
      R"({"model_dir":"/m","training":{"steps":5,"global_batch":4,"seq_len":8}})");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->model_dir, "/m");
  EXPECT_EQ(s->training.microbatch, 4);
  EXPECT_EQ(s->training.lr, 3e-4);
  EXPECT_EQ(s->max_restarts, 1);
}

TEST(JobSpecJsonTest, ErrorsNameTheField) {
  struct Case {
    const char* json;
    const char* message;
  };
  for (const Case& c : {
           Case{"", "not valid JSON"},
           Case{"{", "not valid JSON"},
           Case{"[]", "not an object (got [])"},
           Case{R"({"training":{"steps":"5"}})", "training.steps: must be an integer in"},
           Case{R"({"training":{"steps":1.5}})", "training.steps: must be an integer"},
           Case{R"({"training":{"seed":-1}})", "training.seed: must be an integer in [0, "},
           Case{R"({"priority":4294967296})", "priority: must be an integer in [-2147483648"},
           Case{R"({"training":{"lr":null}})", "training.lr: must be a number (got null)"},
           Case{R"({"training":[]})", "training: must be an object (got [])"},
           Case{R"({"labels":{"a":1}})", "labels.a: must be a string (got 1)"},
           Case{R"({"dataset":{"paht":"/d"}})", "dataset.paht: unknown key"},
           Case{R"({"extra":1,"model_dir":2})", "model_dir: must be a string (got 2); extra: unknown key"},
           Case{R"({"adapter":null})", "adapter: must be an object (got null)"},
           Case{R"({"adapter":{"rank":"8"}})", "adapter.rank: must be an integer in"},
           Case{R"({"adapter":{"target_modules":"q_proj"}})",
                "adapter.target_modules: must be an array of strings"},
           Case{R"({"adapter":{"r":8}})", "adapter.r: unknown key"},
       }) {
    absl::StatusOr<JobSpec> s = JobSpecFromJson(c.json);
    ASSERT_FALSE(s.ok()) << c.json;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(c.message)) << c.json;
  }
}

TEST(JobSpecJsonTest, InvalidUtf8IsReplacedNotThrown) {
  JobSpec s = GoodSpec("minimal.yaml");
  s.name = "bad\xff";
  const std::string text = JobSpecToJson(s);
  EXPECT_THAT(text, HasSubstr("\"name\":\"bad\xef\xbf\xbd\""));
  EXPECT_TRUE(nlohmann::json::accept(text));
}

}  // namespace
}  // namespace mobius::jobspec
