#include "core/xid.h"

namespace stoker {

XidGrade GradeXid(uint64_t xid) {
  switch (xid) {
    // Red: DCGM FAIL, or catalog RESET_GPU / RESTART_BM (telemetry.md 6.3).
    case 46:
    case 48:
    case 54:
    case 62:
    case 64:
    case 74:
    case 79:
    case 95:
    case 109:
    case 110:
    case 119:
    case 120:
    case 136:
    case 140:
    case 143:
    case 158:
    case 167:
      return XidGrade::kRed;
    // Amber: degradation; schedule maintenance.
    case 63:
    case 92:
    case 93:
    case 94:
    case 121:
    case 137:
    case 154:
    case 156:
    case 157:
      return XidGrade::kAmber;
    // Blue: application faults (45 is usually a follow-on of another XID).
    case 8:
    case 13:
    case 31:
    case 32:
    case 43:
    case 45:
    case 68:
    case 69:
      return XidGrade::kBlue;
    default:
      break;
  }
  // 144-150: NVLink5 errors; the sub-code decides fatality, which the event does not carry, so
  // they are graded red (an operator looks) rather than silently dropped.
  if (xid >= 144 && xid <= 150) return XidGrade::kRed;
  return XidGrade::kUngraded;
}

}  // namespace stoker
