// simulate(): the grid walk, the schedules, and the numeric comparison.
//
// Schedules (both deterministic for a given seed):
//   adversarial  each thread runs until it blocks (a barrier) or ends, one thread after another;
//                the thread order flips direction after every barrier release, so every pair of
//                threads runs in both orders across phases. cp.async copies land as late as
//                legal: only when a wait_group retires their group (or never, when none does).
//   random       a seeded choice of thread for each burst of 1..16 steps; at every step an
//                in-flight cp.async chunk lands with probability 1/8.
// Happens-before tracking (cta.h) makes the verdict independent of the interleaving for races and
// early async reads; the schedule decides which stale values the numbers see and which
// interleaving a deadlock shows up in.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "heddle/verify/cta.h"
#include "heddle/verify/numeric.h"

namespace heddle::verify {

const char* scheduleName(Schedule s) { return s == Schedule::Adversarial ? "adversarial" : "random"; }

Schedule scheduleFromName(const std::string& s) {
  if (s == "adversarial") return Schedule::Adversarial;
  if (s == "random") return Schedule::Random;
  fail<HeddleError>("simulate: unknown schedule '", s, "'; use 'adversarial' or 'random'");
}

namespace {

bool swapBlocks(const kir::Kernel& k) {
  return k.tile.bn > 0 && k.launch.gridX.str() != ceilDiv(kir::IExpr::var("N"), kir::IExpr(k.tile.bn)).str();
}

int64_t gridDim(const kir::IExpr& e, const std::map<std::string, int64_t>& env) {
  int64_t v = e.eval(env);
  return v < 1 ? 1 : v;
}

}  // namespace

Cta::Cta(const kir::Kernel& kk, const SimInputs& inp, const SimOptions& o, Reports& r, std::vector<float>& d,
         std::vector<WriteRec>& dw, int64_t x, int64_t y, int64_t z, uint64_t seed)
    : k(kk), in(inp), opt(o), rep(r), out(d), outW(dw), bx(x), by(y), bz(z), rng(seed) {
  T = Tc = k.launch.threads;
  W = opt.warpSize;
  if (T <= 0 || T > 1024) fail<HeddleError>("simulate: kernel ", k.name, " launches ", T, " threads per block");
  ranks = std::max(1, k.cluster);
  T = Tc * ranks;
  if (k.tile.bm > 0) {
    bool sw = swapBlocks(k);
    m0 = (sw ? bx : by) * k.tile.bm;
    n0 = (sw ? by : bx) * (k.tile.bn / std::max(1, k.tile.parts));  // a matmul group: bn / parts columns
  }
  setupMemory();
  setupMbarrierState();  // mbarrier agents widen the vector clocks (mbarrier_sync.cpp)
  kir::walk(k.body, [&](const kir::Node& n) { byId[n.id] = &n; });
  th.resize(T);
  for (int i = 0; i < T; ++i) {
    Thread& t = th[i];
    t.tid = i;
    t.rank = i / Tc;
    t.warp = (i % Tc) / W;
    t.lane = i % W;
    t.env = in.scalars;
    t.env["tid"] = i % Tc;
    t.env["warp"] = t.warp;
    t.env["lane"] = t.lane;
    t.env["m0"] = m0;
    t.env["n0"] = n0;
    t.env["batch_idx"] = batch();
    t.env["blockIdx.x"] = bx + t.rank;
    t.env["blockIdx.y"] = by;
    t.env["blockIdx.z"] = bz;
    t.vc.assign(clockSize(), 0);
    t.vc[i] = 1;
    t.stack.push_back(Frame{&k.body, 0, nullptr, 0, false, 0});
    t.groupChunks.emplace_back();
    t.retire.push_back(kNever);
    t.retirePos.push_back(-1);
  }
}

int64_t Cta::run(int64_t budget) {
  int64_t steps = 0;
  int cur = -1, dir = 1, burst = 0;
  int64_t seenReleases = releases;
  std::vector<int> running;
  while (!stopped) {
    if (steps >= budget) {
      rep.add(Finding::Deadlock, "steps", [&] {
        return "step limit reached (" + std::to_string(opt.maxSteps) + " steps): a livelock, or raise max_steps";
      });
      stopped = true;
      break;
    }
    int pick = -1;
    if (opt.schedule == Schedule::Adversarial) {
      if (releases != seenReleases) {
        seenReleases = releases;
        dir = -dir;
        cur = -1;
      }
      if (cur >= 0 && th[cur].status == Status::Running) pick = cur;
      else
        for (int i = 0; i < T && pick < 0; ++i) {
          int idx = dir > 0 ? i : T - 1 - i;
          if (th[idx].status == Status::Running) pick = idx;
        }
    } else {
      if (burst > 0 && cur >= 0 && th[cur].status == Status::Running) {
        pick = cur;
        --burst;
      } else {
        running.clear();
        for (auto& t : th)
          if (t.status == Status::Running) running.push_back(t.tid);
        if (!running.empty()) {
          pick = running[rng() % running.size()];
          burst = (int)(rng() % 16);
        }
      }
      if (!unlanded.empty() && (rng() & 7) == 0) {
        size_t i = rng() % unlanded.size();
        land(unlanded[i]);
        unlanded[i] = unlanded.back();
        unlanded.pop_back();
      }
      if (!mbar.pending.empty() && (rng() & 7) == 0) tmaLand(false);  // a TMA copy lands
    }
    if (pick < 0) {  // TMA copies land as late as possible: when nothing else can run (a landing may wake threads)
      bool woken = false;
      for (auto& t : th) woken |= t.status == Status::Running;
      if (woken || tmaLand(true)) continue;
    }
    if (pick < 0) {
      for (auto& t : th)
        if (t.status != Status::Done) {
          diagnoseStuck();
          break;
        }
      break;
    }
    cur = pick;
    step(th[pick]);
    ++steps;
    if (opt.stopAtFirstError && rep.total() > 0) stopped = true;
  }
  while (!deferred.empty()) settle(deferred.begin()->first.first, deferred.begin()->first.second);
  mbarrierFinish();
  return steps;
}

SimResult simulate(const kir::Kernel& k, const SimInputs& in, const SimOptions& opt) {
  for (auto& b : k.buffers)  // (lower/passes/mx_scale_ring.cpp) the scale copies into tensor memory: not modelled
    if (b->role == "mx_scale_a")
      fail<HeddleError>("simulate: ", k.name, " is the ",
                        b->dtype != DType::E8M0           ? "nv16 (NVFP4)"
                        : k.tile.inDtype == DType::E2M1X2 ? "mx32 (MXFP4)"
                                                          : "mx32 (MXFP8)",
                        " block-scaled tcgen05 kernel, whose tcgen05.cp of the scale chunks and "
                        "block-scaled MMAs the kernel-IR simulator does not model; heddle.interpret runs the printed "
                        "kernel (docs/fp8.md \"MX formats\")");
  SimResult res;
  res.schedule = opt.schedule == Schedule::Adversarial ? std::string("adversarial")
                                                       : "random(seed=" + std::to_string(opt.seed) + ")";
  Reports rep(opt.maxReportsPerKind);
  std::vector<std::array<int64_t, 3>> ctas = opt.ctas;
  if (ctas.empty()) {
    int64_t gx = gridDim(k.launch.gridX, in.scalars), gy = gridDim(k.launch.gridY, in.scalars),
            gz = gridDim(k.launch.gridZ, in.scalars);
    if (gx * gy * gz > 4096)
      fail<HeddleError>("simulate: grid of ", gx * gy * gz, " CTAs; simulate a subset (ctas=...)");
    for (int64_t z = 0; z < gz; ++z)
      for (int64_t y = 0; y < gy; ++y)
        for (int64_t x = 0; x < gx; x += std::max(1, k.cluster)) ctas.push_back({x, y, z});  // a cluster: one Cta
  }
  for (auto& c : ctas)
    if (k.cluster > 1 && c[0] % k.cluster)
      fail<HeddleError>("simulate: CTA (", c[0], ", ", c[1], ", ", c[2], ") is not the first of its cluster of ",
                        k.cluster, "; name clusters by their first CTA (x a multiple of ", k.cluster, ")");
  bool hasStore = false;
  kir::walk(k.body, [&](const kir::Node& n) { hasStore |= n.kind == kir::NodeKind::EpilogueStore; });
  // every output: D, then D1, ... (Kernel::extraOutputs, at D's index), outSize elements each; the
  // reference gives D alone or all of them one after the other
  size_t outSize = in.reference.size();
  const size_t nOut = 1 + k.extraOutputs.size();
  bool refAll = false;  // the reference covers every output
  auto sc = [&](const char* n, int64_t dflt) { return in.scalars.count(n) ? in.scalars.at(n) : dflt; };
  if (hasStore) {
    int64_t batch = sc("batch", 1), M = sc("M", 0), ldd = sc("ldd", sc("N", 0));
    const size_t d = (size_t)(batch > 1 ? batch * sc("batch_stride_d", M * ldd) : M * ldd);
    if (nOut > 1 && outSize == d * nOut) {
      outSize = d;
      refAll = true;
    } else if (!outSize) {
      outSize = d;
    }
  }
  res.output.assign(outSize * nOut, std::nanf(""));
  std::vector<WriteRec> outW(outSize * nOut);
  int64_t steps = 0;
  GridState grid;  // split-K: shared by the CTAs, which run in the order given (linear order by default)
  for (size_t i = 0; i < ctas.size(); ++i) {
    Cta cta(k, in, opt, rep, res.output, outW, ctas[i][0], ctas[i][1], ctas[i][2],
            opt.seed * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + 1);
    cta.ctaIndex = (int)i;
    cta.grid = &grid;
    steps += cta.run(opt.maxSteps - steps);
    res.ctas++;
    if ((opt.stopAtFirstError && rep.total() > 0) || steps >= opt.maxSteps) break;
  }
  res.steps = steps;

  // numbers: every output element of the simulated CTAs against the reference
  if (!in.reference.empty() && hasStore && !(opt.stopAtFirstError && rep.total() > 0)) {
    const int64_t M = sc("M", 0), N = sc("N", 0), ldd = sc("ldd", N), bsd = sc("batch_stride_d", 0);
    int64_t checked = 0, bad = 0;
    double atol = 0, rtol = 0;
    std::vector<std::string> samples;
    for (size_t o = 0; o < (refAll ? nOut : 1); ++o) {  // output o: its dtype's tolerance, its part of the vectors
      const DType odt = o ? k.extraOutputs[o - 1].dtype : k.outDtype;
      double da, dr;
      defaultTolerance(odt, da, dr);
      atol = opt.atol < 0 ? da : opt.atol;
      rtol = opt.rtol < 0 ? dr : opt.rtol;
      const int64_t off = (int64_t)(o * outSize);
      const std::string oname = o ? k.extraOutputs[o - 1].param : "D";
      // a persistent kernel (grid = num_ctas) walks tiles: with the whole grid simulated, all of D is its
      // output; with a subset, what it wrote
      // (stream-K too: its CTAs walk segments of tiles)
      const bool persistent = k.launch.gridX.str() == "num_ctas" || k.streamK > 0, everyCta = opt.ctas.empty();
      for (int i = 0; i < (persistent ? 1 : res.ctas); ++i) {
        bool sw = swapBlocks(k);
        const int64_t bnOut = k.tile.bn / std::max(1, k.tile.parts);  // output columns per CTA
        int64_t m0 = (sw ? ctas[i][0] : ctas[i][1]) * k.tile.bm, n0 = (sw ? ctas[i][1] : ctas[i][0]) * bnOut;
        if (persistent) m0 = n0 = 0;
        const int64_t mEnd = persistent ? M : std::min(M, m0 + k.tile.bm);
        const int64_t nEnd = persistent ? N : std::min(N, n0 + bnOut);
        for (int64_t r = m0; r < mEnd; ++r)
          for (int64_t c = n0; c < nEnd; ++c) {
            const int64_t b = k.splitK > 1 ? 0 : ctas[i][2];  // split-K: blockIdx.z is the split
            int64_t idx = b * bsd + r * ldd + c;
            if (idx < 0 || idx >= (int64_t)outSize) continue;
            idx += off;
            if (persistent && !everyCta && outW[idx].thread < 0) continue;
            ++checked;
            double d = res.output[idx], ref = in.reference[idx];
            bool fine =
                d == ref || (std::isnan(ref) ? std::isnan(d) : std::fabs(d - ref) <= atol + rtol * std::fabs(ref));
            if (fine) continue;
            if (++bad > 8) continue;
            std::ostringstream os;
            os << oname << "[" << b << "][" << r << "][" << c << "] = " << d << " but the reference is " << ref;
            if (outW[idx].thread < 0) os << " (never written)";
            samples.push_back(os.str());
          }
      }
    }
    if (bad) {
      std::ostringstream os;
      os << bad << " of " << checked << " output elements differ from the reference (atol " << atol << ", rtol " << rtol
         << "); first: " << samples[0];
      std::string s = os.str();
      rep.add(Finding::Mismatch, "num-summary", [&] { return s; });
      for (size_t j = 1; j < samples.size(); ++j)
        rep.add(Finding::Mismatch, "num|" + samples[j], [&] { return samples[j]; });
    }
  }
  rep.into(res);
  res.findings = rep.total();
  return res;
}

}  // namespace heddle::verify
