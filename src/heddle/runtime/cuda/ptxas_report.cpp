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
#include <sstream>
#include <string_view>

namespace heddle::rt {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The fields are found by plain scans, not std::regex: a disk-cache hit parses its entry's report in every new
// process, and compiling the patterns cost 0.25-0.4 ms of a 1-4 ms warm start (docs/perf.md). Each scan finds
// what the pattern in its comment found (the leftmost match).
bool isDigit(char c) { return c >= '0' && c <= '9'; }

// `(\d+)<suffix>`: the number before the first `suffix` preceded by a digit, or -1.
int64_t numberBefore(const std::string& line, std::string_view suffix) {
  for (size_t at = line.find(suffix); at != std::string::npos; at = line.find(suffix, at + 1)) {
    size_t b = at;
    while (b > 0 && isDigit(line[b - 1])) --b;
    if (b < at) return std::stoll(line.substr(b, at - b));
  }
  return -1;
}

// `<prefix>(\d+)<suffix>`: the number between the first `prefix` followed by digits and `suffix`, or -1.
int64_t numberBetween(const std::string& line, std::string_view prefix, std::string_view suffix) {
  for (size_t at = line.find(prefix); at != std::string::npos; at = line.find(prefix, at + 1)) {
    size_t b = at + prefix.size(), e = b;
    while (e < line.size() && isDigit(line[e])) ++e;
    if (e > b && line.compare(e, suffix.size(), suffix) == 0) return std::stoll(line.substr(b, e - b));
  }
  return -1;
}

// `<prefix>([^<close>]+)<close>` or, close == 0, `<prefix>(\S+)`: the captured text, or false.
bool textAfter(const std::string& line, std::string_view prefix, char close, std::string* out) {
  auto inName = [close](char c) { return close ? c != close : !std::isspace(static_cast<unsigned char>(c)); };
  for (size_t at = line.find(prefix); at != std::string::npos; at = line.find(prefix, at + 1)) {
    size_t b = at + prefix.size(), e = b;
    while (e < line.size() && inName(line[e])) ++e;
    if (e > b && (!close || e < line.size())) {
      *out = line.substr(b, e - b);
      return true;
    }
  }
  return false;
}

}  // namespace

PtxasReport parsePtxasReport(const std::string& log) {
  PtxasReport report;
  PtxasStats& st = report.stats;
  std::ostringstream text;
  std::string propsFor;  // function whose "Function properties" block we are in
  std::istringstream in(log);
  std::string line, name;

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

    if (textAfter(line, "Compiling entry function '", '\'', &name)) {  // Compiling entry function '([^']+)'
      st.kernels.push_back(PtxasKernelStats{name});
      continue;
    }
    if (textAfter(line, "Function properties for ", 0, &name)) {  // Function properties for (\S+)
      propsFor = name;
      continue;
    }
    if (int64_t stack = numberBefore(line, " bytes stack frame"); stack >= 0) {
      int64_t stores = std::max<int64_t>(0, numberBefore(line, " bytes spill stores"));
      int64_t loads = std::max<int64_t>(0, numberBefore(line, " bytes spill loads"));
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
    if (int64_t regs = numberBetween(line, "Used ", " registers"); regs >= 0) {
      int64_t smem = std::max<int64_t>(0, numberBefore(line, " bytes smem"));
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
