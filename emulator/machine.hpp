#pragma once
// The emulator's internal state during a launch: the launch's shape and buffers, the block
// being run (its fibers, warps and shared memory), and the report being written. One launch
// runs at a time, on the calling OS thread.
#include <array>
#include <cstddef>
#include <cstdint>
#include <source_location>
#include <string>
#include <type_traits>
#include <vector>

#include "emulator/device_api.hpp"
#include "emulator/fiber.hpp"
#include "emulator/launch.hpp"
#include "emulator/report.hpp"

namespace flashjit::emulator::detail {

enum class ThreadState { runnable, at_barrier, at_warp_op, at_warpgroup_op, exited };

struct ThreadSlot {
  void* sp = nullptr;  // saved stack pointer while switched out
  Dim3 index;
  ThreadState state = ThreadState::runnable;
  std::uint64_t result = 0;       // this lane's result of the last warp collective
  std::source_location location;  // the last set_source_location, line 0 when none
};

/// A warp collective in progress: lanes arrive one by one; the last one computes all results.
struct WarpCollective {
  WarpOp op = WarpOp::sync;
  const WarpExchange* exchange = nullptr;  // the instruction, for WarpOp::exchange
  unsigned mask = 0;
  unsigned arrived = 0;
  int width = warpSize;
  std::array<std::uint64_t, 32> value{};
  std::array<int, 32> operand{};
  std::array<void*, 32> data{};  // WarpOp::exchange: each lane's operands
};

/// A warpgroup collective in progress (warpgroup.cpp): 128 threads arrive; the last computes.
constexpr int kWarpgroupThreads = 128;
struct WarpgroupCollective {
  const WarpgroupExchange* exchange = nullptr;
  std::array<unsigned, 4> arrived{};  // per warp of the group: the lanes that arrived
  int count = 0;
  std::array<void*, kWarpgroupThreads> data{};
};

/// Who touched a shared byte and when (Machine::time at the access). Records older than the
/// block's last barrier are stale: they order before everything now.
struct ShadowByte {
  enum class Readers : std::uint8_t { none, one, lanes, warps };  // lanes: several, one warp
  std::uint32_t write_time = 0;
  std::uint32_t read_time = 0;  // the latest read
  std::int16_t writer = -1;     // linear thread index, -1 none
  std::int16_t reader = -1;     // a reader's linear thread index (of its warp for `lanes`)
  Readers readers = Readers::none;
  std::uint8_t pending_copies = 0;  // cp.async copies in flight to this byte
  std::uint16_t wgmma_reads = 0;    // in-flight wgmma operations reading this byte
};
// No padding: shadows compare as 16 plain bytes.
static_assert(sizeof(ShadowByte) == 16 && std::has_unique_object_representations_v<ShadowByte>);
constexpr int kManyReaders = -2;  // Finding::other_thread for a race with several readers

/// A cp.async in flight: the global bytes were read at issue; they land at `dst` when group
/// `group` of the issuing thread completes.
struct AsyncCopy {
  std::byte* dst = nullptr;
  std::uint32_t group = 0;
  std::uint32_t bytes = 0;
  std::array<std::byte, 16> data{};
};

/// One thread's cp.async copies in issue order (so in group order); [head, end) in flight.
/// Reused across blocks and launches, so issuing allocates nothing once warm.
struct AsyncQueue {
  std::vector<AsyncCopy> copies;
  std::size_t head = 0;
  std::uint32_t open_group = 1;  // the group uncommitted copies will join; earlier ones committed
};

/// A wgmma.mma_async in flight (wgmma.cpp): computed at issue, its results land in the
/// threads' accumulator registers when a wgmma.wait_group completes its group.
struct WgmmaOp {
  const char* name = nullptr;
  std::uint32_t group = 0;
  int registers = 0;                          // per thread: N / 2
  std::array<float*, kWarpgroupThreads> d{};  // each thread's accumulator registers
  std::vector<float> result;                  // (128, registers)
  std::vector<std::uint32_t> chunks;          // shared offsets of the 16-byte chunks read
};

/// One warpgroup's wgmma operations in issue order (so in group order), all in flight.
struct WgmmaQueue {
  std::vector<WgmmaOp> ops;
  std::uint32_t open_group = 1;  // the group uncommitted operations will join
  bool fenced = false;           // a wgmma.fence since the block started
  std::vector<WgmmaOp> landed;   // the newest few landed since the last wgmma.fence
};

struct Machine {
  const LaunchConfig* config = nullptr;
  void (*body)(void*) = nullptr;
  void* body_context = nullptr;
  Report report;

  Dim3 block_index;
  std::vector<ThreadSlot> threads;
  std::vector<WarpCollective> warps;
  std::vector<unsigned> warp_live;  // per warp: lanes that exist and have not exited
  std::vector<WarpgroupCollective> warpgroups;
  int current = -1;  // running thread, -1 in the scheduler
  void* scheduler_sp = nullptr;
  bool abandoned = false;  // a finding ended the block early (deadlock, mismatched collective)
  FiberStacks stacks;

  std::vector<std::byte> shared;  // kSharedAlignment slack, then the dynamic buffer
  std::byte* shared_begin = nullptr;
  std::vector<ShadowByte> shadow;        // one per shared byte
  std::vector<AsyncQueue> async_queues;  // one per thread
  std::vector<WgmmaQueue> wgmma_queues;  // one per warpgroup

  // Happens-before for the race checker, on one clock that ticks at every synchronization
  // (restarted per launch; wrapping would take 4 billion collectives in one launch).
  // An access at time t is ordered before the current one when t < barrier_time (a
  // __syncthreads or the block start came between), or, for two lanes of one warp, when
  // t < warp_sync[warp] (a warp collective of all its live lanes came between) or
  // t < pair_sync[...] (a partial-mask collective holding both lanes came between).
  std::uint32_t time = 0;
  std::uint32_t barrier_time = 0;
  std::vector<std::uint32_t> warp_sync;  // per warp
  std::vector<std::uint32_t> pair_sync;  // per warp, 32 x 32 lanes
};

/// The machine of the running launch, or nullptr outside one.
Machine* active();
/// Makes `machine` the running one (nullptr to end the launch).
void set_active(Machine* machine);

/// Appends a finding for linear thread `thread` (fills kernel, block, thread, location;
/// prefixes the message with them), respecting Report::kMaxFindings.
void record(Machine& machine, int thread, Finding finding);

/// Runs block `block_index` of the launch to completion (or to a deadlock, reported).
void run_block(Machine& machine, Dim3 block_index);

/// Switches from the running thread back to the scheduler; returns when resumed.
void yield_to_scheduler(Machine& machine);

/// Ends the block after a finding that leaves it unable to go on: the running thread is never
/// resumed and the scheduler moves to the next block.
[[noreturn]] void abandon_block(Machine& machine);

/// The collective's instruction, for findings ("__shfl_xor_sync", "mma.sync.m16n8k16.f16").
const char* collective_name(const WarpCollective& collective);

/// Computes every lane's result of a shuffle, vote or sync all of whose lanes have arrived.
std::array<std::uint64_t, 32> collective_results(const WarpCollective& collective);

/// What a shared access conflicts with: nothing (what == nullptr), or the other thread
/// (kManyReaders for several) and how.
struct Conflict {
  int other = -1;
  const char* what = nullptr;  // "read after write", ...
  bool same_warp = false;      // the other side is (or the readers are) of the accessing warp
};
/// The first byte of an access that conflicts with an earlier access or that a cp.async is
/// still copying into (found == false when none).
struct RangeCheck {
  bool found = false;
  std::size_t index = 0;  // from the access's first byte
  bool pending = false;   // a copy in flight (reported before a race)
  bool wgmma = false;     // a write to bytes an in-flight wgmma reads (reported before a race)
  Conflict conflict;
};
/// Updates the shadow of `count` consecutive shared bytes for an access by `self` at the
/// machine's time.
RangeCheck touch_range(const Machine& machine, ShadowByte* shadow, std::size_t count, int self,
                       bool write);

/// Checks a global access of `thread` against the launch's buffers; false when it must be
/// skipped. `what` names the instruction in findings ("cp.async"; "" for plain accesses).
bool check_global_access(Machine& machine, int thread, const void* address, std::size_t bytes,
                         bool write, const char* what);
/// Checks a shared access of `thread` for bounds, races and copies in flight; false when it
/// must be skipped. `what` names the instruction in findings ("ldmatrix"; "" for plain ones).
bool check_shared_access(Machine& machine, int thread, const void* address, std::size_t bytes,
                         bool write, const char* what);

/// Lands `copy` of `thread` in shared memory: the bytes change and are recorded as its write.
void land_async_copy(Machine& machine, int thread, const AsyncCopy& copy);
/// Prepares the cp.async queues for a new block of `threads` threads; copies an abandoned
/// block left in flight are dropped.
void reset_async_copies(Machine& machine, std::size_t threads);
/// Lands every copy `thread` still has in flight, committed or not (it is exiting: the
/// hardware finishes its copies anyway).
void drain_async_copies(Machine& machine, int thread);
/// The thread with a copy in flight covering shared `address`, or -1.
int async_copy_owner(const Machine& machine, const std::byte* address);

/// Why the running thread waits in its warpgroup's collective, for the deadlock report.
std::string describe_warpgroup_wait(const Machine& machine, int thread);
/// Prepares the warpgroup collectives and wgmma queues for a new block of `threads` threads;
/// operations an abandoned block left in flight are dropped, with their shadow marks.
void reset_warpgroups(Machine& machine, std::size_t threads);
/// Reports a wgmma by the running thread's warpgroup that needed a wgmma.fence it did not get:
/// the warpgroup's first, or one using accumulators `d` (each thread's; `registers` each) that
/// a thread changed after the wait_group that delivered them.
void check_wgmma_fence(Machine& machine, const WgmmaQueue& queue,
                       const std::array<float*, kWarpgroupThreads>& d, int registers,
                       const char* name);
/// The in-flight wgmma reading shared `offset` and its warpgroup, or nullptr.
const WgmmaOp* wgmma_reader(const Machine& machine, std::size_t offset, int& warpgroup);

/// Formats a Dim3 as "(x,y,z)".
std::string format(Dim3 index);
/// Formats an address as hexadecimal digits (no "0x").
std::string hex(std::uintptr_t address);

}  // namespace flashjit::emulator::detail
