// vectorize_epilogue_reads: with vec_e=2, an epilogue that runs in pairs of adjacent columns -- the sm_90a
// wgmma epilogues, staged (tma_store_epilogue: into sD for a TMA store) or direct (registers -> D), and the
// mma.sync register epilogue (EpilogueStore::columnPairs: the m16n8 fragment's c0,c1 / c2,c3) -- reads each
// global epilogue operand that varies along the columns (a bias row, a residual) two columns per load -- one
// 32-bit load of a 16-bit pair, one 64-bit load of an f32 pair -- instead of two scalar loads. vec_e is an
// alignment class, like vec_a / vec_b: the launch checks that such an operand has an even number of
// contiguous columns (stride 1), even other strides and a pair-aligned base (core/kernel.py _pair_ok;
// InputError otherwise; heddle.matmul picks vec_e from the tensors). With those, a pair that starts at an
// even column starts at a pair-aligned address and is whole.
//
// Staged store: no branch. The output of a TMA-store epilogue has 16-byte rows, so N is even, and the
// pair's column colv = min(n0 + lc0, N - 2) is even and whole (a pair past N reads the last whole pair;
// the TMA store clips what it computes).
// Direct store and mma.sync: D is stored directly, so N may be odd, and an odd N cuts each row's last pair
// (col = N - 1): reading it whole would read column N. Two ways out: a bounds check per pair read (a
// whole load when col + 1 < N, else one element), or the launch rule above (an even column count; an odd N
// takes vec_e=1). heddle takes the rule, so the read at colv = col (even; pairs with col >= N are skipped)
// is unconditional: measured on sm_80 (docs/perf.md), the per-pair check made NVVM duplicate the pair
// program down both sides of the branch (twice the loads in the PTX), while an odd N with scalar reads
// costs what it cost before. (A residual with an odd N already has an odd row stride, which the rule refuses.)
// The column stride parameter stays in the signature, unused.
//
// Before (epilogue program; the pair epilogues read both columns of a pair apart):
//   r1 = load E_bias[col * E_bias_s0]                 -> {E_bias[col_0 * s], E_bias[col_1 * s]}
//   r2 = add r0, r1
// After (kernel name + "_ev2"; the kernel IR lists "epilogue reads E_bias two columns per load"):
//   r1 = load pair E_bias[colv], colv = min(n0 + lc0, N - 2)   -> one ld.global.nc.b32    (staged sm_90a)
//   r1 = load pair E_bias[colv], colv = col (even; N even)      -> one ld.global.nc.b32    (direct, mma.sync)
//   r2 = add r0, r1
// An operand read from a TMA ring (cache_after(x, "tma_load")) or broadcast along the columns (a per-row
// bias) stays as it was; so does every kernel whose epilogue runs per element (the tcgen05 epilogue, AMD's
// MFMA / WMMA fragments, whose registers walk rows) or stores split-K / stream-K partials: vec_e=2 leaves
// it unchanged.
//
// Runs when: vec_e != 1 (2: operands read in column pairs; any other value is refused).
#include "heddle/lower/lower.h"

namespace heddle::passes {

void vectorizeEpilogueReads(LowerContext& c) {
  const int v = c.options.vecE;
  if (v != 1 && v != 2)
    fail<ScheduleError>("lower(vec_e=", v,
                        "): an epilogue operand is read 1 or 2 elements at a time (mma.sync "
                        "and wgmma fragments hold pairs of adjacent columns); use vec_e=2 for operands with contiguous "
                        "columns, even strides and pair-aligned bases, else vec_e=1");
  auto& k = c.kernel;
  requireWhen(c, "vectorize_epilogue_reads");
  // an epilogue store printed in column pairs: the sm_90a staged one (registers / sC -> sD), in a wgmma kernel
  // the direct one (registers -> D), the mma.sync one (columnPairs); not a raw staging store, a TMEM
  // epilogue or a split-K partial
  bool pairStore = false;
  kir::walk(k.body, [&](const kir::Node& n) {
    if (n.kind != kir::NodeKind::EpilogueStore) return;
    auto& e = static_cast<const kir::EpilogueStore&>(n);
    if (e.partial == kir::EpilogueStore::Partial::None && !e.raw && !e.tmem &&
        (e.to || k.tile.mma == MmaKind::Wgmma || e.columnPairs))
      pairStore = true;
  });
  if (!pairStore) return;
  bool any = false;
  for (auto& op : k.epilogue)
    if (op.op == OpKind::Input && !op.smem && !op.colStride.empty()) any = op.pairs = true;
  if (any) k.name += "_ev2";
}

}  // namespace heddle::passes
