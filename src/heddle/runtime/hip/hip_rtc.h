// hiprtc, loaded with dlopen (no ROCm headers at build time): compiles one HIP source to an AMDGPU
// code object for one gfx architecture, through the same kernel cache as NVRTC (cache.h).
//
// Library search (first hit wins): $HEDDLE_HIPRTC_PATH (a file, or a directory holding one of the
// names below), $ROCM_PATH/lib, /opt/rocm/lib, then the sonames libhiprtc.so.6, libhiprtc.so.5,
// libhiprtc.so, libamdhip64.so.6, libamdhip64.so.5, libamdhip64.so (ROCm 5 ships hiprtc inside
// libamdhip64; Debian's libamdhip64-dev is ROCm 5.2). Hiprtc::instance() throws RuntimeUnavailable
// listing every attempt when none loads; a later call retries.
//
// compileHip() isolates by default (the heddle-rtc-worker process compiles, rtc_isolate.h; a crash becomes a CompileError):
// hiprtc 5.2 compiles gfx90a but crashes on other gfx targets. RtcOptions::isolate = false or
// HEDDLE_RTC_ISOLATE=0 compiles in this process.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "heddle/runtime/dynlib.h"
#include "heddle/runtime/rtc.h"

namespace heddle::rt {

struct HiprtcProgramOpaque;

// The options heddle passes to hiprtc (part of the cache key).
std::vector<std::string> hiprtcOptionList(const RtcOptions& opts);
// The hiprtc candidates in search order, as they would be tried now.
std::vector<std::string> hiprtcCandidates();

class Hiprtc {
 public:
  static Hiprtc& instance();
  static bool available(std::string* reason = nullptr);

  // "hiprtc 9.0, HIP runtime 5.2.21153 (libamdhip64.so.5)": everything that identifies the compiler.
  const std::string& version() const { return version_; }
  const std::string& libraryPath() const { return lib_.path; }

  // Compiles in this process. RtcResult::cubin holds the code object (ELF); ptx is empty.
  // Throws CompileError with the log and a numbered source excerpt.
  RtcResult compile(const std::string& source, const std::string& name,
                    const std::map<std::string, std::string>& headers, const RtcOptions& opts) const;

 private:
  explicit Hiprtc(DynLib lib);
  std::string errorString(int code) const;

  using Program = HiprtcProgramOpaque*;
  DynLib lib_;
  std::string version_;
  const char* (*getErrorString_)(int) = nullptr;
  int (*createProgram_)(Program*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*destroyProgram_)(Program*) = nullptr;
  int (*compileProgram_)(Program, int, const char* const*) = nullptr;
  int (*getProgramLogSize_)(Program, size_t*) = nullptr;
  int (*getProgramLog_)(Program, char*) = nullptr;
  int (*getCodeSize_)(Program, size_t*) = nullptr;
  int (*getCode_)(Program, char*) = nullptr;
};

// compile() for HIP: embedded headers + kernel cache (key: source, headers, options, arch, the
// hiprtc/HIP versions, heddle version, code-changing environment) + hiprtc, isolated by default.
CachedKernel compileHip(const CompileRequest& req);

}  // namespace heddle::rt
