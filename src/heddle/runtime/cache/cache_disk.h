// The on-disk half of the kernel cache: one self-verifying file per key, written atomically.
//
// Entry file <dir>/<key>.bin:
//   "HEDDLEK1"            8-byte magic
//   u32 format version    kCacheFormatVersion
//   u32 key length, key   the 64-hex-digit key, repeated so a renamed file is caught
//   u64 payload length
//   payload               encodeRtcResult(): name, arch, cubin, ptx, log, ptxas report, NVRTC version, ms
//   32 bytes              sha256(payload)
// All integers little-endian. Any mismatch on read (magic, version, key, lengths, checksum, payload
// structure) removes the file and reports Corrupt; the caller recompiles.
// An entry path is opened without following links or blocking (O_NOFOLLOW | O_NONBLOCK); anything but
// a regular file owned by this user and at most 256 MiB (a link, FIFO, device, directory, another
// user's file) is not read and reports Corrupt: the recompiled entry is renamed over it.
#pragma once

#include <string>

#include "heddle/runtime/cuda/nvrtc.h"

namespace heddle::rt {

// The cache directory from the environment: $HEDDLE_CACHE_DIR, else $XDG_CACHE_HOME/heddle, else
// $HOME/.cache/heddle. Empty when none of those can be determined.
std::string cacheDirFromEnv();
// $HEDDLE_DISABLE_DISK_CACHE is set to something other than "" or "0".
bool diskCacheDisabledByEnv();
// mkdir -p; directories it creates get mode 0700. Throws HeddleError naming the failing path.
void ensureDirectory(const std::string& dir);

// Why `dir` must not be used as a shared cache ("" when it may): it is owned by another user, or
// writable by group/others without the sticky bit (entries are checksummed, not authenticated:
// anyone who can write there could plant a kernel). A missing directory is fine (created 0700).
std::string unsafeCacheDirReason(const std::string& dir);

// One entry's bytes (the layout above), and back: decodeEntry verifies magic, version, key, lengths and
// checksum and throws DecodeError describing the first problem found. Also the remote cache's values.
std::string encodeEntry(const std::string& key, const RtcResult& r);
RtcResult decodeEntry(const std::string& key, const std::string& bytes);

enum class DiskReadStatus { Hit, Missing, Corrupt };

struct DiskRead {
  DiskReadStatus status = DiskReadStatus::Missing;
  RtcResult result;     // valid when Hit
  std::string problem;  // what was wrong when Corrupt
};

class DiskStore {
 public:
  explicit DiskStore(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }
  std::string entryPath(const std::string& key) const { return dir_ + "/" + key + ".bin"; }

  DiskRead read(const std::string& key) const;
  // Temp file in the same directory, fsync, rename over <key>.bin. Creates the directory.
  // Returns false with *error set on failure (the cache keeps working from memory).
  bool write(const std::string& key, const RtcResult& r, std::string* error) const;
  // Removes every entry and leftover temp file; returns how many files were removed.
  size_t clear() const;

 private:
  std::string dir_;
};

}  // namespace heddle::rt
