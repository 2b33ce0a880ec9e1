// Parsing Slurm 22.05's answers: recorded from the real test cluster (scripts/slurm-cluster.sh;
// 4 nodes x 8 GPUs, jobs 6 and 7 running on g1, job 8 held, g4 drained), and malformed ones.
#include "slurm/model.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace stoker::slurm {
namespace {

std::string ReadTestdata(const std::string& name) {
  std::ifstream in(std::string(STOKER_SOURCE_DIR) + "/tests/slurm/testdata/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One conversion for the controller, the efficiency engine and the ledger: rounded up.
TEST(SlurmModel, ShardMilliRoundsUpToAWholeGpuAtMost) {
  EXPECT_EQ(ShardMilli(1, 8), 125);
  EXPECT_EQ(ShardMilli(3, 8), 375);
  EXPECT_EQ(ShardMilli(1, 3), 334);
  EXPECT_EQ(ShardMilli(8, 8), 1000);
  EXPECT_EQ(ShardMilli(12, 8), 1000) << "one GPU at most";
  EXPECT_EQ(ShardMilli(12, 8, 2), 1500);
  EXPECT_EQ(ShardMilli(0, 8), 0);
  EXPECT_EQ(ShardMilli(1, 0), 0);
}

TEST(SlurmModel, ParsesRecordedSinfo) {
  auto nodes = ParseSinfoJson(ReadTestdata("sinfo-22.05.json"));
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ASSERT_EQ(nodes->size(), 4u);
  const SlurmNode& g1 = (*nodes)[0];
  EXPECT_EQ(g1.name, "g1");
  EXPECT_EQ(g1.state, "mixed");
  EXPECT_EQ(g1.gpus, 8);
  EXPECT_EQ(g1.gpus_used, 5);
  EXPECT_EQ(g1.cpus, 16);
  EXPECT_EQ(g1.weight, 1);
  EXPECT_EQ(g1.partitions, std::vector<std::string>{"gpu"});
  EXPECT_TRUE(g1.Usable());
  const SlurmNode& g4 = (*nodes)[3];
  EXPECT_EQ(g4.state_flags, std::vector<std::string>{"DRAIN"});
  EXPECT_FALSE(g4.Usable());
}

// Recorded with SLURM_SHARDS_PER_GPU=4 (gres gpu:8,shard:32 per node): shard jobs 1 (3 shards),
// 2 (2), 4 (4), 5, 6 (1 each) and 7 (2); whole-GPU jobs 3 (2 GPUs) and 8 (1 GPU), all on g1.
TEST(SlurmModel, ParsesRecordedShards) {
  auto nodes = ParseSinfoJson(ReadTestdata("sinfo-shards-22.05.json"));
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  const SlurmNode& g1 = (*nodes)[0];
  EXPECT_EQ(g1.gpus, 8);
  EXPECT_EQ(g1.shards, 32);
  EXPECT_EQ(g1.ShardsPerGpu(), 4);
  EXPECT_EQ(g1.gpus_used, 3);
  auto jobs = ParseSqueueJson(ReadTestdata("squeue-shards-22.05.json"));
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 8u);
  const SlurmJob& j1 = (*jobs)[0];
  EXPECT_EQ(j1.shards_per_node, 3);
  EXPECT_EQ(j1.GpusWanted(), 0);
  ASSERT_EQ(j1.shard_counts.size(), 1u);
  EXPECT_EQ(j1.shard_counts[0], 3);
  EXPECT_EQ(j1.shard_gpus[0], std::vector<int32_t>{0});
  EXPECT_TRUE(j1.gpu_indices[0].empty());
  const SlurmJob& j3 = (*jobs)[2];
  EXPECT_EQ(j3.GpusWanted(), 2);
  EXPECT_EQ(j3.shards_per_node, 0);
  // Slurm 22.05 gave the whole-GPU job GPUs 0 and 1, where jobs 1 and 2 hold shards.
  EXPECT_EQ(j3.gpu_indices[0], (std::vector<int32_t>{0, 1}));
  EXPECT_EQ((*jobs)[1].shard_gpus[0], std::vector<int32_t>{1});
}

TEST(SlurmModel, ParsesRecordedSqueue) {
  auto jobs = ParseSqueueJson(ReadTestdata("squeue-22.05.json"));
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 5u);
  const SlurmJob& j6 = (*jobs)[2];
  EXPECT_EQ(j6.id, 6u);
  EXPECT_TRUE(j6.Running());
  EXPECT_EQ(j6.nodes, std::vector<std::string>{"g1"});
  EXPECT_EQ(j6.gpus_per_node, 2);
  ASSERT_EQ(j6.gpu_indices.size(), 1u);
  EXPECT_EQ(j6.gpu_indices[0], (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(j6.user, "root");
  const SlurmJob& j7 = (*jobs)[3];
  EXPECT_EQ(j7.gpus_per_job, 3);
  EXPECT_EQ(j7.GpusWanted(), 3);
  EXPECT_EQ(j7.gpu_indices[0], (std::vector<int32_t>{2, 3, 4}));
  const SlurmJob& j8 = (*jobs)[4];
  EXPECT_TRUE(j8.Held());
  EXPECT_EQ(j8.comment, "stoker:steer");
  EXPECT_EQ(j8.GpusWanted(), 4);
  EXPECT_TRUE(j8.nodes.empty());
}

TEST(SlurmModel, ParsesRecordedPartitions) {
  auto parts = ParsePartitionsText(ReadTestdata("partitions-22.05.txt"));
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  ASSERT_EQ(parts->size(), 1u);
  EXPECT_EQ((*parts)[0].name, "gpu");
  EXPECT_TRUE((*parts)[0].is_default);
  EXPECT_EQ((*parts)[0].state, "UP");
  EXPECT_EQ((*parts)[0].nodes, (std::vector<std::string>{"g1", "g2", "g3", "g4"}));
}

TEST(SlurmModel, HostLists) {
  auto a = ExpandHostList("g[1-3,7],h2,n[08-10]x");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, (std::vector<std::string>{"g1", "g2", "g3", "g7", "h2", "n08x", "n09x", "n10x"}));
  EXPECT_TRUE(ExpandHostList("").ok());
  for (const char* bad : {"g[1-", "g[3-1]", "g[a-b]", "g1]", "g[1-2][3-4]", "g[0-999999999]"}) {
    auto r = ExpandHostList(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("host list"), std::string::npos) << r.status().ToString();
  }
}

TEST(SlurmModel, GresStrings) {
  auto g = ParseGresGpu("gpu:a100:4(S:0-1),shard:16");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->count, 4);
  EXPECT_EQ(g->type, "a100");
  auto u = ParseGresGpu("gpu:a100:3(IDX:0,2-3)");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->indices, (std::vector<int32_t>{0, 2, 3}));
  EXPECT_EQ(ParseGresGpu("gpu:0(IDX:N/A)")->count, 0);
  EXPECT_EQ(ParseGresGpu("(null)")->count, 0);
  for (const char* bad :
       {"gpu:x", "gpu", "gpu:1:2:3", "gpu:2(IDX:0-1", "gpu:2(IDX:3-1)", "gpu:-1"}) {
    EXPECT_FALSE(ParseGresGpu(bad).ok()) << bad;
  }
  EXPECT_EQ(*ParseTresGpuCount("gres:gpu:2"), 2);
  std::string type;
  EXPECT_EQ(*ParseTresGpuCount("gres:gpu:a100:2", &type), 2);
  EXPECT_EQ(type, "a100");
  EXPECT_EQ(*ParseTresShardCount("gres:shard:3"), 3);
  EXPECT_EQ(*ParseTresShardCount("cpu=1,gres/shard=5"), 5);
  EXPECT_EQ(*ParseTresShardCount("gres:gpu:2"), 0);
  EXPECT_FALSE(ParseTresShardCount("gres:shard:many").ok());
  auto sh = ParseGresGpu("gpu:2,shard:(null):3(IDX:0-2)");
  ASSERT_TRUE(sh.ok()) << sh.status().ToString();
  EXPECT_EQ(sh->count, 2);
  EXPECT_EQ(sh->shards, 3);
  EXPECT_EQ(sh->shard_indices, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_FALSE(ParseGresGpu("shard:x").ok());
  // Index lists: the bad number and why, through the one integer parser (core/integer.h).
  EXPECT_EQ(ParseIndexList("0-4096").status().message(),
            "bad index in '0-4096': '4096' is out of range 0..4095");
  EXPECT_EQ(ParseIndexList("1,x").status().message(), "bad index in 'x': 'x' is not an integer");
  EXPECT_EQ(ParseIndexList("3-1").status().message(), "index range '3-1' is reversed");
  EXPECT_EQ(ParseGresGpu("gpu:+2").status().message(),
            "gres 'gpu:+2': bad gpu count: '+2' is not an integer");
  EXPECT_EQ(*ParseTresGpuCount("cpu=1,gres/gpu=3"), 3);
  EXPECT_EQ(*ParseTresGpuCount("gres:gpu:a100:2"), 2);
  EXPECT_EQ(*ParseTresGpuCount(""), 0);
  EXPECT_FALSE(ParseTresGpuCount("gres:gpu:lots").ok());
}

// Each malformed answer is refused with a message naming the command, the record and the field.
TEST(SlurmModel, MalformedAnswersNameWhatAndWhere) {
  struct Case {
    std::string text;
    std::string expect;
  };
  const std::vector<Case> sinfo = {
      {"", "not valid JSON"},
      {"{\"nodes\": [", "not valid JSON"},
      {"[]", "not an object"},
      {"{\"meta\":{}}", "no \"nodes\" array"},
      {"{\"nodes\": [{\"name\": 3}]}", "nodes[0].name: expected a string"},
      {"{\"nodes\": [{\"name\": \"a\"}, {\"state\": \"idle\"}]}",
       "nodes[1].name: required field is missing"},
      {"{\"nodes\": [{\"name\": \"a\", \"cpus\": \"16\"}]}", "nodes[0].cpus: expected an integer"},
      {"{\"nodes\": [{\"name\": \"a\", \"gres\": \"gpu:x\"}]}", "nodes[0].gres"},
      {"{\"nodes\": [{\"name\": \"a\", \"gres\": \"gpu:2\", \"gres_used\": \"gpu:3\"}]}",
       "3 GPUs used of 2"},
      {"{\"nodes\": [{\"name\": \"a\", \"cpus\": 2, \"alloc_cpus\": 5}]}", "nodes[0].alloc_cpus"},
      {"{\"nodes\": [{\"name\": \"a\", \"weight\": 99999999999999999999}]}", "nodes[0].weight"},
      {"{\"errors\": [{\"error\": \"boom\"}], \"nodes\": []}",
       "Slurm reported errors: error: boom"},
      {"{\"nodes\": [{\"name\": \"a\", \"state_flags\": [\"DRAIN\", 5]}]}",
       "nodes[0].state_flags[1]: expected a string, got '5'"},
      {"{\"nodes\": [{\"name\": \"a\", \"partitions\": \"gpu\"}]}",
       "nodes[0].partitions: expected a list, got 'gpu'"},
      {"{\"nodes\": [{\"name\": \"a\", \"cpus\": true}]}",
       "nodes[0].cpus: expected an integer, got 'true'"},
  };
  for (const Case& c : sinfo) {
    auto r = ParseSinfoJson(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().ToString().find(c.expect), std::string::npos)
        << c.text << " -> " << r.status().ToString();
    EXPECT_NE(r.status().ToString().find("sinfo --json"), std::string::npos);
  }
  const std::vector<Case> squeue = {
      {"{\"jobs\": {}}", "no \"jobs\" array"},
      {"{\"jobs\": [{\"job_state\": \"RUNNING\"}]}", "jobs[0].job_id: required field is missing"},
      {"{\"jobs\": [{\"job_id\": -4, \"job_state\": \"RUNNING\"}]}",
       "jobs[0].job_id: must be in 0..4294967295"},
      {"{\"jobs\": [{\"job_id\": 0, \"job_state\": \"RUNNING\"}]}", "0 is not a job id"},
      {"{\"jobs\": [{\"job_id\": 1}]}", "jobs[0].job_state: required field is missing"},
      {"{\"jobs\": [{\"job_id\": 1, \"job_state\": \"RUNNING\", \"nodes\": \"g[1-\"}]}",
       "jobs[0].nodes"},
      {"{\"jobs\": [{\"job_id\": 1, \"job_state\": \"RUNNING\", \"gres_detail\": "
       "[\"gpu:2(IDX:z)\"]}]}",
       "jobs[0].gres_detail[0]"},
      {"{\"jobs\": [{\"job_id\": 1, \"job_state\": \"RUNNING\", \"requeue\": 1}]}",
       "jobs[0].requeue: expected true or false, got '1'"},
      {"{\"jobs\": [{\"job_id\": 1, \"job_state\": \"RUNNING\", \"priority\": -1}]}",
       "jobs[0].priority: expected a non-negative integer, got '-1'"},
      {"{\"jobs\": [{\"job_id\": 1, \"job_state\": \"RUNNING\", \"gres_detail\": "
       "[\"gpu:1\", 2]}]}",
       "jobs[0].gres_detail[1]: expected a string, got '2'"},
      {"{\"jobs\": [{\"job_id\": 1, \"job_state\": \"RUNNING\", \"user_id\": 4294967296}]}",
       "jobs[0].user_id: must be in 0..4294967295"},
      {"{\"jobs\": [{\"job_id\": 1, \"job_state\": \"RUNNING\", \"cpus\": 2.5}]}",
       "jobs[0].cpus: expected an integer, got '2.5'"},
      {"{\"jobs\": [{\"job_id\": 1, \"job_state\": \"RUNNING\"}, 7]}",
       "jobs[1]: expected a mapping, got '7'"},
  };
  for (const Case& c : squeue) {
    auto r = ParseSqueueJson(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().ToString().find(c.expect), std::string::npos)
        << c.text << " -> " << r.status().ToString();
  }
  auto p = ParsePartitionsText("PartitionName=a Nodes=g[1-2]\nNodes=g1 junk\n");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().ToString().find("line 2: 'junk' is not Key=Value"), std::string::npos)
      << p.status().ToString();
  EXPECT_FALSE(ParsePartitionsText("State=UP\n").ok());
}

// An error in a record names the command, the line and column in the answer, and the path of
// the field, the way every document read through doc/reader.h does.
TEST(SlurmModel, ErrorsNameThePositionAndPathOfTheField) {
  const std::string sinfo =
      "{\"nodes\": [\n"
      "  {\"name\": \"a\"},\n"
      "  {\"name\": \"b\"},\n"
      "  {\"name\": \"c\"},\n"
      "  {\"name\": \"d\", \"gres\": 7}\n"
      "]}";
  auto r = ParseSinfoJson(sinfo);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "sinfo --json:5:25: nodes[3].gres: expected a string, got '7'");

  const std::string squeue =
      "{\"jobs\": [{\"job_id\": 5, \"job_state\": \"RUNNING\"},\n"
      "  {\"job_id\": 6, \"job_state\": \"PENDING\", \"tres_per_node\": \"gres:gpu:x\"}]}";
  auto q = ParseSqueueJson(squeue);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().message(),
            "squeue --json:2:58: jobs[1].tres_per_node: tres 'gres:gpu:x': bad gpu count: 'x' is "
            "not an integer");
}

// Answers larger than a configuration file may be (the document reader's default bound is 64
// MiB) are read up to the adapter's own bound.
TEST(SlurmModel, LargeAnswersUpToTheBoundAreRead) {
  std::string text = "{\"nodes\": [{\"name\": \"a\", \"gres\": \"gpu:2\"}";
  text.append(size_t{80} << 20, ' ');
  text += "]}";
  ASSERT_LT(text.size(), kMaxAnswerBytes);
  auto nodes = ParseSinfoJson(text);
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ((*nodes)[0].gpus, 2);
}

// Truncating the recorded answer anywhere gives an error, never a crash or a partial list.
TEST(SlurmModel, TruncatedRecordedAnswersAreRefused) {
  const std::string text = ReadTestdata("squeue-22.05.json");
  for (size_t cut = 0; cut + 2 < text.size(); cut += 97) {
    EXPECT_FALSE(ParseSqueueJson(text.substr(0, cut)).ok()) << cut;
  }
}

}  // namespace
}  // namespace stoker::slurm
