// Warp collectives: each lane of the mask arrives with its value; the last to arrive computes
// every lane's result (from the PTX ISA's shfl.sync / vote.sync semantics) and wakes the rest.
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

}  // namespace

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
  if (c.op == WarpOp::sync) return results;
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
  const int lane = static_cast<int>(self % 32);
  detail::WarpCollective& c = machine->warps[self / 32];
  if (c.arrived == 0) {
    c.op = op;
    c.mask = mask;
    c.width = width;
  }
  c.value[static_cast<std::size_t>(lane)] = value;
  c.operand[static_cast<std::size_t>(lane)] = operand;
  c.arrived |= 1u << lane;
  if ((c.arrived & c.mask) != c.mask) {
    machine->threads[self].state = detail::ThreadState::at_warp_op;
    detail::yield_to_scheduler(*machine);
    return machine->threads[self].result;
  }
  const auto results = detail::collective_results(c);
  const std::size_t warp_base = self - static_cast<std::size_t>(lane);
  for (std::size_t l = 0; l < 32; ++l) {
    if ((c.arrived >> l & 1u) == 0) continue;
    machine->threads[warp_base + l].result = results[l];
    machine->threads[warp_base + l].state = detail::ThreadState::runnable;
  }
  c.arrived = 0;
  return results[static_cast<std::size_t>(lane)];
}

}  // namespace flashjit::emulator
