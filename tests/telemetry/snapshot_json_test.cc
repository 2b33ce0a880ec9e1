#include "telemetry/snapshot_json.h"

#include <gtest/gtest.h>

#include "support/fake_gpu_source.h"
#include "telemetry/xid.h"

namespace stoker::telemetry {
namespace {

TEST(SnapshotJsonTest, EveryFieldHasValueOrNullWithState) {
  TelemetrySnapshot snap;
  snap.nvml_available = true;
  snap.simulated = true;
  snap.gpus.resize(1);
  GpuState& g = snap.gpus[0];
  g.have_sample = true;
  g.sample = stoker::testing::MakeH100Sample(0, 1);
  g.sample.temperature_c = Field<uint32_t>::Unsupported();
  g.sample.power_mw = Field<uint32_t>::Error(15);
  g.sample.processes[0].job = JobRef{JobRef::Kind::kStoker, "42", "bob", ""};
  g.xid_counts[79] = 1;
  g.last_xid = 79;
  const nlohmann::json j = SnapshotToJson(snap, "node-1");
  EXPECT_EQ(j["simulated"], true);
  const auto& fields = j["gpus"][0]["fields"];
  EXPECT_EQ(fields.size(), protocol::GpuScalarFields().size());
  EXPECT_EQ(fields["util_gpu_pct"]["value"], 45);
  EXPECT_EQ(fields["util_gpu_pct"]["state"], "value");
  EXPECT_TRUE(fields["temperature_c"]["value"].is_null());
  EXPECT_EQ(fields["temperature_c"]["state"], "unsupported");
  EXPECT_TRUE(fields["power_mw"]["value"].is_null());
  EXPECT_EQ(fields["power_mw"]["state"], "error");
  EXPECT_EQ(fields["power_mw"]["error_code"], 15);
  EXPECT_EQ(fields["remapping_failed"]["value"], false);
  EXPECT_EQ(fields["sm_active_ratio"]["value"], 0.5);
  const auto& proc = j["gpus"][0]["processes"][0];
  EXPECT_EQ(proc["job"]["kind"], "stoker");
  EXPECT_EQ(proc["job"]["id"], "42");
  EXPECT_EQ(proc["user"], "bob");
  EXPECT_TRUE(proc["gpu_instance_id"].is_null());
  EXPECT_EQ(proc["sm_util_pct"]["state"], "unsupported");
  EXPECT_EQ(j["gpus"][0]["xid"]["counts"]["79"], 1);
  EXPECT_EQ(j["gpus"][0]["xid"]["last_grade"], "red");
}

TEST(SnapshotJsonTest, HealthIsDegradedWithoutNvmlOrWithABadGpu) {
  TelemetrySnapshot snap;
  EXPECT_EQ(HealthToJson(snap)["status"], "degraded");
  snap.nvml_available = true;
  snap.gpus.resize(2);
  for (auto& g : snap.gpus) g.have_sample = true;
  EXPECT_EQ(HealthToJson(snap)["status"], "ok");
  snap.gpus[1].sample.health = GpuHealth::kLost;
  const auto h = HealthToJson(snap);
  EXPECT_EQ(h["status"], "degraded");
  EXPECT_EQ(h["gpus"][1]["health"], "lost");
}

TEST(XidTest, GradesFollowTheReferenceTable) {
  EXPECT_EQ(GradeXid(79), XidGrade::kRed);
  EXPECT_EQ(GradeXid(48), XidGrade::kRed);
  EXPECT_EQ(GradeXid(145), XidGrade::kRed);
  EXPECT_EQ(GradeXid(94), XidGrade::kAmber);
  EXPECT_EQ(GradeXid(13), XidGrade::kBlue);
  EXPECT_EQ(GradeXid(31), XidGrade::kBlue);
  EXPECT_EQ(GradeXid(1), XidGrade::kUngraded);
  EXPECT_STREQ(XidGradeName(XidGrade::kAmber), "amber");
}

}  // namespace
}  // namespace stoker::telemetry
