// The front door (build.h): lower -> print -> compile -> cache.
#include "heddle/runtime/build.h"

#include "heddle/codegen/printer.h"
#include "heddle/runtime/cache/cache.h"

namespace heddle::rt {

std::shared_ptr<LoweredKernel> lowerKernel(const Fusion& f, const TargetInfo& t, const LowerOptions& o) {
  auto l = std::make_shared<LoweredKernel>();
  l->ctx = lower(f, t, o);
  l->source = printKernel(l->ctx->kernel, l->ctx->target);
  return l;
}

CachedKernel compileLowered(const LoweredKernel& l, const BuildOptions& o) {
  CompileRequest req;
  req.source = l.source;
  req.name = l.k().name;
  req.options.arch = l.ctx->target.rtcArch;
  req.options.extraOptions = o.extraOptions;
  req.options.isolate = o.isolate;
  req.options.wantPtx = o.wantPtx;
  req.useCache = o.useCache;
  CachedKernel k = l.backend().compile(req);
  return o.keepPtx ? k : KernelCache::global().forLaunch(std::move(k));
}

BuiltKernel build(const Fusion& f, const TargetInfo& t, const LowerOptions& lo, const BuildOptions& bo) {
  BuiltKernel b;
  b.lowered = lowerKernel(f, t, lo);
  b.binary = compileLowered(*b.lowered, bo);
  return b;
}

}  // namespace heddle::rt
