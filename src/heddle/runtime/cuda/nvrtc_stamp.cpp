// Records and reads the NVRTC version by library-file identity (nvrtc_stamp.h).
#include "heddle/runtime/cuda/nvrtc_stamp.h"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <map>
#include <mutex>

#include "heddle/runtime/cache/cache_disk.h"
#include "heddle/runtime/cuda/nvrtc.h"
#include "heddle/runtime/dynlib.h"
#include "heddle/runtime/sha256.h"

namespace heddle::rt {
namespace {

// The entry key of a library file's identity; "" when the file cannot be stat'ed.
std::string identityKey(const std::string& path) {
  char real[PATH_MAX];
  struct stat st{};
  if (!::realpath(path.c_str(), real) || ::stat(real, &st) != 0 || !S_ISREG(st.st_mode)) return "";
  std::string id = std::string("heddle-nvrtc-identity/1\n") + real + "\n" + std::to_string(st.st_dev) + ":" +
                   std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
                   std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
  return sha256Hex(id);
}

// The file the loader would open first: the first candidate with a path that exists ("" when the
// search reaches the bare sonames first).
std::string firstCandidateFile() {
  for (const std::string& c : nvrtcCandidates()) {
    if (c.find('/') == std::string::npos) return "";  // a soname: only the dynamic loader resolves it
    struct stat st{};
    if (::stat(c.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return c;
  }
  return "";
}

bool usable(const std::string& dir) { return !dir.empty() && unsafeCacheDirReason(dir).empty(); }

// Versions read from disk in this process, per (cache directory, search order): every compile looks the
// version up until NVRTC loads, and a warm process may never load it. forgetNvrtcVersion clears it.
struct Memo {
  std::mutex mu;
  std::map<std::string, std::string> versions;
};
Memo& memo() {
  static Memo m;
  return m;
}
std::string memoKey(const std::string& cacheDir) {
  std::string k = cacheDir;
  for (const std::string& c : nvrtcCandidates()) k += '\n' + c;
  return k;
}

}  // namespace

std::string rememberedNvrtcVersion(const std::string& cacheDir) {
  if (cacheDir.empty()) return "";
  const std::string mk = memoKey(cacheDir);
  {
    std::lock_guard<std::mutex> lock(memo().mu);
    auto it = memo().versions.find(mk);
    if (it != memo().versions.end()) return it->second;
  }
  if (!usable(cacheDir)) return "";
  std::string key = identityKey(firstCandidateFile());
  if (key.empty()) return "";
  DiskRead hit = DiskStore(cacheDir + "/compilers").read(key);
  if (hit.status != DiskReadStatus::Hit) return "";
  std::lock_guard<std::mutex> lock(memo().mu);
  memo().versions[mk] = hit.result.nvrtcVersion;
  return hit.result.nvrtcVersion;
}

void rememberNvrtcVersion(const std::string& cacheDir, const Nvrtc& nvrtc) {
  if (!usable(cacheDir)) return;
  std::string key = identityKey(nvrtc.libraryPath());
  if (key.empty()) return;
  RtcResult record;
  record.name = nvrtc.libraryPath();
  record.nvrtcVersion = nvrtc.version();
  std::string ignored;
  DiskStore(cacheDir + "/compilers").write(key, record, &ignored);
}

void forgetNvrtcVersion(const std::string& cacheDir) {
  {
    std::lock_guard<std::mutex> lock(memo().mu);
    memo().versions.clear();
  }
  std::string key = identityKey(firstCandidateFile());
  if (usable(cacheDir) && !key.empty()) ::unlink(DiskStore(cacheDir + "/compilers").entryPath(key).c_str());
}

}  // namespace heddle::rt
