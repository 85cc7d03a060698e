// Warp collectives: each lane of the mask arrives with its value; the last to arrive computes
// every lane's result (from the PTX ISA's shfl.sync / vote.sync semantics, or the instruction's
// own compute function for exchanges) and wakes the rest. A completed collective is a
// synchronization point of its lanes for the race checker (race_shadow.cpp).
#include <cstdio>
#include <stdexcept>
#include <string>

#include "emulator/machine.hpp"

namespace flashjit::emulator::detail {
namespace {

// The lane whose value `lane` receives; `lane` itself when the source would leave its
// width-lane group (the hardware then returns the caller's own value).
int source_lane(WarpOp op, int lane, int operand, int width) {
  const int group = lane & ~(width - 1);
  switch (op) {
    case WarpOp::shfl_idx:
      return group + (operand & (width - 1));
    case WarpOp::shfl_xor: {
      const int source = lane ^ operand;
      return source >= group && source < group + width ? source : lane;
    }
    case WarpOp::shfl_down:
      return (lane - group) + operand < width ? lane + operand : lane;
    case WarpOp::shfl_up:
      return lane - group >= operand ? lane - operand : lane;
    default:
      return lane;
  }
}

const char* op_name(WarpOp op) {
  switch (op) {
    case WarpOp::sync:
      return "__syncwarp";
    case WarpOp::shfl_idx:
      return "__shfl_sync";
    case WarpOp::shfl_xor:
      return "__shfl_xor_sync";
    case WarpOp::shfl_down:
      return "__shfl_down_sync";
    case WarpOp::shfl_up:
      return "__shfl_up_sync";
    case WarpOp::ballot:
      return "__ballot_sync";
    case WarpOp::exchange:
      return "exchange";
  }
  return "unknown";
}

// Lanes that meet in different collectives (or masks) are undefined behaviour on the GPU, and
// here an exchange would read another instruction's operands: reported, the block abandoned.
[[noreturn]] void report_mismatch(Machine& m, const WarpCollective& c, std::size_t self,
                                  const char* name, unsigned mask) {
  const std::size_t warp_base = self - self % 32;
  Finding finding;
  finding.kind = FindingKind::warp_collective_mismatch;
  finding.other_thread = static_cast<int>(warp_base) + __builtin_ctz(c.arrived);
  char text[256];
  std::snprintf(text, sizeof text,
                "arrives at %s (mask 0x%08x) while lanes 0x%08x of its warp wait in %s "
                "(mask 0x%08x); the block is abandoned",
                name, mask, c.arrived, collective_name(c), c.mask);
  finding.message = text;
  record(m, static_cast<int>(self), std::move(finding));
  abandon_block(m);
}

// Adds the running lane (`self`) to its warp's collective, starting one if none is in progress.
WarpCollective& join(Machine& m, std::size_t self, WarpOp op, unsigned mask,
                     const WarpExchange* exchange) {
  WarpCollective& c = m.warps[self / 32];
  if (c.arrived == 0) {
    c.op = op;
    c.exchange = exchange;
    c.mask = mask;
  } else if (c.op != op || c.exchange != exchange || c.mask != mask) {
    report_mismatch(m, c, self, exchange != nullptr ? exchange->name : op_name(op), mask);
  }
  c.arrived |= 1u << (self % 32);
  return c;
}

// Suspends the running lane until the last lane of its collective completes it.
void wait_for_lanes(Machine& m, std::size_t self) {
  m.threads[self].state = ThreadState::at_warp_op;
  yield_to_scheduler(m);
}

// The collective of warp `warp` is complete: its lanes are synchronized (for the race checker)
// and may all run again.
void finish(Machine& m, WarpCollective& c, std::size_t warp) {
  const std::uint32_t now = ++m.time;
  const unsigned live = m.warp_live[warp];
  if ((c.mask & live) == live) {
    m.warp_sync[warp] = now;
  } else {
    for (unsigned a = c.mask; a != 0; a &= a - 1) {
      for (unsigned b = c.mask; b != 0; b &= b - 1) {
        m.pair_sync[warp * 1024 + static_cast<std::size_t>(__builtin_ctz(a)) * 32 +
                    static_cast<std::size_t>(__builtin_ctz(b))] = now;
      }
    }
  }
  for (unsigned lanes = c.arrived; lanes != 0; lanes &= lanes - 1) {
    m.threads[warp * 32 + static_cast<std::size_t>(__builtin_ctz(lanes))].state =
        ThreadState::runnable;
  }
  c.arrived = 0;
}

}  // namespace

const char* collective_name(const WarpCollective& c) {
  return c.exchange != nullptr ? c.exchange->name : op_name(c.op);
}

std::array<std::uint64_t, 32> collective_results(const WarpCollective& c) {
  std::array<std::uint64_t, 32> results{};
  if (c.op == WarpOp::ballot) {
    std::uint64_t votes = 0;
    for (int lane = 0; lane < 32; ++lane) {
      if ((c.arrived >> lane & 1u) != 0 && c.value[lane] != 0) votes |= 1ull << lane;
    }
    results.fill(votes);
    return results;
  }
  if (c.op == WarpOp::sync || c.op == WarpOp::exchange) return results;
  for (int lane = 0; lane < 32; ++lane) {
    if ((c.arrived >> lane & 1u) == 0) continue;
    const int source = source_lane(c.op, lane, c.operand[lane], c.width);
    // A source outside the mask is undefined on the GPU; the caller's own value is one answer.
    results[lane] = (c.arrived >> source & 1u) != 0 ? c.value[source] : c.value[lane];
  }
  return results;
}

}  // namespace flashjit::emulator::detail

namespace flashjit::emulator {

std::uint64_t warp_collective(WarpOp op, unsigned mask, std::uint64_t value, int operand,
                              int width) {
  detail::Machine* machine = detail::active();
  if (machine == nullptr || machine->current < 0) return value;  // outside a launch: a lone lane
  const auto self = static_cast<std::size_t>(machine->current);
  const std::size_t lane = self % 32;
  detail::WarpCollective& c = detail::join(*machine, self, op, mask, nullptr);
  c.width = width;
  c.value[lane] = value;
  c.operand[lane] = operand;
  if ((c.arrived & c.mask) != c.mask) {
    detail::wait_for_lanes(*machine, self);
    return machine->threads[self].result;
  }
  const auto results = detail::collective_results(c);
  for (unsigned lanes = c.arrived; lanes != 0; lanes &= lanes - 1) {
    const auto l = static_cast<std::size_t>(__builtin_ctz(lanes));
    machine->threads[self - lane + l].result = results[l];
  }
  detail::finish(*machine, c, self / 32);
  return results[lane];
}

void warp_exchange(unsigned mask, void* lane_data, const WarpExchange& kind) {
  detail::Machine* machine = detail::active();
  if (machine == nullptr || machine->current < 0) {
    throw std::logic_error(std::string(kind.name) + " needs a warp: call it in an emulated launch");
  }
  const auto self = static_cast<std::size_t>(machine->current);
  detail::WarpCollective& c = detail::join(*machine, self, WarpOp::exchange, mask, &kind);
  c.data[self % 32] = lane_data;
  if ((c.arrived & c.mask) != c.mask) {
    detail::wait_for_lanes(*machine, self);
    return;
  }
  for (std::size_t l = 0; l < 32; ++l) {
    if ((c.arrived >> l & 1u) == 0) c.data[l] = nullptr;
  }
  kind.compute(c.data.data());
  detail::finish(*machine, c, self / 32);
}

}  // namespace flashjit::emulator
