// NVRTC through dlopen: loading, option list, one in-process compile, and error messages with a
// numbered source excerpt. NVRTC's C API is declared here by hand (nvrtcResult is an int enum,
// nvrtcProgram an opaque pointer); 0 is NVRTC_SUCCESS.
#include "heddle/runtime/cuda/nvrtc.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <regex>
#include <sstream>

#include "heddle/ir/errors.h"
#include "heddle/runtime/debug_options.h"

namespace heddle::rt {
namespace {

constexpr int kNvrtcSuccess = 0;
constexpr int kExcerptLines = 40;

template <typename Fn>
void bind(const DynLib& lib, Fn& fn, const char* name) {
  fn = reinterpret_cast<Fn>(lib.requireSymbol(name));
}

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

std::mutex gInstanceMutex;
std::unique_ptr<Nvrtc> gInstance;

}  // namespace

std::vector<std::string> nvrtcOptionList(const RtcOptions& opts) {
  std::vector<std::string> o = {"-std=c++17", "--gpu-architecture=" + opts.arch, "--ptxas-options=-v"};
  if (opts.lineinfo) o.push_back("-lineinfo");
  if (opts.maxRegisters > 0) o.push_back("--maxrregcount=" + std::to_string(opts.maxRegisters));
  o.insert(o.end(), opts.extraOptions.begin(), opts.extraOptions.end());
  for (auto& d : debugNvrtcOptions())  // HEDDLE_DEBUG (debug_options.h): in the cache key like every option
    if (std::find(o.begin(), o.end(), d) == o.end()) o.push_back(d);
  return o;
}

Nvrtc& Nvrtc::instance() {
  std::lock_guard<std::mutex> lock(gInstanceMutex);
  if (!gInstance) gInstance.reset(new Nvrtc(loadNvrtcLibrary()));  // throws: retried next call
  return *gInstance;
}

const Nvrtc* Nvrtc::loadedInstance() {
  std::lock_guard<std::mutex> lock(gInstanceMutex);
  return gInstance.get();
}

bool Nvrtc::available(std::string* reason) {
  try {
    instance();
    return true;
  } catch (const RuntimeUnavailable& e) {
    if (reason) *reason = e.what();
    return false;
  }
}

Nvrtc::Nvrtc(DynLib lib) : lib_(std::move(lib)) {
  bind(lib_, getErrorString_, "nvrtcGetErrorString");
  bind(lib_, getNumSupportedArchs_, "nvrtcGetNumSupportedArchs");
  bind(lib_, getSupportedArchs_, "nvrtcGetSupportedArchs");
  bind(lib_, createProgram_, "nvrtcCreateProgram");
  bind(lib_, destroyProgram_, "nvrtcDestroyProgram");
  bind(lib_, compileProgram_, "nvrtcCompileProgram");
  bind(lib_, getProgramLogSize_, "nvrtcGetProgramLogSize");
  bind(lib_, getProgramLog_, "nvrtcGetProgramLog");
  bind(lib_, getPTXSize_, "nvrtcGetPTXSize");
  bind(lib_, getPTX_, "nvrtcGetPTX");
  bind(lib_, getCUBINSize_, "nvrtcGetCUBINSize");
  bind(lib_, getCUBIN_, "nvrtcGetCUBIN");
  int (*versionFn)(int*, int*) = nullptr;
  bind(lib_, versionFn, "nvrtcVersion");
  int major = 0, minor = 0;
  if (versionFn(&major, &minor) != kNvrtcSuccess) fail<RuntimeUnavailable>("nvrtcVersion failed in ", lib_.path);
  version_ = std::to_string(major) + "." + std::to_string(minor);
}

std::string Nvrtc::errorString(int code) const {
  const char* s = getErrorString_(code);
  return s ? s : "NVRTC error " + std::to_string(code);
}

std::vector<std::string> Nvrtc::supportedArchs() const {
  int n = 0;
  if (getNumSupportedArchs_(&n) != kNvrtcSuccess || n <= 0) return {};
  std::vector<int> archs(n);
  if (getSupportedArchs_(archs.data()) != kNvrtcSuccess) return {};
  std::vector<std::string> out;
  for (int a : archs) out.push_back("sm_" + std::to_string(a));
  return out;
}

void Nvrtc::checkArch(const std::string& arch) const {
  static const std::regex archRe(R"((sm|compute)_(\d+)[af]?)");
  std::smatch m;
  if (!std::regex_match(arch, m, archRe))
    fail<CompileError>("invalid GPU architecture '", arch,
                       "': expected sm_<NN>[a|f] or compute_<NN>, e.g. sm_80, sm_90a, sm_100a");
  std::vector<std::string> supported = supportedArchs();
  if (supported.empty()) return;  // cannot tell: let NVRTC decide
  if (std::find(supported.begin(), supported.end(), "sm_" + m[2].str()) != supported.end()) return;
  std::ostringstream list;
  for (size_t i = 0; i < supported.size(); ++i) list << (i ? ", " : "") << supported[i];
  fail<CompileError>("NVRTC ", version_, " (", lib_.path, ") cannot compile for ", arch, "; it supports ", list.str());
}

RtcResult Nvrtc::compile(const std::string& source, const std::string& name,
                         const std::map<std::string, std::string>& headers, const RtcOptions& opts) const {
  checkArch(opts.arch);
  auto start = std::chrono::steady_clock::now();

  std::vector<const char*> headerTexts, headerNames;
  for (const auto& [hname, text] : headers) {
    headerNames.push_back(hname.c_str());
    headerTexts.push_back(text.c_str());
  }
  Program prog = nullptr;
  int rc = createProgram_(&prog, source.c_str(), name.c_str(), static_cast<int>(headers.size()), headerTexts.data(),
                          headerNames.data());
  if (rc != kNvrtcSuccess) fail<CompileError>("nvrtcCreateProgram failed for ", name, ": ", errorString(rc));
  struct Destroy {
    const Nvrtc* self;
    Program* p;
    ~Destroy() { self->destroyProgram_(p); }
  } destroy{this, &prog};

  std::vector<std::string> options = nvrtcOptionList(opts);
  std::vector<const char*> optionPtrs;
  for (const auto& o : options) optionPtrs.push_back(o.c_str());
  int compileRc = compileProgram_(prog, static_cast<int>(optionPtrs.size()), optionPtrs.data());

  RtcResult r;
  r.name = name;
  r.arch = opts.arch;
  r.nvrtcVersion = version_;
  size_t logSize = 0;
  if (getProgramLogSize_(prog, &logSize) == kNvrtcSuccess && logSize > 1) {
    r.log.resize(logSize);
    getProgramLog_(prog, r.log.data());
    r.log.resize(logSize - 1);  // drop NVRTC's terminating NUL
  }
  if (compileRc != kNvrtcSuccess) {
    std::ostringstream opt;
    for (const auto& o : options) opt << ' ' << o;
    fail<CompileError>("NVRTC ", version_, " failed to compile ", name, " for ", opts.arch, " (",
                       errorString(compileRc), ")\noptions:", opt.str(), "\n--- NVRTC log ---\n",
                       r.log.empty() ? "(empty log)\n" : r.log, "\n", sourceExcerpt(r.log, name, source, headers));
  }

  size_t size = 0;
  if (opts.arch.rfind("sm_", 0) == 0) {
    if ((rc = getCUBINSize_(prog, &size)) != kNvrtcSuccess || size == 0)
      fail<CompileError>("NVRTC produced no CUBIN for ", name, " (", opts.arch, "): ", errorString(rc));
    r.cubin.resize(size);
    if ((rc = getCUBIN_(prog, r.cubin.data())) != kNvrtcSuccess)
      fail<CompileError>("nvrtcGetCUBIN failed for ", name, ": ", errorString(rc));
  }
  if (opts.wantPtx) {
    if ((rc = getPTXSize_(prog, &size)) != kNvrtcSuccess)
      fail<CompileError>("nvrtcGetPTXSize failed for ", name, ": ", errorString(rc));
    r.ptx.resize(size);
    if ((rc = getPTX_(prog, r.ptx.data())) != kNvrtcSuccess)
      fail<CompileError>("nvrtcGetPTX failed for ", name, ": ", errorString(rc));
    while (!r.ptx.empty() && r.ptx.back() == '\0') r.ptx.pop_back();
  }

  PtxasReport report = parsePtxasReport(r.log);
  r.ptxasReport = std::move(report.text);
  r.stats = std::move(report.stats);
  r.compileMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return r;
}

std::string sourceExcerpt(const std::string& log, const std::string& name, const std::string& source,
                          const std::map<std::string, std::string>& headers) {
  static const std::regex locRe(R"(([^\s()]+)\((\d+)\): (catastrophic )?error)");
  std::smatch m;
  std::string file = name;
  const std::string* text = &source;
  int errorLine = 0;
  if (std::regex_search(log, m, locRe)) {
    std::string where = m[1].str();
    auto h = headers.find(where);
    if (h != headers.end()) {
      file = where;
      text = &h->second;
    }
    if (h != headers.end() || where == name) errorLine = std::stoi(m[2].str());
  }
  std::vector<std::string> lines = splitLines(*text);
  int total = static_cast<int>(lines.size());
  int first = errorLine > 0 ? std::max(1, errorLine - kExcerptLines / 2) : 1;
  int last = std::min(total, first + kExcerptLines - 1);
  std::ostringstream out;
  out << "--- " << file << " lines " << first << "-" << last << " of " << total << " ---\n";
  for (int i = first; i <= last; ++i) {
    out << (i == errorLine ? ">>" : "  ");
    std::string num = std::to_string(i);
    out << std::string(num.size() < 5 ? 5 - num.size() : 0, ' ') << num << " | " << lines[i - 1] << '\n';
  }
  return out.str();
}

}  // namespace heddle::rt
