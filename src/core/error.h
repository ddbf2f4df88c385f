// Two kinds of failure, told apart by type:
//  - pagoda::Error: something the user can fix (a bad flag, a malformed checkpoint, a request
//    that does not fit); its message says what went wrong and what to do. The CLI exits 1.
//  - pagoda::InternalError: a broken invariant of pagoda itself (a bug). The CLI prints
//    "internal error: ... — please report it" and exits 3; the server fails the requests in
//    flight with a 500.
// InternalError is not an Error: code that turns user mistakes into 400s must not swallow bugs.
#pragma once

#include <stdexcept>
#include <string>

namespace pagoda {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& what) : std::logic_error(what) {}
};

// Throws pagoda::Error with `message` when `cond` is false. For outside input and user mistakes,
// never for internal invariants (check_invariant).
inline void check(bool cond, const std::string& message) {
  if (!cond) throw Error(message);
}

// Throws pagoda::InternalError with `message` when `cond` is false: an invariant of pagoda's own
// code that no input should be able to break.
inline void check_invariant(bool cond, const std::string& message) {
  if (!cond) throw InternalError(message);
}

// Exit codes of the `pagoda` binary (README, "Commands").
inline constexpr int kExitUserError = 1;      // pagoda::Error
inline constexpr int kExitUsage = 2;          // bad command line (unknown flag, missing argument)
inline constexpr int kExitInternalError = 3;  // pagoda::InternalError and other unexpected exceptions

}  // namespace pagoda
