#pragma once
// The XID grading table lives in the core (core/xid.h); only red XIDs raise the red
// "GpuFatalXid" alert.

#include "core/xid.h"

namespace stoker::efficiency {
using stoker::GradeXid;
using stoker::XidGrade;
using stoker::XidGradeName;
}  // namespace stoker::efficiency
