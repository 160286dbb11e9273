// heddle/interp/rt/hrt_fiber.cpp -- see hrt_fiber.h.
#include "heddle/interp/rt/hrt_fiber.h"

#include <cstdint>
#include <cstdlib>

#if defined(__x86_64__)

extern "C" void hrt_switch_asm(void** save, void* to);
extern "C" void hrt_fiber_trampoline();
// SysV x86-64: rbx rbp r12-r15, the SSE control/status word and the x87 control word are callee-saved.
__asm__(
    ".text\n"
    ".globl hrt_switch_asm\n"
    ".type hrt_switch_asm,@function\n"
    "hrt_switch_asm:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  subq $8, %rsp\n  stmxcsr (%rsp)\n  fnstcw 4(%rsp)\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  ldmxcsr (%rsp)\n  fldcw 4(%rsp)\n  addq $8, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size hrt_switch_asm, .-hrt_switch_asm\n"
    ".globl hrt_fiber_trampoline\n"
    ".type hrt_fiber_trampoline,@function\n"
    "hrt_fiber_trampoline:\n"
    "  movq %r12, %rdi\n"
    "  callq *%r13\n"
    "  ud2\n"
    ".size hrt_fiber_trampoline, .-hrt_fiber_trampoline\n");

namespace heddle_rt {

void* fiber_prepare(char* lo, std::size_t bytes, void (*fn)(void*), void* arg) {
  uintptr_t top = (reinterpret_cast<uintptr_t>(lo) + bytes) & ~uintptr_t(15);
  uint64_t* sp = reinterpret_cast<uint64_t*>(top);
  *--sp = reinterpret_cast<uint64_t>(&hrt_fiber_trampoline);  // ret target: rsp = top after it, so
                                                              // fn is entered with rsp = 8 mod 16
  *--sp = 0;                                              // rbp
  *--sp = 0;                                              // rbx
  *--sp = reinterpret_cast<uint64_t>(arg);                // r12
  *--sp = reinterpret_cast<uint64_t>(fn);                 // r13
  *--sp = 0;                                              // r14
  *--sp = 0;                                              // r15
  *--sp = 0x037F00001F80ull;                              // mxcsr (low), x87 control word (high)
  return sp;
}

void fiber_switch(void** save, void* to) { hrt_switch_asm(save, to); }

}  // namespace heddle_rt

#elif defined(__aarch64__)

extern "C" void hrt_switch_asm(void** save, void* to);
extern "C" void hrt_fiber_trampoline();
// AAPCS64: x19-x29, lr (x30), sp and d8-d15 are callee-saved.
__asm__(
    ".text\n"
    ".globl hrt_switch_asm\n"
    ".type hrt_switch_asm,%function\n"
    "hrt_switch_asm:\n"
    "  sub sp, sp, #176\n"
    "  stp x19, x20, [sp, #0]\n  stp x21, x22, [sp, #16]\n  stp x23, x24, [sp, #32]\n"
    "  stp x25, x26, [sp, #48]\n  stp x27, x28, [sp, #64]\n  stp x29, x30, [sp, #80]\n"
    "  stp d8, d9, [sp, #96]\n  stp d10, d11, [sp, #112]\n  stp d12, d13, [sp, #128]\n  stp d14, d15, [sp, #144]\n"
    "  mov x2, sp\n  str x2, [x0]\n"
    "  mov sp, x1\n"
    "  ldp x19, x20, [sp, #0]\n  ldp x21, x22, [sp, #16]\n  ldp x23, x24, [sp, #32]\n"
    "  ldp x25, x26, [sp, #48]\n  ldp x27, x28, [sp, #64]\n  ldp x29, x30, [sp, #80]\n"
    "  ldp d8, d9, [sp, #96]\n  ldp d10, d11, [sp, #112]\n  ldp d12, d13, [sp, #128]\n  ldp d14, d15, [sp, #144]\n"
    "  add sp, sp, #176\n"
    "  ret\n"
    ".globl hrt_fiber_trampoline\n"
    ".type hrt_fiber_trampoline,%function\n"
    "hrt_fiber_trampoline:\n"
    "  mov x0, x19\n"
    "  blr x20\n"
    "  brk #0\n");

namespace heddle_rt {

void* fiber_prepare(char* lo, std::size_t bytes, void (*fn)(void*), void* arg) {
  uintptr_t top = (reinterpret_cast<uintptr_t>(lo) + bytes) & ~uintptr_t(15);
  uint64_t* sp = reinterpret_cast<uint64_t*>(top - 176);
  for (int i = 0; i < 22; ++i) sp[i] = 0;
  sp[0] = reinterpret_cast<uint64_t>(arg);                    // x19
  sp[1] = reinterpret_cast<uint64_t>(fn);                     // x20
  sp[11] = reinterpret_cast<uint64_t>(&hrt_fiber_trampoline);  // x30
  return sp;
}

void fiber_switch(void** save, void* to) { hrt_switch_asm(save, to); }

}  // namespace heddle_rt

#else  // ucontext fallback

#include <ucontext.h>

namespace heddle_rt {

namespace {
struct Ctx {
  ucontext_t uc;
  void (*fn)(void*);
  void* arg;
};
void start(unsigned hi, unsigned lo) {
  Ctx* c = reinterpret_cast<Ctx*>((uintptr_t(hi) << 32) | uintptr_t(lo));
  c->fn(c->arg);
  std::abort();
}
}  // namespace

void* fiber_prepare(char* lo, std::size_t bytes, void (*fn)(void*), void* arg) {
  Ctx* c = reinterpret_cast<Ctx*>(lo);  // the context lives at the bottom of its own stack
  getcontext(&c->uc);
  c->fn = fn;
  c->arg = arg;
  c->uc.uc_stack.ss_sp = lo + sizeof(Ctx);
  c->uc.uc_stack.ss_size = bytes - sizeof(Ctx);
  c->uc.uc_link = nullptr;
  uintptr_t p = reinterpret_cast<uintptr_t>(c);
  makecontext(&c->uc, reinterpret_cast<void (*)()>(&start), 2, unsigned(p >> 32), unsigned(p));
  return c;
}

void fiber_switch(void** save, void* to) {
  thread_local Ctx main_ctx;
  Ctx* from = *save ? reinterpret_cast<Ctx*>(*save) : &main_ctx;
  *save = from;
  swapcontext(&from->uc, &reinterpret_cast<Ctx*>(to)->uc);
}

}  // namespace heddle_rt

#endif
