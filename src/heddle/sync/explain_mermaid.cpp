// Mermaid picture of a kernel's role graph (kernel.explain(format="mermaid")): one node per role
// (warps, register budget), one node per ring (its buffers and stages), the producer's publish and
// the consumer's wait as solid arrows, the release through the empty barriers as a dotted arrow back,
// the ping-pong order token as a dotted self-arrow.
#include <sstream>

#include "heddle/sync/explain.h"

namespace heddle::sync {

namespace {

std::string quoted(const std::string& s) {  // Mermaid labels: no double quotes inside
  std::string o;
  for (char ch : s) o += ch == '"' ? '\'' : ch;
  return "\"" + o + "\"";
}

}  // namespace

std::string explainMermaid(const kir::Kernel& k) {
  std::ostringstream os;
  os << "flowchart LR\n";
  const auto& d = k.syncPlan.roles;
  if (d.roles.empty()) {  // no roles: every thread runs every op
    os << "  cta[" << quoted("all " + std::to_string(k.launch.threads) + " threads") << "]\n";
    std::string bars;
    for (auto& b : k.buffers)
      if (b->role == "mbar") bars += (bars.empty() ? "" : ", ") + b->name + "[" + std::to_string(b->stages) + "]";
    int i = 0;
    for (auto& b : k.buffers) {
      if (b->memory != MemoryType::Shared || b->role == "mbar" || b->stages < 2) continue;
      os << "  b" << i << "[(" << quoted(b->name + "<br/>" + std::to_string(b->stages) + " stages") << ")]\n";
      os << "  cta -->|" << quoted(bars.empty() ? "write" : "write (" + bars + ")") << "| b" << i << "\n";
      os << "  b" << i << " -->|" << quoted("read") << "| cta\n";
      ++i;
    }
    return os.str();
  }
  for (size_t r = 0; r < d.roles.size(); ++r) {
    auto& x = d.roles[r];
    std::string label =
        x.name +
        (x.warps == 1 ? "<br/>warp " + std::to_string(x.firstWarp)
                      : "<br/>warps " + std::to_string(x.firstWarp) + "-" + std::to_string(x.firstWarp + x.warps - 1)) +
        (x.registers ? ", setmaxnreg " + std::to_string(x.registers) : "");
    os << "  r" << r << "[" << quoted(label) << "]\n";
  }
  for (size_t i = 0; i < d.edges.size(); ++i) {
    auto& e = d.edges[i];
    if (e.kind == "order") {
      os << "  r" << e.from << " -.->|"
         << quoted(e.full + "[" + std::to_string(e.stages) + "]: " + e.consume + "; " + e.produce) << "| r" << e.to
         << "\n";
      continue;
    }
    os << "  e" << i << "[("
       << quoted(e.buffers + "<br/>" + std::to_string(e.stages) + " stages<br/>" + e.full + "[" +
                 std::to_string(e.stages) + "], " + e.empty + "[" + std::to_string(e.stages) + "]")
       << ")]\n";
    os << "  r" << e.from << " -->|" << quoted(e.produce) << "| e" << i << "\n";
    os << "  e" << i << " -->|" << quoted(e.consume) << "| r" << e.to << "\n";
    os << "  r" << e.to << " -.->|" << quoted(e.release) << "| r" << e.from << "\n";
  }
  return os.str();
}

}  // namespace heddle::sync
