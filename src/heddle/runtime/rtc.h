// The CUDA compile (the CUDA RuntimeBackend's, backend.h; the whole front door is build.h): embedded
// device headers + kernel cache + NVRTC (in-process or isolated). One call: source in, cached CUBIN/PTX
// out. CompileRequest is every backend's request.
#pragma once

#include <map>
#include <string>

#include "heddle/runtime/cache/cache.h"
#include "heddle/runtime/cuda/nvrtc.h"

namespace heddle {
// The device runtime headers (src/heddle/codegen/device/*.cuh) as "heddle/<file>.cuh" -> text;
// generated at build time by cmake/embed_headers.cmake.
const std::map<std::string, std::string>& embeddedHeaders();
// Their digest, computed at build time by the same script: sha256 over one "<name> <sha256 of text>\n" line
// per header in name order.
const std::string& embeddedHeadersDigest();
}  // namespace heddle

namespace heddle::rt {

// heddle::embeddedHeadersDigest(): what stands for the embedded headers in the cache keys of NVRTC and
// interpreter builds. Computed at build time, so a warm process does not hash 170 KB of header text (it did,
// headerSetDigest(embeddedHeaders()), 0.2-0.3 ms of each new process's first lookup).
const std::string& embeddedHeadersDigest();

struct CompileRequest {
  std::string source;
  std::string name = "heddle_kernel.cu";
  std::map<std::string, std::string> headers;  // added to (and overriding) the embedded headers
  RtcOptions options;
  bool useCache = true;  // false: always compile, store nothing (the key is still computed)
};

// Compiles `req` for options.arch, or returns it from KernelCache::global(). Kernels can
// `#include "heddle/<file>.cuh"`. Isolation: options.isolate, else $HEDDLE_RTC_ISOLATE.
// Throws RuntimeUnavailable (no NVRTC) or CompileError (with log and source excerpt).
CachedKernel compile(const CompileRequest& req);

}  // namespace heddle::rt
