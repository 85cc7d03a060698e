#include "emulator/fiber.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define FLASHJIT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FLASHJIT_ASAN 1
#endif
#endif
#if defined(FLASHJIT_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if !defined(__x86_64__)
#error "flashjit's emulator fibers are implemented for x86-64 (System V ABI) only"
#endif

// System V x86-64: rbx, rbp, r12-r15 are callee-saved; everything else the compiler already
// assumes clobbered across the call. MXCSR and the x87 control word are never changed by
// kernels, so they are not saved.
asm(R"(
  .pushsection .text
  .globl flashjit_fiber_switch
  .type flashjit_fiber_switch, @function
flashjit_fiber_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size flashjit_fiber_switch, .-flashjit_fiber_switch
  .popsection
)");

namespace flashjit::emulator {

FiberStacks::~FiberStacks() {
  if (base_ != nullptr) munmap(base_, count_ * stride_);
}

void FiberStacks::reserve(std::size_t count) {
  if (count <= count_) return;
  if (base_ != nullptr) munmap(base_, count_ * stride_);
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  stride_ = kStackBytes + page;
  void* memory = mmap(nullptr, count * stride_, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED) throw std::bad_alloc();
  base_ = static_cast<std::byte*>(memory);
  count_ = count;
  for (std::size_t i = 0; i < count; ++i) mprotect(base_ + i * stride_, page, PROT_NONE);
}

std::byte* FiberStacks::top(std::size_t index) const { return base_ + (index + 1) * stride_; }

void* fiber_prepare(std::byte* stack_top, void (*entry)()) {
#if defined(FLASHJIT_ASAN)
  // A fiber that exited or was abandoned left its frames' redzones poisoned (it never returned
  // from them); the stack starts clean for the next one.
  __asan_unpoison_memory_region(stack_top - FiberStacks::kStackBytes, FiberStacks::kStackBytes);
#endif
  auto top = reinterpret_cast<std::uintptr_t>(stack_top) & ~std::uintptr_t{15};
  auto* sp = reinterpret_cast<std::uintptr_t*>(top);
  // After the six pops and `ret` into entry, rsp = top - 8: the alignment a callee expects
  // right after a `call`. The 0 is entry's (never used) return address.
  *--sp = 0;
  *--sp = reinterpret_cast<std::uintptr_t>(entry);
  for (int i = 0; i < 6; ++i) *--sp = 0;  // rbp, rbx, r12-r15
  return sp;
}

// AddressSanitizer follows a switch of stacks only when told; otherwise it takes a fiber's
// stack for the thread's own, and its handling of calls that do not return and its reports go
// wrong (the protocol of sanitizer/common_interface_defs.h: start before the switch, finish
// right after it).
void fiber_switch(void** save, void* load, StackBounds to) {
#if defined(FLASHJIT_ASAN)
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, to.bottom, to.size);
  flashjit_fiber_switch(save, load);
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#else
  (void)to;
  flashjit_fiber_switch(save, load);
#endif
}

void fiber_leave(void* load, StackBounds to) {
#if defined(FLASHJIT_ASAN)
  __sanitizer_start_switch_fiber(nullptr, to.bottom, to.size);
#else
  (void)to;
#endif
  void* never_resumed = nullptr;
  flashjit_fiber_switch(&never_resumed, load);
  __builtin_unreachable();
}

void fiber_started(StackBounds* from) {
#if defined(FLASHJIT_ASAN)
  __sanitizer_finish_switch_fiber(nullptr, &from->bottom, &from->size);
#else
  (void)from;
#endif
}

}  // namespace flashjit::emulator
