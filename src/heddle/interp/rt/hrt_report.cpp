// heddle/interp/rt/hrt_report.cpp -- findings and the JSON report of hrt_run. Program points are
// written as "@pc(0xOFFSET)" (an offset into the interpreter library); the driver resolves them to
// lines of the printed source (addr2line over the library's debug info).
#include <dlfcn.h>

#include <cstdio>

#include "heddle/interp/rt/hrt_core.h"

namespace heddle_rt {

std::string pcs(const void* pc) {
  Dl_info info;
  char b[64];
  if (pc && dladdr(pc, &info) && info.dli_fbase) {
    std::snprintf(b, sizeof b, "@pc(0x%llx)",
                  (unsigned long long)(reinterpret_cast<const char*>(pc) - static_cast<const char*>(info.dli_fbase) - 1));
    return b;
  }
  return "an unknown point";
}

std::string who(int tid) {
  const Run* r = run_ptr();
  const bool amd = r && r->cta && r->cta->amd;
  const int w = amd ? r->cta->wave : 32;
  return "thread " + std::to_string(tid) + (amd ? " (wave " : " (warp ") + std::to_string(tid / w) + " lane " +
         std::to_string(tid % w) + ")";
}

std::string hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", (unsigned long long)v);
  return b;
}

void finding(const char* kind, const std::string& text) {
  Run& r = run();
  int& n = r.per_kind[kind];
  if (++n > r.max_findings) return;  // counted, not repeated
  r.findings.push_back({kind, text, r.cta ? r.cta->linear : 0u});
}

static std::string esc(const std::string& s) {
  std::string o;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\', o += ch;
    else if (ch == '\n') o += "\\n";
    else if ((unsigned char)ch < 0x20) o += ' ';
    else o += ch;
  }
  return o;
}

std::string report_json(const Run& r, uint64_t ctas_run) {
  std::string j = "{\"ctas\": " + std::to_string(ctas_run) + ", \"events\": " + std::to_string(r.events_total) +
                  ", \"counts\": {";
  bool first = true;
  for (auto& [k, n] : r.per_kind) {
    j += (first ? "" : ", ") + std::string("\"") + k + "\": " + std::to_string(n);
    first = false;
  }
  j += "}, \"findings\": [";
  for (size_t i = 0; i < r.findings.size(); ++i)
    j += (i ? ", " : "") + std::string("{\"kind\": \"") + r.findings[i].kind + "\", \"text\": \"" + esc(r.findings[i].text) + "\"}";
  j += "]}";
  return j;
}

}  // namespace heddle_rt
