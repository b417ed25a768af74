// Status propagation macros for absl::Status / absl::StatusOr.
//
// The Abseil release in Debian 12 (20220623) predates absl's own versions of these macros, so they
// live here, in one header, for the whole project.
//
//   MOBIUS_RETURN_IF_ERROR(DoThing());            // returns the status if it is not OK
//   MOBIUS_ASSIGN_OR_RETURN(auto v, MakeThing()); // declares/assigns v or returns the error
//   MOBIUS_ASSIGN_OR_RETURN(x, MakeThing());      // assigns to an existing lvalue
//
// Both work in functions returning absl::Status or any absl::StatusOr<T>.
#ifndef MOBIUS_COMMON_STATUS_MACROS_H_
#define MOBIUS_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define MOBIUS_STATUS_CONCAT_INNER_(a, b) a##b
#define MOBIUS_STATUS_CONCAT_(a, b) MOBIUS_STATUS_CONCAT_INNER_(a, b)

#define MOBIUS_RETURN_IF_ERROR(expr)                                          \
  do {                                                                        \
    ::absl::Status mobius_status_ = (expr);                                   \
    if (!mobius_status_.ok()) return mobius_status_;                          \
  } while (0)

#define MOBIUS_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                  \
  if (!statusor.ok()) return std::move(statusor).status();  \
  lhs = std::move(statusor).value()

#define MOBIUS_ASSIGN_OR_RETURN(lhs, rexpr) \
  MOBIUS_ASSIGN_OR_RETURN_IMPL_(            \
      MOBIUS_STATUS_CONCAT_(mobius_statusor_, __LINE__), lhs, rexpr)

#endif  // MOBIUS_COMMON_STATUS_MACROS_H_
