// dlopen loaders for NVRTC and libcuda; see dynlib.h for the search order.
#include "heddle/runtime/dynlib.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <mutex>
#include <sstream>

#include "heddle/ir/errors.h"

namespace heddle::rt {
namespace {

std::mutex gDirsMutex;
std::vector<std::string> gExtraDirs;

const char* const kNvrtcNames[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};

bool isDirectory(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool isFile(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0 && !S_ISDIR(st.st_mode);
}

std::string dirName(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

void addDir(std::vector<Candidate>& out, const std::string& dir, const std::string& origin) {
  if (dir.empty()) return;
  for (const char* name : kNvrtcNames) out.push_back({dir + "/" + name, origin, false});
}

std::vector<Candidate> nvrtcSearch() {
  std::vector<Candidate> c;
  std::string env = envOr("HEDDLE_NVRTC_PATH");
  if (!env.empty()) {
    if (isDirectory(env)) addDir(c, env, "HEDDLE_NVRTC_PATH");
    else c.push_back({env, "HEDDLE_NVRTC_PATH", false});
  }
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    std::string root = envOr(var);
    if (root.empty()) continue;
    addDir(c, root + "/lib64", std::string("$") + var);
    addDir(c, root + "/lib", std::string("$") + var);
  }
  addDir(c, "/usr/local/cuda/lib64", "default toolkit");
  for (const std::string& d : extraSearchDirs()) addDir(c, d, "registered by Python");
  for (const char* name : kNvrtcNames) c.push_back({name, "dynamic loader path", true});
  return c;
}

// Path of the file that defines `sym` in the library behind `handle` (for libraries opened by soname).
std::string resolvedPath(void* handle, const char* sym, const std::string& fallback) {
  void* addr = ::dlsym(handle, sym);
  Dl_info info{};
  if (addr && ::dladdr(addr, &info) && info.dli_fname && info.dli_fname[0]) return info.dli_fname;
  return fallback;
}

// NVRTC opens libnvrtc-builtins.so.<major>.<minor> by soname at compile time. Preloading it from the
// directory NVRTC came from makes that lookup succeed without LD_LIBRARY_PATH (glibc matches an
// already-loaded soname). Failure is not an error here: NVRTC reports it clearly at compile time.
void preloadNvrtcBuiltins(const DynLib& lib) {
  using VersionFn = int (*)(int*, int*);
  auto version = reinterpret_cast<VersionFn>(lib.symbol("nvrtcVersion"));
  int major = 0, minor = 0;
  if (!version || version(&major, &minor) != 0) return;
  std::string builtins =
      dirName(lib.path) + "/libnvrtc-builtins.so." + std::to_string(major) + "." + std::to_string(minor);
  if (isFile(builtins)) ::dlopen(builtins.c_str(), RTLD_NOW | RTLD_GLOBAL);
}

}  // namespace

DynLib loadFirst(const std::vector<Candidate>& candidates, const char* what, const char* probeSymbol,
                 const std::string& howToFix) {
  std::ostringstream tried;
  for (const Candidate& cand : candidates) {
    if (!cand.soname && !isFile(cand.path)) {
      tried << "\n  " << cand.path << " (" << cand.origin << "): no such file";
      continue;
    }
    ::dlerror();
    void* h = ::dlopen(cand.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* err = ::dlerror();
      tried << "\n  " << cand.path << " (" << cand.origin << "): " << (err ? err : "dlopen failed");
      continue;
    }
    if (!::dlsym(h, probeSymbol)) {
      tried << "\n  " << cand.path << " (" << cand.origin << "): loaded but has no symbol " << probeSymbol;
      continue;  // handle intentionally leaked: dlclose of a half-matching library gains nothing
    }
    return DynLib{h, cand.soname ? resolvedPath(h, probeSymbol, cand.path) : cand.path};
  }
  fail<RuntimeUnavailable>("could not load ", what, ". Tried, in order:", tried.str(), "\n", howToFix);
}

std::string envOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v && v[0]) ? std::string(v) : fallback;
}

void* DynLib::symbol(const char* name) const { return handle ? ::dlsym(handle, name) : nullptr; }

void* DynLib::requireSymbol(const char* name) const {
  void* s = symbol(name);
  if (!s) fail<RuntimeUnavailable>("symbol ", name, " not found in ", path, " (library too old?)");
  return s;
}

void setExtraSearchDirs(const std::vector<std::string>& dirs) {
  std::lock_guard<std::mutex> lock(gDirsMutex);
  gExtraDirs = dirs;
}

std::vector<std::string> extraSearchDirs() {
  std::lock_guard<std::mutex> lock(gDirsMutex);
  return gExtraDirs;
}

std::vector<std::string> nvrtcCandidates() {
  std::vector<std::string> out;
  for (const Candidate& c : nvrtcSearch()) out.push_back(c.path);
  return out;
}

DynLib loadNvrtcLibrary() {
  DynLib lib = loadFirst(nvrtcSearch(), "NVRTC (libnvrtc)", "nvrtcCompileProgram",
                         "To fix: set HEDDLE_NVRTC_PATH to libnvrtc.so.* or its directory, or set CUDA_HOME "
                         "to a CUDA toolkit, or `pip install nvidia-cuda-nvrtc` (heddle searches its wheel "
                         "directories when imported from Python).");
  preloadNvrtcBuiltins(lib);
  return lib;
}

DynLib loadCudaLibrary() {
  std::vector<Candidate> c;
  std::string env = envOr("HEDDLE_LIBCUDA_PATH");
  if (!env.empty()) c.push_back({env, "HEDDLE_LIBCUDA_PATH", false});
  c.push_back({"libcuda.so.1", "dynamic loader path", true});
  c.push_back({"libcuda.so", "dynamic loader path", true});
  return loadFirst(c, "the CUDA driver (libcuda)", "cuInit",
                   "libcuda ships with the NVIDIA GPU driver, not with the CUDA toolkit or pip wheels: install "
                   "the driver, or set HEDDLE_LIBCUDA_PATH to libcuda.so.1.");
}

}  // namespace heddle::rt
