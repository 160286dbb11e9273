// Deep copy of kernel IR nodes with index substitution (used to clone pipelined loops).
#include "heddle/kir/kir.h"

namespace heddle::kir {

static void cloneBlock(const Block& from, Block& to, const std::map<std::string, IExpr>& s) {
  for (auto& n : from.stmts) to.stmts.push_back(clone(*n, s));
}

NodePtr clone(const Node& n, const std::map<std::string, IExpr>& s) {
  switch (n.kind) {
    case NodeKind::For: {
      auto& f = static_cast<const ForLoop&>(n);
      auto c = std::make_unique<ForLoop>();
      c->var = f.var;
      c->start = f.start.substitute(s);
      c->stop = f.stop.substitute(s);
      c->stage = f.stage;
      c->cbStages = f.cbStages;
      c->cbPrefetch = f.cbPrefetch;
      c->tripsVar = f.tripsVar;
      c->tileK = f.tileK;
      cloneBlock(f.body, c->body, s);
      return c;
    }
    case NodeKind::If: {
      auto& i = static_cast<const IfThenElse&>(n);
      auto c = std::make_unique<IfThenElse>();
      c->cond = i.cond.substitute(s);
      c->electWarp = i.electWarp;
      cloneBlock(i.thenBody, c->thenBody, s);
      cloneBlock(i.elseBody, c->elseBody, s);
      return c;
    }
    case NodeKind::TileLoad: {
      auto c = std::make_unique<TileLoad>(static_cast<const TileLoad&>(n));
      c->stage = c->stage.substitute(s);
      c->iter = c->iter.substitute(s);
      c->row0 = c->row0.substitute(s);
      c->col0 = c->col0.substitute(s);
      c->mbarIndex = c->mbarIndex.substitute(s);
      return c;
    }
    case NodeKind::MmaStep: {
      auto c = std::make_unique<MmaStep>(static_cast<const MmaStep&>(n));
      c->stageA = c->stageA.substitute(s);
      c->stageB = c->stageB.substitute(s);
      c->iter = c->iter.substitute(s);
      c->accStage = c->accStage.substitute(s);
      c->accumulate = c->accumulate.substitute(s);
      return c;
    }
    case NodeKind::SmemAccess: {
      auto c = std::make_unique<SmemAccess>(static_cast<const SmemAccess&>(n));
      c->stage = c->stage.substitute(s);
      c->iter = c->iter.substitute(s);
      return c;
    }
    case NodeKind::EpilogueStore: {
      auto c = std::make_unique<EpilogueStore>(static_cast<const EpilogueStore&>(n));
      c->fromStage = c->fromStage.substitute(s);
      c->toStage = c->toStage.substitute(s);
      c->slot = c->slot.substitute(s);
      c->operandStage = c->operandStage.substitute(s);
      return c;
    }
    case NodeKind::Sync: {
      auto c = std::make_unique<Sync>(static_cast<const Sync&>(n));
      c->index = c->index.substitute(s);
      c->parity = c->parity.substitute(s);
      return c;
    }
    case NodeKind::Let: {
      auto& l = static_cast<const Let&>(n);
      return std::make_unique<Let>(l.var, l.value.substitute(s));
    }
    case NodeKind::TmaStore: {
      auto c = std::make_unique<TmaStore>(static_cast<const TmaStore&>(n));
      c->stage = c->stage.substitute(s);
      c->row0 = c->row0.substitute(s);
      c->col0 = c->col0.substitute(s);
      c->iter = c->iter.substitute(s);
      return c;
    }
    case NodeKind::MmaPromote: {
      auto c = std::make_unique<MmaPromote>(static_cast<const MmaPromote&>(n));
      c->kBlock = c->kBlock.substitute(s);
      c->first = c->first.substitute(s);
      c->kBlocks = c->kBlocks.substitute(s);
      c->scaleStage = c->scaleStage.substitute(s);
      return c;
    }
    case NodeKind::Alloc: return std::make_unique<Alloc>(static_cast<const Alloc&>(n).buf);
    case NodeKind::Comment: return std::make_unique<Comment>(static_cast<const Comment&>(n).text);
    case NodeKind::Block: break;
  }
  throw HeddleError("clone: unexpected node kind");
}

}  // namespace heddle::kir
