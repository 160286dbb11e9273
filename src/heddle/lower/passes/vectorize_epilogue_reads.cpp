// vectorize_epilogue_reads: with vec_e=2, the staged sm_90a epilogue (tma_store_epilogue: the wgmma
// fragment in pairs of adjacent columns) reads each global epilogue operand that varies along the
// columns (a bias row, a residual) two columns per load -- one 32-bit load of a 16-bit pair, one 64-bit
// load of an f32 pair -- instead of two scalar loads. vec_e is an alignment class, like vec_a / vec_b: the
// launch checks that such an operand's columns are contiguous (stride 1), its other strides even and its
// base aligned to a pair (InputError otherwise; heddle.matmul picks vec_e from the tensors).
//
// The pair read needs no branch: the output of a TMA-store epilogue has 16-byte rows, so N is even, and
// the pair's column min(n0 + lc0, N - 2) is even and whole (a pair past N reads the last whole pair; the
// TMA store clips what it computes). The column stride parameter stays in the signature, unused.
//
// Before (epilogue program; the staged store reads both columns of a pair apart):
//   r1 = load E_bias[col * E_bias_s0]                 -> {E_bias[col_0 * s], E_bias[col_1 * s]}
//   r2 = add r0, r1
// After (kernel name + "_ev2"; the kernel IR lists "epilogue reads E_bias two columns per load"):
//   r1 = load pair E_bias[colv], colv = min(n0 + lc0, N - 2)   -> one ld.global.nc.b32
//   r2 = add r0, r1
// An operand read from a TMA ring (cache_after(x, "tma_load")) or broadcast along the columns (a per-row
// bias) stays as it was; so does every kernel without a staged epilogue (vec_e=2 leaves it unchanged).
#include "heddle/lower/lower.h"

namespace heddle::passes {

namespace {

bool stagedStore(const kir::Block& b) {
  for (auto& s : b.stmts) {
    switch (s->kind) {
      case kir::NodeKind::EpilogueStore: {
        auto& e = static_cast<const kir::EpilogueStore&>(*s);
        if (e.to && !e.raw && !e.tmem && e.partial == kir::EpilogueStore::Partial::None) return true;
        break;
      }
      case kir::NodeKind::For:
        if (stagedStore(static_cast<const kir::ForLoop&>(*s).body)) return true;
        break;
      case kir::NodeKind::If: {
        auto& x = static_cast<const kir::IfThenElse&>(*s);
        if (stagedStore(x.thenBody) || stagedStore(x.elseBody)) return true;
        break;
      }
      case kir::NodeKind::Block:
        if (stagedStore(static_cast<const kir::Block&>(*s))) return true;
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
  if (v == 1 || !stagedStore(k.body)) return;
  bool any = false;
  for (auto& op : k.epilogue)
    if (op.op == OpKind::Input && !op.smem && !op.colStride.empty()) any = op.pairs = true;
  if (any) k.name += "_ev2";
}

}  // namespace heddle::passes
