// compile(): merge headers, pick in-process or isolated NVRTC, go through the kernel cache.
#include "heddle/runtime/rtc.h"

#include <mutex>

#include "heddle/runtime/rtc_isolate.h"

namespace heddle::rt {

const std::string& embeddedHeadersDigest() {
  static const std::string d = headerSetDigest(embeddedHeaders());
  return d;
}

CachedKernel compile(const CompileRequest& req) {
  const Nvrtc& nvrtc = Nvrtc::instance();  // the key needs the NVRTC version; throws when absent

  KeyInputs in;
  in.source = req.source;
  in.name = req.name;
  in.headers = embeddedHeaders();
  for (const auto& [name, text] : req.headers) in.headers[name] = text;
  if (req.headers.empty()) {
    in.headersDigest = embeddedHeadersDigest();
  }
  in.options = req.options;
  in.compilerVersion = nvrtc.version();

  bool isolate = req.options.isolate.value_or(isolateByDefault());
  auto run = [&]() -> RtcResult {
    if (isolate) return compileIsolated(in.source, in.name, in.headers, in.options);
    std::shared_lock<std::shared_mutex> noFork(compilerForkLock());
    return nvrtc.compile(in.source, in.name, in.headers, in.options);
  };
  if (req.useCache) return KernelCache::global().getOrCompile(in, run);

  CachedKernel out;
  out.key = KernelCache::computeKey(in);
  out.result = std::make_shared<const RtcResult>(run());
  out.source = CacheSource::Compiled;
  return out;
}

}  // namespace heddle::rt
