// vectorize_epilogue_reads: with vec_e=2, an epilogue that runs in pairs of adjacent columns -- the staged
// sm_90a epilogue (tma_store_epilogue: the wgmma fragment, TMA-stored) and the mma.sync register epilogue
// (EpilogueStore::columnPairs: the m16n8 fragment's c0,c1 / c2,c3) -- reads each global epilogue operand
// that varies along the columns (a bias row, a residual) two columns per load -- one 32-bit load of a 16-bit pair, one 64-bit
// load of an f32 pair -- instead of two scalar loads. vec_e is an alignment class, like vec_a / vec_b: the
// launch checks that such an operand's columns are contiguous (stride 1), its other strides even and its
// base aligned to a pair (InputError otherwise; heddle.matmul picks vec_e from the tensors).
//
// The staged sm_90a pair read needs no branch: the output of a TMA-store epilogue has 16-byte rows, so N is
// even, and the pair's column min(n0 + lc0, N - 2) is even and whole (a pair past N reads the last whole
// pair; the TMA store clips what it computes).
// The mma.sync epilogue stores D directly, so its N may be odd, and an odd N cuts each row's last pair
// (col = N - 1): reading it whole would read column N. Two ways out: a bounds check per pair read (a
// whole load when col + 1 < N, else one element), or a launch rule. heddle takes the rule: an operand read
// in pairs must have an even number of columns (core/kernel.py _pair_ok; InputError at launch naming the
// operand, and heddle.matmul picks vec_e=1 for an odd N), so the pair at the even column colv = col is
// always whole and the read is unconditional. Measured on sm_80 (docs/perf.md): the per-pair check made
// NVVM duplicate the pair program down both sides of the branch (twice the loads in the PTX and 5% more
// lines), while an odd N with scalar reads costs what it cost before. (A residual with an odd N already
// had an odd row stride, which the launch refuses for vec_e=2.) Pairs past N (col >= N) are skipped.
// The column stride parameter stays in the signature, unused.
//
// Before (epilogue program; the staged store reads both columns of a pair apart):
//   r1 = load E_bias[col * E_bias_s0]                 -> {E_bias[col_0 * s], E_bias[col_1 * s]}
//   r2 = add r0, r1
// After (kernel name + "_ev2"; the kernel IR lists "epilogue reads E_bias two columns per load"):
//   r1 = load pair E_bias[colv], colv = min(n0 + lc0, N - 2)   -> one ld.global.nc.b32    (staged sm_90a)
//   r1 = load pair E_bias[colv], colv = col (even; N even)      -> one ld.global.nc.b32    (mma.sync)
//   r2 = add r0, r1
// An operand read from a TMA ring (cache_after(x, "tma_load")) or broadcast along the columns (a per-row
// bias) stays as it was; so does every kernel whose epilogue runs per element (the sm_90a direct store, the
// tcgen05 epilogue, AMD's MFMA / WMMA fragments, whose registers walk rows): vec_e=2 leaves it unchanged.
#include "heddle/lower/lower.h"

namespace heddle::passes {

namespace {

// Whether `b` holds an epilogue store that runs in column pairs: staged (sm_90a) or columnPairs (mma.sync).
bool pairStore(const kir::Block& b) {
  for (auto& s : b.stmts) {
    switch (s->kind) {
      case kir::NodeKind::EpilogueStore: {
        auto& e = static_cast<const kir::EpilogueStore&>(*s);
        if (e.partial != kir::EpilogueStore::Partial::None) break;
        if ((e.to && !e.raw && !e.tmem) || e.columnPairs) return true;
        break;
      }
      case kir::NodeKind::For:
        if (pairStore(static_cast<const kir::ForLoop&>(*s).body)) return true;
        break;
      case kir::NodeKind::If: {
        auto& x = static_cast<const kir::IfThenElse&>(*s);
        if (pairStore(x.thenBody) || pairStore(x.elseBody)) return true;
        break;
      }
      case kir::NodeKind::Block:
        if (pairStore(static_cast<const kir::Block&>(*s))) return true;
        break;
      default: break;
    }
  }
  return false;
}

}  // namespace

void vectorizeEpilogueReads(LowerContext& c) {
  const int v = c.options.vecE;
  if (v != 1 && v != 2)
    fail<ScheduleError>("lower(vec_e=", v, "): an epilogue operand is read 1 or 2 elements at a time (mma.sync "
                        "and wgmma fragments hold pairs of adjacent columns); use vec_e=2 for operands with contiguous "
                        "columns, even strides and pair-aligned bases, else vec_e=1");
  auto& k = c.kernel;
  if (v == 1 || !pairStore(k.body)) return;
  bool any = false;
  for (auto& op : k.epilogue)
    if (op.op == OpKind::Input && !op.smem && !op.colStride.empty()) any = op.pairs = true;
  if (any) k.name += "_ev2";
}

}  // namespace heddle::passes
