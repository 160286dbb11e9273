// heddle/interp/host_build.cpp -- see host_build.h.
#include "heddle/interp/host_build.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>

#include "heddle/interp/rt/hrt_ptx.h"
#include "heddle/ir/errors.h"
#include "heddle/runtime/cache/cache.h"
#include "heddle/runtime/cache/cache_disk.h"
#include "heddle/runtime/rtc.h"
#include "heddle/runtime/sha256.h"

extern char** environ;

namespace heddle::interp {

namespace {

struct Proc {
  int rc = -1;
  std::string out;  // stdout + stderr
};

// Runs argv (no shell), capturing both output streams through a temporary file.
Proc runProcess(const std::vector<std::string>& argv, const std::string& scratch) {
  Proc p;
  std::string log = scratch + ".log";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int e = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (e != 0) {
    p.out = std::string("cannot start ") + argv[0] + ": " + std::strerror(e);
    return p;
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  p.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  p.out = ss.str();
  std::remove(log.c_str());
  return p;
}

bool onPath(const std::string& exe, std::string* full) {
  if (exe.find('/') != std::string::npos) {
    if (access(exe.c_str(), X_OK) == 0) return *full = exe, true;
    return false;
  }
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(ss, dir, ':');) {
    std::string f = (dir.empty() ? "." : dir) + "/" + exe;
    if (access(f.c_str(), X_OK) == 0) return *full = f, true;
  }
  return false;
}

void mkdirs(const std::string& dir) {
  std::string cur;
  std::stringstream ss(dir);
  for (std::string part; std::getline(ss, part, '/');) {
    cur += part + "/";
    if (!part.empty()) mkdir(cur.c_str(), 0755);
  }
}

bool exists(const std::string& f) {
  struct stat st;
  return stat(f.c_str(), &st) == 0;
}

void writeFile(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream o(tmp, std::ios::binary);
    o << text;
    if (!o) fail<HeddleError>("interpret: cannot write ", tmp);
  }
  std::rename(tmp.c_str(), path.c_str());
}

std::vector<std::string> commonFlags() {
  return {"-std=c++17", "-g", "-fPIC", "-fno-strict-aliasing", "-w", "-Wno-psabi"};
}

// The macros hiprtc predefines for an AMD target, so the printed HIP source and the device headers take
// the target's branches (wave size, GFX12 split barriers, MFMA vs WMMA); empty for CUDA.
std::vector<std::string> targetFlags(const std::string& arch) {
  if (arch.rfind("gfx", 0) != 0) return {"-include", "heddle/interp/rt/hrt_cuda.h"};
  std::vector<std::string> f = {"-D__" + arch + "__", "-D__HIP__", "-D__HIP_DEVICE_COMPILE__"};
  if (arch.rfind("gfx12", 0) == 0) f.insert(f.end(), {"-D__GFX12__", "-D__AMDGCN_WAVEFRONT_SIZE=32"});
  else if (arch.rfind("gfx9", 0) == 0) f.insert(f.end(), {"-D__GFX9__", "-D__AMDGCN_WAVEFRONT_SIZE=64"});
  else fail<CompileError>("interpret: no interpreter target for AMD architecture ", arch, " (gfx9* or gfx12*)");
  f.insert(f.end(), {"-include", "heddle/interp/rt/hrt_hip.h"});
  return f;
}

// -fsanitize=thread instrumentation with our own hooks instead of the sanitizer's runtime
std::vector<std::string> kernelFlags(const HostCompiler& cc, const std::string& arch) {
  std::vector<std::string> f = commonFlags();
  f.push_back("-O1");
  f.push_back("-fsanitize=thread");
  if (cc.clang) {
    f.insert(f.end(), {"-mllvm", "-tsan-instrument-func-entry-exit=0", "-mllvm", "-tsan-instrument-atomics=0"});
  } else {
    f.insert(f.end(), {"--param", "tsan-instrument-func-entry-exit=0"});
  }
  f.push_back("-DHEDDLE_INTERPRET=1");
  for (auto& t : targetFlags(arch)) f.push_back(t);
  return f;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (auto& x : v) s += x + " ";
  return s;
}

// The runtime sources: embedded at build time, or read from $HEDDLE_INTERP_RT_DIR (for developing the
// runtime without rebuilding heddle; the cache key follows the text either way).
const std::map<std::string, std::string>& runtimeSources() {
  static const std::map<std::string, std::string> m = [] {
    const char* dir = std::getenv("HEDDLE_INTERP_RT_DIR");
    if (!dir || !*dir) return embeddedInterpRuntime();
    std::map<std::string, std::string> out;
    for (auto& [name, text] : embeddedInterpRuntime()) {
      std::ifstream in(std::string(dir) + "/" + name.substr(name.rfind('/') + 1));
      std::stringstream ss;
      ss << in.rdbuf();
      out[name] = in ? ss.str() : text;
    }
    return out;
  }();
  return m;
}

std::string runtimeDigest() {
  static const std::string d = [] {
    rt::Sha256 h;
    for (auto& [name, text] : runtimeSources()) h.update(name).update("\0", 1).update(text);
    return h.hexDigest();
  }();
  return d;
}

std::string cacheRoot() { return rt::cacheDirFromEnv() + "/interp"; }

// The source tree the compiler sees: device headers and runtime sources as embedded at build time.
std::string sourceTree(const std::string& key) {
  std::string dir = cacheRoot() + "/src-" + key;
  if (exists(dir + "/.complete")) return dir;
  for (auto* m : {&embeddedHeaders(), &runtimeSources()})
    for (auto& [name, text] : *m) {
      std::string f = dir + "/" + name;
      mkdirs(f.substr(0, f.rfind('/')));
      writeFile(f, text);
    }
  writeFile(dir + "/.complete", "");
  return dir;
}

// The runtime objects, compiled once per (runtime, compiler, flags).
std::vector<std::string> runtimeObjects(const HostCompiler& cc, const std::string& tree, const std::string& key) {
  std::vector<std::string> objs;
  for (auto& [name, text] : runtimeSources()) {
    if (name.size() < 4 || name.substr(name.size() - 4) != ".cpp") continue;
    std::string base = name.substr(name.rfind('/') + 1);
    std::string obj = cacheRoot() + "/rt-" + key + "-" + base.substr(0, base.size() - 4) + ".o";
    if (!exists(obj)) {
      std::string tmp = obj + ".tmp" + std::to_string(getpid());
      std::vector<std::string> argv = {cc.path};
      for (auto& f : commonFlags()) argv.push_back(f);
      argv.insert(argv.end(), {"-O2", "-I", tree, "-c", tree + "/" + name, "-o", tmp});
      Proc p = runProcess(argv, tmp);
      if (p.rc != 0)
        fail<CompileError>("interpret: the host compiler failed on the execution runtime (", name, "):\n", p.out);
      std::rename(tmp.c_str(), obj.c_str());
    }
    objs.push_back(obj);
  }
  return objs;
}

std::string lineText(const std::string& src, int line) {
  std::stringstream ss(src);
  std::string l;
  for (int i = 1; std::getline(ss, l); ++i)
    if (i == line) {
      size_t a = l.find_first_not_of(" \t");
      l = a == std::string::npos ? "" : l.substr(a);
      if (l.size() > 140) l = l.substr(0, 137) + "...";
      return l;
    }
  return "";
}

std::string sourceName(const std::string& kernel) { return kernel + ".cu"; }

// CompileError for an AMD builtin (__builtin_amdgcn_*) that no runtime primitive implements: the host
// compiler does not know it (g++: "not declared", clang: "undeclared identifier" / "unknown builtin")
void checkUnknownBuiltin(const std::string& log, const std::string& src, const std::string& kernel) {
  std::regex re("(?:([^\\s:]+):([0-9]+):[0-9]+: )?[^\\n]*error[^\\n]*?(__builtin_amdgcn_\\w+)");
  std::smatch m;
  if (!std::regex_search(log, m, re)) return;
  const bool inKernel = m[1].str() == sourceName(kernel);
  std::string where = m[1].matched ? (inKernel ? "line " : m[1].str() + " line ") + m[2].str() : "an unknown line";
  std::string what = inKernel ? lineText(src, std::stoi(m[2].str())) : "";
  fail<CompileError>("interpret: the source calls the AMD builtin ", m[3].str(), " (", where,
                     what.empty() ? "" : ": `" + what + "`",
                     ") that no primitive of the execution runtime implements; every builtin and asm must go through "
                     "a named primitive (src/heddle/interp/rt/hrt_api.h) -- add one there and a HEDDLE_INTERPRET "
                     "branch in the device header");
}

// CompileError for an inline-asm statement that no runtime primitive implements
void checkUnknownAsm(const std::string& log, const std::string& src, const std::string& kernel) {
  if (log.find("HEDDLE_INTERPRET_NO_PRIMITIVE_FOR_INLINE_ASM") == std::string::npos) return;
  // the poisoned identifier carries the statement's line; the "In function" context before it, its file
  std::regex at("HEDDLE_INTERPRET_NO_PRIMITIVE_FOR_INLINE_ASM_AT_LINE_([0-9]+)");
  std::regex ctx("([^\\s:]+): In (?:member )?function [^\\n]*");
  std::smatch m, c;
  std::string where = "an unknown line";
  std::string what;
  if (std::regex_search(log, m, at)) {
    std::string before = log.substr(0, m.position(0)), file;
    for (std::sregex_iterator it(before.begin(), before.end(), ctx), end; it != end; ++it) file = (*it)[1].str();
    const bool inKernel = file.empty() || file == sourceName(kernel);
    where = (inKernel ? "line " : file + " line ") + m[1].str();
    if (inKernel) what = lineText(src, std::stoi(m[1].str()));
  }
  fail<CompileError>("interpret: the printed source has an inline asm statement (", where,
                     what.empty() ? "" : ": `" + what + "`",
                     ") that no primitive of the execution runtime implements; every asm must go through a named "
                     "primitive (src/heddle/interp/rt/hrt_api.h) -- add one there and in the device header");
}

}  // namespace

const HostCompiler& hostCompiler() {
  static std::mutex mu;
  static std::unique_ptr<HostCompiler> found;
  std::lock_guard<std::mutex> g(mu);
  if (found) return *found;
  std::vector<std::string> tried;
  std::vector<std::string> cands;
  if (const char* e = std::getenv("HEDDLE_HOST_CXX"); e && *e) cands = {e};
  else cands = {"g++", "c++", "clang++", "clang++-19"};
  for (auto& c : cands) {
    std::string full;
    if (!onPath(c, &full)) {
      tried.push_back(c + " (not found)");
      continue;
    }
    Proc p = runProcess({full, "--version"}, "/tmp/heddle-cxx-probe-" + std::to_string(getpid()));
    if (p.rc != 0) {
      tried.push_back(full + " (--version failed)");
      continue;
    }
    auto hc = std::make_unique<HostCompiler>();
    hc->path = full;
    hc->version = p.out.substr(0, p.out.find('\n'));
    hc->clang = p.out.find("clang") != std::string::npos;
    found = std::move(hc);
    return *found;
  }
  std::string t;
  for (auto& x : tried) t += "\n  " + x;
  fail<RuntimeUnavailable>("interpret: no host C++ compiler to build the interpreter with; tried:", t,
                           "\ninstall g++ (apt-get install g++) or clang++, or set HEDDLE_HOST_CXX to one");
}

std::vector<hrt_param> Library::params() const {
  std::vector<hrt_param> p(64);
  int n = describe(p.data(), (int)p.size());
  p.resize(std::min<int>(n, 64));
  return p;
}

std::shared_ptr<Library> build(const std::string& source, const std::string& kernelName, const std::string& arch) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<Library>> loaded;
  const HostCompiler& cc = hostCompiler();
  auto t0 = std::chrono::steady_clock::now();
  std::string rtKey =
      rt::sha256Hex(runtimeDigest() + "|" + cc.path + "|" + cc.version + "|" + joined(commonFlags())).substr(0, 24);
  std::string key = rt::sha256Hex(source + "|" + kernelName + "|" + rt::embeddedHeadersDigest() + "|" + rtKey + "|" +
                                  joined(kernelFlags(cc, arch)))
                        .substr(0, 32);
  std::lock_guard<std::mutex> g(mu);
  if (auto it = loaded.find(key); it != loaded.end()) return it->second;
  mkdirs(cacheRoot());
  std::string so = cacheRoot() + "/k-" + key + ".so";
  auto lib = std::make_shared<Library>();
  lib->cached = exists(so);
  if (!lib->cached) {
    // the tree holds the device headers too: key it on both (the objects depend on the runtime only)
    std::string tree = sourceTree(rt::sha256Hex(rtKey + "|" + rt::embeddedHeadersDigest()).substr(0, 24));
    std::vector<std::string> objs = runtimeObjects(cc, tree, rtKey);
    std::string stem = cacheRoot() + "/k-" + key + ".tmp" + std::to_string(getpid());
    std::string cu = cacheRoot() + "/k-" + key + ".cu";
    writeFile(cu, "#line 1 \"" + sourceName(kernelName) + "\"\n" + source +
                      "\n#line 1 \"hrt_entry_stub\"\nHRT_DEFINE_ENTRY(" + kernelName + ")\n");
    std::vector<std::string> argv = {cc.path};
    for (auto& f : kernelFlags(cc, arch)) argv.push_back(f);
    argv.insert(argv.end(), {"-I", tree, "-x", "c++", "-c", cu, "-o", stem + ".o"});
    Proc p = runProcess(argv, stem);
    if (p.rc != 0) {
      checkUnknownAsm(p.out, source, kernelName);
      checkUnknownBuiltin(p.out, source, kernelName);
      fail<CompileError>("interpret: the host compiler rejected the printed source of ", kernelName, " (", cc.path,
                         "):\n", p.out.substr(0, 6000));
    }
    std::vector<std::string> link = {cc.path, "-shared", "-o", stem + ".so", stem + ".o"};
    link.insert(link.end(), objs.begin(), objs.end());
    link.push_back("-ldl");
    p = runProcess(link, stem);
    std::remove((stem + ".o").c_str());
    if (p.rc != 0) fail<CompileError>("interpret: linking the interpreter of ", kernelName, " failed:\n", p.out);
    std::rename((stem + ".so").c_str(), so.c_str());
  }
  lib->path = so;
  lib->kernelName = kernelName;
  lib->source = source;
  lib->handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib->handle) fail<RuntimeUnavailable>("interpret: cannot load ", so, ": ", dlerror());
  lib->abiVersion = reinterpret_cast<int (*)()>(dlsym(lib->handle, "hrt_abi_version"));
  lib->describe = reinterpret_cast<int (*)(hrt_param*, int)>(dlsym(lib->handle, "hrt_describe"));
  lib->run = reinterpret_cast<int (*)(const hrt_launch*, char**)>(dlsym(lib->handle, "hrt_run"));
  lib->freeFn = reinterpret_cast<void (*)(char*)>(dlsym(lib->handle, "hrt_free"));
  if (!lib->abiVersion || !lib->describe || !lib->run || !lib->freeFn || lib->abiVersion() != HRT_ABI_VERSION)
    fail<RuntimeUnavailable>("interpret: ", so, " is not an interpreter library of this heddle (ABI mismatch)");
  lib->buildMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  loaded[key] = lib;
  return lib;
}

std::string run(const Library& lib, const hrt_launch& launch) {
  char* out = nullptr;
  int rc = lib.run(&launch, &out);
  std::string json = out ? out : "";
  if (out) lib.freeFn(out);
  if (rc != 0) fail<InputError>("interpret: ", lib.kernelName, ": ", json);
  // resolve @pc(0x..) markers
  std::regex marker("@pc\\((0x[0-9a-f]+)\\)");
  std::vector<std::string> pcs;
  for (std::sregex_iterator it(json.begin(), json.end(), marker), end; it != end; ++it)
    if (std::find(pcs.begin(), pcs.end(), (*it)[1].str()) == pcs.end()) pcs.push_back((*it)[1].str());
  if (pcs.empty()) return json;
  std::map<std::string, std::string> where;
  std::string a2l;
  if (onPath("addr2line", &a2l)) {
    std::vector<std::string> argv = {a2l, "-a", "-i", "-e", lib.path};
    argv.insert(argv.end(), pcs.begin(), pcs.end());
    Proc p = runProcess(argv, lib.path + ".a2l" + std::to_string(getpid()));
    std::stringstream ss(p.out);
    std::string cur, l;
    std::map<std::string, std::vector<std::string>> frames;
    while (std::getline(ss, l)) {
      if (l.rfind("0x", 0) == 0) {
        std::stringstream hx(l);
        unsigned long long v = 0;
        hx >> std::hex >> v;
        char b[32];
        std::snprintf(b, sizeof b, "0x%llx", v);
        cur = b;
      } else if (!cur.empty()) {
        frames[cur].push_back(l.substr(0, l.find(" (discriminator")));
      }
    }
    const std::string src = sourceName(lib.kernelName);
    for (auto& [pc, fr] : frames) {
      std::string kernelLine, inner;
      for (auto& f : fr) {
        size_t c = f.rfind(':');
        if (c == std::string::npos) continue;
        std::string file = f.substr(0, c), ln = f.substr(c + 1);
        std::string base = file.substr(file.rfind('/') + 1);
        if (base == src && kernelLine.empty() && !ln.empty() && ln != "?") {
          int n = std::atoi(ln.c_str());
          kernelLine = "line " + ln + " `" + lineText(lib.source, n) + "`";
        } else if (inner.empty() && base != src && base != "??") {
          inner = base + ":" + ln;
        }
      }
      if (!kernelLine.empty()) where[pc] = kernelLine + (inner.empty() ? "" : " (in " + inner + ")");
      else if (!inner.empty()) where[pc] = inner;
    }
  }
  std::string outJson;
  size_t last = 0;
  for (std::sregex_iterator it(json.begin(), json.end(), marker), end; it != end; ++it) {
    outJson += json.substr(last, it->position() - last);
    auto w = where.find((*it)[1].str());
    std::string text = w != where.end() ? w->second : "library offset " + (*it)[1].str();
    std::string esc;
    for (char ch : text) {
      if (ch == '"' || ch == '\\') esc += '\\';
      esc += ch;
    }
    outJson += esc;
    last = it->position() + it->length();
  }
  outJson += json.substr(last);
  return outJson;
}

std::string encodeTensorMap(int dataType, uint64_t address, const std::vector<uint64_t>& dims,
                            const std::vector<uint64_t>& strides, const std::vector<uint32_t>& box,
                            const std::vector<uint32_t>& elementStrides, int interleave, int swizzle, int l2Promotion,
                            int oobFill) {
  const int rank = (int)dims.size();
  if (rank < 1 || rank > 5 || (int)box.size() != rank || (int)elementStrides.size() != rank ||
      (int)strides.size() != rank - 1)
    fail<InputError>("tensor map: rank ", rank, " with ", box.size(), " box dims, ", elementStrides.size(),
                     " element strides and ", strides.size(), " strides (want rank 1..5, rank, rank, rank-1)");
  heddle_rt::ptx::TensorMap m;
  std::string err =
      heddle_rt::ptx::encode_tensor_map(&m, dataType, address, rank, dims.data(), strides.data(), box.data(),
                                        elementStrides.data(), interleave, swizzle, l2Promotion, oobFill);
  if (!err.empty()) fail<InputError>("tensor map: ", err);
  return std::string(reinterpret_cast<const char*>(&m), sizeof m);
}

}  // namespace heddle::interp
