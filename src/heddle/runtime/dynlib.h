// dlopen loaders for the run-time libraries heddle never links against: NVRTC, libcuda (and hiprtc, through
// loadFirst).
//
// Each loader walks a documented search order (docs/runtime.md), returns the first library that
// loads, and otherwise throws RuntimeUnavailable listing every path it tried, why each failed, and
// how to fix it. Nothing here caches: the Nvrtc and CudaDriver singletons call these once.
#pragma once

#include <string>
#include <vector>

namespace heddle::rt {

// A library opened with dlopen. The handle is never closed: the singletons that own these live
// for the whole process, and unloading NVRTC or libcuda mid-process is not safe.
struct DynLib {
  void* handle = nullptr;
  std::string path;  // the file that was actually loaded (resolved with dladdr when loaded by soname)

  // Resolves a symbol; returns nullptr when absent.
  void* symbol(const char* name) const;
  // Resolves a symbol; throws RuntimeUnavailable naming the symbol and the library when absent.
  void* requireSymbol(const char* name) const;
};

// One entry of a search: a file path (absolute or relative) or a bare soname for ld.so.
struct Candidate {
  std::string path;
  std::string origin;  // where the candidate came from, for the error message
  bool soname = false;
};

// Tries each candidate in order and returns the first that loads and has `probeSymbol` (a soname's
// path resolved with dladdr); on total failure throws RuntimeUnavailable: "could not load <what>",
// every attempt and why it failed, then `howToFix`. NVRTC, libcuda and hiprtc load through it.
DynLib loadFirst(const std::vector<Candidate>& candidates, const char* what, const char* probeSymbol,
                 const std::string& howToFix);

// Extra directories to search for NVRTC after the CUDA toolkit locations and before the plain
// sonames. The Python package registers the nvidia-cuda-nvrtc wheel directories it finds
// (site-packages/nvidia/cu13/lib, nvidia/cuda_nvrtc/lib, nvidia/cu12/lib). Thread-safe.
void setExtraSearchDirs(const std::vector<std::string>& dirs);
std::vector<std::string> extraSearchDirs();

// The NVRTC candidates, in search order, as they would be tried now (reads the environment).
// Entries are absolute files, or bare sonames resolved by the dynamic loader.
std::vector<std::string> nvrtcCandidates();

// Loads NVRTC. Search order:
//   1. $HEDDLE_NVRTC_PATH (a library file, or a directory holding one)
//   2. $CUDA_HOME/lib64, $CUDA_HOME/lib, $CUDA_PATH/lib64, $CUDA_PATH/lib
//   3. /usr/local/cuda/lib64
//   4. directories registered with setExtraSearchDirs (pip wheel directories)
//   5. the sonames libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so (LD_LIBRARY_PATH, ld.so.cache)
// In each directory the names libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so are tried in turn.
// After loading, the matching libnvrtc-builtins.so.<major>.<minor> from the same directory is
// preloaded, so that NVRTC finds it even when that directory is not on the loader's path (the pip
// wheel case: NVRTC opens its builtins by soname at compile time and has no RUNPATH).
DynLib loadNvrtcLibrary();

// Loads the CUDA driver: $HEDDLE_LIBCUDA_PATH, then libcuda.so.1, then libcuda.so.
DynLib loadCudaLibrary();

// Reads an environment variable; empty string when unset.
std::string envOr(const char* name, const std::string& fallback = "");

}  // namespace heddle::rt
