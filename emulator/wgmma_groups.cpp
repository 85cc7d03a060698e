// wgmma.fence, wgmma.commit_group and wgmma.wait_group on the emulator (PTX ISA sections of
// the same names), all warpgroup collectives (.sync.aligned):
//  - commit_group makes the warpgroup's uncommitted wgmma.mma_async one wgmma-group;
//  - wait_group N waits until at most N of the newest committed groups are pending; here the
//    completed operations' results land in the accumulator registers (checked first for
//    writes while in flight: they must still hold the operation's poison) and their shared
//    operands are released (wgmma.cpp computes them at issue);
//  - wgmma.fence must come before the first wgmma and between a register access and a wgmma
//    using those registers: checked where the emulator can see it (check_wgmma_fence).
#include <algorithm>
#include <cstring>
#include <string>

#include "emulator/machine.hpp"

namespace flashjit::emulator::detail {
namespace {

// Reports an operand the PTX ISA does not allow; the instruction does nothing.
void report_invalid(Machine& m, int thread, std::string text) {
  Finding finding;
  finding.kind = FindingKind::invalid_operand;
  finding.message = std::move(text);
  record(m, thread, std::move(finding));
}

void report_missing_fence(Machine& m, int thread, const char* name, const std::string& why) {
  Finding finding;
  finding.kind = FindingKind::wgmma_fence_missing;
  finding.message = std::string(name) + ": " + why +
                    "; the PTX ISA requires a wgmma.fence between register accesses and a wgmma "
                    "using the same registers";
  record(m, thread, std::move(finding));
}

// Whether an in-flight operation of the same shape writes thread t's registers `d` (they hold
// its poison, and a wgmma of that shape chains on it with no fence).
bool owned_in_flight(const WgmmaQueue& queue, const float* d, int t, int registers) {
  for (const WgmmaOp& op : queue.ops) {
    if (op.d[static_cast<std::size_t>(t)] == d && op.registers == registers) return true;
  }
  return false;
}

}  // namespace

// The fence rule where the emulator can see it: the warpgroup's first wgmma follows a fence,
// and accumulators that a wait_group delivered and the thread then changed (a rescale, a
// reset) are fenced before a wgmma uses them again. Reads of them are invisible here.
void check_wgmma_fence(Machine& m, const WgmmaQueue& queue,
                       const std::array<float*, kWarpgroupThreads>& d, int registers,
                       const char* name) {
  const int base = m.current - m.current % kWarpgroupThreads;
  if (!queue.fenced) {
    report_missing_fence(m, base, name, "no wgmma.fence before the warpgroup's first wgmma");
    return;
  }
  for (int t = 0; t < kWarpgroupThreads; ++t) {
    const float* registers_now = d[static_cast<std::size_t>(t)];
    if (owned_in_flight(queue, registers_now, t, registers)) continue;
    for (auto op = queue.landed.rbegin(); op != queue.landed.rend(); ++op) {
      if (op->d[static_cast<std::size_t>(t)] != registers_now || op->registers != registers) {
        continue;
      }
      const float* delivered = op->result.data() + static_cast<std::size_t>(t * registers);
      if (std::memcmp(registers_now, delivered,
                      static_cast<std::size_t>(registers) * sizeof(float)) != 0) {
        report_missing_fence(m, base + t, name,
                             "this thread changed its accumulators after the wgmma.wait_group "
                             "that delivered them, with no wgmma.fence since");
        return;
      }
      break;
    }
  }
}

namespace {

// Register ordering itself is implied by computing at issue; the fence is only tracked.
void fence_compute(void* const*) {
  Machine& m = *active();
  WgmmaQueue& queue = m.wgmma_queues[static_cast<std::size_t>(m.current / kWarpgroupThreads)];
  queue.fenced = true;
  queue.landed.clear();
  fence_register_a(queue);
}

void commit_compute(void* const*) {
  Machine& m = *active();
  ++m.wgmma_queues[static_cast<std::size_t>(m.current / kWarpgroupThreads)].open_group;
}

// Whether a later operation in the queue of the same shape writes thread t's registers of
// queue.ops[index]: that one owns them now (its poison is in them, its result lands later).
bool superseded(const WgmmaQueue& queue, std::size_t index, int t) {
  const auto slot = static_cast<std::size_t>(t);
  const WgmmaOp& op = queue.ops[index];
  for (std::size_t later = index + 1; later < queue.ops.size(); ++later) {
    const WgmmaOp& next = queue.ops[later];
    if (next.d[slot] == op.d[slot] && next.registers == op.registers) return true;
  }
  return false;
}

// Lands queue.ops[index]: the results reach the accumulator registers, which must still hold
// the operation's poison (else the thread wrote them in flight: reported, first thread only),
// and the shared reads end.
void land(Machine& m, const WgmmaQueue& queue, std::size_t index) {
  const WgmmaOp& op = queue.ops[index];
  check_register_a_untouched(m, op);
  bool reported = false;
  for (int t = 0; t < kWarpgroupThreads; ++t) {
    if (superseded(queue, index, t)) continue;
    if (!reported) reported = !check_accumulators_untouched(m, op, t);
    const float* result = op.result.data() + static_cast<std::size_t>(t * op.registers);
    std::copy(result, result + op.registers, op.d[static_cast<std::size_t>(t)]);
  }
  for (const std::uint32_t chunk : op.chunks) {
    for (std::uint32_t byte = chunk; byte < chunk + 16; ++byte) {
      if (m.shadow[byte].wgmma_reads != 0) --m.shadow[byte].wgmma_reads;
    }
  }
}

void wait_compute(void* const* threads) {
  Machine& m = *active();
  const int base = m.current - m.current % kWarpgroupThreads;
  const int pending = *static_cast<const int*>(threads[0]);
  for (int t = 1; t < kWarpgroupThreads; ++t) {
    if (*static_cast<const int*>(threads[t]) == pending) continue;
    report_invalid(m, base + t,
                   "wgmma.wait_group.sync.aligned: this thread's N differs from the warpgroup's "
                   "first thread's (" +
                       std::to_string(pending) + "); waited for none");
    return;
  }
  WgmmaQueue& queue = m.wgmma_queues[static_cast<std::size_t>(base / kWarpgroupThreads)];
  const std::uint32_t committed = queue.open_group - 1;  // groups 1..committed
  const auto keep = static_cast<std::uint32_t>(std::max(pending, 0));
  if (committed <= keep) return;
  const std::uint32_t last_complete = committed - keep;
  auto end = queue.ops.begin();
  for (; end != queue.ops.end() && end->group <= last_complete; ++end) {
    land(m, queue, static_cast<std::size_t>(end - queue.ops.begin()));
  }
  constexpr std::size_t kLandedKept = 8;  // enough for the accumulators of a main loop
  for (auto op = queue.ops.begin(); op != end; ++op) {
    if (queue.landed.size() == kLandedKept) queue.landed.erase(queue.landed.begin());
    queue.landed.push_back(std::move(*op));
  }
  queue.ops.erase(queue.ops.begin(), end);
}

constexpr WarpgroupExchange kFence{"wgmma.fence.sync.aligned", &fence_compute};
constexpr WarpgroupExchange kCommit{"wgmma.commit_group.sync.aligned", &commit_compute};
constexpr WarpgroupExchange kWait{"wgmma.wait_group.sync.aligned", &wait_compute};

}  // namespace
}  // namespace flashjit::emulator::detail

namespace flashjit::emulator {

void wgmma_fence() { warpgroup_exchange(nullptr, detail::kFence); }

void wgmma_commit_group() { warpgroup_exchange(nullptr, detail::kCommit); }

void wgmma_wait_group(int pending_groups) {
  if (pending_groups < 0) {
    detail::Machine* m = detail::active();
    if (m != nullptr && m->current >= 0) {
      detail::report_invalid(*m, m->current,
                             "wgmma.wait_group.sync.aligned " + std::to_string(pending_groups) +
                                 ": N must be a non-negative constant; waited for none");
    }
    return;
  }
  warpgroup_exchange(&pending_groups, detail::kWait);
}

}  // namespace flashjit::emulator

namespace flashjit::emulator::detail {

const WgmmaOp* wgmma_reader(const Machine& m, std::size_t offset, int& warpgroup) {
  for (std::size_t g = 0; g < m.wgmma_queues.size(); ++g) {
    for (const WgmmaOp& op : m.wgmma_queues[g].ops) {
      for (const std::uint32_t chunk : op.chunks) {
        if (offset >= chunk && offset < chunk + 16u) {
          warpgroup = static_cast<int>(g);
          return &op;
        }
      }
    }
  }
  warpgroup = -1;
  return nullptr;
}

}  // namespace flashjit::emulator::detail
