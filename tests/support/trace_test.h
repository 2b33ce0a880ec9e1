#pragma once
// STOKER_TRACE_OR_SKIP: a test that needs a public trace file (support/traces.h says where they
// are looked for). Where the file is found nowhere the test is skipped with a message saying how
// to get the traces; with STOKER_REQUIRE_TRACES=1 in the environment (CI sets it) the test fails
// instead, so a run without the traces cannot pass unnoticed where they are expected.

#include <gtest/gtest.h>

#include "support/traces.h"

// Declares `const std::string var` = the path of the trace file `relative`, or skips the test
// (fails it under STOKER_REQUIRE_TRACES=1) when the file is nowhere to be found.
#define STOKER_TRACE_OR_SKIP(var, relative)                                       \
  const std::string var = ::stoker::testing::TracePath(relative);                 \
  if (var.empty()) {                                                              \
    if (::stoker::testing::TracesRequired()) {                                    \
      FAIL() << ::stoker::testing::MissingTraceMessage(relative)                  \
             << "\n(STOKER_REQUIRE_TRACES=1: a missing trace is a failure here)"; \
    } else {                                                                      \
      GTEST_SKIP() << ::stoker::testing::MissingTraceMessage(relative);           \
    }                                                                             \
  }
