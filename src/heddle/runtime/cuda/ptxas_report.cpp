// Line-by-line parser for the ptxas -v report. Formats handled (CUDA 12 and 13):
//   ptxas info    : Compiling entry function 'k' for 'sm_80'
//   ptxas info    : Function properties for k
//   ptxas         .     416 bytes stack frame, 532 bytes spill stores, 532 bytes spill loads
//   ptxas info    : Used 24 registers, used 0 barriers, 4096 bytes smem, 364 bytes cmem[0]
//   ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; ...
//   ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized due to ...
//   ptxas info    : (C7519) warpgroup.arrive is injected in between ... to allow use of registers in GMMA ...
//   ptxas warning : For profile sm_80 adjusting per thread register count of 16 to lower bound of 24
#include "heddle/runtime/cuda/ptxas_report.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <sstream>

namespace heddle::rt {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

int64_t captureInt(const std::string& line, const std::regex& re) {
  std::smatch m;
  return std::regex_search(line, m, re) ? std::stoll(m[1].str()) : -1;
}

}  // namespace

PtxasReport parsePtxasReport(const std::string& log) {
  static const std::regex entryRe(R"(Compiling entry function '([^']+)')");
  static const std::regex propsRe(R"(Function properties for (\S+))");
  static const std::regex stackRe(R"((\d+) bytes stack frame)");
  static const std::regex spillStoreRe(R"((\d+) bytes spill stores)");
  static const std::regex spillLoadRe(R"((\d+) bytes spill loads)");
  static const std::regex regsRe(R"(Used (\d+) registers)");
  static const std::regex smemRe(R"((\d+) bytes smem)");

  PtxasReport report;
  PtxasStats& st = report.stats;
  std::ostringstream text;
  std::string propsFor;  // function whose "Function properties" block we are in
  std::istringstream in(log);
  std::string line;
  std::smatch m;

  auto kernelNamed = [&](const std::string& name) -> PtxasKernelStats* {
    for (auto& k : st.kernels)
      if (k.name == name) return &k;
    return nullptr;
  };

  while (std::getline(in, line)) {
    if (line.rfind("ptxas", 0) != 0) continue;
    text << line << '\n';
    std::string low = lower(line);
    if (low.rfind("ptxas warning", 0) == 0 || low.find("potential performance loss") != std::string::npos)
      st.warnings.push_back(line);
    bool ignored = low.find("ignored") != std::string::npos;
    if (low.find("setmaxnreg") != std::string::npos && ignored) st.setmaxnregIgnored = true;
    // Advisories that mean slow or wrong code, by their text (ptxas numbers them C75xx; new numbers keep the
    // wording): a serialised wgmma pipeline, an injected warpgroup sync, an instruction ptxas ignored.
    bool serialized = (low.find("serialized") != std::string::npos || low.find("serialised") != std::string::npos) &&
                      low.find("gmma") != std::string::npos;
    bool injected = low.find("injected") != std::string::npos &&
                    (low.find("warpgroup") != std::string::npos || low.find("gmma") != std::string::npos);
    if (serialized || injected) st.wgmmaSerialized = true;
    if (serialized || injected ||
        (ignored &&
         (low.find("potential performance loss") != std::string::npos || low.find("(c7") != std::string::npos)))
      st.advisories.push_back(line);

    if (std::regex_search(line, m, entryRe)) {
      st.kernels.push_back(PtxasKernelStats{m[1].str()});
      continue;
    }
    if (std::regex_search(line, m, propsRe)) {
      propsFor = m[1].str();
      continue;
    }
    if (int64_t stack = captureInt(line, stackRe); stack >= 0) {
      int64_t stores = std::max<int64_t>(0, captureInt(line, spillStoreRe));
      int64_t loads = std::max<int64_t>(0, captureInt(line, spillLoadRe));
      st.spillStoreBytes += stores;
      st.spillLoadBytes += loads;
      st.stackFrame = std::max(st.stackFrame, stack);
      if (PtxasKernelStats* k = kernelNamed(propsFor)) {
        k->stackFrame = stack;
        k->spillStoreBytes = stores;
        k->spillLoadBytes = loads;
      }
      continue;
    }
    if (int64_t regs = captureInt(line, regsRe); regs >= 0) {
      int64_t smem = std::max<int64_t>(0, captureInt(line, smemRe));
      st.registers = std::max(st.registers, static_cast<int>(regs));
      st.smemBytes = std::max(st.smemBytes, smem);
      // "Used N registers" follows the properties block of the entry being compiled.
      PtxasKernelStats* k = kernelNamed(propsFor);
      if (!k && !st.kernels.empty()) k = &st.kernels.back();
      if (k) {
        k->registers = static_cast<int>(regs);
        k->smemBytes = smem;
      }
    }
  }
  report.text = text.str();
  return report;
}

}  // namespace heddle::rt
