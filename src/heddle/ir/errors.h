// Error types shared by every layer. The bindings map them to heddle.ScheduleError,
// heddle.InputError, heddle.CompileError, heddle.DriverError and heddle.RuntimeUnavailable; messages
// name the tensor, axis, option or rule and say what would be valid instead.
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
// NVRTC / hiprtc failures (and the interpreter's host compiler), with the compiler log.
struct CompileError : HeddleError {
  using HeddleError::HeddleError;
};
// A CUDA driver / HIP runtime call that failed (module load, function attribute, launch, tensor map
// encoding, an asynchronous fault caught by HEDDLE_SYNC_LAUNCH=1), naming the call, the kernel and the
// driver's error.
struct DriverError : HeddleError {
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
