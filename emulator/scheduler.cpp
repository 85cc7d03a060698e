// The block scheduler: runs a block's threads as fibers in a fixed order (lowest linear index
// first), each until it blocks at a barrier, a warp or warpgroup collective, a named barrier
// or an mbarrier wait, or exits, and releases the block barrier once every live thread waits
// at it. The blocks of a cluster run together, their threads interleaved pass by pass (rank 0's,
// then rank 1's, ...), since they may wait on each other (cluster.cpp); a block runs alone
// as a cluster of one. TMA loads in flight complete only when no thread can run (so data read
// before its mbarrier phase completes shows), unless the launch explores orderings (explore.cpp):
// then loads also land between threads' steps, and one at a time. Deterministic: no OS threads, no
// timing; an explored order is fixed by its seed.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>

#include "emulator/machine.hpp"

namespace flashjit::emulator::detail {
namespace {

// The stack thread `thread` of `machine` runs on.
StackBounds thread_stack(const Machine& machine, std::size_t thread) {
  const std::byte* top = machine.stacks->top(machine.stack_base + thread);
  return {top - FiberStacks::kStackBytes, FiberStacks::kStackBytes};
}

[[noreturn]] void thread_entry() {
  StackBounds scheduler_stack;
  fiber_started(&scheduler_stack);
  Machine& machine = *active();
  machine.scheduler_stack = scheduler_stack;
  machine.body(machine.body_context);
  const auto self = static_cast<std::size_t>(machine.current);
  drain_async_copies(machine, machine.current);
  drain_tma_stores(machine, machine.current);
  machine.warp_live[self / 32] &= ~(1u << (self % 32));
  machine.threads[self].state = ThreadState::exited;
  cluster_thread_exited(machine);
  fiber_leave(machine.scheduler_sp, machine.scheduler_stack);
}

void resume(Machine& machine, std::size_t thread) {
  machine.current = static_cast<int>(thread);
  ::threadIdx = machine.threads[thread].index;
  ::blockIdx = machine.block_index;
  fiber_switch(&machine.scheduler_sp, machine.threads[thread].sp, thread_stack(machine, thread));
  machine.current = -1;
}

int first_in_state(const Machine& machine, ThreadState state) {
  auto it = std::find_if(machine.threads.begin(), machine.threads.end(),
                         [state](const ThreadSlot& t) { return t.state == state; });
  return it == machine.threads.end() ? -1 : static_cast<int>(it - machine.threads.begin());
}

// Every live thread waits at __syncthreads. If some thread already exited, the barrier is
// divergent (undefined behaviour on the GPU): reported once per block, then released anyway
// so the rest of the kernel still runs and gets checked.
void release_barrier(Machine& machine, bool& divergence_reported) {
  const int exited = first_in_state(machine, ThreadState::exited);
  if (exited >= 0 && !divergence_reported) {
    const int waiting = first_in_state(machine, ThreadState::at_barrier);
    Finding finding;
    finding.kind = FindingKind::divergent_barrier;
    finding.other_thread = exited;
    finding.message = "__syncthreads reached while thread " +
                      format(machine.threads[static_cast<std::size_t>(exited)].index) +
                      " (and maybe others) has exited";
    record(machine, waiting, std::move(finding));
    divergence_reported = true;
  }
  for (ThreadSlot& t : machine.threads) {
    if (t.state == ThreadState::at_barrier) t.state = ThreadState::runnable;
  }
  machine.barrier_time = ++machine.time;  // orders every earlier access before later ones
  ++machine.report.work.barriers;
  model_block_barrier(machine);
}

void report_deadlock(Machine& machine) {
  const int in_warp_op = first_in_state(machine, ThreadState::at_warp_op);
  const int in_warpgroup_op = first_in_state(machine, ThreadState::at_warpgroup_op);
  const int at_named = first_in_state(machine, ThreadState::at_named_barrier);
  const int at_mbarrier = first_in_state(machine, ThreadState::at_mbarrier);
  const int at_setmaxnreg = first_in_state(machine, ThreadState::at_setmaxnreg);
  const int at_cluster = first_in_state(machine, ThreadState::at_cluster_barrier);
  const int at_semaphore = first_in_state(machine, ThreadState::at_semaphore);
  const int stuck = in_warp_op >= 0        ? in_warp_op
                    : in_warpgroup_op >= 0 ? in_warpgroup_op
                    : at_named >= 0        ? at_named
                    : at_mbarrier >= 0     ? at_mbarrier
                    : at_setmaxnreg >= 0   ? at_setmaxnreg
                    : at_cluster >= 0      ? at_cluster
                    : at_semaphore >= 0    ? at_semaphore
                                           : first_in_state(machine, ThreadState::at_barrier);
  Finding finding;
  finding.kind = FindingKind::deadlock;
  if (in_warp_op >= 0) {
    const WarpCollective& c = machine.warps[static_cast<std::size_t>(in_warp_op) / 32];
    char detail[160];
    std::snprintf(detail, sizeof detail,
                  "waits in warp collective %s (mask 0x%08x, arrived 0x%08x)", collective_name(c),
                  c.mask, c.arrived);
    finding.message = detail;
  } else if (in_warpgroup_op >= 0) {
    finding.message = describe_warpgroup_wait(machine, in_warpgroup_op);
  } else if (at_named >= 0) {
    finding.message = describe_named_barrier_wait(machine, at_named);
  } else if (at_mbarrier >= 0) {
    finding.message = describe_mbarrier_wait(machine, at_mbarrier, finding.kind);
  } else if (at_setmaxnreg >= 0) {
    finding.message = describe_register_wait(machine, at_setmaxnreg);
  } else if (at_cluster >= 0) {
    finding.message = describe_cluster_wait(machine, at_cluster);
  } else if (at_semaphore >= 0) {
    finding.message = describe_semaphore_wait(machine, at_semaphore);
  } else {
    finding.message = "waits at __syncthreads that other threads cannot reach";
  }
  finding.message += "; the block is abandoned";
  record(machine, stuck, std::move(finding));
}

void start_threads(Machine& machine) {
  const Dim3 shape = machine.config->block;
  const auto count = static_cast<std::size_t>(shape.volume());
  machine.threads.assign(count, ThreadSlot{});
  machine.warps.assign((count + 31) / 32, WarpCollective{});
  machine.warp_live.assign(machine.warps.size(), 0);
  for (std::size_t i = 0; i < count; ++i) {
    const auto linear = static_cast<unsigned>(i);
    machine.threads[i].index = {linear % shape.x, linear / shape.x % shape.y,
                                linear / (shape.x * shape.y)};
    machine.threads[i].sp =
        fiber_prepare(machine.stacks->top(machine.stack_base + i), &thread_entry);
    machine.warp_live[i / 32] |= 1u << (i % 32);
  }
  reset_async_copies(machine, count);
  reset_warpgroups(machine, count);
  reset_async_proxy(machine, count);
  reset_register_budget(machine, count);
}

// Starts block `block_index` on `machine`: fresh shared memory, threads at their entry.
void start_block(Machine& machine, Dim3 block_index) {
  machine.block_index = block_index;
  // Shared memory starts as all-ones bytes (NaN floats), so a read of data nobody wrote shows.
  std::memset(machine.shared_begin, 0xff, machine.config->shared_bytes);
  machine.barrier_time = ++machine.time;  // the previous block's accesses are history
  machine.abandoned = false;
  machine.finished = false;
  ++machine.report.work.ctas;
  const Dim3 grid = machine.config->grid;
  start_exploring_block(machine, block_index.x + std::uint64_t{grid.x} *
                                                     (block_index.y + std::uint64_t{grid.y} *
                                                                          block_index.z));
  start_threads(machine);
  model_block_begin(machine);
}

// Resumes every runnable thread of `machine` once, in index order; true when any ran. Stops
// at once when a thread abandoned the block.
bool run_pass(Machine& machine) {
  set_active(&machine);
  bool ran = false;
  for (std::size_t i = 0; i < machine.threads.size(); ++i) {
    if (machine.threads[i].state != ThreadState::runnable) continue;
    resume(machine, i);
    if (machine.abandoned) return true;  // reported by whoever abandoned it
    ran = true;
    land_tma_load_early(machine);
  }
  return ran;
}

enum class Settled { finished, moved, stuck };

// No thread of the cluster can run: ends `machine`'s block when all its threads exited, else
// releases its __syncthreads when every live thread waits there, else lets the async proxy
// finish its loads in flight; stuck when none of these applies.
Settled settle(Machine& machine, bool& divergence_reported) {
  set_active(&machine);
  const auto live =
      std::count_if(machine.threads.begin(), machine.threads.end(),
                    [](const ThreadSlot& t) { return t.state != ThreadState::exited; });
  if (live == 0) {
    finish_async_proxy(machine);
    model_block_end(machine);
    machine.finished = true;
    return Settled::finished;
  }
  const auto waiting =
      std::count_if(machine.threads.begin(), machine.threads.end(),
                    [](const ThreadSlot& t) { return t.state == ThreadState::at_barrier; });
  if (waiting == live) {
    release_barrier(machine, divergence_reported);
    return Settled::moved;
  }
  return complete_tma_loads(machine) ? Settled::moved : Settled::stuck;
}

}  // namespace

void run_cluster(Cluster& cluster, const std::vector<Dim3>& blocks) {
  for (std::size_t r = 0; r < cluster.ranks.size(); ++r) start_block(*cluster.ranks[r], blocks[r]);
  std::array<bool, kMaxClusterBlocks> divergence_reported{};
  for (;;) {
    // Passes until nobody can run: a completed collective, barrier phase or remote arrival
    // wakes threads that an earlier pass already went by.
    for (bool ran = true; ran;) {
      ran = false;
      for (Machine* machine : cluster.ranks) {
        if (machine->finished) continue;
        ran = run_pass(*machine) || ran;
        if (machine->abandoned) return;  // the cluster's other blocks are dropped with it
      }
    }
    bool moved = false;
    Machine* stuck = nullptr;
    for (std::size_t r = 0; r < cluster.ranks.size(); ++r) {
      Machine& machine = *cluster.ranks[r];
      if (machine.finished) continue;
      const Settled settled = settle(machine, divergence_reported[r]);
      if (settled == Settled::stuck && stuck == nullptr) stuck = &machine;
      moved = moved || settled != Settled::stuck;
    }
    if (stuck == nullptr && !moved) return;  // every block finished
    if (!moved) {
      set_active(stuck);
      report_deadlock(*stuck);  // fibers left mid-stack: kernels hold only trivial locals
      return;
    }
  }
}

void yield_to_scheduler(Machine& machine) {
  fiber_switch(&machine.threads[static_cast<std::size_t>(machine.current)].sp, machine.scheduler_sp,
               machine.scheduler_stack);
}

void abandon_block(Machine& machine) {
  machine.abandoned = true;
  fiber_leave(machine.scheduler_sp, machine.scheduler_stack);
}

}  // namespace flashjit::emulator::detail

namespace flashjit::emulator {

void block_barrier() {
  detail::Machine* machine = detail::active();
  if (machine == nullptr || machine->current < 0) return;
  machine->threads[static_cast<std::size_t>(machine->current)].state =
      detail::ThreadState::at_barrier;
  detail::yield_to_scheduler(*machine);
}

void set_source_location(std::source_location where) {
  detail::Machine* machine = detail::active();
  if (machine == nullptr || machine->current < 0) return;
  machine->threads[static_cast<std::size_t>(machine->current)].location = where;
}

}  // namespace flashjit::emulator
