#pragma once
// XID grading comes from the core table (core/xid.h), shared with the alert engine.

#include "core/xid.h"

namespace stoker::telemetry {
using stoker::GradeXid;
using stoker::XidGrade;
using stoker::XidGradeName;
}  // namespace stoker::telemetry
