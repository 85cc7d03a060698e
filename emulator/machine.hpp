#pragma once
// The emulator's internal state during a launch: the launch's shape and buffers, the block
// being run (its fibers, warps and shared memory), and the report being written. One launch
// runs at a time, on the calling OS thread.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "emulator/device_api.hpp"
#include "emulator/fiber.hpp"
#include "emulator/launch.hpp"
#include "emulator/report.hpp"

namespace flashjit::emulator::detail {

enum class ThreadState { runnable, at_barrier, at_warp_op, exited };

struct ThreadSlot {
  void* sp = nullptr;  // saved stack pointer while switched out
  Dim3 index;
  ThreadState state = ThreadState::runnable;
  std::uint64_t result = 0;  // this lane's result of the last warp collective
};

/// A warp collective in progress: lanes arrive one by one; the last one computes all results.
struct WarpCollective {
  WarpOp op = WarpOp::sync;
  unsigned mask = 0;
  unsigned arrived = 0;
  int width = warpSize;
  std::array<std::uint64_t, 32> value{};
  std::array<int, 32> operand{};
};

/// Who last touched a shared byte in the current barrier interval (epoch).
struct ShadowByte {
  std::uint32_t epoch = 0;
  int writer = -1;  // linear thread index, -1 none
  int reader = -1;  // linear thread index, -1 none, kManyReaders several
};
constexpr int kManyReaders = -2;

struct Machine {
  const LaunchConfig* config = nullptr;
  void (*body)(void*) = nullptr;
  void* body_context = nullptr;
  Report report;

  Dim3 block_index;
  std::vector<ThreadSlot> threads;
  std::vector<WarpCollective> warps;
  int current = -1;  // running thread, -1 in the scheduler
  void* scheduler_sp = nullptr;
  FiberStacks stacks;

  std::vector<std::byte> shared;  // kSharedAlignment slack, then the dynamic buffer
  std::byte* shared_begin = nullptr;
  std::vector<ShadowByte> shadow;  // one per shared byte
  std::uint32_t epoch = 0;         // barrier intervals since the launch began
};

/// The machine of the running launch, or nullptr outside one.
Machine* active();
/// Makes `machine` the running one (nullptr to end the launch).
void set_active(Machine* machine);

/// Appends a finding for linear thread `thread` (fills kernel, block, thread; prefixes the message
/// with them), respecting Report::kMaxFindings.
void record(Machine& machine, int thread, Finding finding);

/// Runs block `block_index` of the launch to completion (or to a deadlock, reported).
void run_block(Machine& machine, Dim3 block_index);

/// Switches from the running thread back to the scheduler; returns when resumed.
void yield_to_scheduler(Machine& machine);

/// Computes every lane's result of a collective all of whose lanes have arrived.
std::array<std::uint64_t, 32> collective_results(const WarpCollective& collective);

/// Formats a Dim3 as "(x,y,z)".
std::string format(Dim3 index);

}  // namespace flashjit::emulator::detail
