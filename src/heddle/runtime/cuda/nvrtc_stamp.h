// The NVRTC version without loading NVRTC: a process whose kernels all come from the disk cache never
// loads the compiler (docs/runtime.md, "Warm starts").
//
// The cache key holds the NVRTC version. The version is read once from the loaded library and recorded
// in the cache directory (its compilers/ folder) under the identity of the library file (absolute path, device, inode, size,
// modification time in ns) as an ordinary checksummed entry (cache_disk.h); a later process that finds
// the same file first in the search order (dynlib.h) reads the version from there. Any change to the
// file (an upgrade, a different HEDDLE_NVRTC_PATH, a new wheel) changes the identity, and NVRTC is
// loaded and recorded afresh. A library found through the dynamic loader by soname has no identity
// here (only dlopen resolves it): NVRTC is loaded as before. A record read from disk is remembered for
// the rest of the process (per cache directory and search order) until forgetNvrtcVersion.
#pragma once

#include <string>

namespace heddle::rt {

class Nvrtc;

// "" when the disk cache is off or unusable, no candidate file exists before the sonames, or this
// directory has not seen the file.
std::string rememberedNvrtcVersion(const std::string& cacheDir);

// Records the loaded library's identity and version in `cacheDir` (best effort: failures are ignored,
// the next process loads NVRTC again).
void rememberNvrtcVersion(const std::string& cacheDir, const Nvrtc& nvrtc);

// Drops the record rememberedNvrtcVersion read (it was not the loaded library's version).
void forgetNvrtcVersion(const std::string& cacheDir);

}  // namespace heddle::rt
