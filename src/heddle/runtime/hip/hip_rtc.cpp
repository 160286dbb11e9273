// hiprtc through dlopen, and compileHip(): kernel cache + (isolated) hiprtc. See hip_rtc.h.
#include "heddle/runtime/hip/hip_rtc.h"
#include "heddle/runtime/rtc_isolate.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>

#include "heddle/ir/errors.h"

namespace heddle::rt {
namespace {

const char* const kNames[] = {"libhiprtc.so.6",   "libhiprtc.so.5",   "libhiprtc.so",
                              "libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"};

std::mutex gMutex;
std::unique_ptr<Hiprtc> gInstance;

bool isDir(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<Candidate> search() {
  std::vector<Candidate> c;
  auto dir = [&](const std::string& d, const std::string& origin) {
    if (d.empty()) return;
    for (const char* n : kNames) c.push_back({d + "/" + n, origin, false});
  };
  std::string env = envOr("HEDDLE_HIPRTC_PATH");
  if (!env.empty()) {
    if (isDir(env)) dir(env, "HEDDLE_HIPRTC_PATH");
    else c.push_back({env, "HEDDLE_HIPRTC_PATH", false});
  }
  std::string rocm = envOr("ROCM_PATH");
  if (!rocm.empty()) dir(rocm + "/lib", "$ROCM_PATH");
  dir("/opt/rocm/lib", "default ROCm");
  for (const char* n : kNames) c.push_back({n, "dynamic loader path", true});
  return c;
}

DynLib load() {
  return loadFirst(search(), "hiprtc (AMD run-time compiler)", "hiprtcCompileProgram",
                   "To fix: install ROCm (or Debian's libamdhip64-dev), set ROCM_PATH, or set "
                   "HEDDLE_HIPRTC_PATH to libhiprtc.so / libamdhip64.so or its directory.");
}

template <typename F>
void bind(const DynLib& lib, F*& fn, const char* name) {
  fn = reinterpret_cast<F*>(lib.requireSymbol(name));
}

std::string baseName(const std::string& p) {
  auto s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

}  // namespace

std::vector<std::string> hiprtcOptionList(const RtcOptions& opts) {
  std::vector<std::string> o = {"-std=c++17", "-O3", "--gpu-architecture=" + opts.arch};
  o.insert(o.end(), opts.extraOptions.begin(), opts.extraOptions.end());
  return o;
}

std::vector<std::string> hiprtcCandidates() {
  std::vector<std::string> out;
  for (auto& c : search()) out.push_back(c.path);
  return out;
}

Hiprtc& Hiprtc::instance() {
  std::lock_guard<std::mutex> lock(gMutex);
  if (!gInstance) gInstance.reset(new Hiprtc(load()));
  return *gInstance;
}

bool Hiprtc::available(std::string* reason) {
  try {
    instance();
    return true;
  } catch (const RuntimeUnavailable& e) {
    if (reason) *reason = e.what();
    return false;
  }
}

Hiprtc::Hiprtc(DynLib lib) : lib_(std::move(lib)) {
  bind(lib_, getErrorString_, "hiprtcGetErrorString");
  bind(lib_, createProgram_, "hiprtcCreateProgram");
  bind(lib_, destroyProgram_, "hiprtcDestroyProgram");
  bind(lib_, compileProgram_, "hiprtcCompileProgram");
  bind(lib_, getProgramLogSize_, "hiprtcGetProgramLogSize");
  bind(lib_, getProgramLog_, "hiprtcGetProgramLog");
  bind(lib_, getCodeSize_, "hiprtcGetCodeSize");
  bind(lib_, getCode_, "hiprtcGetCode");
  int (*versionFn)(int*, int*) = nullptr;
  bind(lib_, versionFn, "hiprtcVersion");
  int major = 0, minor = 0;
  if (versionFn(&major, &minor) != 0) fail<RuntimeUnavailable>("hiprtcVersion failed in ", lib_.path);
  std::ostringstream v;
  v << "hiprtc " << major << "." << minor;
  auto* rtVersion = reinterpret_cast<int (*)(int*)>(lib_.symbol("hipRuntimeGetVersion"));
  int rv = 0;
  if (rtVersion && rtVersion(&rv) == 0 && rv > 0)
    v << ", HIP runtime " << rv / 10000000 << "." << (rv / 100000) % 100 << "." << rv % 100000;
  v << " (" << baseName(lib_.path) << ")";
  version_ = v.str();
}

std::string Hiprtc::errorString(int code) const {
  const char* s = getErrorString_(code);
  return s ? s : "hiprtc error " + std::to_string(code);
}

RtcResult Hiprtc::compile(const std::string& source, const std::string& name,
                          const std::map<std::string, std::string>& headers, const RtcOptions& opts) const {
  if (opts.arch.rfind("gfx", 0) != 0)
    fail<CompileError>("invalid AMD GPU architecture '", opts.arch, "': expected gfx<N>, e.g. gfx90a, gfx942");
  auto start = std::chrono::steady_clock::now();
  std::vector<const char*> texts, names;
  for (const auto& [n, t] : headers) {
    names.push_back(n.c_str());
    texts.push_back(t.c_str());
  }
  Program prog = nullptr;
  int rc = createProgram_(&prog, source.c_str(), name.c_str(), (int)headers.size(), texts.data(), names.data());
  if (rc != 0) fail<CompileError>("hiprtcCreateProgram failed for ", name, ": ", errorString(rc));
  struct Destroy {
    const Hiprtc* self;
    Program* p;
    ~Destroy() { self->destroyProgram_(p); }
  } destroy{this, &prog};
  std::vector<std::string> options = hiprtcOptionList(opts);
  std::vector<const char*> ptrs;
  for (auto& o : options) ptrs.push_back(o.c_str());
  int compileRc = compileProgram_(prog, (int)ptrs.size(), ptrs.data());
  RtcResult r;
  r.name = name;
  r.arch = opts.arch;
  r.nvrtcVersion = version_;  // the compiler's version (field shared with NVRTC results)
  size_t logSize = 0;
  if (getProgramLogSize_(prog, &logSize) == 0 && logSize > 1) {
    r.log.resize(logSize);
    getProgramLog_(prog, r.log.data());
    while (!r.log.empty() && r.log.back() == '\0') r.log.pop_back();
  }
  if (compileRc != 0) {
    std::ostringstream opt;
    for (auto& o : options) opt << ' ' << o;
    fail<CompileError>(version_, " failed to compile ", name, " for ", opts.arch, " (", errorString(compileRc),
                       ")\noptions:", opt.str(), "\n--- hiprtc log ---\n", r.log.empty() ? "(empty log)\n" : r.log,
                       "\n", sourceExcerpt(r.log, name, source, headers));
  }
  size_t size = 0;
  if ((rc = getCodeSize_(prog, &size)) != 0 || size == 0)
    fail<CompileError>("hiprtc produced no code object for ", name, " (", opts.arch, "): ", errorString(rc));
  r.cubin.resize(size);
  if ((rc = getCode_(prog, r.cubin.data())) != 0) fail<CompileError>("hiprtcGetCode failed for ", name);
  r.compileMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return r;
}

CachedKernel compileHip(const CompileRequest& req) {
  const Hiprtc& h = Hiprtc::instance();  // the key needs the version; throws when absent
  KeyInputs in;
  in.source = req.source;
  in.name = req.name;
  in.headers = embeddedHeaders();
  for (const auto& [n, t] : req.headers) in.headers[n] = t;
  in.options = req.options;
  in.options.wantPtx = false;
  std::ostringstream cv;
  cv << h.version() << " |";
  for (auto& o : hiprtcOptionList(req.options)) cv << ' ' << o;
  in.compilerVersion = cv.str();
  // isolated unless asked otherwise: HEDDLE_RTC_ISOLATE=0 or options.isolate = false
  bool isolate = req.options.isolate.value_or(isolateByDefault());
  auto run = [&]() -> RtcResult {
    if (!isolate) return h.compile(req.source, in.name, in.headers, in.options);
    WorkerRequest work{IsolatedCompiler::Hiprtc, h.libraryPath(), req.source, in.name, in.headers, in.options};
    return compileIsolated(work,
                           " Known: Debian's hiprtc 5.2 compiles gfx90a only (use clang-19 offline for gfx942/gfx1200, "
                           "or a newer ROCm)");
  };
  if (req.useCache) return KernelCache::global().getOrCompile(in, run);
  CachedKernel out;
  out.key = KernelCache::computeKey(in);
  out.result = std::make_shared<const RtcResult>(run());
  out.source = CacheSource::Compiled;
  return out;
}

}  // namespace heddle::rt
