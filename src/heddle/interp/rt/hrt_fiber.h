// heddle/interp/rt/hrt_fiber.h -- minimal stackful context switch for the interpreter's GPU threads.
// x86-64 and AArch64 use a hand-written switch (callee-saved registers only: no signal mask syscall,
// so hundreds of thousands of switches stay cheap); other hosts fall back to ucontext.
#pragma once
#include <cstddef>

namespace heddle_rt {

// Prepares a stack [lo, lo + bytes) so that the first switch to the returned sp calls fn(arg).
// fn must never return (it switches away for the last time instead).
void* fiber_prepare(char* lo, std::size_t bytes, void (*fn)(void*), void* arg);
// Saves the current context into *save and resumes `to`.
void fiber_switch(void** save, void* to);

}  // namespace heddle_rt
