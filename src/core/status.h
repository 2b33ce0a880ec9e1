#pragma once
// Project-wide error model: one Status and one Result<T>, chosen once (docs/architecture.md).
// Codes follow retry semantics: kUnavailable = retry later, kFailedPrecondition = fix state
// first, kInvalidArgument = the input is wrong and retrying will not help.

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace stoker {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,
  kPermissionDenied,
  kUnauthenticated,
  kResourceExhausted,
  kUnavailable,
  kDeadlineExceeded,
  kUnimplemented,
  kInternal,
};

std::string_view StatusCodeName(StatusCode code);

// A success or an error with a message that says what is wrong and where.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: scenario.yaml:12: gpus[3].model: unknown model 'X'".
  std::string ToString() const;

  // Returns a copy whose message is prefixed with `context: ` (used to add file/line/field).
  Status WithContext(std::string_view context) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status PermissionDenied(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}
inline Status Unauthenticated(std::string m) {
  return {StatusCode::kUnauthenticated, std::move(m)};
}
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// A value or a non-OK Status. Accessing the value of an error is a programming bug (asserted).
// Building a Result from an OK Status is a bug too: debug builds assert; release builds hold an
// INTERNAL error instead, so the caller sees a failure rather than an "error" whose status() is OK
// (which STOKER_ASSIGN_OR_RETURN would pass on as success, dropping the value silently).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : data_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(data_).ok() && "Result constructed from OK status");
    if (std::get<Status>(data_).ok()) {
      data_ = Status{StatusCode::kInternal, "a Result was built from an OK status and no value"};
    }
  }

  bool ok() const { return std::holds_alternative<T>(data_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(data_); }

  T& value() & { return std::get<T>(data_); }
  const T& value() const& { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace stoker

#define STOKER_CONCAT_INNER_(a, b) a##b
#define STOKER_CONCAT_(a, b) STOKER_CONCAT_INNER_(a, b)

#define STOKER_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::stoker::Status stoker_status_ = (expr);        \
    if (!stoker_status_.ok()) return stoker_status_; \
  } while (false)

// `lhs` is a declaration or an lvalue; it cannot be parenthesized.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define STOKER_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)

// STOKER_ASSIGN_OR_RETURN(auto x, ComputeX()); returns the error status from the caller.
#define STOKER_ASSIGN_OR_RETURN(lhs, expr) \
  STOKER_ASSIGN_OR_RETURN_IMPL_(STOKER_CONCAT_(stoker_result_, __LINE__), lhs, expr)
