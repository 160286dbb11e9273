// heddle/interp/host_build.h -- builds and loads an interpreter library for a printed kernel.
//
//   printed source (CUDA as handed to NVRTC, or HIP as handed to hiprtc)
//     + hrt_cuda.h or hrt_hip.h force-included (the language surface, HEDDLE_INTERPRET; for HIP also the
//       target's predefined macros: __gfx942__, __GFX9__ / __GFX12__, __AMDGCN_WAVEFRONT_SIZE)
//     + HRT_DEFINE_ENTRY(<kernel>) appended (the C entry points of rt/hrt_abi.h)
//   -> host C++ compiler (-fsanitize=thread instrumentation: every load/store reports to the runtime)
//   -> linked with the execution runtime (rt/hrt_*.cpp, compiled once per runtime version)
//   -> <cache dir>/interp/k-<key>.so, written atomically; key = source, device headers, runtime,
//      compiler identity and flags. A second build of the same kernel is a file lookup.
//
// The compiler: $HEDDLE_HOST_CXX, else g++, c++, clang++, clang++-19 on PATH. None: RuntimeUnavailable.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "heddle/interp/rt/hrt_abi.h"

namespace heddle {
const std::map<std::string, std::string>& embeddedInterpRuntime();  // cmake: src/heddle/interp/rt/*
}

namespace heddle::interp {

struct HostCompiler {
  std::string path;
  std::string version;  // first line of --version
  bool clang = false;
};

// Finds the host compiler (cached per process); throws RuntimeUnavailable naming what was tried.
const HostCompiler& hostCompiler();

struct Library {
  std::string path;  // the .so
  std::string kernelName;
  std::string source;   // the printed source (for report lines)
  bool cached = false;  // true when the build was a cache hit
  double buildMs = 0;
  void* handle = nullptr;
  int (*abiVersion)() = nullptr;
  int (*describe)(hrt_param*, int) = nullptr;
  int (*run)(const hrt_launch*, char**) = nullptr;
  void (*freeFn)(char*) = nullptr;
  std::vector<hrt_param> params() const;
};

// Builds (or finds in the cache) and loads the interpreter library of `source`. arch: the kernel's
// rtc architecture; a "gfx*" one compiles the HIP source against hrt_hip.h with the target's
// predefined macros, anything else the CUDA source against hrt_cuda.h. A source the host
// compiler rejects raises CompileError; an inline-asm statement no runtime primitive implements
// raises CompileError naming the statement and its line.
std::shared_ptr<Library> build(const std::string& source, const std::string& kernelName, const std::string& arch = "");

// Runs the launch; returns the report JSON with every "@pc(0x..)" resolved to a line of the printed
// source ("line 41 `heddle::block_sync();`").
std::string run(const Library& lib, const hrt_launch& launch);

// The runtime's tensor-map encoding (same arguments as cuTensorMapEncodeTiled): 128 bytes, or an
// InputError naming the violated rule.
std::string encodeTensorMap(int dataType, uint64_t address, const std::vector<uint64_t>& dims,
                            const std::vector<uint64_t>& strides, const std::vector<uint32_t>& box,
                            const std::vector<uint32_t>& elementStrides, int interleave, int swizzle, int l2Promotion,
                            int oobFill);

}  // namespace heddle::interp
