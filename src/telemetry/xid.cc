#include "telemetry/xid.h"

namespace stoker::telemetry {

XidGrade GradeXid(uint64_t xid) {
  switch (xid) {
    case 46: case 48: case 54: case 62: case 64: case 74: case 79: case 95: case 109:
    case 110: case 119: case 120: case 136: case 140: case 143: case 158: case 167:
      return XidGrade::kRed;
    case 63: case 92: case 93: case 94: case 121: case 137: case 154: case 156: case 157:
      return XidGrade::kAmber;
    // 45 is usually preemptive cleanup after another XID; without correlation it is blue.
    case 8: case 13: case 31: case 32: case 43: case 45: case 68: case 69:
      return XidGrade::kBlue;
    default:
      break;
  }
  // NVLink5 errors; their fatal sub-codes are not visible in the XID number alone.
  if (xid >= 144 && xid <= 150) return XidGrade::kRed;
  return XidGrade::kUngraded;
}

const char* XidGradeName(XidGrade g) {
  switch (g) {
    case XidGrade::kRed: return "red";
    case XidGrade::kAmber: return "amber";
    case XidGrade::kBlue: return "blue";
    case XidGrade::kUngraded: return "ungraded";
  }
  return "ungraded";
}

}  // namespace stoker::telemetry
