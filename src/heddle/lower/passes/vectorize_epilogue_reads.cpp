// vectorize_epilogue_reads: with vec_e=2, the sm_90a epilogues that work on the wgmma fragment in pairs of
// adjacent columns -- the staged store (tma_store_epilogue: into sD for a TMA store) and the direct store
// (registers -> D, bounds-checked) -- read each global epilogue operand that varies along the columns (a
// bias row, a residual) two columns per load -- one 32-bit load of a 16-bit pair, one 64-bit load of an
// f32 pair -- instead of two scalar loads. vec_e is an alignment class, like vec_a / vec_b: the launch
// checks that such an operand's columns are contiguous (stride 1), its other strides even and its base
// aligned to a pair (InputError otherwise; heddle.matmul picks vec_e from the tensors). With those, a
// pair that starts at an even column starts at a pair-aligned address.
//
// Staged store: no branch. The output of a TMA-store epilogue has 16-byte rows, so N is even, and the
// pair's column min(n0 + lc0, N - 2) is even and whole (a pair past N reads the last whole pair; the
// TMA store clips what it computes). The column stride parameter stays in the signature, unused.
//
// Direct store: N may be odd (any output), so min(n0 + lc0, N - 2) could be odd -- misaligned -- and is
// not used. The pair's column col = n0 + lc0 is even (tiles are multiples of 8 columns, lc0 is even) and
// the direct store skips pairs with row >= M or col >= N, so the one pair that can be cut is the last
// column's when N is odd (col = N - 1). It reads the whole pair in one load at col when col + 1 < N, else
// the one element at col (heddle::sm90::load_pair_or_first): never past the operand's last column, never
// at an odd column. No launch rule on N follows (an odd N costs one scalar read per cut pair).
//
// Before (epilogue program; the pair epilogues read both columns of a pair apart):
//   r1 = load E_bias[col * E_bias_s0]                 -> {E_bias[col_0 * s], E_bias[col_1 * s]}
//   r2 = add r0, r1
// After (kernel name + "_ev2"; the kernel IR lists "epilogue reads E_bias two columns per load"):
//   r1 = load pair E_bias[colv], colv = min(n0 + lc0, N - 2)   -> one ld.global.nc.b32   (staged)
//   r1 = load pair E_bias[col] if col + 1 < N, else E_bias[col] -> ld.global.nc.b32 | .b16 (direct)
//   r2 = add r0, r1
// An operand read from a TMA ring (cache_after(x, "tma_load")) or broadcast along the columns (a per-row
// bias) stays as it was; so does every kernel whose epilogue is not a wgmma pair epilogue (sm_80's
// registers -> D, split-K / stream-K partial stores, tcgen05's TMEM epilogue: vec_e=2 leaves it unchanged).
#include "heddle/lower/lower.h"

namespace heddle::passes {

namespace {

// An epilogue store the sm_90a printer prints in column pairs: staged (registers / sC -> sD) or, in a
// wgmma kernel, direct (registers -> D); not a raw staging store, a TMEM epilogue or a split-K partial.
bool pairStore(const kir::Block& b, bool wgmma) {
  for (auto& s : b.stmts) {
    switch (s->kind) {
      case kir::NodeKind::EpilogueStore: {
        auto& e = static_cast<const kir::EpilogueStore&>(*s);
        if ((e.to || wgmma) && !e.raw && !e.tmem && e.partial == kir::EpilogueStore::Partial::None) return true;
        break;
      }
      case kir::NodeKind::For:
        if (pairStore(static_cast<const kir::ForLoop&>(*s).body, wgmma)) return true;
        break;
      case kir::NodeKind::If: {
        auto& x = static_cast<const kir::IfThenElse&>(*s);
        if (pairStore(x.thenBody, wgmma) || pairStore(x.elseBody, wgmma)) return true;
        break;
      }
      case kir::NodeKind::Block:
        if (pairStore(static_cast<const kir::Block&>(*s), wgmma)) return true;
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
    fail<ScheduleError>("lower(vec_e=", v, "): an epilogue operand is read 1 or 2 elements at a time (the wgmma "
                        "fragment holds pairs of adjacent columns); use vec_e=2 for operands with contiguous "
                        "columns, even strides and pair-aligned bases, else vec_e=1");
  auto& k = c.kernel;
  if (v == 1 || !pairStore(k.body, k.tile.wgmma)) return;
  bool any = false;
  for (auto& op : k.epilogue)
    if (op.op == OpKind::Input && !op.smem && !op.colStride.empty()) any = op.pairs = true;
  if (any) k.name += "_ev2";
}

}  // namespace heddle::passes
