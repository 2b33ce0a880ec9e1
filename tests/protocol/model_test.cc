#include "protocol/model.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "protocol/limits.h"
#include "protocol/samples.h"
#include "support/enum_tables.h"

namespace stoker::protocol {
namespace {

std::string ErrorOf(const std::string& body) {
  auto r = ParseJobSpec(json::parse(body));
  EXPECT_FALSE(r.ok()) << body;
  return r.ok() ? "" : r.status().message();
}

TEST(JobSpec, ValidSpecRoundTrips) {
  auto r = ParseJobSpec(json::parse(R"({"command":["python","train.py"],"gpus":2,"min_gpus":1,
      "cpu_milli":4000,"memory_mib":8192,"env":{"A":"b"},"workdir":"/tmp","class":"cv",
      "priority":5,"preemptible":true,"on_node_loss":"fail","gpu_models":["H100"]})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->gpus, 2);
  EXPECT_EQ(r->min_gpus, 1);
  EXPECT_EQ(r->on_node_loss, OnNodeLoss::kFail);
  EXPECT_EQ(r->env.at("A"), "b");
  auto again = ParseJobSpec(JobSpecToJson(*r));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(JobSpecToJson(*again), JobSpecToJson(*r));
}

TEST(JobSpec, ErrorsNameTheField) {
  EXPECT_EQ(ErrorOf(R"({})"), "command: required (argv array)");
  EXPECT_EQ(ErrorOf(R"({"command":[]})").rfind("command:", 0), 0u);
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"gpus":9})"), "gpus: must be in 0..8");
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"gpus":"2"})"), "gpus: must be an integer");
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"gpu_milli":1000})"), "gpu_milli: must be in 0..999");
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"gpus":1,"gpu_milli":300})").rfind("gpu_milli:", 0), 0u);
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"mig":"9g.1gb"})").rfind("mig:", 0), 0u);
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"cpu_milli":0})"), "cpu_milli: must be in 1..1000000");
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"on_node_loss":"explode"})").rfind("on_node_loss:", 0), 0u);
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"on_node_loss":""})").rfind("on_node_loss:", 0), 0u);
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"workdir":"rel"})"), "workdir: must be an absolute path");
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"env":{"1BAD":"v"}})"), "env.1BAD: invalid variable name");
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"gpus":1,"min_gpus":2})"),
            "min_gpus: must not exceed gpus");
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"colour":"red"})"), "colour: unknown field");
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"priority":18446744073709551615})"),
            "priority: must be in -1000..1000");
  EXPECT_EQ(ErrorOf(R"([1,2])"), "job: body must be a JSON object");
}

TEST(JobJson, FullJobRoundTrips) {
  Job j;
  j.id = 9;
  j.user = "alice";
  j.spec.command = {"sleep", "1"};
  j.state = JobState::kRunning;
  Assignment a;
  a.node = "n1";
  a.gpu_indices = {0, 3};
  a.gpu_milli = 1000;
  a.cuda_visible_devices = "0,3";
  a.shares = {{0, 1000}, {3, 1000}};
  j.assignment = a;
  j.exit_code = 4;
  auto back = JobFromJson(JobToJson(j));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(JobToJson(*back), JobToJson(j));
}

// A spec field this version does not know: a stored job or a submission refuses it, naming
// it; a client reading a (newer) server's answer skips it and reads everything else.
TEST(JobJson, AnUnknownSpecFieldIsRefusedOrSkippedAsTheReaderAsks) {
  Job j;
  j.id = 9;
  j.user = "alice";
  j.spec.command = {"train"};
  j.spec.gpus = 2;
  j.state = JobState::kQueued;
  json doc = JobToJson(j);
  doc["spec"]["checkpoint_every"] = "10m";
  auto strict = JobFromJson(doc);
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(strict.status().message(), "checkpoint_every: unknown field");
  auto lenient = JobFromJson(doc, UnknownFields::kIgnore);
  ASSERT_TRUE(lenient.ok()) << lenient.status().ToString();
  EXPECT_EQ(JobToJson(*lenient), JobToJson(j));
  // Skipping unknown fields does not skip checks: a known field out of range is still refused.
  doc["spec"]["gpus"] = -1;
  EXPECT_FALSE(JobFromJson(doc, UnknownFields::kIgnore).ok());
}

// The server stores a job's document once, at submission, and then only its status: the job
// read back from both is the job as it was last written, fields it lost since included.
TEST(JobJson, StatusOverTheSubmittedDocumentIsTheNewestJob) {
  Job j;
  j.id = 11;
  j.user = "alice";
  j.spec.name = "train";
  j.spec.command = {"python", "train.py"};
  j.spec.gpus = 1;
  j.state = JobState::kRunning;
  j.assignment = Assignment{};
  j.assignment->node = "n1";
  j.assignment->gpu_indices = {2};
  j.preempted_by = 4;
  const json doc = JobToJson(j);  // stored whole, by an earlier release or a full write
  const json status = JobStatusToJson(j);
  for (const char* key : kJobFixedKeys) EXPECT_FALSE(status.contains(key)) << key;
  // Sent back to the queue since: no assignment, no preemption mark, one more requeue.
  j.state = JobState::kQueued;
  j.assignment.reset();
  j.preempted_by = 0;
  j.requeues = 1;
  j.reason = "preempted for job 4";
  auto back = JobFromJson(doc, JobStatusToJson(j));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(JobToJson(*back), JobToJson(j));
  EXPECT_FALSE(back->assignment.has_value());
  // No status: the document alone.
  back = JobFromJson(doc, json());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(JobToJson(*back), doc);
  EXPECT_FALSE(JobFromJson(doc, json::array()).ok());
  EXPECT_FALSE(JobFromJson(json::array(), status).ok());
}

TEST(QueueEntryJson, RoundTripsAndErrorsNameTheField) {
  const QueueEntry e{.position = 3,
                     .job = 42,
                     .user = "alice",
                     .name = "train",
                     .priority = -5,
                     .reason = "waiting for 2 GPUs"};
  auto back = QueueEntryFromJson(QueueEntryToJson(e));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(QueueEntryToJson(*back), QueueEntryToJson(e));
  // Keys a newer server adds are read past; absent optional ones keep their defaults.
  json newer = QueueEntryToJson(e);
  newer["eta_s"] = 120;
  newer.erase("reason");
  back = QueueEntryFromJson(newer);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->reason, "");
  EXPECT_EQ(back->job, 42);
  // What is wrong is named.
  const std::vector<std::tuple<json, std::string>> bad = {
      {json::array(), "queue entry"},
      {json{{"job", 1}}, "position: missing"},
      {json{{"position", 1}}, "job: missing"},
      {json{{"position", 1}, {"job", "7"}}, "job: must be an integer"},
      {json{{"position", 0}, {"job", 7}}, "position: must be in 1.."},
      {json{{"position", 1}, {"job", 7}, {"user", 3}}, "user"},
      {json{{"position", 1}, {"job", 7}, {"priority", int64_t{1} << 40}}, "priority: must be in"},
  };
  for (const auto& [body, what] : bad) {
    auto r = QueueEntryFromJson(body);
    ASSERT_FALSE(r.ok()) << body.dump();
    EXPECT_NE(r.status().message().find(what), std::string::npos)
        << body.dump() << " -> " << r.status().ToString();
  }
}

TEST(Heartbeat, RoundTripAndValidation) {
  Heartbeat h;
  RunReport r;
  r.id = 3;
  r.phase = protocol::RunPhase::kExited;
  r.exit_code = 1;
  r.stdout_data = "hi";
  h.jobs.push_back(r);
  auto back = ParseHeartbeat(HeartbeatBody(h));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->jobs[0].exit_code, 1);
  EXPECT_EQ(back->jobs[0].stdout_data, "hi");
  EXPECT_EQ(back->samples_json, "[]");
  auto bad = ParseHeartbeat(R"({"jobs":[{"id":1,"phase":"dancing"}]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("jobs[0].phase", 0), 0u);
  EXPECT_TRUE(ParseHeartbeat("").ok());  // an empty body is an empty heartbeat
}

// The samples as telemetry's SampleToJson writes them: typed readings for the observers, and
// the text kept (minified) for GET /nodes/{name}.
TEST(Heartbeat, SamplesAreReadIntoTypedReadingsAndKeptAsText) {
  const json fields = {{"util_gpu_pct", {{"state", "value"}, {"value", 42}}},
                       {"memory_used_bytes", {{"state", "value"}, {"value", 3'000'000'000LL}}},
                       {"temperature_c", {{"state", "error"}, {"value", nullptr}}},
                       {"sm_active_ratio", {{"state", "unsupported"}, {"value", nullptr}}},
                       {"tensor_active_ratio", {{"state", "value"}, {"value", 0.25}}},
                       {"power_mw", {{"state", "value"}, {"value", nullptr}}}};  // NaN: none
  const json gpus = json::array(
      {{{"index", 3},
        {"uuid", "GPU-a"},
        {"name", "NVIDIA H100"},
        {"health", "lost"},
        {"timestamp_unix", 1767225600.5},
        {"fields", fields},
        {"processes",
         json::array({{{"pid", 77}, {"job", {{"kind", "stoker"}, {"id", "12"}}}},
                      {{"pid", 78}, {"job", nullptr}},
                      {{"pid", 79}, {"job", {{"kind", "slurm"}, {"id", "5"}, {"step", "0"}}}}})}}});
  auto hb = ParseHeartbeat(json{{"jobs", json::array()}, {"samples", gpus}}.dump(2));
  ASSERT_TRUE(hb.ok()) << hb.status().ToString();
  EXPECT_EQ(json::parse(hb->samples_json), gpus);
  EXPECT_EQ(hb->samples_json.find('\n'), std::string::npos);  // minified
  ASSERT_EQ(hb->gpus.size(), 1u);
  const GpuSample& g = hb->gpus[0];
  EXPECT_EQ(g.id.index, 3u);
  EXPECT_EQ(g.id.uuid, "GPU-a");
  EXPECT_EQ(g.id.name, "NVIDIA H100");
  EXPECT_EQ(g.health, GpuHealth::kLost);
  EXPECT_EQ(
      std::chrono::duration_cast<std::chrono::milliseconds>(g.timestamp.time_since_epoch()).count(),
      1'767'225'600'500);
  EXPECT_EQ(g.util_gpu_pct, Field<uint32_t>::Of(42));
  EXPECT_EQ(g.memory_used_bytes, Field<uint64_t>::Of(3'000'000'000ULL));
  EXPECT_FALSE(g.temperature_c.has_value());
  EXPECT_EQ(g.gpm.sm_active.state(), FieldState::kUnsupported);
  EXPECT_EQ(g.gpm.tensor_active, Field<double>::Of(0.25));
  EXPECT_FALSE(g.power_mw.has_value());
  ASSERT_EQ(g.processes.size(), 3u);
  EXPECT_EQ(g.processes[0].pid, 77u);
  EXPECT_EQ(g.processes[0].job.id, "12");
  EXPECT_FALSE(g.processes[1].job.known());
  EXPECT_EQ(g.processes[2].job.kind, JobRef::Kind::kSlurm);
  EXPECT_EQ(g.processes[2].job.step, "0");
  // Written back as the agent writes it (the step only where there is one).
  EXPECT_EQ(GpuSampleToJson(g, 3, true)["processes"][2]["job"]["step"], "0");
  EXPECT_FALSE(GpuSampleToJson(g, 3, true)["processes"][0]["job"].contains("step"));
}

// Claims (who holds a GPU by allocation: Kubernetes pods through kubelet's PodResources) are
// written by the agent's codec and read back by the server's, with errors naming the claim.
TEST(Heartbeat, GpuClaimsRoundTripAndBadOnesAreNamed) {
  GpuSample s;
  s.id.index = 1;
  s.id.uuid = "GPU-b";
  GpuClaim share;
  share.job = {JobRef::Kind::kKubernetes, "ml/train-0", "", "train"};
  share.gpu_milli = 250;
  GpuClaim whole;
  whole.job = {JobRef::Kind::kKubernetes, "ml/infer", "", "server"};
  whole.whole = true;
  whole.gpu_milli = 1000;
  GpuClaim mig;
  mig.job = {JobRef::Kind::kKubernetes, "ml/small", "", "c"};
  mig.mig_uuid = "MIG-7";
  s.claims = {share, whole, mig};
  const json gpus = json::array({GpuSampleToJson(s, 1, true)});
  auto hb = ParseHeartbeat(json{{"samples", gpus}}.dump());
  ASSERT_TRUE(hb.ok()) << hb.status().ToString();
  ASSERT_EQ(hb->gpus[0].claims.size(), 3u);
  const GpuClaim& a = hb->gpus[0].claims[0];
  EXPECT_EQ(a.job.kind, JobRef::Kind::kKubernetes);
  EXPECT_EQ(a.job.id, "ml/train-0");
  EXPECT_EQ(a.job.container, "train");
  EXPECT_EQ(a.gpu_milli, 250);
  EXPECT_FALSE(a.whole);
  EXPECT_TRUE(hb->gpus[0].claims[1].whole);
  EXPECT_EQ(hb->gpus[0].claims[2].mig_uuid, "MIG-7");
  // A sample without claims writes none (older agents and servers see no new key).
  EXPECT_FALSE(GpuSampleToJson(GpuSample{}, 0, true).contains("claims"));
  for (const auto& [claim, want] : std::vector<std::pair<json, std::string>>{
           {json{{"gpu_milli", 5}}, "samples[0].claims[0].job: needs kind and id"},
           {json{{"job", {{"kind", "podman"}, {"id", "x"}}}},
            "claims[0].job.kind: unknown job kind 'podman' (none, stoker, slurm, kubernetes)"},
           {json{{"job", {{"kind", "kubernetes"}, {"id", "x"}}}, {"gpu_milli", 1001}},
            "claims[0].gpu_milli: not in 0..1000"}}) {
    json g = gpus;
    g[0]["claims"] = json::array({claim});
    auto bad = ParseHeartbeat(json{{"samples", g}}.dump());
    ASSERT_FALSE(bad.ok()) << claim;
    EXPECT_NE(bad.status().message().find(want), std::string::npos) << bad.status().message();
  }
}

// JSON has one number type: an integer reading written as 250000.0 or 2.5e5 (as some JSON
// writers do) is that integer, up to the field's largest value.
TEST(Heartbeat, WholeNumbersWithAFractionPartAreIntegerReadings) {
  auto read = [](const json& fields) {
    auto hb = ParseHeartbeat(json{{"samples", json::array({{{"fields", fields}}})}}.dump());
    EXPECT_TRUE(hb.ok()) << fields << ": " << hb.status().ToString();
    return hb.ok() ? hb->gpus.at(0) : GpuSample{};
  };
  const auto value = [](json v) { return json{{"state", "value"}, {"value", std::move(v)}}; };
  EXPECT_EQ(read({{"power_mw", value(250000.0)}}).power_mw, Field<uint32_t>::Of(250000));
  EXPECT_EQ(read({{"power_mw", value(json::parse("2.5e5"))}}).power_mw,
            Field<uint32_t>::Of(250000));
  // At the bound of the field's type, as an integer and as a number with a fraction part.
  EXPECT_EQ(read({{"power_mw", value(4294967295ULL)}}).power_mw, Field<uint32_t>::Of(4294967295U));
  EXPECT_EQ(read({{"power_mw", value(4294967295.0)}}).power_mw, Field<uint32_t>::Of(4294967295U));
  EXPECT_EQ(read({{"memory_used_bytes", value(3e9)}}).memory_used_bytes,
            Field<uint64_t>::Of(3'000'000'000ULL));
  EXPECT_EQ(read({{"mig_enabled", value(1)}}).mig_enabled, Field<bool>::Of(true));
  EXPECT_EQ(read({{"tensor_active_ratio", value(1)}}).gpm.tensor_active, Field<double>::Of(1.0));
}

// A reading that does not fit its field is a 400 naming the field, never a silently dropped
// reading.
TEST(Heartbeat, ReadingsThatDoNotFitTheirFieldAreNamed) {
  const auto value = [](json v) { return json{{"state", "value"}, {"value", std::move(v)}}; };
  const std::string uint32_rule = "must be an integer in 0..4294967295";
  const std::string uint64_rule = "must be an integer in 0..18446744073709551615";
  for (const auto& [field, v, want] : std::vector<std::tuple<std::string, json, std::string>>{
           {"power_mw", 250000.5, uint32_rule},
           {"power_mw", -5, uint32_rule},
           {"power_mw", 4294967296ULL, uint32_rule},  // one past the bound
           {"power_mw", 4294967296.0, uint32_rule},
           {"power_mw", "250000", uint32_rule},
           {"power_mw", true, uint32_rule},
           {"memory_used_bytes", 1.8446744073709552e19, uint64_rule},  // 2^64
           {"mig_enabled", 2, "must be true or false"},
           {"mig_enabled", 0.5, "must be true or false"},
           {"tensor_active_ratio", "0.5", "must be a number"},
           {"tensor_active_ratio", false, "must be a number"}}) {
    const json body = {
        {"samples", json::array({{{"index", 0}}, {{"fields", {{field, value(v)}}}}})}};
    auto hb = ParseHeartbeat(body.dump());
    ASSERT_FALSE(hb.ok()) << body;
    EXPECT_EQ(hb.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(hb.status().message(), "samples[1].fields." + field + ".value: " + want) << body;
  }
  // The readings of MIG instances and processes, and the GPU's own numbers, likewise.
  for (const auto& [sample, want] : std::vector<std::pair<json, std::string>>{
           {{{"mig_instances", json::array({{{"memory_total_bytes", value(-1)}}})}},
            "samples[0].mig_instances[0].memory_total_bytes.value: " + uint64_rule},
           {{{"processes", json::array({{{"pid", 1}}, {{"used_memory_bytes", value(1.5)}}})}},
            "samples[0].processes[1].used_memory_bytes.value: " + uint64_rule},
           {{{"minor", value(0.5)}}, "samples[0].minor.value: " + uint32_rule}}) {
    auto hb = ParseHeartbeat(json{{"samples", json::array({sample})}}.dump());
    ASSERT_FALSE(hb.ok()) << sample;
    EXPECT_EQ(hb.status().message(), want);
  }
}

TEST(Heartbeat, BadBodiesNameWhatIsWrong) {
  auto msg = [](std::string_view body) {
    auto r = ParseHeartbeat(body);
    EXPECT_FALSE(r.ok()) << body;
    return r.ok() ? std::string() : std::string(r.status().message());
  };
  EXPECT_NE(msg(R"({"samples": [)").find("not valid JSON"), std::string::npos);
  EXPECT_NE(msg("[1]").find("must be a JSON object"), std::string::npos);
  EXPECT_EQ(msg(R"({"samples": {}})").rfind("samples", 0), 0u);
  EXPECT_EQ(msg(R"({"samples": [1]})").rfind("samples[0]", 0), 0u);
  EXPECT_EQ(
      msg(R"({"samples": [{}, {"timestamp_unix": -1}]})").rfind("samples[1].timestamp_unix", 0),
      0u);
  EXPECT_EQ(msg(R"({"jobs": {}})").rfind("jobs", 0), 0u);
}

}  // namespace
}  // namespace stoker::protocol

namespace stoker::protocol {
namespace {

TEST(HeartbeatReplyJson, PreemptionGraceRoundTripsAndOlderRepliesStillParse) {
  HeartbeatReply r;
  r.cancel = {4, 9};
  r.cancel_grace_ms[9] = 120000;
  auto back = ParseHeartbeatReply(HeartbeatReplyToJson(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->cancel, r.cancel);
  EXPECT_EQ(back->cancel_grace_ms, r.cancel_grace_ms);
  // A server without the field (older release): no per-job grace.
  json old = HeartbeatReplyToJson(HeartbeatReply{});
  old.erase("cancel_grace_ms");
  ASSERT_TRUE(ParseHeartbeatReply(old).ok());
  json bad = HeartbeatReplyToJson(r);
  bad["cancel_grace_ms"]["9"] = -1;
  auto err = ParseHeartbeatReply(bad);
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.status().message().find("cancel_grace_ms.9"), std::string::npos)
      << err.status().ToString();
}

}  // namespace
}  // namespace stoker::protocol

namespace stoker::protocol {
namespace {

TEST(GangSpec, NodesTimesGpusOrATotal) {
  auto r = ParseJobSpec(json::parse(R"({"command":["x"],"nodes":2,"gpus":4})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(IsGang(*r));
  EXPECT_EQ(TotalGpus(*r), 8);
  EXPECT_EQ(JobSpecToJson(*r)["nodes"], 2);
  r = ParseJobSpec(json::parse(R"({"command":["x"],"total_gpus":20})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(IsGang(*r));
  EXPECT_EQ(TotalGpus(*r), 20);
  auto again = ParseJobSpec(JobSpecToJson(*r));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->total_gpus, 20);
  // A one-node job's document is as it was: no gang fields.
  r = ParseJobSpec(json::parse(R"({"command":["x"],"gpus":4})"));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(IsGang(*r));
  EXPECT_FALSE(JobSpecToJson(*r).contains("nodes"));
  EXPECT_FALSE(JobSpecToJson(*r).contains("total_gpus"));
}

TEST(GangSpec, ErrorsNameTheField) {
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"nodes":2,"gpu_milli":500})").rfind("nodes:", 0), 0u);
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"nodes":2,"mig":"1g.10gb"})").rfind("nodes:", 0), 0u);
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"nodes":2,"gpus":4,"min_gpus":2})"),
            "min_gpus: a gang (nodes) is not elastic");
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"total_gpus":16,"gpus":8})").rfind("total_gpus:", 0), 0u);
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"total_gpus":16,"nodes":2})").rfind("total_gpus:", 0), 0u);
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"nodes":5000})"), "nodes: must be in 0..4096");
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"nodes":-1})"), "nodes: must be in 0..4096");
  EXPECT_EQ(ErrorOf(R"({"command":["x"],"total_gpus":-1})"), "total_gpus: must be in 0..131072");
}

// The gang bounds of protocol/limits.h, accepted at the bound and refused one past it.
TEST(GangSpec, BoundsAtAndPastTheLimit) {
  auto spec = [](json fields) {
    fields["command"] = json::array({"x"});
    return ParseJobSpec(fields);
  };
  const int64_t parts = limits::kGangPartsMax;
  const int64_t gpus = limits::kGangGpusMax;
  EXPECT_TRUE(spec({{"nodes", parts}}).ok());
  EXPECT_EQ(spec({{"nodes", parts + 1}}).status().message(),
            "nodes: must be in 0.." + std::to_string(parts));
  EXPECT_TRUE(spec({{"total_gpus", gpus}}).ok());
  EXPECT_EQ(spec({{"total_gpus", gpus + 1}}).status().message(),
            "total_gpus: must be in 0.." + std::to_string(gpus));
  EXPECT_FALSE(spec({{"nodes", 2.0}}).ok());  // counts are integers in a job spec
}

TEST(NodeInventory, AddressBoundAtAndPastTheLimit) {
  const std::string at(static_cast<size_t>(limits::kNodeAddressBytes), 'a');
  auto n = ParseNodeInventory(json{{"name", "n1"}, {"address", at}});
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->address, at);
  auto bad = ParseNodeInventory(json{{"name", "n1"}, {"address", at + "a"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "address: longer than " + std::to_string(limits::kNodeAddressBytes) + " bytes");
}

TEST(GangSpec, LauncherVariablesAreSetByStoker) {
  JobSpec s;
  s.command = {"x"};
  s.nodes = 2;
  s.gpus = 1;
  s.env = {{"RANK", "3"}};
  Status st = CheckSubmission(s);
  EXPECT_EQ(st.message(), "env.RANK: set by Stoker for every part of a gang; not settable");
  s.env = {{"PET_MASTER_PORT", "1"}};
  EXPECT_FALSE(CheckSubmission(s).ok());
  // An ordinary job may set them (they are its own business).
  s.nodes = 0;
  s.env = {{"RANK", "3"}};
  EXPECT_TRUE(CheckSubmission(s).ok());
}

TEST(GangEnv, WhatTorchrunAndEnvInitRead) {
  const auto env = GangEnv(1, {"10.0.0.1", "n2", "n3"}, 4, 29501);
  EXPECT_EQ(env.at("RANK"), "1");
  EXPECT_EQ(env.at("NODE_RANK"), "1");
  EXPECT_EQ(env.at("LOCAL_RANK"), "0");
  EXPECT_EQ(env.at("WORLD_SIZE"), "3");
  EXPECT_EQ(env.at("LOCAL_WORLD_SIZE"), "1");
  EXPECT_EQ(env.at("MASTER_ADDR"), "10.0.0.1");
  EXPECT_EQ(env.at("MASTER_PORT"), "29501");
  EXPECT_EQ(env.at("PET_NNODES"), "3");
  EXPECT_EQ(env.at("PET_NODE_RANK"), "1");
  EXPECT_EQ(env.at("PET_NPROC_PER_NODE"), "4");
  EXPECT_EQ(env.at("PET_MASTER_ADDR"), "10.0.0.1");
  EXPECT_EQ(env.at("PET_MASTER_PORT"), "29501");
  EXPECT_EQ(env.at("STOKER_GANG_NODES"), "10.0.0.1,n2,n3");
  for (const auto& [k, v] : env) {
    EXPECT_TRUE(IsGangEnvName(k) || IsReservedEnvName(k)) << k;
  }
  // A part without GPUs still runs one process.
  EXPECT_EQ(GangEnv(0, {"a"}, 0, 29500).at("PET_NPROC_PER_NODE"), "1");
}

TEST(GangJob, PartsRoundTripAndFindTheirNode) {
  Job j;
  j.id = 7;
  j.user = "alice";
  j.spec.command = {"x"};
  j.spec.nodes = 2;
  j.spec.gpus = 1;
  j.state = JobState::kCancelling;
  j.stop_to_fail = "part 1 on b: exit code 3";
  for (const char* node : {"a", "b"}) {
    GangPart p;
    p.assignment.node = node;
    p.assignment.gpu_indices = {0};
    p.assignment.gpu_milli = 1000;
    p.assignment.cuda_visible_devices = "0";
    p.assignment.shares = {{0, 1000}};
    p.assignment.env = GangEnv(p.assignment.node == "a" ? 0 : 1, {"a", "b"}, 1, 29500);
    j.parts.push_back(p);
  }
  j.parts[1].phase = PartPhase::kExited;
  j.parts[1].exit_code = 3;
  const json doc = JobToJson(j);
  EXPECT_FALSE(doc.contains("assignment"));
  ASSERT_EQ(doc["parts"].size(), 2u);
  EXPECT_EQ(doc["parts"][1]["rank"], 1);
  EXPECT_EQ(doc["parts"][1]["phase"], "exited");
  auto back = JobFromJson(doc);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(JobToJson(*back), doc);
  EXPECT_EQ(back->stop_to_fail, j.stop_to_fail);
  ASSERT_NE(PartOn(*back, "b"), nullptr);
  EXPECT_EQ(PartOn(*back, "b")->exit_code, 3);
  EXPECT_EQ(PartOn(*back, "c"), nullptr);
  EXPECT_EQ(Assignments(*back).size(), 2u);
}

// Enums cross JSON as their table names (json/enum_json.h): the bytes the names always were,
// and a name the table does not list is refused with the ones it does.
TEST(GangJob, StatesAndPhasesAreTheirNamesAndUnknownOnesAreRefused) {
  Job j;
  j.id = 8;
  j.user = "alice";
  j.spec.command = {"x"};
  j.spec.nodes = 2;
  j.spec.gpus = 1;
  j.state = JobState::kRunning;
  for (const char* node : {"a", "b"}) {
    GangPart p;
    p.assignment.node = node;
    p.phase = PartPhase::kRunning;
    j.parts.push_back(p);
  }
  j.parts[0].phase = PartPhase::kLost;
  const json status = JobStatusToJson(j);
  const std::string bytes = status.dump();
  EXPECT_NE(bytes.find(R"("state":"running")"), std::string::npos) << bytes;
  EXPECT_NE(bytes.find(R"("phase":"lost")"), std::string::npos) << bytes;
  EXPECT_NE(bytes.find(R"("phase":"running")"), std::string::npos) << bytes;
  const json doc = JobToJson(j);
  ASSERT_TRUE(JobFromJson(doc).ok());

  json bad = doc;
  bad["state"] = "sleeping";
  auto r = JobFromJson(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  // The job's id, then the table's words; not nlohmann's "[json.exception...]" prefix.
  EXPECT_EQ(r.status().message(), "job " + std::to_string(j.id) +
                                      ": unknown job state 'sleeping' (" + kJobStateNames.List() +
                                      ")");
  bad = doc;
  bad["state"] = 2;  // the enum's number is not its name
  EXPECT_FALSE(JobFromJson(bad).ok());
  bad = doc;
  bad["parts"][1]["phase"] = "napping";
  r = JobFromJson(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(
      r.status().message().find("unknown part phase 'napping' (" + kPartPhaseNames.List() + ")"),
      std::string::npos)
      << r.status().message();
  // The status over the stored document is read the same way.
  json bad_status = status;
  bad_status["state"] = "Running";
  EXPECT_FALSE(JobFromJson(doc, bad_status).ok());
}

TEST(NodeInventory, AddressIsAHostNameOrAnIpAddress) {
  auto n = ParseNodeInventory(json::parse(R"({"name":"n1","address":"10.1.2.3"})"));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(NodeInventoryToJson(*n)["address"], "10.1.2.3");
  EXPECT_TRUE(ParseNodeInventory(json::parse(R"({"name":"n1","address":"fe80::1"})")).ok());
  auto bad = ParseNodeInventory(json::parse(R"({"name":"n1","address":"a b;rm"})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "address: must be a host name or an IP address");
  // Without one, none is written.
  n = ParseNodeInventory(json::parse(R"({"name":"n1"})"));
  ASSERT_TRUE(n.ok());
  EXPECT_FALSE(NodeInventoryToJson(*n).contains("address"));
}

}  // namespace
}  // namespace stoker::protocol

namespace stoker::protocol {
namespace {

// A sample with every kind of reading: values of each type, an unsupported field, an error, no
// reading, MIG instances, processes with and without a job, a claim, a health that is not ok.
GpuSample RichSample(uint32_t index, WallTime at) {
  GpuSample s;
  s.id.index = index;
  s.id.uuid = "GPU-" + std::to_string(index);
  s.id.pci_bus_id = "00000000:18:00.0";
  s.id.name = "NVIDIA H100";
  s.id.minor = Field<uint32_t>::Of(index);
  s.id.architecture = Field<uint32_t>::Of(9);
  s.timestamp = at;
  s.util_gpu_pct = Field<uint32_t>::Of(42 + index);
  s.memory_used_bytes = Field<uint64_t>::Of(3'000'000'000ULL);
  s.temperature_c = Field<uint32_t>::Error(3);
  s.gpm.sm_active = Field<double>::Unsupported();
  s.gpm.tensor_active = Field<double>::Of(0.25);
  s.mig_enabled = Field<bool>::Of(true);
  MigInstance m;
  m.uuid = "MIG-1";
  m.profile = "3g.40gb";
  m.slices = 3;
  m.memory_used_bytes = Field<uint64_t>::Of(1 << 20);
  m.gpm.sm_active = Field<double>::Of(0.5);
  s.mig_instances.push_back(m);
  GpuProcess p;
  p.pid = 77;
  p.job = JobRef{.kind = JobRef::Kind::kSlurm, .id = "5", .step = "0"};
  p.job.user = "alice";
  p.used_memory_bytes = Field<uint64_t>::Of(123);
  s.processes.push_back(p);
  s.processes.push_back(GpuProcess{.pid = 78});
  GpuClaim c;
  c.job = JobRef{.kind = JobRef::Kind::kKubernetes, .id = "ns/pod", .container = "main"};
  c.gpu_milli = 500;
  s.claims.push_back(c);
  s.health = index == 1 ? GpuHealth::kLost : GpuHealth::kOk;
  return s;
}

Result<Heartbeat> ParseCompact(const std::vector<SampleTick>& ticks, bool identity) {
  Heartbeat h;
  h.ticks_json = CompactTicksJson(ticks, identity);
  return ParseHeartbeat(HeartbeatBody(h));
}

// Every second of a compact report comes back as its own tick with its own time, and every
// reading, state, MIG instance, process and claim as the full form would carry it.
TEST(CompactHeartbeat, EverySecondRoundTripsWithItsTime) {
  const WallTime t0 = WallTime(std::chrono::seconds(1'767'225'600));
  std::vector<SampleTick> ticks;
  for (int t = 0; t < 10; ++t) {
    const WallTime at = t0 + std::chrono::seconds(t);
    ticks.push_back({at, {RichSample(0, at), RichSample(1, at)}});
  }
  auto hb = ParseCompact(ticks, /*identity=*/true);
  ASSERT_TRUE(hb.ok()) << hb.status().ToString();
  EXPECT_TRUE(hb->compact);
  ASSERT_EQ(hb->ticks.size(), 10u);
  for (size_t t = 0; t < 10; ++t) {
    EXPECT_EQ(hb->ticks[t].at, ticks[t].at);
    ASSERT_EQ(hb->ticks[t].gpus.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      const GpuSample& want = ticks[t].gpus[i];
      const GpuSample& got = hb->ticks[t].gpus[i];
      EXPECT_EQ(got.timestamp, want.timestamp);
      EXPECT_EQ(got.health, want.health);
      // The full form of both is the same: every field, MIG instance, process and claim the
      // compact form carries (processes' names and per-process utilization it does not).
      json a = GpuSampleToJson(got, got.id.index, true);
      json b = GpuSampleToJson(want, want.id.index, true);
      for (json* j : {&a, &b}) {
        for (json& p : (*j)["processes"]) p.erase("name");
        for (json& m : (*j)["mig_instances"]) {
          m.erase("sm_occupancy_ratio");
          m.erase("dram_active_ratio");
        }
      }
      EXPECT_EQ(a, b) << "tick " << t << " gpu " << i;
    }
  }
  EXPECT_EQ(hb->ticks[3].gpus[0].temperature_c.error_code(), 3);
  EXPECT_EQ(hb->ticks[3].gpus[1].util_gpu_pct, Field<uint32_t>::Of(43));
}

// Without identity a GPU is its index alone (the server takes the rest from the registration),
// and the compact body is a fraction of the full one.
TEST(CompactHeartbeat, IdentityOnlyWhenAskedAndSmallerThanTheFullForm) {
  const WallTime at = WallTime(std::chrono::seconds(1'767'225'600));
  std::vector<GpuSample> gpus;
  for (uint32_t i = 0; i < 8; ++i) gpus.push_back(RichSample(i, at));
  auto hb = ParseCompact({{at, gpus}}, /*identity=*/false);
  ASSERT_TRUE(hb.ok()) << hb.status().ToString();
  EXPECT_EQ(hb->ticks[0].gpus[5].id.index, 5u);
  EXPECT_EQ(hb->ticks[0].gpus[5].id.uuid, "");
  EXPECT_FALSE(hb->ticks[0].gpus[5].id.minor.has_value());
  json full = json::array();
  for (const GpuSample& g : gpus) full.push_back(GpuSampleToJson(g, g.id.index, true));
  const size_t compact = CompactGpusJson(gpus, false).size();
  EXPECT_LT(compact * 2, full.dump().size()) << compact << " vs " << full.dump().size();
}

// Keys name the readings: a report whose keys are in another order, or that has a key this
// build does not know, still reads each reading into its own field.
TEST(CompactHeartbeat, ReadingsFollowTheKeysNotTheBuildsOrder) {
  auto hb = ParseHeartbeat(
      R"({"format":2,"keys":["power_mw","some_future_key","util_gpu_pct"],)"
      R"("ticks":[{"t":1767225600,"gpus":[{"i":2,"v":[250000,"x",7],"unsupported":[1]}]}]})");
  ASSERT_TRUE(hb.ok()) << hb.status().ToString();
  const GpuSample& g = hb->ticks[0].gpus[0];
  EXPECT_EQ(g.power_mw, Field<uint32_t>::Of(250000));
  EXPECT_EQ(g.util_gpu_pct, Field<uint32_t>::Of(7));
}

TEST(CompactHeartbeat, BadReportsNameWhatIsWrong) {
  const std::string keys = R"({"format":2,"keys":["util_gpu_pct","power_mw"],"ticks":)";
  for (const auto& [ticks, want] : std::vector<std::pair<std::string, std::string>>{
           {R"([{"gpus":[]}])", "ticks[0].t: must be a Unix time"},
           {R"([{"t":-1,"gpus":[]}])", "ticks[0].t: must be a Unix time"},
           {R"([{"t":1,"gpus":{}}])", "ticks[0].gpus: must be an array"},
           {R"([{"t":1,"gpus":[{"v":[]}]}])", "ticks[0].gpus[0].i: must be a GPU index in 0..63"},
           {R"([{"t":1,"gpus":[{"i":64}]}])", "ticks[0].gpus[0].i: must be a GPU index in 0..63"},
           {R"([{"t":1,"gpus":[{"i":0,"v":[1,-5]}]}])",
            "ticks[0].gpus[0].v[1] (power_mw): must be an integer in 0..4294967295"},
           {R"([{"t":1,"gpus":[{"i":0,"v":[1,2,3]}]}])",
            "ticks[0].gpus[0].v: 3 readings for 2 keys"},
           {R"([{"t":1,"gpus":[{"i":0,"unsupported":[2]}]}])",
            "ticks[0].gpus[0].unsupported[0]: must be a position in keys"},
           {R"([{"t":1,"gpus":[{"i":0,"errors":[[0]]}]}])",
            "ticks[0].gpus[0].errors[0]: must be [key position, NVML error code]"},
           {R"([{"t":1,"gpus":[{"i":0,"mig":[{"memory_used_bytes":"x"}]}]}])",
            "ticks[0].gpus[0].mig[0].memory_used_bytes: must be"},
           // Paths further down, past the first tick and GPU.
           {R"([{"t":1,"gpus":[]},{"t":2,"gpus":[{"i":0},{"i":1,"processes":[{},)"
            R"({"used_memory_bytes":"x"}]}]}])",
            "ticks[1].gpus[1].processes[1].used_memory_bytes: must be"},
           {R"([{"t":1,"gpus":[{"i":0,"errors":[[9,3]]}]}])",
            "ticks[0].gpus[0].errors[0][0]: must be a position in keys (0..2)"},
           {R"([{"t":1,"gpus":[{"i":0,"unsupported":[0,7]}]}])",
            "ticks[0].gpus[0].unsupported[1]: must be a position in keys (0..2)"},
           {R"([{"t":1,"gpus":[{"i":0,"claims":[1]}]}])",
            "ticks[0].gpus[0].claims[0]: must be an object"},
           {R"([{"t":1,"gpus":[{"i":0,"claims":[{"job":{"kind":"nope","id":"1"}}]}]}])",
            "ticks[0].gpus[0].claims[0].job.kind: "},
           {R"([{"t":1,"gpus":[{"i":0,"claims":[{"job":{"kind":"stoker","id":"1"},)"
            R"("gpu_milli":2000}]}]}])",
            "ticks[0].gpus[0].claims[0].gpu_milli: not in 0..1000"},
       }) {
    auto r = ParseHeartbeat(keys + ticks + "}");
    ASSERT_FALSE(r.ok()) << ticks;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
  EXPECT_NE(ParseHeartbeat(R"({"ticks":[]})").status().message().find("keys"), std::string::npos);
}

// The bounds of protocol/limits.h: ticks per report and GPUs per tick, at the bound and past it.
TEST(CompactHeartbeat, TicksAndGpusBoundedAtTheLimit) {
  auto body = [](int64_t ticks, int64_t gpus) {
    std::string g = "[";
    for (int64_t i = 0; i < gpus; ++i) g += (i ? ",{\"i\":" : "{\"i\":") + std::to_string(i) + "}";
    g += "]";
    std::string t = "[";
    for (int64_t i = 0; i < ticks; ++i) {
      t += (i ? "," : "") + CompactTickJson(WallTime(std::chrono::seconds(1000 + i)), g);
    }
    return R"({"format":2,"keys":[],"ticks":)" + t + "]}";
  };
  EXPECT_TRUE(ParseHeartbeat(body(limits::kReportTicksMax, limits::kGpusPerNode)).ok());
  EXPECT_NE(ParseHeartbeat(body(limits::kReportTicksMax + 1, 1))
                .status()
                .message()
                .find("ticks: more than " + std::to_string(limits::kReportTicksMax)),
            std::string::npos);
  EXPECT_NE(ParseHeartbeat(body(1, limits::kGpusPerNode + 1))
                .status()
                .message()
                .find("ticks[0].gpus: more than " + std::to_string(limits::kGpusPerNode)),
            std::string::npos);
}

TEST(HeartbeatReplyJson, ReportIntervalRoundTripsWithinItsBounds) {
  HeartbeatReply r;
  r.report_interval_ms = limits::kReportIntervalMsMax;
  auto back = ParseHeartbeatReply(HeartbeatReplyToJson(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->report_interval_ms, limits::kReportIntervalMsMax);
  json j = HeartbeatReplyToJson(r);
  j["report_interval_ms"] = limits::kReportIntervalMsMax + 1;
  EXPECT_FALSE(ParseHeartbeatReply(j).ok());
  j["report_interval_ms"] = limits::kReportIntervalMsMin - 1;
  EXPECT_FALSE(ParseHeartbeatReply(j).ok());
  j.erase("report_interval_ms");  // an older server
  EXPECT_EQ(ParseHeartbeatReply(j)->report_interval_ms, 0);
}

// Every name that crosses the wire parses back to its value, and no two values share one.
TEST(EnumNames, EveryProtocolTableRoundTrips) {
  using stoker::testing::ExpectRoundTrip;
  ExpectRoundTrip(kJobStateNames);
  ExpectRoundTrip(kRoleNames);
  ExpectRoundTrip(kOnNodeLossNames);
  ExpectRoundTrip(kRunPhaseNames);
  ExpectRoundTrip(kPartPhaseNames);
  ExpectRoundTrip(kNodeStateNames);
}

}  // namespace
}  // namespace stoker::protocol
