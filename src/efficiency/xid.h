#pragma once
// XID grading (reference/telemetry.md 6.3): red = hardware or node action, amber = degradation,
// blue = application fault. Only red XIDs raise the red "GpuFatalXid" alert.

#include <cstdint>

namespace stoker::efficiency {

enum class XidGrade : uint8_t { kUngraded, kBlue, kAmber, kRed };
const char* XidGradeName(XidGrade g);
XidGrade GradeXid(uint64_t xid);

}  // namespace stoker::efficiency
