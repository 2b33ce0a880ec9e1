#pragma once
// XID grading (reference/telemetry.md §6.3): red = hardware or node action, amber =
// degradation (schedule maintenance / restart the app), blue = application fault.

#include <cstdint>

namespace stoker::telemetry {

enum class XidGrade : uint8_t { kRed, kAmber, kBlue, kUngraded };

XidGrade GradeXid(uint64_t xid);
const char* XidGradeName(XidGrade g);  // "red", "amber", "blue", "ungraded"

}  // namespace stoker::telemetry
