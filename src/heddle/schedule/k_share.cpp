// How the automatic schedules (cp.async; sm_90a TMA: wgmma_auto_schedule.cpp) share the k loop among CTAs when the
// output tiles leave SMs idle: not at all (data-parallel), split_k(S) (autoSplitK's S), or stream_k(SMs);
// checkStreamKRoles: what stream-K takes on the warp-specialized kernel. A deterministic cost model in
// units of one CTA's k-iteration (one bm x bn x bk step), printed by KShareChoice::str():
//   fix          = (write + read of one f32 bm x bn tile) / (one k-iteration's operand bytes)
//                = 2 * bm * bn * 4 / ((bm + bn) * bk * 2)
//   data-parallel  ceil(tiles / sms) * nk
//   split_k(S)     ceil(tiles * S / sms) * ceil(nk / S) + S * fix / 2   (S-1 partials stored in parallel,
//                                                                        read one after another)
//   stream_k(sms)  ceil(iters / G) + (p - 1) * fix, G = min(sms, iters), q = floor(iters / G),
//                  p = min(G, ceil((nk - 1) / q) + 1) CTAs at most per tile (1 when q >= nk): the running
//                  sum goes CTA to CTA (read + write each), after the CTAs' equal shares of the k-iterations
// Stream-K is a candidate only when the tiles do not fill the SMs (tiles < sms) and the target runs it
// (streamKOk: the cp.async kernels, and on sm_90a the warp-specialized TMA kernel, wgmma_auto_schedule.cpp).
// Ties go to the simpler kernel (data-parallel, then split-K). `mode` overrides the model: "split_k",
// "stream_k" (each only where it applies), "none"; "auto" takes the cheapest.
#include <algorithm>
#include <sstream>

#include "heddle/schedule/schedule.h"

namespace heddle {

std::string KShareChoice::str() const {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(1);
  os << "k sharing (k-iteration units): data-parallel " << dataParallel;
  if (splitCandidate > 1) os << ", split_k(" << splitCandidate << ") " << splitCost;
  if (streamCandidate > 0) os << ", stream_k(" << streamCandidate << ") " << streamCost;
  os << " -> "
     << (splits > 1       ? "split_k(" + std::to_string(splits) + ")"
         : streamCtas > 0 ? "stream_k(" + std::to_string(streamCtas) + ")"
                          : "data-parallel");
  return os.str();
}

bool kShareOk(const TargetInfo& target) { return target.gridFlags; }
bool streamKOk(const TargetInfo& target) { return !target.mma.has(MmaKind::Tcgen05) && target.gridFlags; }

void checkStreamKRoles(const MatmulTiling& t) {
  const auto& h = t.rolePipeline;
  if (!h.warpSpecialized) return;  // the cp.async pipeline: stream_k_fixup.cpp
  const std::string mm = t.mm->name;
  if (!h.coop)
    fail<ScheduleError>("stream_k(", mm,
                        "): stream-K on the warp-specialized kernel is built for cooperative MMA "
                        "warpgroups (one tile's accumulators in both); ping-pong warpgroups own whole tiles: give the "
                        "mma role the tile's warpgroups, or drop stream_k");
  if (h.role(PipelineRole::Epilogue))
    fail<ScheduleError>("stream_k(", mm,
                        "): stream-K reduces the accumulators in the MMA warpgroups, before the "
                        "epilogue; an epilogue role is not built with it: drop the epilogue role "
                        "(epilogue_store('tma') stages the output from the mma role), or drop stream_k");
  if (!h.epiTma.empty())
    fail<ScheduleError>("stream_k(", mm, "): the TMA-loaded epilogue operand '", h.epiTma,
                        "' is walked per tile, not "
                        "per stream-K segment: drop cache_after(",
                        h.epiTma, ", 'tma_load'), or drop stream_k");
}

KShareChoice chooseKShare(int64_t tiles, int64_t nk, int stages, int sms, int bm, int bn, int bk, bool streamOk,
                          const std::string& mode) {
  if (mode != "auto" && mode != "split_k" && mode != "stream_k" && mode != "none")
    fail<ScheduleError>("auto schedule: k_share = '", mode, "' is not one of 'auto', 'split_k', 'stream_k', 'none'");
  KShareChoice c;
  if (tiles <= 0 || nk <= 0 || sms <= 0) return c;
  auto cdiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  const double fix = 2.0 * bm * bn * 4 / (double(bm + bn) * bk * 2);
  c.dataParallel = double(cdiv(tiles, sms) * nk);
  const int S = autoSplitK(tiles, nk, stages, sms);
  if (S > 1) {
    c.splitCandidate = S;
    c.splitCost = double(cdiv(tiles * S, sms) * cdiv(nk, S)) + S * fix / 2;
  }
  if (streamOk && tiles < sms && sms <= kMaxStreamK) {
    const int64_t iters = tiles * nk, G = std::min<int64_t>(sms, iters), q = iters / G;
    const int64_t p = q >= nk ? 1 : std::min<int64_t>(G, cdiv(nk - 1, q) + 1);
    c.streamCandidate = sms;
    c.streamCost = double(cdiv(iters, G)) + double(p - 1) * fix;
  }
  const bool split = c.splitCandidate > 1, stream = c.streamCandidate > 0;
  if (mode == "none") return c;
  if (mode == "split_k") {
    c.splits = split ? S : 1;
    return c;
  }
  if (mode == "stream_k") {
    c.streamCtas = stream ? c.streamCandidate : 0;
    return c;
  }
  double best = c.dataParallel;
  if (split && c.splitCost < best) best = c.splitCost, c.splits = S;
  if (stream && c.streamCost < best) c.splits = 1, c.streamCtas = c.streamCandidate;
  return c;
}

}  // namespace heddle
