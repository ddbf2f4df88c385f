// Cheap argument checks of the CPU ops. A failure is a bug in the caller (a model or a test), so
// the message starts with "internal:"; checking costs nothing next to the op and beats silently
// writing out of bounds in a release build.
#pragma once

#include <string>

#include "core/error.h"
#include "core/tensor.h"

namespace pagoda::cpu {

inline void require(bool cond, const char* op, const char* what) {
  if (!cond) throw Error(std::string("internal: ") + op + ": " + what);
}

inline void require_dtype(const Tensor& t, DType want, const char* op, const char* name) {
  if (t.dtype != want)
    throw Error(std::string("internal: ") + op + ": " + name + " is " + t.describe() +
                ", expected " + dtype_name(want));
}

}  // namespace pagoda::cpu
