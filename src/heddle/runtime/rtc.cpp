// compile(): merge headers, pick in-process or isolated NVRTC, go through the kernel cache.
#include "heddle/runtime/rtc.h"

#include <functional>
#include <mutex>

#include "heddle/runtime/cuda/nvrtc_stamp.h"
#include "heddle/runtime/rtc_isolate.h"

namespace heddle::rt {

const std::string& embeddedHeadersDigest() { return ::heddle::embeddedHeadersDigest(); }

namespace {

struct StaleNvrtcRecord {};  // the version recorded for the library file was not the loaded library's

// The NVRTC version for the key: the loaded library's; before it is loaded, the one the cache directory
// recorded for the file the loader would open (nvrtc_stamp.h), so a warm process never loads NVRTC;
// else NVRTC is loaded (throws when absent) and its version recorded.
std::string keyNvrtcVersion(const std::function<std::string()>& cacheDirOf, bool trustRecord) {
  if (const Nvrtc* loaded = Nvrtc::loadedInstance()) return loaded->version();
  const std::string cacheDir = cacheDirOf();
  if (trustRecord) {
    std::string recorded = rememberedNvrtcVersion(cacheDir);
    if (!recorded.empty()) return recorded;
  }
  const Nvrtc& nvrtc = Nvrtc::instance();
  rememberNvrtcVersion(cacheDir, nvrtc);
  return nvrtc.version();
}

CachedKernel compileWith(const CompileRequest& req, const std::function<std::string()>& cacheDir, bool trustRecord) {
  KeyInputs in;
  in.source = req.source;
  in.name = req.name;
  // the embedded headers alone: their digest stands for them, and they are not copied (a hit never
  // reads them; a miss compiles with embeddedHeaders() itself)
  if (req.headers.empty()) {
    in.headersDigest = embeddedHeadersDigest();
  } else {
    in.headers = embeddedHeaders();
    for (const auto& [name, text] : req.headers) in.headers[name] = text;
  }
  const std::map<std::string, std::string>& headers = req.headers.empty() ? embeddedHeaders() : in.headers;
  in.options = req.options;
  in.compilerVersion = keyNvrtcVersion(cacheDir, trustRecord);

  bool isolate = req.options.isolate.value_or(isolateByDefault());
  auto run = [&]() -> RtcResult {
    const Nvrtc& nvrtc = Nvrtc::instance();  // a miss: now NVRTC is needed
    if (nvrtc.version() != in.compilerVersion) throw StaleNvrtcRecord{};
    if (!isolate) return nvrtc.compile(req.source, in.name, headers, in.options);
    WorkerRequest work{IsolatedCompiler::Nvrtc, nvrtc.libraryPath(), req.source, in.name, headers, in.options};
    return compileIsolated(work, req.source.find("wgmma") != std::string::npos
                                     ? " Known trigger: ptxas segfaults on a wgmma whose descriptor is a compile-time "
                                       "constant; compute the descriptor at run time."
                                     : " Rerun with HEDDLE_RTC_ISOLATE=0 under a debugger to see where it crashes, and "
                                       "report it with HEDDLE_DUMP=cuda output.");
  };
  if (req.useCache) return KernelCache::global().getOrCompile(in, run);

  CachedKernel out;
  out.key = KernelCache::computeKey(in);
  out.result = std::make_shared<const RtcResult>(run());
  out.source = CacheSource::Compiled;
  return out;
}

}  // namespace

CachedKernel compile(const CompileRequest& req) {
  // the directory whose record names the NVRTC version, read only while NVRTC is not loaded (a memory
  // hit in a process that compiled before does not look at the environment)
  auto cacheDir = [&req] {
    KernelCache& cache = KernelCache::global();
    return req.useCache && cache.diskEnabled() ? cache.diskDir() : std::string();
  };
  try {
    return compileWith(req, cacheDir, /*trustRecord=*/true);
  } catch (const StaleNvrtcRecord&) {  // the library file changed in place and kept its identity
    forgetNvrtcVersion(cacheDir());
    rememberNvrtcVersion(cacheDir(), Nvrtc::instance());
    return compileWith(req, cacheDir, /*trustRecord=*/false);
  }
}

}  // namespace heddle::rt
