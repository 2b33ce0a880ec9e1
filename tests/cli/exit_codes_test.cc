// The one Status -> exit-code map of every command, as docs/cli.md documents it, including the
// statuses the client makes of HTTP answers.
#include <gtest/gtest.h>

#include "cli/common.h"

namespace stoker::cli {
namespace {

TEST(ExitCodes, EveryStatusHasTheDocumentedCode) {
  EXPECT_EQ(ExitCodeFor(Status::Ok()), 0);
  EXPECT_EQ(ExitCodeFor(Internal("x")), 1);
  EXPECT_EQ(ExitCodeFor(FailedPrecondition("x")), 1);
  EXPECT_EQ(ExitCodeFor(AlreadyExists("x")), 1);
  EXPECT_EQ(ExitCodeFor(ResourceExhausted("x")), 1);
  EXPECT_EQ(ExitCodeFor(Unimplemented("x")), 1);
  EXPECT_EQ(ExitCodeFor(InvalidArgument("x")), 2);
  EXPECT_EQ(ExitCodeFor(Unavailable("x")), 3);
  EXPECT_EQ(ExitCodeFor(DeadlineExceeded("x")), 3);
  EXPECT_EQ(ExitCodeFor(NotFound("x")), 4);
  EXPECT_EQ(ExitCodeFor(Unauthenticated("x")), 5);
  EXPECT_EQ(ExitCodeFor(PermissionDenied("x")), 5);
}

TEST(ExitCodes, HttpAnswersMapThroughTheirStatus) {
  auto code = [](int http) {
    client::HttpResult r;
    r.status = http;
    return ExitCodeFor(client::StatusFromHttp(r));
  };
  EXPECT_EQ(code(200), 0);
  EXPECT_EQ(code(400), 2);
  EXPECT_EQ(code(401), 5);
  EXPECT_EQ(code(403), 5);
  EXPECT_EQ(code(404), 4);
  EXPECT_EQ(code(409), 1);
  EXPECT_EQ(code(500), 1);
  EXPECT_EQ(code(503), 3);
}

}  // namespace
}  // namespace stoker::cli
