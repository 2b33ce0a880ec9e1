#pragma once
// XID grading (reference/telemetry.md 6.3): red = hardware or node action, amber = degradation,
// blue = application fault. One table for the exporter, `stoker smi` and the alert engine;
// ordered by severity so grades compare.

#include <cstdint>

#include "core/enum_table.h"

namespace stoker {

enum class XidGrade : uint8_t { kUngraded, kBlue, kAmber, kRed };
inline constexpr EnumTable<XidGrade, 4> kXidGradeNames{"XID grade",
                                                       {{{XidGrade::kUngraded, "ungraded"},
                                                         {XidGrade::kBlue, "blue"},
                                                         {XidGrade::kAmber, "amber"},
                                                         {XidGrade::kRed, "red"}}}};
constexpr const auto& NamesOf(XidGrade) { return kXidGradeNames; }
inline const char* XidGradeName(XidGrade v) { return kXidGradeNames.CName(v); }
XidGrade GradeXid(uint64_t xid);

}  // namespace stoker
