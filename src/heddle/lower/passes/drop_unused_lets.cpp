// drop_unused_lets: removes every Let whose name nothing after it in its scope reads.
//
// The builders give each role the whole persistent tile walk (tile, m0, n0, batch_idx, the stream-K segment's
// lets), but not every role reads every coordinate: the MMA role of a 3-role kernel never names m0 or n0, a
// bias loader reads n0 alone, a stream-K role that starts its k loop at 0 never reads skkt. Printed, such a
// Let is a `const int` nothing reads: NVRTC's warning #177-D ("declared but never referenced") in the program
// log, kept with the compiled kernel. Reads are kir::collectReads (kir/reads.cpp): the index expressions and
// the tile coordinates the printers and the simulator read implicitly. A block is walked from its end, so a
// Let read only by a dropped one (tile, read only by m0 and n0) goes too.
//
// Before (a 3-role kernel's MMA role, after check_uniformity):
//   for tl ... { let tile = bid + tl * num_ctas; let m0 = ...tile...; let n0 = ...tile...; wgmma ... }
// After:
//   for tl ... { wgmma ... }
// The printer declares the grid's m0, n0 and batch_idx the same way: only when the body reads them
// (codegen/printer.cpp, CLikePrinter::print).
//
// Runs when: always (last: every earlier pass may add a read).
#include <set>
#include <string>

#include "heddle/lower/lower.h"

namespace heddle::passes {

namespace {

// Drops b's dead Lets. `live`: the names read after b's end that b's Lets could bind (a bare block is
// printed without braces: its Lets reach the statements after it); empty for a braced body.
void dropIn(const kir::Kernel& k, kir::Block& b, std::set<std::string> live) {
  for (size_t i = b.stmts.size(); i-- > 0;) {
    kir::Node& s = *b.stmts[i];
    if (s.kind == kir::NodeKind::Let) {
      auto& l = static_cast<kir::Let&>(s);
      if (!live.count(l.var)) {
        b.stmts.erase(b.stmts.begin() + (long)i);
        continue;
      }
      live.erase(l.var);
    } else if (s.kind == kir::NodeKind::For) {
      dropIn(k, static_cast<kir::ForLoop&>(s).body, {});
    } else if (s.kind == kir::NodeKind::If) {
      dropIn(k, static_cast<kir::IfThenElse&>(s).thenBody, {});
      dropIn(k, static_cast<kir::IfThenElse&>(s).elseBody, {});
    } else if (s.kind == kir::NodeKind::Block) {
      dropIn(k, static_cast<kir::Block&>(s), live);
    }
    for (auto& r : kir::freeReads(k, s)) live.insert(r);
  }
}

}  // namespace

void dropUnusedLets(LowerContext& c) { dropIn(c.kernel, c.kernel.body, {}); }

}  // namespace heddle::passes
