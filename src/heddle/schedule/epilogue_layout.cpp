// The epilogue layout of the automatic sm_90a schedule (see epilogue_layout.h).
#include "heddle/schedule/epilogue_layout.h"

#include <algorithm>

#include "heddle/schedule/schedule.h"

namespace heddle {

bool fusedEpilogue(const Fusion& f) {
  bool seenMatmul = false;
  for (auto* e : f.exprs()) {
    if (e->kind == OpKind::Matmul) {
      seenMatmul = true;
      continue;
    }
    if (seenMatmul && e->kind != OpKind::Cast && e->kind != OpKind::Input) return true;
  }
  return false;
}

bool matrixEpilogueOperand(const Fusion& f) {
  auto* e = f.findMatmul()->definition;
  auto one = [](const Size& x) { return !x.isSymbolic() && x.value == 1; };
  for (auto* in : f.inputs()) {
    if (in == e->inputs[0] || in == e->inputs[1] || in->rank() < 2) continue;
    const auto& s = in->shape;
    if (!one(s[s.size() - 1]) && !one(s[s.size() - 2])) return true;
  }
  return false;
}

std::string chooseEpilogueLayout(const Fusion& f, const std::string& asked, bool epiPairs) {
  if (asked == "cooperative" || asked == "pingpong" || asked == "epilogue_role") return asked;
  if (asked != "auto")
    fail<ScheduleError>("auto schedule: epilogue_layout = '", asked,
                        "' is not one of 'auto', 'cooperative', "
                        "'pingpong', 'epilogue_role'");
  // a TMA-loaded bias / residual ring is built for cooperative MMA warpgroups (ping-pong would consume it
  // out of order); the epilogue role would take it, at twice the compile time: cooperative
  // a residual read by scalar loads (operands unfit for pair reads) spills the ping-pong kernel: cooperative
  if (!epiPairs && matrixEpilogueOperand(f)) return "cooperative";
  return fusedEpilogue(f) && cachedEpilogueOperands(f).empty() ? "pingpong" : "cooperative";
}

int epilogueOperandRegisters(const Fusion& f, int wgRows, int outBytes, bool pairs) {
  auto* e = f.findMatmul()->definition;
  auto one = [](const Size& x) { return !x.isSymbolic() && x.value == 1; };
  const int C = 128 / std::max(1, outBytes);
  int regs = 0;
  for (auto* in : f.inputs()) {
    if (in == e->inputs[0] || in == e->inputs[1]) continue;
    const auto& s = in->shape;
    const bool rows = s.size() >= 2 && !one(s[s.size() - 2]), cols = !s.empty() && !one(s.back());
    const int pair = !pairs ? 4 : dtypeBytes(in->dtype) == 2 ? 1 : 2;
    if (rows && cols) regs += wgRows * C / 256 * pair;  // a residual
    else if (cols) regs += C / 8 * pair;                // a bias row
    else if (rows) regs += wgRows / 32 * 2;             // a per-row bias
  }
  return regs;
}

bool epilogueFits(const Fusion& f, int wgRows, int accumulators, int budget, int outBytes, bool pairs) {
  return accumulators + kEpilogueStateRegisters + epilogueOperandRegisters(f, wgRows, outBytes, pairs) <= budget;
}

std::string epilogueLayoutPhrase(const std::string& layout) {
  if (layout == "pingpong") return "ping-pong MMA warpgroups: one's epilogue overlaps the other's mainloop";
  if (layout == "epilogue_role") return "an epilogue warpgroup: tile t's epilogue overlaps tile t+1's mainloop";
  return "cooperative MMA warpgroups: the epilogue follows the tile's mainloop";
}

}  // namespace heddle
