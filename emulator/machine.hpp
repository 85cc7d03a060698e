#pragma once
// The emulator's internal state during a launch: the launch's shape and buffers, the block
// being run (its fibers, warps and shared memory), and the report being written. One launch
// runs at a time, on the calling OS thread.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <source_location>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "emulator/device_api.hpp"
#include "emulator/fiber.hpp"
#include "emulator/launch.hpp"
#include "emulator/memory_recorder.hpp"
#include "emulator/report.hpp"

namespace flashjit::emulator::detail {

// at_mbarrier: suspended in an mbarrier try_wait until the phase completes (mbarrier.cpp);
// at_setmaxnreg: its warpgroup's setmaxnreg.inc waits for registers (register_budget.cpp);
// at_cluster_barrier: in barrier.cluster.wait until every live thread of the cluster arrived
// (cluster.cpp); at_semaphore: spinning in an acquire load until a global integer holds a value
// (semaphore.cpp).
enum class ThreadState {
  runnable,
  at_barrier,
  at_warp_op,
  at_warpgroup_op,
  at_named_barrier,
  at_mbarrier,
  at_setmaxnreg,
  at_cluster_barrier,
  at_semaphore,
  exited
};

struct ThreadSlot {
  void* sp = nullptr;  // saved stack pointer while switched out
  Dim3 index;
  ThreadState state = ThreadState::runnable;
  std::uint64_t result = 0;        // this lane's result of the last warp collective
  std::source_location location;   // the last set_source_location, line 0 when none
  std::uint32_t wait_barrier = 0;  // at_named_barrier: the id; at_mbarrier: its offset
  std::int64_t wait_phase = 0;     // at_mbarrier, at_cluster_barrier: the phase it waits for
  std::int64_t cluster_arrived = -1;  // the cluster barrier phase it last arrived in
  const int* wait_semaphore = nullptr;  // at_semaphore: the integer, and the value it waits for
  int wait_value = 0;
  bool waited_previous_grid = false;  // griddepcontrol.wait done: global memory is safe to touch
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
  std::uint16_t pending_tma = 0;    // TMA loads written here whose mbarrier phase is open
  std::uint16_t tma_reads = 0;      // TMA stores reading this byte, not yet waited for
  std::uint32_t reader_warps = 0;   // for `warps`: bit w set when warp w read (32 warps at most)
};
// No padding: shadows compare as 24 plain bytes.
static_assert(sizeof(ShadowByte) == 24 && std::has_unique_object_representations_v<ShadowByte>);
constexpr int kManyReaders = -2;  // Finding::other_thread for a race with several readers
constexpr std::size_t kShadowChunk = 16;  // shared bytes per chunk of Machine::warp_reads

/// A cp.async in flight: the global bytes were read at issue; they land at `dst` when group
/// `group` of the issuing thread completes.
struct AsyncCopy {
  std::byte* dst = nullptr;
  std::uint32_t group = 0;
  std::uint32_t bytes = 0;
  std::uint32_t source_bytes = 0;  // read from global memory (the rest is zero fill)
  std::array<std::byte, 16> data{};
};

/// One thread's cp.async copies in issue order (so in group order); [head, end) in flight.
/// Reused across blocks and launches, so issuing allocates nothing once warm.
struct AsyncQueue {
  std::vector<AsyncCopy> copies;
  std::size_t head = 0;
  std::uint32_t open_group = 1;  // the group uncommitted copies will join; earlier ones committed
};

/// The RS form's A operand: each thread's 4 registers (where the kernel keeps its fragment)
/// and their contents at a point the wgmma rules care about (wgmma_register_a.cpp).
struct RegisterA {
  std::array<const std::uint32_t*, 128> at{};
  std::vector<std::uint32_t> words;  // (128, 4)
};

/// A wgmma.mma_async in flight (wgmma.cpp): computed at issue, its results land in the
/// threads' accumulator registers when a wgmma.wait_group completes its group.
struct WgmmaOp {
  const char* name = nullptr;
  std::uint32_t group = 0;
  int registers = 0;                          // per thread: N / 2
  std::array<float*, kWarpgroupThreads> d{};  // each thread's accumulator registers
  RegisterA a;                                // the RS form's A at issue (at[0] null for SS)
  std::vector<float> result;                  // (128, registers)
  std::vector<std::uint32_t> chunks;          // shared offsets of the 16-byte chunks read
  std::uint32_t poison = 0;  // the bits its accumulators hold until delivered (a NaN)
};

/// One warpgroup's wgmma operations in issue order (so in group order), all in flight.
struct WgmmaQueue {
  std::vector<WgmmaOp> ops;
  std::uint32_t open_group = 1;  // the group uncommitted operations will join
  bool fenced = false;           // a wgmma.fence since the block started
  std::vector<WgmmaOp> landed;   // the newest few landed since the last wgmma.fence
  std::vector<RegisterA> a_seen;  // A operands RS wgmma read: contents at the last fence or read
};

/// An mbarrier (mbarrier.cpp): the 64-bit object lives in shared memory; its state lives here,
/// keyed by its shared offset. `phase` counts completed phases (the parity is its low bit).
struct Mbarrier {
  std::uint32_t offset = 0;
  bool live = false;               // initialised and not invalidated
  std::uint32_t expected = 0;      // arrivals per phase (init's count)
  std::uint32_t pending = 0;       // arrivals still missing in the current phase
  std::int64_t tx = 0;             // transaction bytes still expected in the current phase
  std::int64_t phase = 0;          // completed phases
  int expect_thread = -1;          // the thread of the latest expect_tx, for findings
  std::vector<std::int64_t> seen;  // per thread: the phase its last wait named (-1)
  std::int64_t observed = -1;      // the latest phase a wait returned true for
  std::int64_t unobserved_reported = -1;  // the phase an unobserved arrival was reported in
  std::int64_t init_epoch = 0;  // cluster barrier phases completed when it was initialised
  // The race checker's release and acquire: each arrival of this block's threads in the current
  // phase (thread, clock after it), and those of the last completed phase, which a wait that
  // sees it complete orders before the waiter.
  std::vector<std::pair<int, std::uint32_t>> arrivals, completed_arrivals;
};

/// A cp.async.bulk.tensor load in flight (tma.cpp): its bytes are in shared memory already,
/// marked pending in the shadow, until the async proxy completes it (complete_tx on `barrier`).
struct TmaLoad {
  std::uint32_t barrier = 0;          // the mbarrier's shared offset
  std::uint32_t bytes = 0;            // the box's bytes, out-of-bounds fill included
  int thread = -1;                    // the issuing thread
  std::vector<std::uint32_t> chunks;  // shared offsets of the 16-byte chunks written
};

/// Which TMA load last wrote a 16-byte chunk of shared memory, for kv_loads_ahead: its tensor
/// map and the load batch of that map in this block (consecutive loads of one map that complete
/// on the same mbarrier phase, such as the panels of one K tile, are one batch).
struct LoadOrigin {
  const void* map = nullptr;
  std::uint32_t batch = 0;
};
/// Where the last TMA load into a 16-byte chunk of shared memory landed: its mbarrier's offset
/// and the phase its bytes counted toward (-1: none since the block began or a generic write
/// since), for tma_landing.cpp.
struct TmaLanding {
  std::uint32_t barrier = 0;
  std::int64_t phase = -1;
};
/// The load batches of one tensor map issued in this block so far, where the latest one
/// completes (an mbarrier's offset and phase: a load elsewhere starts a new batch), and per
/// batch the fewest batches issued after it when a wgmma read it (-1: none read it).
struct MapLoads {
  const void* map = nullptr;
  std::uint32_t batches = 0;
  std::uint32_t barrier = 0;
  std::int64_t phase = -1;
  std::vector<std::int64_t> fewest_ahead;
  // Per batch the most batches issued after it when a wgmma read it as its A operand (-1: none
  // read it), for q_loads_ahead.
  std::vector<std::int64_t> most_ahead_as_a;
};

/// A TMA store in flight: its shared source is guarded until its bulk group is waited for.
struct TmaStore {
  std::uint32_t group = 0;
  std::vector<std::uint32_t> chunks;  // shared offsets of the 16-byte chunks read
};
/// A bulk reduction in flight (cp.reduce.async.bulk; emulator/bulk_reduce.cpp): its shared
/// source is guarded until a wait_group of either form covers its group, its global destination
/// until a wait_group without .read does.
struct BulkReduce {
  TmaStore source;  // its group and the 16-byte chunks it reads, guarded as a TMA store's
  std::uint32_t bytes = 0;
  std::uintptr_t destination = 0;
  bool source_released = false;
};
struct BulkQueue {
  std::vector<TmaStore> stores;
  std::vector<BulkReduce> reductions;
  std::uint32_t open_group = 1;
};

/// A named barrier (bar.sync / bar.arrive with an id): the count its first arrival set and
/// the threads that arrived in the current round.
struct NamedBarrier {
  int expected = 0;  // 0: idle
  int arrived = 0;
  int first = -1;                             // the thread whose arrival set `expected`
  std::array<std::uint8_t, 32> warp_lanes{};  // per warp: its lanes arrived this round
};
constexpr int kNamedBarriers = 16;

/// The CTA's register file as setmaxnreg moves it (register_budget.cpp): what each warpgroup's
/// threads hold, a blocked .inc's request, and what no warpgroup holds.
struct RegisterBudget {
  std::vector<int> per_thread;  // per warpgroup: registers each of its threads holds
  std::vector<int> requested;   // per warpgroup: the count a waiting .inc asks for, 0 none
  std::int64_t free = 0;        // registers of the CTA's pool held by no warp
};

/// The exploration of orderings (LaunchConfig::explore_seed): a generator reseeded per block
/// from the seed and the block's index, so each block's choices replay alone.
struct Explorer {
  bool on = false;
  std::uint64_t seed = 0;
  std::uint64_t state = 0;
};

struct Machine;

/// The CTAs of one cluster, run together (cluster.cpp): each a Machine of its own, by rank,
/// and the cluster barrier (barrier.cluster.arrive / wait) they share.
struct Cluster {
  std::vector<Machine*> ranks;
  std::int64_t barrier_phase = 0;  // completed phases of the cluster barrier
};

struct Machine {
  const LaunchConfig* config = nullptr;
  void (*body)(void*) = nullptr;
  void* body_context = nullptr;
  Report report;

  Dim3 block_index;
  Cluster* cluster = nullptr;  // the cluster this block runs in (one CTA: a cluster of one)
  unsigned rank = 0;           // %cluster_ctarank
  std::size_t stack_base = 0;  // its threads' first stack in `stacks`
  bool finished = false;       // every thread exited and the block's end was processed
  std::vector<ThreadSlot> threads;
  std::vector<WarpCollective> warps;
  std::vector<unsigned> warp_live;  // per warp: lanes that exist and have not exited
  std::vector<WarpgroupCollective> warpgroups;
  int current = -1;  // running thread, -1 in the scheduler
  void* scheduler_sp = nullptr;
  StackBounds scheduler_stack;  // the scheduler's (the OS thread's) stack, for AddressSanitizer
  bool abandoned = false;  // a finding ended the block early (deadlock, mismatched collective)
  FiberStacks* stacks = nullptr;  // this launch's: LaunchConfig::stacks, else own_stacks
  FiberStacks own_stacks;

  std::vector<std::byte> shared;  // kSharedAlignment slack, then the dynamic buffer
  std::byte* shared_begin = nullptr;
  std::vector<ShadowByte> shadow;        // one per shared byte
  std::vector<AsyncQueue> async_queues;  // one per thread
  std::vector<WgmmaQueue> wgmma_queues;  // one per warpgroup
  std::vector<Mbarrier> mbarriers;       // every mbarrier initialised in this block
  std::vector<TmaLoad> tma_loads;        // in flight
  std::vector<LoadOrigin> load_origins;  // one per 16-byte chunk of shared memory
  std::vector<TmaLanding> landings;      // one per 16-byte chunk of shared memory
  std::vector<MapLoads> map_loads;       // one per tensor map loaded in this block
  std::vector<BulkQueue> bulk_queues;    // TMA stores and bulk reductions, one queue per thread
  std::size_t reductions_in_flight = 0;  // bulk reductions whose destination is not yet complete
  std::array<NamedBarrier, kNamedBarriers> named_barriers{};
  std::vector<std::uint32_t> proxy_fence_time;  // per thread: its last fence.proxy.async
  RegisterBudget registers;
  BlockMemory memory;  // the memory model's part of this block (memory_recorder.hpp)
  std::uint32_t wgmma_issued = 0;  // wgmma.mma_async issued so far: each poison's id
  Explorer explorer;

  // Happens-before for the race checker, on one clock that ticks at every synchronization
  // (restarted per launch; wrapping would take 4 billion collectives in one launch).
  // An access at time t is ordered before the current one when t < barrier_time (a
  // __syncthreads or the block start came between), or, for two lanes of one warp, when
  // t < warp_sync[warp] (a warp collective of all its live lanes came between) or
  // t < pair_sync[...] (a partial-mask collective holding both lanes came between); and for
  // any two threads when t < warps_sync[...] (a named-barrier round holding every live lane
  // of both threads' warps came between), or when t < handoff_sync[...] (the earlier thread
  // arrived on an mbarrier after t, and a thread of the later one's warp has since seen that
  // phase complete: arrive releases, a wait that returns true acquires).
  std::uint32_t time = 0;
  std::uint32_t barrier_time = 0;
  std::vector<std::uint32_t> warp_sync;   // per warp
  std::vector<std::uint32_t> pair_sync;   // per warp, 32 x 32 lanes
  std::vector<std::uint32_t> warps_sync;  // per pair of warps, warps x warps
  std::vector<std::uint32_t> handoff_sync;  // per (arriving thread, waiting warp), threads x warps
  // Per 16-byte shared chunk and warp (chunks x warps): the stamp of that warp's latest read of
  // any byte of the chunk, at or after the byte's own. A byte's shadow keeps only its latest
  // read of all warps; a write ordered after several reader warps by their handoffs (each warp's
  // threads arrived on an mbarrier after their reads, at different times) needs each warp's.
  std::vector<std::uint32_t> warp_reads;
};

/// The machine of the running launch, or nullptr outside one.
Machine* active();
/// Makes `machine` the running one (nullptr to end the launch).
void set_active(Machine* machine);

/// Appends a finding for linear thread `thread` (fills kernel, block, thread, location;
/// prefixes the message with them), respecting Report::kMaxFindings.
void record(Machine& machine, int thread, Finding finding);

/// Runs the blocks of one cluster, `cluster.ranks[r]` as block `blocks[r]`, to completion (or
/// to a deadlock, reported), interleaving their threads: each pass resumes every runnable
/// thread of rank 0, then of rank 1, and so on. A cluster of one runs as a lone block.
void run_cluster(Cluster& cluster, const std::vector<Dim3>& blocks);

/// The machine of CTA `rank` of `self`'s cluster, or nullptr (reported for the running thread
/// as `what`'s invalid operand) when the cluster has no such rank.
Machine* cluster_peer(Machine& self, unsigned rank, const char* what);
/// Whether `peer`'s shared memory may still be reached from `self`: false (reported) once
/// every thread of `peer` has exited (its shared memory may belong to another block by then).
bool peer_alive(Machine& self, const Machine& peer, const char* what);
/// Whether an operation of `self` on the mbarrier `barrier` of `peer` is ordered after the
/// barrier's init: always within a CTA; across CTAs only when a cluster barrier completed
/// after the init (reported otherwise).
bool peer_init_ordered(Machine& self, const Machine& peer, const Mbarrier& barrier,
                       const char* what);
/// Throws std::invalid_argument for a cluster shape CUDA refuses: an extent of 0 or one that
/// does not divide the grid's, or more than kMaxClusterBlocks blocks.
void check_cluster_shape(const LaunchConfig& config);
/// Adds the findings, work and schedule counters of `part` (another block's machine of the
/// same launch) to `into`.
void merge_report(Report& into, const Report& part);
/// " of CTA rank R" when `owner` (the block whose shared memory an operation reaches) is not
/// `issuer`, "" when it is: for findings that name where the operation landed.
std::string of_peer(const Machine& issuer, const Machine& owner);
/// A thread of `machine` exited: a cluster barrier phase waiting only for it may complete.
void cluster_thread_exited(Machine& machine);
/// Why `thread` waits in barrier.cluster.wait, for the deadlock report.
std::string describe_cluster_wait(const Machine& machine, int thread);
/// Why `thread` (at_semaphore) still spins: the semaphore, the value it waits for and holds.
std::string describe_semaphore_wait(const Machine& machine, int thread);

/// One arrival (with `tx_bytes` announced first) by thread `self` of `issuer` on `barrier`,
/// an mbarrier of `owner` (the issuer's own or a peer's in the cluster); `what` names the
/// instruction in findings, which go to the issuer.
void mbarrier_arrive_on(Machine& owner, Mbarrier& barrier, Machine& issuer, int self,
                        const char* what, std::uint32_t tx_bytes);

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
  std::size_t index = 0;   // from the access's first byte
  bool pending = false;    // a copy in flight (reported before a race)
  bool wgmma = false;      // a write to bytes an in-flight wgmma reads (reported before a race)
  bool tma = false;        // bytes a TMA load wrote whose mbarrier phase is still open
  bool tma_store = false;  // a write to bytes an in-flight TMA store reads
  Conflict conflict;
};
/// Updates the shadow of `count` consecutive shared bytes for an access by `self` at the
/// machine's time.
RangeCheck touch_range(Machine& machine, ShadowByte* shadow, std::size_t count, int self,
                       bool write);

/// Appends to `finding` where global `address` lies relative to the nearest registered buffer
/// (and sets its buffer and offset).
void locate_global(const LaunchConfig& config, std::uintptr_t address, std::size_t bytes,
                   Finding& finding);
/// Checks a global access of `thread` against the launch's buffers, and against the bytes bulk
/// reductions still add into; false when it must be skipped. `what` names the instruction in
/// findings ("cp.async"; "" for plain accesses).
bool check_global_access(Machine& machine, int thread, const void* address, std::size_t bytes,
                         bool write, const char* what);
/// check_global_access without the bulk reductions: for a bulk reduction's own destination,
/// which any number of reductions may add into at once.
bool check_global_bounds(Machine& machine, int thread, const void* address, std::size_t bytes,
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
/// The poison of the `issued`-th wgmma (accumulator_poison.cpp): a signalling NaN tagged as an
/// in-flight accumulator, with an id from `issued`.
std::uint32_t accumulator_poison(std::uint32_t issued);
/// Fills every thread's accumulator registers of `op` with its poison.
void poison_accumulators(const WgmmaOp& op);
/// Whether thread `slot` (of the running thread's warpgroup) left `op`'s accumulators holding
/// their poison; if not, reports the first register it wrote while `op` was in flight.
bool check_accumulators_untouched(Machine& machine, const WgmmaOp& op, int slot);
/// The RS form's fence rule for `op`'s A registers (filled in `op.a`, contents taken here):
/// registers the warpgroup's RS wgmma read before and a thread changed since the last
/// wgmma.fence (or since that read, with no fence between) are reported, first thread only.
void check_register_a_fence(Machine& machine, WgmmaQueue& queue, WgmmaOp& op);
/// At a wgmma.fence: the A registers seen so far are taken as fenced in their present state.
void fence_register_a(WgmmaQueue& queue);
/// At the wait_group that lands `op`: A registers a thread changed while it was in flight are
/// reported, first thread only.
void check_register_a_untouched(Machine& machine, const WgmmaOp& op);
/// The in-flight wgmma reading shared `offset` and its warpgroup, or nullptr.
const WgmmaOp* wgmma_reader(const Machine& machine, std::size_t offset, int& warpgroup);

/// Prepares mbarriers, TMA copies, named barriers and proxy fences for a new block of
/// `threads` threads; what an abandoned block left in flight is dropped with its shadow marks.
void reset_async_proxy(Machine& machine, std::size_t threads);
/// Completes the TMA loads in flight (the async proxy finishes them when no thread can run):
/// all of them, or one at random when exploring; false when there was none.
bool complete_tma_loads(Machine& machine);
/// Exploring: between threads' steps, sometimes lands one TMA load in flight early.
void land_tma_load_early(Machine& machine);
/// Exploring: how often each choice goes the unusual way (explore.cpp), one time in ...
constexpr std::uint32_t kLandAtIssue = 8, kLandBetweenSteps = 4, kTryWaitFails = 2;
/// The launch's exploration seed: config.explore_seed, else FLASHJIT_EMULATOR_EXPLORE's value
/// (throws std::invalid_argument when it is not a decimal integer), else none.
std::optional<std::uint64_t> explore_seed(const LaunchConfig& config);
/// Starts the exploration of block `linear_block` (seeded from the launch's seed and it).
void start_exploring_block(Machine& machine, std::uint64_t linear_block);
/// Exploring: true one time in `odds`, from the block's generator; false when not exploring.
bool explore_chance(Machine& machine, std::uint32_t odds);
/// Exploring: a choice in [0, count) from the block's generator (count > 0).
std::size_t explore_pick(Machine& machine, std::size_t count);
/// At the end of a block: lands what is in flight, folds kv_loads_ahead and q_loads_ahead, and
/// reports mbarrier phases that received every arrival but still expect transaction bytes.
void finish_async_proxy(Machine& machine);
/// The TMA stores of `thread` release their shared sources (it is exiting).
void drain_tma_stores(Machine& machine, int thread);
/// The async proxy reads `source`'s chunks until a bulk wait_group: generic writes to them are
/// reported (tma_store_in_flight) from guard_bulk_source until release_bulk_source.
void guard_bulk_source(Machine& machine, const TmaStore& source);
void release_bulk_source(Machine& machine, const TmaStore& source);
/// Completes `queue`'s bulk reductions of groups up to `last_group`: their shared sources are
/// free again, and with `destinations` (a wait_group without .read) their global destinations.
void complete_bulk_reductions(Machine& machine, BulkQueue& queue, std::uint32_t last_group,
                              bool destinations);
/// Reports (bulk_reduce_in_flight) a generic access by `thread` to global bytes that a bulk
/// reduction of this block still adds into; call only when machine.reductions_in_flight > 0.
void check_bulk_reduce_destination(Machine& machine, int thread, std::uintptr_t address,
                                   std::size_t bytes, bool write, const char* what);
/// Whether shared offset `offset` is the source of a bulk reduction in flight (else of a TMA
/// store), for the finding that names what still reads it.
bool is_bulk_reduce_source(const Machine& machine, std::size_t offset);
/// The live mbarrier at shared `offset`, or nullptr.
Mbarrier* find_mbarrier(Machine& machine, std::uint32_t offset);
/// complete_tx(bytes) on `barrier` by the async proxy: the transaction count drops (below zero
/// when the copy beat its expect_tx) and the phase may complete.
void mbarrier_complete_tx(Machine& machine, Mbarrier& barrier, std::uint32_t bytes);
/// Why `thread`, suspended in an mbarrier wait, waits (for the deadlock report); `kind` becomes
/// mbarrier_tx_mismatch when the phase got all its arrivals but expects bytes never coming.
std::string describe_mbarrier_wait(const Machine& machine, int thread, FindingKind& kind);
/// Why `thread` waits at a named barrier, for the deadlock report.
std::string describe_named_barrier_wait(const Machine& machine, int thread);
/// Gives each warpgroup of a new block of `threads` threads the launch's register count and
/// the rest of the register file to the pool.
void reset_register_budget(Machine& machine, std::size_t threads);
/// Why `thread` waits in setmaxnreg.inc, for the deadlock report.
std::string describe_register_wait(const Machine& machine, int thread);
/// Samples kv_loads_ahead for a wgmma whose B operand starts at shared `offset`: the batches
/// of that operand's tensor map issued after the one that wrote it. The block's end folds the
/// samples into the report (finish_async_proxy), but a map's first and last batches'.
void count_loads_ahead(Machine& machine, std::uint32_t offset);
/// Samples q_loads_ahead for a wgmma whose A operand starts at shared `offset`, as
/// count_loads_ahead does for B; the block's end folds each batch's last sample (its most),
/// but a map's last batch's.
void count_a_loads_ahead(Machine& machine, std::uint32_t offset);
/// `load` landed, its bytes counting toward phase `phase` of its mbarrier (tma_landing.cpp).
void note_landing(Machine& machine, const TmaLoad& load, std::int64_t phase);
/// A generic write to [offset, offset + bytes): its chunks hold the writer's data now.
void forget_landings(Machine& machine, std::size_t offset, std::size_t bytes);
/// Reports (once, returning false) a chunk of [offset, offset + bytes), read now by `thread`
/// (`what`), whose last TMA load landed on an mbarrier phase no wait has seen complete.
bool check_landing_seen(Machine& machine, int thread, std::size_t offset, std::size_t bytes,
                        const char* what);
/// Reports (returning false) a TMA load by `issuer`'s thread `self` over `dest`'s `chunk`
/// (the issuer's own block or a peer's) while the chunk's previous load is in flight or landed
/// on a phase no wait of dest has seen complete.
bool check_reloadable(Machine& issuer, int self, Machine& dest, std::uint32_t chunk);
/// The TMA load in flight writing shared `offset`, or nullptr.
const TmaLoad* tma_load_covering(const Machine& machine, std::size_t offset);
/// Reports (once, returning false) a byte of [offset, offset + bytes) that a thread last
/// wrote through the generic proxy with no fence.proxy.async since, read now by the async
/// proxy instruction `what` issued by `thread`.
bool check_proxy_fence(Machine& machine, int thread, std::size_t offset, std::size_t bytes,
                       const char* what);
/// The running launch's machine and thread; throws std::logic_error outside one.
Machine& launch_machine(const char* instruction);

/// Formats a Dim3 as "(x,y,z)".
std::string format(Dim3 index);
/// Formats an address as hexadecimal digits (no "0x").
std::string hex(std::uintptr_t address);

}  // namespace flashjit::emulator::detail
