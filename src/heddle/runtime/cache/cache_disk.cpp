// Entry encoding, verification and atomic replacement for the on-disk kernel cache (cache_disk.h).
#include "heddle/runtime/cache/cache_disk.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <regex>
#include <sstream>

#include "heddle/ir/errors.h"
#include "heddle/runtime/serialize.h"
#include "heddle/runtime/sha256.h"

namespace heddle::rt {
namespace {

const std::string kMagic = "HEDDLEK1";
constexpr uint32_t kCacheFormatVersion = 1;
constexpr size_t kDigestBytes = 32;
constexpr off_t kMaxEntryBytes = off_t(256) << 20;  // real entries are ~50 KB .. a few MB

bool envFlag(const char* name) {
  std::string v = envOr(name);
  return !v.empty() && v != "0";
}

enum class Open { Ok, Missing, Bad };

// Reads an entry without following a link, blocking on a FIFO or reading a device: only a regular
// file of at most kMaxEntryBytes, owned by this user, is read. *problem says why not (Bad).
Open readEntryFile(const std::string& path, std::string& out, std::string* problem) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return Open::Missing;
    *problem = errno == ELOOP ? "a symbolic link, not an entry" : std::string("cannot open: ") + std::strerror(errno);
    return Open::Bad;
  }
  struct stat st{};
  Open result = Open::Bad;
  if (::fstat(fd, &st) != 0) *problem = std::string("cannot stat: ") + std::strerror(errno);
  else if (!S_ISREG(st.st_mode)) *problem = "not a regular file";
  else if (st.st_uid != ::geteuid()) *problem = "owned by another user (uid " + std::to_string(st.st_uid) + ")";
  else if (st.st_size > kMaxEntryBytes)
    *problem = std::to_string(st.st_size) + " bytes, over the " + std::to_string(kMaxEntryBytes) + "-byte entry limit";
  else {
    out.resize(static_cast<size_t>(st.st_size));
    size_t off = 0;
    while (off < out.size()) {
      ssize_t n = ::read(fd, &out[off], out.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    out.resize(off);  // a shorter file fails the length check in decodeEntry
    result = Open::Ok;
  }
  ::close(fd);
  return result;
}

}  // namespace

std::string encodeEntry(const std::string& key, const RtcResult& r) {
  std::string payload = encodeRtcResult(r);
  ByteWriter w;
  w.raw(kMagic);
  w.u32(kCacheFormatVersion);
  w.u32(static_cast<uint32_t>(key.size()));
  w.raw(key);
  w.u64(payload.size());
  w.raw(payload);
  w.raw(sha256Raw(payload));
  return w.bytes();
}

RtcResult decodeEntry(const std::string& key, const std::string& bytes) {
  ByteReader rd(bytes);
  if (rd.raw(kMagic.size()) != kMagic) throw DecodeError("bad magic");
  uint32_t version = rd.u32();
  if (version != kCacheFormatVersion) fail<DecodeError>("format version ", version, ", expected ", kCacheFormatVersion);
  if (rd.raw(rd.u32()) != key) throw DecodeError("key mismatch");
  uint64_t payloadLen = rd.u64();
  if (payloadLen + kDigestBytes != rd.remaining())
    fail<DecodeError>("payload length ", payloadLen, " does not match the file size");
  std::string payload = rd.raw(payloadLen);
  if (sha256Raw(payload) != rd.raw(kDigestBytes)) throw DecodeError("payload checksum mismatch");
  return decodeRtcResult(payload);
}

namespace {

bool writeAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::string cacheDirFromEnv() {
  std::string dir = envOr("HEDDLE_CACHE_DIR");
  if (!dir.empty()) return dir;
  std::string xdg = envOr("XDG_CACHE_HOME");
  if (!xdg.empty()) return xdg + "/heddle";
  std::string home = envOr("HOME");
  return home.empty() ? std::string() : home + "/.cache/heddle";
}

bool diskCacheDisabledByEnv() { return envFlag("HEDDLE_DISABLE_DISK_CACHE"); }

void ensureDirectory(const std::string& dir) {
  if (dir.empty()) throw HeddleError("no cache directory: set HEDDLE_CACHE_DIR");
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0700) == 0 || errno == EEXIST) continue;
    fail<HeddleError>("cannot create cache directory ", prefix, ": ", std::strerror(errno));
  }
  struct stat st{};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    fail<HeddleError>("cache path ", dir, " exists but is not a directory");
}

std::string unsafeCacheDirReason(const std::string& dir) {
  struct stat st{};
  if (::lstat(dir.c_str(), &st) != 0) return "";  // missing: ensureDirectory creates it with mode 0700
  if (S_ISLNK(st.st_mode) && ::stat(dir.c_str(), &st) != 0) return "";
  if (!S_ISDIR(st.st_mode)) return "";  // not a directory: the write fails and says so
  if (st.st_uid != ::geteuid()) return "it is owned by another user (uid " + std::to_string(st.st_uid) + ")";
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
    return "it is writable by its group or by others (mode " + [&] {
      std::ostringstream os;
      os << std::oct << (st.st_mode & 07777);
      return os.str();
    }() + ") without the sticky bit";
  return "";
}

DiskRead DiskStore::read(const std::string& key) const {
  DiskRead out;
  std::string path = entryPath(key), bytes, problem;
  Open opened = readEntryFile(path, bytes, &problem);
  if (opened == Open::Missing) return out;
  if (opened == Open::Bad) {  // a miss: the recompiled entry is renamed over it
    out.status = DiskReadStatus::Corrupt;
    out.problem = path + ": " + problem;
    return out;
  }
  try {
    out.result = decodeEntry(key, bytes);
    out.status = DiskReadStatus::Hit;
  } catch (const DecodeError& e) {
    out.status = DiskReadStatus::Corrupt;
    out.problem = path + ": " + e.what();
    ::unlink(path.c_str());
  }
  return out;
}

bool DiskStore::write(const std::string& key, const RtcResult& r, std::string* error) const {
  static std::atomic<unsigned> counter{0};
  auto failWith = [&](const std::string& what) {
    if (error) *error = what + ": " + std::strerror(errno);
    return false;
  };
  try {
    ensureDirectory(dir_);
  } catch (const HeddleError& e) {
    if (error) *error = e.what();
    return false;
  }
  std::string tmp = dir_ + "/." + key + "." + std::to_string(::getpid()) + "." + std::to_string(counter++) + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return failWith("cannot create " + tmp);
  bool ok = writeAll(fd, encodeEntry(key, r)) && ::fsync(fd) == 0;
  ok = (::close(fd) == 0) && ok;
  if (!ok || ::rename(tmp.c_str(), entryPath(key).c_str()) != 0) {
    bool result = failWith("cannot write " + entryPath(key));
    ::unlink(tmp.c_str());
    return result;
  }
  int dirFd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);  // make the rename durable
  if (dirFd >= 0) {
    ::fsync(dirFd);
    ::close(dirFd);
  }
  return true;
}

size_t DiskStore::clear() const {
  static const std::regex entryRe(R"([0-9a-f]{64}\.bin|\.[0-9a-f]{64}\..*\.tmp)");
  DIR* d = ::opendir(dir_.c_str());
  if (!d) return 0;
  size_t removed = 0;
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (std::regex_match(name, entryRe) && ::unlink((dir_ + "/" + name).c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

}  // namespace heddle::rt
