// backendFor: the one place a target's vendor picks its runtime (backend.h).
#include "heddle/runtime/backend.h"

#include "heddle/ir/errors.h"

namespace heddle::rt {

const RuntimeBackend& backendFor(Backend b) { return b == Backend::Hip ? hipBackend() : cudaBackend(); }

const RuntimeBackend& backendFor(const TargetInfo& t) { return backendFor(t.backend); }

const RuntimeBackend& backendNamed(const std::string& name) {
  for (const RuntimeBackend* b : {&cudaBackend(), &hipBackend()})
    if (name == b->name()) return *b;
  fail<InputError>("runtime backend '", name, "': the backends are 'cuda' and 'hip'");
}

}  // namespace heddle::rt
