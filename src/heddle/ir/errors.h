// Error types shared by every layer. The bindings map them to heddle.ScheduleError,
// heddle.InputError and heddle.CompileError; messages name the tensor, axis, option or rule and
// say what would be valid instead.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace heddle {

struct HeddleError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// An invalid definition or schedule.
struct ScheduleError : HeddleError {
  using HeddleError::HeddleError;
};
// A run-time input the compiled kernel cannot take (device, dtype, shape, stride, alignment).
struct InputError : HeddleError {
  using HeddleError::HeddleError;
};
// NVRTC / hiprtc / driver failures, with the compiler log.
struct CompileError : HeddleError {
  using HeddleError::HeddleError;
};
// The runtime library (NVRTC, libcuda, hiprtc) could not be found or used.
struct RuntimeUnavailable : HeddleError {
  using HeddleError::HeddleError;
};

// Build a message from stream pieces: fail<ScheduleError>("tensor ", name, ": ...").
template <typename E, typename... Args>
[[noreturn]] void fail(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  throw E(os.str());
}

}  // namespace heddle
