// Warpgroup collectives (the wgmma instructions, all .sync.aligned): the 128 threads of warps
// 4k..4k+3 arrive one by one; the last to arrive runs the instruction's compute over all of
// them and wakes the rest, as warp_exchange does for one warp (warp.cpp). A thread arriving at
// a different instruction while others wait is reported like a warp collective mismatch; a
// thread that never arrives leaves the rest waiting, which the scheduler reports as a deadlock.
// A completed collective synchronizes each of its warps for the race checker (every lane of
// each warp took part); it orders nothing between the warps.
#include <cstdio>
#include <stdexcept>
#include <string>

#include "emulator/machine.hpp"

namespace flashjit::emulator::detail {
namespace {

// The lanes of `c` that arrived, as the four warps' masks.
std::string arrival_text(const WarpgroupCollective& c) {
  char text[96];
  std::snprintf(text, sizeof text,
                "%d of 128 threads arrived; per warp 0x%08x 0x%08x 0x%08x 0x%08x", c.count,
                c.arrived[0], c.arrived[1], c.arrived[2], c.arrived[3]);
  return text;
}

[[noreturn]] void report_mismatch(Machine& m, const WarpgroupCollective& c, std::size_t self,
                                  const char* name) {
  Finding finding;
  finding.kind = FindingKind::warp_collective_mismatch;
  const std::size_t base = self - self % kWarpgroupThreads;
  for (std::size_t w = 0; w < 4; ++w) {
    if (c.arrived[w] != 0) {
      finding.other_thread = static_cast<int>(base + 32 * w) + __builtin_ctz(c.arrived[w]);
      break;
    }
  }
  finding.message = std::string("arrives at ") + name + " while threads of its warpgroup wait in " +
                    c.exchange->name + " (" + arrival_text(c) + "); the block is abandoned";
  record(m, static_cast<int>(self), std::move(finding));
  abandon_block(m);
}

// The collective of warpgroup `group` is complete: each warp's lanes are synchronized and all
// 128 threads may run again.
void finish(Machine& m, WarpgroupCollective& c, std::size_t group) {
  const std::uint32_t now = ++m.time;
  for (std::size_t w = 4 * group; w < 4 * group + 4 && w < m.warps.size(); ++w) {
    m.warp_sync[w] = now;
  }
  for (std::size_t t = group * kWarpgroupThreads; t < (group + 1) * kWarpgroupThreads; ++t) {
    m.threads[t].state = ThreadState::runnable;
  }
  c = WarpgroupCollective{};
}

}  // namespace

std::string describe_warpgroup_wait(const Machine& machine, int thread) {
  const WarpgroupCollective& c =
      machine.warpgroups[static_cast<std::size_t>(thread) / kWarpgroupThreads];
  return std::string("waits in warpgroup collective ") + c.exchange->name + " (" + arrival_text(c) +
         ")";
}

void reset_warpgroups(Machine& m, std::size_t threads) {
  const std::size_t groups = (threads + kWarpgroupThreads - 1) / kWarpgroupThreads;
  m.warpgroups.assign(groups, WarpgroupCollective{});
  for (WgmmaQueue& queue : m.wgmma_queues) {  // an abandoned block's operations in flight
    for (const WgmmaOp& op : queue.ops) {
      for (const std::uint32_t chunk : op.chunks) {
        for (std::size_t b = chunk; b < chunk + 16u && b < m.shadow.size(); ++b) {
          m.shadow[b].wgmma_reads = 0;
        }
      }
    }
  }
  m.wgmma_queues.assign(groups, WgmmaQueue{});
}

}  // namespace flashjit::emulator::detail

namespace flashjit::emulator {

void warpgroup_exchange(void* thread_data, const WarpgroupExchange& kind) {
  detail::Machine* machine = detail::active();
  if (machine == nullptr || machine->current < 0) {
    throw std::logic_error(std::string(kind.name) +
                           " needs a warpgroup: call it in an emulated launch");
  }
  const auto self = static_cast<std::size_t>(machine->current);
  const std::size_t group = self / detail::kWarpgroupThreads;
  const std::size_t slot = self % detail::kWarpgroupThreads;
  detail::WarpgroupCollective& c = machine->warpgroups[group];
  if (c.count == 0) {
    c.exchange = &kind;
  } else if (c.exchange != &kind) {
    detail::report_mismatch(*machine, c, self, kind.name);
  }
  c.arrived[slot / 32] |= 1u << (slot % 32);
  c.data[slot] = thread_data;
  if (++c.count < detail::kWarpgroupThreads) {
    machine->threads[self].state = detail::ThreadState::at_warpgroup_op;
    detail::yield_to_scheduler(*machine);
    return;
  }
  kind.compute(c.data.data());
  detail::finish(*machine, c, group);
}

}  // namespace flashjit::emulator
