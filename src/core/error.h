// Errors that reach the user: one exception type whose message says what went wrong and what to do.
#pragma once

#include <stdexcept>
#include <string>

namespace pagoda {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Throws pagoda::Error with `message` when `cond` is false. For outside input and user mistakes,
// never for internal invariants (those are asserts).
inline void check(bool cond, const std::string& message) {
  if (!cond) throw Error(message);
}

}  // namespace pagoda
