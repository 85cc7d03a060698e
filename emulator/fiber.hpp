#pragma once
// Fibers: the CPU stacks the emulated threads run on, and the switch between them. A switch
// saves only the callee-saved registers (a plain function call on both sides), which is what
// makes a warp collective cost nanoseconds rather than the microsecond of swapcontext's
// signal-mask system call.
#include <cstddef>

namespace flashjit::emulator {

/// `count` stacks of `bytes` each, every one with an inaccessible guard page below it so an
/// overflow faults instead of corrupting a neighbour. Reused across blocks and launches.
class FiberStacks {
 public:
  FiberStacks() = default;
  FiberStacks(const FiberStacks&) = delete;
  FiberStacks& operator=(const FiberStacks&) = delete;
  ~FiberStacks();

  /// Makes room for at least `count` stacks (keeps the current ones when enough).
  void reserve(std::size_t count);
  /// One past the highest byte of stack `index` (stacks grow down).
  std::byte* top(std::size_t index) const;

  static constexpr std::size_t kStackBytes = 64 * 1024;

 private:
  std::byte* base_ = nullptr;
  std::size_t count_ = 0;
  std::size_t stride_ = 0;  // stack plus guard page
};

/// Prepares a fresh fiber on the stack ending at `stack_top` (FiberStacks::kStackBytes long)
/// that starts in `entry` (which must never return and calls fiber_started first) on its first
/// switch-in; returns its saved stack pointer.
void* fiber_prepare(std::byte* stack_top, void (*entry)());

/// Saves the running context's stack pointer to `*save` and resumes the one saved in `load`.
/// Call it through fiber_switch, which tells AddressSanitizer about the change of stacks.
extern "C" void flashjit_fiber_switch(void** save, void* load);

/// A stack's lowest byte and size: what AddressSanitizer needs to know of the stack a switch
/// goes to (unused in builds without it).
struct StackBounds {
  const void* bottom = nullptr;
  std::size_t size = 0;
};

/// flashjit_fiber_switch to the context in `load`, which runs on `to`; returns when switched
/// back.
void fiber_switch(void** save, void* load, StackBounds to);
/// A switch to `load` (on `to`) by a fiber that is never resumed: AddressSanitizer drops its
/// stack's bookkeeping.
[[noreturn]] void fiber_leave(void* load, StackBounds to);
/// A fiber's first act on its first switch-in: completes the switch for AddressSanitizer and
/// gives the bounds of the stack that switched to it.
void fiber_started(StackBounds* from);

}  // namespace flashjit::emulator
