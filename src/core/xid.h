#pragma once
// XID grading (reference/telemetry.md 6.3): red = hardware or node action, amber = degradation,
// blue = application fault. One table for the exporter, `stoker smi` and the alert engine;
// ordered by severity so grades compare.

#include <cstdint>

namespace stoker {

enum class XidGrade : uint8_t { kUngraded, kBlue, kAmber, kRed };
const char* XidGradeName(XidGrade g);
XidGrade GradeXid(uint64_t xid);

}  // namespace stoker
