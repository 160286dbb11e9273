// NVRTC, loaded with dlopen (no CUDA headers at build time): compiles one CUDA source to CUBIN and
// PTX for one architecture and returns the log, the parsed ptxas report and the timing.
//
// Nvrtc::instance() loads the library on first use (thread-safe) and throws RuntimeUnavailable when
// it cannot be found; a later call retries, so search directories registered afterwards still count.
// compile() runs in this process; compileIsolated() (rtc_isolate.h) runs it in the heddle-rtc-worker process.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "heddle/runtime/cuda/ptxas_report.h"
#include "heddle/runtime/dynlib.h"

namespace heddle::rt {

struct NvrtcProgramOpaque;  // nvrtcProgram's pointee, never defined

struct RtcOptions {
  std::string arch = "sm_80";             // sm_80, sm_90a, sm_100a, ... (compute_XX gives PTX only)
  std::vector<std::string> extraOptions;  // passed to NVRTC after heddle's own options
  bool lineinfo = false;                  // -lineinfo
  int maxRegisters = 0;                   // --maxrregcount=N; 0 = no limit
  bool wantPtx = true;                    // also return the PTX (same compile: NVRTC keeps it for sm_XX)
  std::optional<bool> isolate;            // compile in heddle-rtc-worker; unset = $HEDDLE_RTC_ISOLATE
};

struct RtcResult {
  std::string name;  // program name given to NVRTC (appears in diagnostics)
  std::string arch;
  std::string cubin;        // ELF bytes; empty for compute_XX
  std::string ptx;          // empty unless wantPtx
  std::string log;          // full NVRTC program log (front-end warnings + ptxas report)
  std::string ptxasReport;  // the ptxas lines of the log
  PtxasStats stats;         // parsed from ptxasReport
  double compileMs = 0;
  std::string nvrtcVersion;  // "13.0"
  // Set on a memory-cache entry only (never stored): its ptxas report's text, and a log that was nothing more,
  // were left in the disk entry (`stats` keeps the parsed facts); KernelCache::ptxasReportOf reads them back.
  bool reportOnDisk = false;
};

// The option list heddle passes to NVRTC for `opts` (exposed for the cache key and for docs/tests).
std::vector<std::string> nvrtcOptionList(const RtcOptions& opts);

class Nvrtc {
 public:
  static Nvrtc& instance();
  // The instance when NVRTC is already loaded in this process, else nullptr (loads nothing).
  static const Nvrtc* loadedInstance();
  // True when NVRTC loads; otherwise false and *reason (if given) says why.
  static bool available(std::string* reason = nullptr);

  const std::string& version() const { return version_; }  // "13.0"
  const std::string& libraryPath() const { return lib_.path; }
  std::vector<std::string> supportedArchs() const;  // "sm_75", "sm_80", ...

  // Compiles in this process. Throws CompileError with the log and a numbered source excerpt.
  RtcResult compile(const std::string& source, const std::string& name,
                    const std::map<std::string, std::string>& headers, const RtcOptions& opts) const;

 private:
  explicit Nvrtc(DynLib lib);
  void checkArch(const std::string& arch) const;
  std::string errorString(int code) const;

  using Program = NvrtcProgramOpaque*;
  DynLib lib_;
  std::string version_;
  const char* (*getErrorString_)(int) = nullptr;
  int (*getNumSupportedArchs_)(int*) = nullptr;
  int (*getSupportedArchs_)(int*) = nullptr;
  int (*createProgram_)(Program*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*destroyProgram_)(Program*) = nullptr;
  int (*compileProgram_)(Program, int, const char* const*) = nullptr;
  int (*getProgramLogSize_)(Program, size_t*) = nullptr;
  int (*getProgramLog_)(Program, char*) = nullptr;
  int (*getPTXSize_)(Program, size_t*) = nullptr;
  int (*getPTX_)(Program, char*) = nullptr;
  int (*getCUBINSize_)(Program, size_t*) = nullptr;
  int (*getCUBIN_)(Program, char*) = nullptr;
};

// Numbered lines of the file a diagnostic points at (the first "file(line): error" in `log`): up
// to 40 lines around the error, marked with ">>"; the first 40 lines of `source` when the log
// names no location. Used in CompileError messages.
std::string sourceExcerpt(const std::string& log, const std::string& name, const std::string& source,
                          const std::map<std::string, std::string>& headers);

}  // namespace heddle::rt
