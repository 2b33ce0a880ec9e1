#include "protocol/job_status_text.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "protocol/model.h"

namespace stoker::protocol {
namespace {

// Strings of every kind the writer treats differently: empty, plain printable ASCII, the two
// characters JSON escapes among them, control characters, DEL, and non-ASCII UTF-8.
const std::string kStrings[] = {"",
                                "n1",
                                "node-0042.rack7",
                                "waiting for resources: no node has 3 free GPUs",
                                "say \"hi\"",
                                "C:\\path",
                                "line\nbreak\ttab\rret",
                                std::string("nul\0byte", 8),
                                "\x01\x1f bell \x07",
                                "del \x7f",
                                "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\x80",
                                "{}[]:,",
                                "MIG-2f6a1c3e-0b9d-4c6e-9a51-7d3e2b8c1f00"};

std::string Pick(std::mt19937_64& rng) { return kStrings[rng() % std::size(kStrings)]; }

Assignment RandomAssignment(std::mt19937_64& rng) {
  Assignment a;
  a.node = Pick(rng);
  for (uint64_t i = rng() % 4; i > 0; --i) a.gpu_indices.push_back(static_cast<uint32_t>(rng()));
  a.gpu_milli = static_cast<int32_t>(rng() % 3 == 0 ? -static_cast<int64_t>(rng() % 5000)
                                                    : static_cast<int64_t>(rng() % 5000));
  a.mig_slices = static_cast<uint8_t>(rng());
  a.mig_uuid = Pick(rng);
  a.cuda_visible_devices = Pick(rng);
  for (uint64_t i = rng() % 4; i > 0; --i) a.env[Pick(rng)] = Pick(rng);
  for (uint64_t i = rng() % 4; i > 0; --i) {
    a.shares.emplace_back(static_cast<uint8_t>(rng()), static_cast<int16_t>(rng()));
  }
  return a;
}

Job RandomJob(std::mt19937_64& rng) {
  Job j;
  j.id = static_cast<int64_t>(rng() >> 1);
  j.user = Pick(rng);
  j.spec.name = Pick(rng);
  j.spec.command = {"train", Pick(rng)};
  j.state = kJobStateNames.entries()[rng() % kJobStateNames.entries().size()].value;
  switch (rng() % 3) {
    case 0:
      break;
    case 1:
      j.assignment = RandomAssignment(rng);
      break;
    default:
      for (uint64_t i = 1 + rng() % 3; i > 0; --i) {
        GangPart p;
        p.assignment = RandomAssignment(rng);
        p.phase = kPartPhaseNames.entries()[rng() % kPartPhaseNames.entries().size()].value;
        if (rng() % 2) p.exit_code = static_cast<int>(rng() % 512) - 256;
        if (rng() % 2) p.signal = static_cast<int>(rng() % 64);
        if (rng() % 2) p.error = Pick(rng);
        j.parts.push_back(std::move(p));
      }
  }
  if (rng() % 2) j.exit_code = static_cast<int>(rng() % 512) - 256;
  if (rng() % 2) j.signal = static_cast<int>(rng() % 64);
  j.reason = Pick(rng);
  j.submit_ms = static_cast<int64_t>(rng() >> 1);
  j.start_ms = rng() % 2 ? 0 : static_cast<int64_t>(rng() >> 1);
  j.end_ms = rng() % 2 ? 0 : -static_cast<int64_t>(rng() >> 1);
  j.requeues = static_cast<int32_t>(rng() % 100);
  j.preemptions = static_cast<int32_t>(rng() % 100);
  j.preempted_by = rng() % 2 ? 0 : static_cast<int64_t>(rng() >> 1);
  j.stop_to_requeue = rng() % 2 ? "" : Pick(rng);
  j.consolidate_milli = rng() % 2 ? 0 : static_cast<int32_t>(rng() % 1000);
  j.stop_to_fail = rng() % 2 ? "" : Pick(rng);
  return j;
}

// The text is the JSON library's own dump of the status document, byte for byte, for jobs with
// every optional member present or absent, gangs of every part phase, and strings that need
// every kind of escape.
TEST(JobStatusText, IsTheDumpOfTheStatusDocument) {
  std::mt19937_64 rng(20261203);
  for (int i = 0; i < 20000; ++i) {
    const Job j = RandomJob(rng);
    ASSERT_EQ(JobStatusText(j), JobStatusToJson(j).dump()) << "job " << i;
  }
}

TEST(JobStatusText, AQueuedAndAPlacedJob) {
  Job j;
  j.id = 7;
  j.submit_ms = 1'700'000'000'123;
  EXPECT_EQ(JobStatusText(j),
            R"({"end_ms":0,"preemptions":0,"reason":"","requeues":0,"start_ms":0,)"
            R"("state":"queued","submit_ms":1700000000123})");
  j.state = JobState::kAssigned;
  j.assignment = Assignment{};
  j.assignment->node = "node12";
  j.assignment->gpu_indices = {3};
  j.assignment->gpu_milli = 250;
  j.assignment->cuda_visible_devices = "3";
  j.assignment->env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = "25";
  j.assignment->shares = {{3, 250}};
  EXPECT_EQ(JobStatusText(j),
            R"({"assignment":{"cuda_visible_devices":"3",)"
            R"("env":{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE":"25"},"gpu_indices":[3],)"
            R"("gpu_milli":250,"mig_slices":0,"mig_uuid":"","node":"node12",)"
            R"("shares":[[3,250]]},"end_ms":0,"preemptions":0,"reason":"","requeues":0,)"
            R"("start_ms":0,"state":"assigned","submit_ms":1700000000123})");
}

// Bytes that are not UTF-8 are refused as the library's dump refuses them.
TEST(JobStatusText, RefusesWhatDumpRefuses) {
  Job j;
  j.reason = "bad \xff byte";
  EXPECT_THROW((void)JobStatusToJson(j).dump(), json::exception);
  EXPECT_THROW((void)JobStatusText(j), json::exception);
  j.reason.clear();
  j.assignment = Assignment{};
  j.assignment->env["K"] = "\xc3";
  EXPECT_THROW((void)JobStatusToJson(j).dump(), json::exception);
  EXPECT_THROW((void)JobStatusText(j), json::exception);
}

}  // namespace
}  // namespace stoker::protocol
