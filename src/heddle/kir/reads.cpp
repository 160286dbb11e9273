// The names kernel IR code reads from the scope around it (kir.h, "Reads"): what a Let or a printed
// declaration must provide. The explicit reads are the variables of a node's index expressions; the implicit
// ones are the tile coordinates that the printers (codegen/) and the simulator (verify/) take from the scope
// without an expression naming them:
//   - an epilogue store writing the tile (not a split-K partial, not raw accumulators staged into shared
//     memory) and a block-scale promotion read m0 and n0
//     (the fragment's rows and columns are m0 + row_of(...), n0 + col_of(...));
//   - in a batched kernel, a tile load, an epilogue store and a TMA store read batch_idx (the third map
//     coordinate, the batch offset of an operand or of D), as does an epilogue operand with a batch stride;
//   - a multicast tile load and a remote mbarrier arrive read crank (this CTA's rank in the cluster).
// A superset is safe (a declaration kept that nothing reads); a missing read is a compile error of the printed
// source, which tests/codegen/test_unused_declarations.py compiles for every family.
#include <set>
#include <string>

#include "heddle/kir/kir.h"

namespace heddle::kir {

namespace {

void exprs(std::set<std::string>& out, std::initializer_list<const IExpr*> es) {
  for (auto* e : es) e->collectVars(out);
}

bool epilogueReadsBatch(const Kernel& k) {
  if (k.tile.batched) return true;
  for (auto& op : k.epilogue)
    if (!op.batchStride.empty()) return true;
  return false;
}

}  // namespace

void collectReads(const Kernel& k, const Node& n, std::set<std::string>& out) {
  switch (n.kind) {
    case NodeKind::For: {
      auto& f = static_cast<const ForLoop&>(n);
      exprs(out, {&f.start, &f.stop});
      break;
    }
    case NodeKind::If: exprs(out, {&static_cast<const IfThenElse&>(n).cond}); break;
    case NodeKind::TileLoad: {
      auto& t = static_cast<const TileLoad&>(n);
      exprs(out, {&t.stage, &t.iter, &t.row0, &t.col0, &t.rowsBound, &t.colsBound, &t.mbarIndex});
      if (k.tile.batched || !t.batchStride.empty()) out.insert("batch_idx");
      if (t.multicast > 1) out.insert("crank");
      break;
    }
    case NodeKind::MmaStep: {
      auto& m = static_cast<const MmaStep&>(n);
      exprs(out, {&m.stageA, &m.stageB, &m.iter, &m.accStage, &m.accumulate});
      break;
    }
    case NodeKind::EpilogueStore: {
      auto& e = static_cast<const EpilogueStore&>(n);
      exprs(out, {&e.fromStage, &e.toStage, &e.operandStage, &e.slot});
      // whole-tile workspace slots (split-K partials) and raw accumulators staged into a shared tile (the
      // MMA role of a 3-role kernel: fragment (row, col) -> (row, col) of sC) address no global element
      if (e.partial != EpilogueStore::Partial::None || e.raw) break;
      out.insert({"m0", "n0"});
      if (epilogueReadsBatch(k)) out.insert("batch_idx");
      break;
    }
    case NodeKind::SmemAccess: {
      auto& s = static_cast<const SmemAccess&>(n);
      exprs(out, {&s.stage, &s.iter});
      break;
    }
    case NodeKind::Sync: {
      auto& s = static_cast<const Sync&>(n);
      exprs(out, {&s.index, &s.parity});
      if (s.sync == SyncKind::MbarArriveRemote) out.insert("crank");
      break;
    }
    case NodeKind::Let: exprs(out, {&static_cast<const Let&>(n).value}); break;
    case NodeKind::TmaStore: {
      auto& t = static_cast<const TmaStore&>(n);
      exprs(out, {&t.stage, &t.row0, &t.col0, &t.iter});
      if (k.tile.batched) out.insert("batch_idx");
      break;
    }
    case NodeKind::MmaPromote: {
      auto& m = static_cast<const MmaPromote&>(n);
      exprs(out, {&m.kBlock, &m.kBlocks, &m.first, &m.scaleStage});
      out.insert({"m0", "n0"});
      break;
    }
    case NodeKind::Block:
    case NodeKind::Alloc:
    case NodeKind::Comment: break;
  }
}

namespace {

// Adds to `out` the names n reads (itself and the nodes inside it) that neither `bound` (bound by the scopes
// around n) nor a Let or loop before the read binds. A Let binds its name for the rest of its block; a
// bare block (printed without braces) is treated as its own scope, which can only over-count.
void freeIn(const Kernel& k, const Node& n, const std::set<std::string>& bound, std::set<std::string>& out) {
  std::set<std::string> reads;
  collectReads(k, n, reads);
  for (auto& r : reads)
    if (!bound.count(r)) out.insert(r);
  auto blockIn = [&](const Block& b, std::set<std::string> inner) {
    for (auto& s : b.stmts) {
      freeIn(k, *s, inner, out);
      if (s->kind == NodeKind::Let) inner.insert(static_cast<const Let&>(*s).var);
    }
  };
  switch (n.kind) {
    case NodeKind::For: {
      auto& f = static_cast<const ForLoop&>(n);
      auto inner = bound;
      inner.insert(f.var);
      blockIn(f.body, inner);
      break;
    }
    case NodeKind::If: {
      auto& i = static_cast<const IfThenElse&>(n);
      blockIn(i.thenBody, bound);
      blockIn(i.elseBody, bound);
      break;
    }
    case NodeKind::Block: blockIn(static_cast<const Block&>(n), bound); break;
    default: break;
  }
}

}  // namespace

std::set<std::string> freeReads(const Kernel& k, const Node& n) {
  std::set<std::string> out;
  freeIn(k, n, {}, out);
  return out;
}

}  // namespace heddle::kir
