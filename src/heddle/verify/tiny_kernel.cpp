// Hand-built kernels for planted-bug tests (see tiny_kernel.h).
#include "heddle/verify/tiny_kernel.h"

namespace heddle::verify {

namespace {

void build(kir::Kernel& k, const TinySpec& spec, kir::Block& b, const std::vector<TinyStmt>& prog,
           const std::string& loopVar) {
  for (auto& s : prog) {
    switch (s.op) {
      case TinyStmt::Loop: {
        auto* l = b.add<kir::ForLoop>();
        l->var = s.var;
        l->start = s.a;
        l->stop = s.b;
        l->stage = s.stage;
        build(k, spec, l->body, s.body, s.var);
        break;
      }
      case TinyStmt::If: {
        auto* c = b.add<kir::IfThenElse>();
        if (s.cmp == "<") c->cond = s.a < s.b;
        else if (s.cmp == "<=") c->cond = s.a <= s.b;
        else if (s.cmp == "==") c->cond = eq(s.a, s.b);
        else fail<HeddleError>("tiny kernel: unknown comparison '", s.cmp, "' (use <, <= or ==)");
        build(k, spec, c->thenBody, s.body, loopVar);
        build(k, spec, c->elseBody, s.elseBody, loopVar);
        break;
      }
      case TinyStmt::Write:
      case TinyStmt::Read: {
        kir::Buffer* buf = nullptr;
        for (auto& x : k.buffers)
          if (x->name == s.buffer) buf = x.get();
        if (!buf) {
          auto nb = std::make_unique<kir::Buffer>();
          nb->name = s.buffer;
          nb->stages = spec.stages;
          nb->rows = spec.rows;
          nb->cols = spec.cols;
          buf = k.addBuffer(std::move(nb));
        }
        auto* a = b.add<kir::SmemAccess>();
        a->buf = buf;
        a->stage = s.a;
        a->write = s.op == TinyStmt::Write;
        a->async = s.async;
        a->mapping = s.mapping;
        a->iter = loopVar.empty() ? kir::IExpr(0) : kir::IExpr::var(loopVar);
        a->label = std::string(a->write ? (s.async ? "cp.async write " : "write ") : "read ") + s.buffer;
        break;
      }
      case TinyStmt::Commit: b.add<kir::Sync>(kir::SyncKind::CpAsyncCommit); break;
      case TinyStmt::Barrier: b.add<kir::Sync>(kir::SyncKind::BlockSync); break;
      case TinyStmt::Wait: b.add<kir::Sync>(kir::SyncKind::CpAsyncWait, s.n); break;
    }
  }
}

}  // namespace

kir::Kernel buildTinyKernel(const TinySpec& spec) {
  if (spec.threads <= 0 || spec.threads > 1024) fail<HeddleError>("tiny kernel: threads must be in [1, 1024]");
  if (spec.stages < 1 || spec.rows < 1 || spec.cols < 1) fail<HeddleError>("tiny kernel: empty buffers");
  kir::Kernel k;
  k.name = spec.name;
  k.launch.threads = spec.threads;
  k.launch.gridX = 1;
  k.launch.gridY = 1;
  k.launch.gridZ = 1;
  build(k, spec, k.body, spec.program, "");
  k.renumber();
  return k;
}

}  // namespace heddle::verify
