// The staged TMA store of an output tile (docs/sync-cases.md case 11), shared by the sm_90a MMA role's
// TMA-store epilogue (passes/tma_store_epilogue.cpp) and the sm_100a tcgen05 epilogue warpgroup's
// (passes/tcgen05_specialize.cpp). Not a pass.
//
// The tile is written in column chunks of `cols` = 128 bytes / element size (one 128-byte swizzle box), chunk
// q = local * chunks + c of the writers' walk through slot stage(q) of sD (and of sD1, ... for further outputs).
// Per chunk:
//   if (issuer) cp.async.bulk.wait_group.read(sd-1)   # WAR: the store of chunk q-sd has read the slot
//   bar.sync id, n                                      # ... before any writer rewrites it
//   epilogue store -> sD[stage(q)] (columns [c*cols, (c+1)*cols))
//   [afterWrite(c): e.g. the tcgen05 accumulator release after the tile's last chunk]
//   fence.proxy.async                                   # each writer: generic -> async proxy
//   bar.sync id, n                                      # every fenced write before the store
//   if (issuer) { tma_store sD[stage(q)] -> D (m0, n0 + c*cols); [D1 ...;] cp.async.bulk.commit_group }
// and after the tile loop `if (issuer) cp.async.bulk.wait_group.read(0)` (shared memory outlives its last store).
// PTX ISA "cp.async.bulk.tensor" (the shared-memory source is read through the async proxy),
// "cp.async.bulk.commit_group" / "cp.async.bulk.wait_group" (.read: the issuing thread's groups only) and "membar /
// fence" (fence.proxy.async orders the thread's generic-proxy writes before later async-proxy accesses); DeepGEMM's
// sm100 bf16 epilogue (sm100_bf16_gemm.cuh: tma_store_fence, a named barrier over the epilogue threads, one
// thread's TMA store + tma_store_arrive, tma_store_wait<stages - 1> before a slot is rewritten) keeps the same order.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "heddle/lower/build/role_pipeline_build.h"

namespace heddle::passes::build {

struct StagedStore {
  int cols = 0, chunks = 0, stages = 0;  // columns per chunk (one 128-byte box), bn / cols, slots per writer group
  kir::Buffer* sD = nullptr;
  std::vector<kir::Buffer*> extra;  // sD1, ... for Kernel::extraOutputs
  std::string writes;               // the generic-proxy writes, in words ("stmatrix", "st.shared", ...)
  // the writers' named barrier and the thread issuing the stores (its bulk groups are its own)
  int barId = 2, barThreads = 128;
  IExpr barIndex = 0;   // added to barId (ping-pong: the warpgroup)
  std::string barWho;   // " MMA threads", " threads of this warpgroup", ... (after the count)
  std::string writers;  // "the MMA threads", "the epilogue threads"
  std::string issuer;   // "thread 128", ...
  std::function<std::unique_ptr<kir::IfThenElse>()> elect;
  std::string names() const;  // "sD" or "sD, sD1"
};

// sD (and sD1, ... for further outputs): `slots` slots of bm rows x `cols`, 1024-byte aligned, and each output's
// tensor-map parameter tmD / tmD1 ... (a [bm, cols] box, 128-byte swizzle). A HeddleError where an output's chunk
// row is not 128 bytes.
StagedStore stagingBuffers(kir::Kernel& k, const MatmulTiling& t, int cols, int slots);

// The chunks of one tile, replacing the direct store `epi`: chunk c of `local` writes slot stage(q).
// `afterWrite(c, out)` may append nodes after chunk c's writes (before its fence).
std::vector<kir::NodePtr> stagedChunks(kir::Kernel& k, const StagedStore& s, const kir::EpilogueStore& epi, IExpr local,
                                       const std::function<IExpr(IExpr)>& stage,
                                       const std::function<void(int, std::vector<kir::NodePtr>&)>& afterWrite = {});

// `if (issuer) cp.async.bulk.wait_group.read(0)` after the writers' last tile.
std::unique_ptr<kir::IfThenElse> stagedDrain(kir::Kernel& k, const StagedStore& s);

// The Alloc nodes of sD, sD1, ... after the kernel's leading allocations.
void allocStaging(kir::Kernel& k, const StagedStore& s);

}  // namespace heddle::passes::build
