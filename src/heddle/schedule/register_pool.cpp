// The setmaxnreg register pool: see register_pool.h.
#include "heddle/schedule/register_pool.h"

#include <algorithm>
#include <sstream>

#include "heddle/ir/errors.h"

namespace heddle {

namespace {

std::string num(int64_t v) {  // 64512 -> "64,512"
  std::string s = std::to_string(v), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

}  // namespace

int launchBoundsRegisters(int threads) { return std::min(256, (65536 / std::max(1, threads)) / 8 * 8); }

int entryRegisterCap(int threads) { return std::min(255, launchBoundsRegisters(threads)); }

RegisterPool registerPool(int threads, int ptxasRegisters) {
  RegisterPool p;
  p.threads = threads;
  p.fromPtxas = ptxasRegisters > 0;
  p.perThread = p.fromPtxas ? (ptxasRegisters + 7) / 8 * 8 : launchBoundsRegisters(threads);
  return p;
}

std::vector<WarpgroupBudget> roleBudgets(const RolePipelineSchedule& h) {
  std::vector<WarpgroupBudget> v;
  for (auto& r : h.roles)
    if (r.warpgroups > 0) v.push_back({r.name, r.warpgroups, r.registers});
  return v;
}

std::string registerPoolProblem(const std::vector<WarpgroupBudget>& budgets, const RegisterPool& pool) {
  bool any = false;
  int64_t total = 0;
  std::ostringstream parts;
  for (auto& b : budgets) {
    any |= b.registers > 0;
    const int regs = b.registers ? b.registers : pool.perThread;
    total += (int64_t)regs * 128 * b.warpgroups;
    parts << (parts.tellp() ? " + " : "") << b.role << " " << regs << " x " << 128 * b.warpgroups;
  }
  if (!any || total <= pool.size()) return "";
  std::ostringstream fix;
  for (auto& b : budgets) {
    if (!b.registers) continue;
    const int64_t others = total - (int64_t)b.registers * 128 * b.warpgroups;
    const int64_t most = (pool.size() - others) / (128 * b.warpgroups) / 8 * 8;
    if (most >= 24) fix << (fix.tellp() ? " or " : "") << "'" << b.role << "' " << b.registers << " -> " << most;
  }
  std::ostringstream os;
  os << "the role budgets need " << num(total) << " registers (" << parts.str() << ") but the CTA's register pool, "
     << "which setmaxnreg.inc draws from, is " << num(pool.size()) << " (" << pool.perThread
     << " registers per thread at entry, "
     << (pool.fromPtxas ? "ptxas's count" : "the __launch_bounds__(" + std::to_string(pool.threads) + ", 1) cap")
     << ", x " << pool.threads << " threads): an increase waits until registers are free, so the kernel would hang; "
     << (fix.tellp() ? "lower " + fix.str() : std::string("give the roles smaller budgets"));
  return os.str();
}

void checkRegisterPool(const std::string& mm, const std::vector<WarpgroupBudget>& budgets, const RegisterPool& pool) {
  const std::string why = registerPoolProblem(budgets, pool);
  if (!why.empty()) fail<ScheduleError>("warp_specialize(", mm, "): ", why);
}

}  // namespace heddle
