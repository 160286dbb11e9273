// HEDDLE_DEBUG parsing and the NVRTC options it adds (debug_options.h).
#include "heddle/runtime/debug_options.h"

#include <cstdlib>
#include <sstream>

#include "heddle/ir/errors.h"

namespace heddle::rt {

DebugOptions parseDebugOptions(const std::string& value) {
  DebugOptions d;
  std::istringstream in(value);
  for (std::string word; std::getline(in, word, ',');) {
    while (!word.empty() && word.front() == ' ') word.erase(word.begin());
    while (!word.empty() && word.back() == ' ') word.pop_back();
    if (word.empty()) continue;
    std::string key = word, arg;
    if (auto eq = word.find('='); eq != std::string::npos) key = word.substr(0, eq), arg = word.substr(eq + 1);
    if (key == "bounded_waits") {
      long long ms = 1000;
      if (!arg.empty()) {
        char* end = nullptr;
        ms = std::strtoll(arg.c_str(), &end, 10);
        if (*end || ms <= 0 || ms > 600000)
          fail<InputError>("HEDDLE_DEBUG: bounded_waits=", arg, " is not a whole number of milliseconds in 1..600000");
      }
      d.boundedWaitNs = ms * 1000000LL;
    } else if (key == "lineinfo" && arg.empty()) {
      d.lineinfo = true;
    } else {
      fail<InputError>("HEDDLE_DEBUG: unknown option '", word, "'; known: bounded_waits[=MS], lineinfo");
    }
  }
  return d;
}

std::vector<std::string> debugNvrtcOptions() {
  const char* raw = std::getenv("HEDDLE_DEBUG");
  if (!raw || !*raw) return {};
  DebugOptions d = parseDebugOptions(raw);
  std::vector<std::string> o;
  if (d.lineinfo) o.push_back("-lineinfo");
  if (d.boundedWaitNs) o.push_back("-DHEDDLE_BOUNDED_WAIT_NS=" + std::to_string(d.boundedWaitNs) + "ULL");
  return o;
}

}  // namespace heddle::rt
