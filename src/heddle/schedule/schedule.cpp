// Scheduling operations on tensors and the rules that make a schedule valid.
#include "heddle/schedule/schedule.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <sstream>

#include "heddle/schedule/epilogue_layout.h"

namespace heddle {

static int findAxis(TensorView* tv, const std::string& axis, const char* op) {
  int i = tv->domain.find(axis);
  if (i < 0)
    fail<ScheduleError>(op, "(", tv->name, ", '", axis, "'): no such axis; ", tv->name, "'s axes are ",
                        tv->domain.str());
  return i;
}

static void requireScheduled(TensorView* tv, const char* op) {
  if (tv->domain.empty())
    fail<ScheduleError>(op, "(", tv->name, "): ", tv->name,
                        " has no loop domain. Only the matmul tensor is tiled; "
                        "epilogue tensors are computed inline in its tiles, and caches follow their consumer");
}

void initLoopDomain(Fusion& f, TensorView* tv) {
  if (!tv->definition || tv->definition->kind != OpKind::Matmul)
    fail<ScheduleError>("schedule(", tv->name, "): only the matmul tensor carries a loop schedule; ", tv->name,
                        " is computed inline in the matmul's epilogue");
  auto* e = tv->definition;
  auto* a = e->inputs[0];
  int r = a->rank();
  Size K = e->transA ? a->shape[r - 2] : a->shape[r - 1];
  tv->domain.axes.clear();
  tv->epilogueStore.clear();  // a new schedule starts with the default store (auto schedules re-run this)
  tv->clusterSize = 1;        // ... and without a cluster
  tv->clusterAlong = "m";
  auto add = [&](const std::string& n, const Size& s, bool red) {
    IterDomain d;
    d.name = d.root = n;
    d.extent = s.isSymbolic() ? -1 : s.value;
    d.isReduction = red;
    tv->domain.axes.push_back(d);
  };
  if (tv->rank() == 3) add("b", tv->shape[0], false);
  add("m", tv->shape[tv->rank() - 2], false);
  add("n", tv->shape[tv->rank() - 1], false);
  add("k", K, true);
}

void split(TensorView* tv, const std::string& axis, int64_t factor) {
  requireScheduled(tv, "split");
  int i = findAxis(tv, axis, "split");
  if (factor <= 0)
    fail<ScheduleError>("split(", tv->name, ", '", axis, "', ", factor, "): the factor must be positive");
  IterDomain old = tv->domain.axes[i];
  constexpr int64_t kMaxTile = INT32_MAX;  // tiles, warp tiles and loop strides are 32-bit in the kernel
  if (factor > kMaxTile || old.factor * factor > kMaxTile)  // old.factor <= kMaxTile: no 64-bit overflow
    fail<ScheduleError>("split(", tv->name, ", '", axis, "', ", factor, "): the tile this split makes (", old.factor,
                        " x ", factor, " elements) exceeds ", kMaxTile,
                        "; tile factors are 32-bit: use a factor such as 16..256");
  if (old.parallel != ParallelType::Serial)
    fail<ScheduleError>("split(", tv->name, ", '", axis, "'): the axis is already bound to ",
                        parallelName(old.parallel), "; split before parallelize");
  if (old.extent >= 0 && old.root != old.name && old.extent % factor != 0)
    fail<ScheduleError>("split(", tv->name, ", '", axis, "', ", factor, "): the tile axis has extent ", old.extent,
                        " which ", factor, " does not divide; pick a divisor of ", old.extent);
  IterDomain outer = old, inner = old;
  outer.name = old.name + ".o";
  outer.factor = old.factor * factor;
  outer.extent = old.extent >= 0 ? (old.extent + factor - 1) / factor : -1;
  inner.name = old.name + ".i";
  inner.extent = factor;
  inner.factor = old.factor;
  tv->domain.axes[i] = outer;
  tv->domain.axes.insert(tv->domain.axes.begin() + i + 1, inner);
}

void reorder(TensorView* tv, const std::vector<std::string>& order) {
  requireScheduled(tv, "reorder");
  std::set<std::string> seen;
  for (auto& n : order) {
    findAxis(tv, n, "reorder");
    if (!seen.insert(n).second) fail<ScheduleError>("reorder(", tv->name, "): axis '", n, "' is named twice");
  }
  // Named axes take the positions, in the given order, that they occupied together; others stay.
  std::vector<int> slots;
  for (int i = 0; i < tv->domain.size(); ++i)
    if (seen.count(tv->domain.axes[i].name)) slots.push_back(i);
  std::vector<IterDomain> moved;
  for (auto& n : order) moved.push_back(tv->domain.axes[tv->domain.find(n)]);
  for (size_t j = 0; j < slots.size(); ++j) tv->domain.axes[slots[j]] = moved[j];
}

void parallelize(TensorView* tv, const std::string& axis, ParallelType p) {
  requireScheduled(tv, "parallelize");
  int i = findAxis(tv, axis, "parallelize");
  auto& d = tv->domain.axes[i];
  if (p != ParallelType::Serial && p != ParallelType::Unroll)
    for (auto& o : tv->domain.axes)
      if (o.name != d.name && o.parallel == p && (p != ParallelType::Warp || o.root == d.root))
        fail<ScheduleError>("parallelize(", tv->name, ", '", axis, "', ", parallelName(p), "): axis '", o.name,
                            "' is already bound to ", parallelName(p),
                            "; each parallel type binds one axis (warp: one per m/n)");
  bool block = p == ParallelType::BIDx || p == ParallelType::BIDy || p == ParallelType::BIDz;
  if (d.isReduction && p != ParallelType::Serial && p != ParallelType::Unroll)
    fail<ScheduleError>("parallelize(", tv->name, ", '", axis, "', ", parallelName(p), "): '", axis,
                        "' is a reduction (k) axis, which stays a loop of each CTA; to share K between CTAs use "
                        "split_k(S) (or stream_k(ctas)) on ",
                        tv->name, " and keep k axes serial");
  // The k-tile loop is the pipelined main loop (circular_buffer overlaps its iterations): the lowering never
  // unrolls it, and the loops inside a tile (k.i among them) are unrolled already. Say so, not ignore it.
  if (d.isReduction && p == ParallelType::Unroll && !(d.name.size() >= 2 && d.name.substr(d.name.size() - 2) == ".i"))
    fail<ScheduleError>("parallelize(", tv->name, ", '", axis, "', unroll): '", axis,
                        "' is the k-tile loop, the "
                        "pipelined main loop (circular_buffer overlaps its iterations), which heddle never unrolls; "
                        "the loops inside a tile (the k-steps of k.i) are unrolled already. Keep '",
                        axis, "' serial");
  if (block && d.name.size() >= 2 && d.name.substr(d.name.size() - 2) == ".i")
    fail<ScheduleError>("parallelize(", tv->name, ", '", axis, "', ", parallelName(p),
                        "): a block index must bind the "
                        "outer part of a split (the tile count), not '",
                        axis, "'; bind '", d.name.substr(0, d.name.size() - 2) + ".o", "'");
  if ((p == ParallelType::Warp || p == ParallelType::TIDx || p == ParallelType::TIDy || p == ParallelType::TIDz) &&
      d.extent < 0)
    fail<ScheduleError>("parallelize(", tv->name, ", '", axis, "', ", parallelName(p),
                        "): thread and warp axes need a "
                        "constant extent; split '",
                        axis, "' by a constant first and bind the inner part");
  d.parallel = p;
}

void warpTiledNest(Fusion& f, TensorView* mm, int bm, int bn, int bk, int wm, int wn) {
  initLoopDomain(f, mm);
  split(mm, "m", bm);
  split(mm, "n", bn);
  split(mm, "k", bk);
  split(mm, "m.i", bm / wm);
  split(mm, "n.i", bn / wn);
  if (mm->rank() == 3) parallelize(mm, "b", ParallelType::BIDz);
  parallelize(mm, "m.o", ParallelType::BIDy);
  parallelize(mm, "n.o", ParallelType::BIDx);
  parallelize(mm, "m.i.o", ParallelType::Warp);
  parallelize(mm, "n.i.o", ParallelType::Warp);
  std::vector<std::string> order = {"m.o", "n.o", "k.o", "m.i.o", "n.i.o", "m.i.i", "n.i.i", "k.i"};
  if (mm->rank() == 3) order.insert(order.begin(), "b");
  reorder(mm, order);
}

void circularBuffer(TensorView* tv, int stages, int prefetch, const std::string& war) {
  if (!tv->cacheOf || tv->memory != MemoryType::Shared)
    fail<ScheduleError>("circular_buffer(", tv->name, ", stages=", stages, ", prefetch=", prefetch, "): ", tv->name,
                        " is computed inside the loop it would be buffered across; only a shared-memory cache made "
                        "with cache_after(input, ...) can be circular-buffered");
  if (stages <= 1)
    fail<ScheduleError>("circular_buffer(", tv->name, ", stages=", stages,
                        "): stages must be >= 2 (one stage cannot "
                        "overlap loading with computing); use stages=2 or more");
  if (prefetch >= stages || prefetch < -stages)
    fail<ScheduleError>("circular_buffer(", tv->name, ", stages=", stages, ", prefetch=", prefetch,
                        "): prefetch must be in [", -stages, ", ", stages - 1,
                        "] (negative means stages+prefetch; "
                        "at most stages-1 loads can be ahead of the compute)");
  if (war != "mbarrier" && war != "block_sync")
    fail<ScheduleError>("circular_buffer(", tv->name, ", war='", war,
                        "'): war must be 'mbarrier' (empty mbarriers "
                        "release the slots) or 'block_sync' (a block barrier after the last read)");
  tv->circular.stages = stages;
  tv->circular.prefetch = prefetch < 0 ? prefetch + stages : prefetch;
  tv->circular.mbarrierWar = war == "mbarrier";
}

int roleWarps(const std::string& role, const std::string& option, int64_t count) {
  constexpr int64_t kMaxWarps = 32;  // 1024 threads of 32 lanes: the most any target's block holds
  const int64_t per = option == "warpgroups" ? 4 : 1;
  if (count < 0 || count > kMaxWarps / per)
    fail<ScheduleError>("warp_specialize: role '", role, "' asks for ", option, "=", count, "; a block holds at most ",
                        kMaxWarps, " warps (", kMaxWarps / 4,
                        " warpgroups): use e.g. warpgroups=1 or 2 for an MMA "
                        "role and warps=1 for a load role");
  return static_cast<int>(count * per);
}

void validateRoles(const std::string& tensor, const std::vector<Role>& roles) {
  if (roles.size() < 2)
    fail<ScheduleError>("warp_specialize(", tensor,
                        "): needs at least two roles (a producer such as 'load' and a "
                        "consumer such as 'mma'), got ",
                        roles.size());
  std::set<std::string> names;
  int producerRegs = 0, minConsumerRegs = 1 << 30;
  for (auto& r : roles) {
    if (!names.insert(r.name).second)
      fail<ScheduleError>("warp_specialize(", tensor, "): role '", r.name, "' is named twice");
    if (r.warps <= 0)
      fail<ScheduleError>("warp_specialize(", tensor, "): role '", r.name, "' has ", r.warps,
                          " warps; each role needs at least one warp");
    if (r.registers != 0 && (r.registers < 24 || r.registers > 256 || r.registers % 8 != 0))
      fail<ScheduleError>("warp_specialize(", tensor, "): role '", r.name, "' asks for ", r.registers,
                          " registers; setmaxnreg takes 24..256 in multiples of 8 (e.g. ",
                          std::max(24, std::min(256, (r.registers + 7) / 8 * 8)), ")");
    bool producer = r.name == "load" || r.name == "producer";
    if (r.registers) {
      if (producer) producerRegs = r.registers;
      else minConsumerRegs = std::min(minConsumerRegs, r.registers);
    }
  }
  if (producerRegs && minConsumerRegs != (1 << 30) && producerRegs > minConsumerRegs)
    fail<ScheduleError>("warp_specialize(", tensor, "): the producer role asks for ", producerRegs,
                        " registers, more than a consumer's ", minConsumerRegs,
                        "; producers only issue copies, give them fewer registers than the consumers (e.g. 40 vs 232)");
}

void warpSpecialize(TensorView* tv, const std::vector<Role>& roles) {
  if (!tv->definition || tv->definition->kind != OpKind::Matmul)
    fail<ScheduleError>("warp_specialize(", tv->name,
                        "): roles are set on the matmul tensor, whose k loop they split "
                        "into producer and consumer warps");
  validateRoles(tv->name, roles);
  tv->roles = roles;
}

void splitK(TensorView* tv, int splits) {
  if (!tv->definition || tv->definition->kind != OpKind::Matmul)
    fail<ScheduleError>("split_k(", tv->name,
                        "): split-K is set on the matmul tensor, whose k loop it shares "
                        "among CTAs");
  if (splits < 1 || splits > kMaxSplitK)
    fail<ScheduleError>("split_k(", tv->name, "): splits = ", splits, " must lie in [1, ", kMaxSplitK,
                        "] (1 turns split-K off)");
  tv->splitK = splits;
}

void streamK(TensorView* tv, int ctas) {
  if (!tv->definition || tv->definition->kind != OpKind::Matmul)
    fail<ScheduleError>("stream_k(", tv->name,
                        "): stream-K is set on the matmul tensor, whose tiles x k-tiles it "
                        "shares among CTAs");
  if (ctas < 0 || ctas > kMaxStreamK)
    fail<ScheduleError>("stream_k(", tv->name, "): ctas = ", ctas, " must lie in [0, ", kMaxStreamK,
                        "] (the SM count of the device; 0 turns stream-K off)");
  tv->streamK = ctas;
}

void epilogueStore(TensorView* tv, const std::string& kind) {
  if (!tv->definition || tv->definition->kind != OpKind::Matmul)
    fail<ScheduleError>("epilogue_store(", tv->name, "): the epilogue store is set on the matmul tensor");
  if (kind != "tma" && kind != "direct")
    fail<ScheduleError>("epilogue_store(", tv->name, "): kind '", kind,
                        "' is not one of 'tma' (shared memory + TMA "
                        "store) or 'direct' (per-thread global stores)");
  tv->epilogueStore = kind;
}

void cluster(TensorView* tv, int size, const std::string& along) {
  if (!tv->definition || tv->definition->kind != OpKind::Matmul)
    fail<ScheduleError>("cluster(", tv->name,
                        "): clusters are set on the matmul tensor, whose tiles the cluster's "
                        "CTAs share an operand of");
  if (size != 1 && size != 2)
    fail<ScheduleError>("cluster(", tv->name, "): size = ", size,
                        "; this build makes clusters of 2 CTAs (1 turns "
                        "clusters off)");
  if (along != "m" && along != "n")
    fail<ScheduleError>("cluster(", tv->name, "): along = '", along,
                        "' is not 'm' (m-neighbours share the B tile) "
                        "or 'n' (n-neighbours share the A tile)");
  tv->clusterSize = size;
  tv->clusterAlong = along;
}

std::string MatmulTiling::str() const {
  std::ostringstream os;
  os << "tile " << bm << "x" << bn << "x" << bk << ", warps " << warpsM << "x" << warpsN << " (" << threads()
     << " threads), " << loadKindName(loadKind) << " vec " << vecA << "/" << vecB;
  if (stages > 1) os << ", circular_buffer(stages=" << stages << ", prefetch=" << prefetch << ")";
  if (splitK > 1) os << ", split_k(" << splitK << ")";
  if (streamK > 0) os << ", stream_k(" << streamK << ")";
  os << ", layout " << (transA ? "T" : "N") << (transB ? "T" : "N");
  if (parts > 1)  // a matmul group: the accumulator tile holds bn / parts columns of each member
    os << ", matmul group of " << parts << " (" << bn / parts << " output columns of each per tile)";
  if (rolePipeline.warpSpecialized && !rolePipeline.tcgen05)  // the epilogue layout (schedule/epilogue_layout.h)
    os << ", epilogue: "
       << epilogueLayoutPhrase(rolePipeline.tmaStore ? "epilogue_role"
                               : rolePipeline.coop   ? "cooperative"
                                                     : "pingpong")
       << (rolePipeline.tmaStore || rolePipeline.mmaTmaStore ? ", TMA store" : ", direct store");
  return os.str();
}

}  // namespace heddle
