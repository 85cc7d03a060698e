// Named barriers on the emulator (PTX ISA "bar, barrier"): bar.sync id, n
// waits until n threads have arrived at barrier id (0 to 15) with bar.sync or bar.arrive;
// bar.arrive counts without waiting. n is a multiple of the warp size, and every arrival of
// one round must give the same n. Findings: an id or count out of range, counts that differ
// within a round, and (through the scheduler) a round that can never fill: a deadlock naming
// the id and how many arrived. A round holding every live thread orders all shared accesses
// before it like __syncthreads; a partial one orders the accesses of the warps it holds whole
// (every live lane arrived), as a warpgroup's barrier before one of its threads stores the
// warpgroup's rows. Warps with only some lanes in the round are not ordered by it.
// Barrier 0 here is separate from __syncthreads' barrier: a kernel mixes them at its peril.
#include <bit>
#include <string>
#include <vector>

#include "emulator/machine.hpp"

namespace flashjit::emulator::detail {
namespace {

void report(Machine& m, int self, int other, std::string text) {
  Finding finding;
  finding.kind = FindingKind::named_barrier_mismatch;
  finding.other_thread = other;
  finding.message = std::move(text);
  record(m, self, std::move(finding));
}

std::string instruction(bool wait, int id, int threads) {
  return std::string(wait ? "bar.sync " : "bar.arrive ") + std::to_string(id) + ", " +
         std::to_string(threads);
}

// A partial round: every pair of warps whose live lanes all arrived is ordered from now on.
void order_whole_warps(Machine& m, const NamedBarrier& b) {
  const std::uint32_t now = ++m.time;
  const std::size_t warps = m.warp_sync.size();
  std::vector<std::size_t> whole;
  for (std::size_t w = 0; w < warps; ++w) {
    if (b.warp_lanes[w] != 0 && b.warp_lanes[w] == std::popcount(m.warp_live[w])) {
      whole.push_back(w);
    }
  }
  for (std::size_t a : whole) {
    for (std::size_t c : whole) m.warps_sync[a * warps + c] = now;
  }
}

// Counts the running thread at barrier `id`; true when it filled the round (released).
bool arrive(Machine& m, int id, int threads, bool wait) {
  const int self = m.current;
  if (id < 0 || id >= kNamedBarriers || threads < 32 || threads % 32 != 0 ||
      threads > static_cast<int>(m.threads.size() + 31) / 32 * 32) {
    report(m, self, -1,
           instruction(wait, id, threads) +
               ": the id must be 0 to 15 and the thread count a non-zero multiple of 32 no "
               "larger than the block; ignored");
    return true;
  }
  NamedBarrier& b = m.named_barriers[static_cast<std::size_t>(id)];
  if (b.expected == 0) {
    b.expected = threads;
    b.first = self;
  } else if (b.expected != threads) {
    report(m, self, b.first,
           instruction(wait, id, threads) + " while thread " +
               format(m.threads[static_cast<std::size_t>(b.first)].index) + " arrived at barrier " +
               std::to_string(id) + " with a count of " + std::to_string(b.expected) +
               " in the same round (the first count is kept)");
  }
  ++b.warp_lanes[static_cast<std::size_t>(self / 32)];
  if (++b.arrived < b.expected) return false;
  for (ThreadSlot& t : m.threads) {
    if (t.state == ThreadState::at_named_barrier &&
        t.wait_barrier == static_cast<std::uint32_t>(id)) {
      t.state = ThreadState::runnable;
    }
  }
  std::size_t live = 0;
  for (const ThreadSlot& t : m.threads) live += t.state != ThreadState::exited ? 1 : 0;
  if (static_cast<std::size_t>(b.expected) >= live) {
    m.barrier_time = ++m.time;
  } else {
    order_whole_warps(m, b);
  }
  b = NamedBarrier{};
  return true;
}

}  // namespace

std::string describe_named_barrier_wait(const Machine& m, int thread) {
  const std::uint32_t id = m.threads[static_cast<std::size_t>(thread)].wait_barrier;
  const NamedBarrier& b = m.named_barriers[id];
  return "waits at bar.sync " + std::to_string(id) + ", " + std::to_string(b.expected) + " (" +
         std::to_string(b.arrived) + " of " + std::to_string(b.expected) +
         " threads arrived; the rest cannot reach it)";
}

}  // namespace flashjit::emulator::detail

namespace flashjit::emulator {

void named_barrier_sync(int id, int threads) {
  detail::Machine& m = detail::launch_machine("bar.sync");
  if (detail::arrive(m, id, threads, true)) return;
  detail::ThreadSlot& slot = m.threads[static_cast<std::size_t>(m.current)];
  slot.state = detail::ThreadState::at_named_barrier;
  slot.wait_barrier = static_cast<std::uint32_t>(id);
  detail::yield_to_scheduler(m);
}

void named_barrier_arrive(int id, int threads) {
  detail::Machine& m = detail::launch_machine("bar.arrive");
  detail::arrive(m, id, threads, false);
}

}  // namespace flashjit::emulator
