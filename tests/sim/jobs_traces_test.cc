#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/jobs_sim.h"
#include "sim/traces.h"
#include "support/enum_tables.h"
#include "support/trace_test.h"

namespace stoker::sim {
namespace {

Result<Trace> Parse(const std::string& text, TraceFormat f, TraceLoadOptions o = {}) {
  std::istringstream in(text);
  return ParseTrace(in, "t.csv", f, o);
}

TEST(TraceParse, ItpRowsAreSortedAndRebased) {
  auto t = Parse(
      "job_id,submission_time,duration,num_gpu\n"
      "b,200,50,8\n"
      "a,100,10,1\n",
      TraceFormat::kItp);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[0].id, "a");
  EXPECT_EQ(t->jobs[0].submit_ms, 0);
  EXPECT_EQ(t->jobs[0].duration_ms, 10'000);
  EXPECT_EQ(t->jobs[1].id, "b");
  EXPECT_EQ(t->jobs[1].submit_ms, 100'000);
  EXPECT_EQ(t->jobs[1].gpus, 8);
  EXPECT_EQ(t->jobs[1].min_gpus, 8);
  EXPECT_EQ(t->jobs[1].line, 2u);
}

TEST(TraceParse, PhillyTimestampsAndFractionalDurations) {
  auto t = Parse(
      "timestamp,duration,num_gpus,gpu_time,cluster\n"
      "2017-10-09 07:01:55,66.5,1,66.5,11cb48\n"
      "2017-10-08 07:01:55,10.0,2,20.0,6214e9\n"
      "\n",
      TraceFormat::kPhilly);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[0].group, "6214e9");
  EXPECT_EQ(t->jobs[0].gpus, 2);
  EXPECT_EQ(t->jobs[1].submit_ms, 86'400'000);  // one day later
  EXPECT_EQ(t->jobs[1].duration_ms, 66'500);
  EXPECT_EQ(t->epoch_offset_s, 1507446115);  // 2017-10-08 07:01:55 UTC
}

TEST(TraceParse, TiresiasColumnsByName) {
  auto t = Parse(
      "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
      "0,4,30,606,vgg19,164,30\n",
      TraceFormat::kTiresias);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ(t->jobs.size(), 1u);
  EXPECT_EQ(t->jobs[0].gpus, 4);
  EXPECT_EQ(t->jobs[0].duration_ms, 164'000);
  EXPECT_EQ(t->jobs[0].group, "vgg19");
}

struct BadRow {
  std::string row;
  std::string expect;  // substring of the message
};

class TraceBadRows : public ::testing::TestWithParam<BadRow> {};

TEST_P(TraceBadRows, ErrorNamesFileLineAndField) {
  const std::string text =
      "job_id,submission_time,duration,num_gpu\nok,1,2,1\n" + GetParam().row + "\n";
  auto t = Parse(text, TraceFormat::kItp);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("t.csv:3"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find(GetParam().expect), std::string::npos)
      << t.status().message();

  TraceLoadOptions skip;
  skip.skip_bad_rows = true;
  auto s = Parse(text, TraceFormat::kItp, skip);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->skipped_rows, 1);
  EXPECT_EQ(s->jobs.size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(
    Rows, TraceBadRows,
    ::testing::Values(BadRow{"x,1,2", "expected 4 fields"}, BadRow{"x,abc,2,1", "submission_time"},
                      BadRow{"x,1,-5,1", "duration"}, BadRow{"x,1,0,1", "duration"},
                      BadRow{"x,1,2,0", "GPU count"}, BadRow{"x,1,2,1.5", "num_gpu"},
                      BadRow{"x,1,nan,1", "duration"}, BadRow{",1,2,1", "job_id"}));

TEST(TraceParse, BadPhillyTimestamp) {
  auto t = Parse("timestamp,duration,num_gpus,gpu_time,cluster\n2017-13-09 07:01:55,1,1,1,a\n",
                 TraceFormat::kPhilly);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("t.csv:2: timestamp"), std::string::npos)
      << t.status().message();
}

TEST(TraceParse, MissingHeaderColumn) {
  auto t = Parse("job_id,submission_time,num_gpu\na,1,1\n", TraceFormat::kItp);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("missing column 'duration'"), std::string::npos);
  EXPECT_FALSE(Parse("", TraceFormat::kItp).ok());
}

TEST(TraceParse, LimitKeepsEarliestJobs) {
  TraceLoadOptions o;
  o.limit = 2;
  auto t = Parse("job_id,submission_time,duration,num_gpu\nc,30,1,1\na,10,1,1\nb,20,1,1\n",
                 TraceFormat::kItp, o);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->jobs.size(), 2u);
  EXPECT_EQ(t->jobs[0].id, "a");
  EXPECT_EQ(t->jobs[1].id, "b");
}

TEST(TraceParse, ClusterShape) {
  auto s = ParseClusterShape("64x8");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->total_gpus(), 512);
  EXPECT_FALSE(ParseClusterShape("64").ok());
  EXPECT_FALSE(ParseClusterShape("0x8").ok());
  EXPECT_FALSE(ParseClusterShape("axb").ok());
  EXPECT_FALSE(ParseTraceFormat("csv").ok());
}

TEST(TraceFiles, PublishedTracesLoad) {
  STOKER_TRACE_OR_SKIP(itp_path, "itp/cluster01.csv");
  STOKER_TRACE_OR_SKIP(philly_path, "philly/philly.csv");
  STOKER_TRACE_OR_SKIP(tiresias_path, "tiresias/60_job.csv");
  auto itp = LoadTrace(itp_path, TraceFormat::kItp);
  ASSERT_TRUE(itp.ok()) << itp.status().ToString();
  EXPECT_EQ(itp->jobs.size(), 1595u);
  EXPECT_EQ(itp->skipped_rows, 0);

  auto philly = LoadTrace(philly_path, TraceFormat::kPhilly);
  ASSERT_TRUE(philly.ok()) << philly.status().ToString();
  EXPECT_EQ(philly->jobs.size(), 82247u);
  for (size_t i = 1; i < philly->jobs.size(); ++i) {
    ASSERT_LE(philly->jobs[i - 1].submit_ms, philly->jobs[i].submit_ms);
  }

  auto tiresias = LoadTrace(tiresias_path, TraceFormat::kTiresias);
  ASSERT_TRUE(tiresias.ok()) << tiresias.status().ToString();
  EXPECT_EQ(tiresias->jobs.size(), 60u);
  ASSERT_TRUE(tiresias->cluster.has_value());
  EXPECT_EQ(tiresias->cluster->nodes, 16);
  EXPECT_EQ(tiresias->cluster->gpus_per_node, 4);

  auto missing = LoadTrace(itp_path + ".none", TraceFormat::kItp);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

// The lookup (support/traces.h, docs/traces.md): $STOKER_TRACES first, then ../shared/traces,
// then data/traces of the checkout; each file in the first folder that has it.
TEST(TraceFiles, LookupOrderAndMessage) {
  const std::string dir = ::testing::TempDir() + "/stoker-traces-lookup";
  std::filesystem::create_directories(dir + "/itp");
  { std::ofstream(dir + "/itp/mine.csv") << "job_id,submission_time,duration,num_gpu\n"; }
  const char* before = std::getenv("STOKER_TRACES");
  const std::string saved = before != nullptr ? before : "";
  setenv("STOKER_TRACES", dir.c_str(), 1);
  EXPECT_EQ(testing::TraceDirs().front(), dir);
  EXPECT_EQ(testing::TracePath("itp/mine.csv"), dir + "/itp/mine.csv");
  EXPECT_EQ(testing::TracePath("itp/none.csv"), "");
  const std::string message = testing::MissingTraceMessage("itp/none.csv");
  EXPECT_NE(message.find("scripts/fetch-traces.sh"), std::string::npos) << message;
  EXPECT_NE(message.find(dir), std::string::npos) << message;
  EXPECT_NE(message.find("/data/traces"), std::string::npos) << message;
  if (before != nullptr) {
    setenv("STOKER_TRACES", saved.c_str(), 1);
  } else {
    unsetenv("STOKER_TRACES");
  }
  std::filesystem::remove_all(dir);
}

TEST(EnumNames, TheSimulatorsTablesRoundTrip) {
  stoker::testing::ExpectRoundTrip(kTraceFormatNames);
  stoker::testing::ExpectRoundTrip(kBackfillModeNames);
}

}  // namespace
}  // namespace stoker::sim
