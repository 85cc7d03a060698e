// setmaxnreg on the emulator, from the PTX ISA section "setmaxnreg":
//  - setmaxnreg.{inc,dec}.sync.aligned.u32 count: count is a constant, a multiple of 8 in
//    24..256; every warp of the warpgroup executes the same instruction (.aligned);
//  - .dec releases registers so the per-thread maximum drops from its current value to count
//    (count above the current value: undefined); .inc requests registers up to count (count
//    below the current value: undefined) and blocks until the CTA's pool has enough;
//  - the pool is per CTA; .dec puts registers into it, .inc takes them out.
// Modelling choices:
//  - the register file is 65536 registers in four quadrants of 16384, and warp w runs on
//    quadrant w % 4 (so a warpgroup holds one warp of each). A launch gives every thread the
//    most registers the fullest quadrant allows: 16384 / (32 · its warps), rounded down to a
//    multiple of 8 (the allocation unit), capped at ptxas' 255: the limit ptxas works to for
//    __launch_bounds__(threads), which the Hopper kernels give. So 384 threads (12 warps, 3 a
//    quadrant) get 168, and so do 288 (9 warps, still 3 a quadrant), as ptxas reports for the
//    TMA forward (tests/ops/test_attention_forward_tma_emulated.cpp). The emulator's
//    launches carry no launch bounds or register count, so the block size stands for them;
//  - with whole warpgroups each quadrant gains or loses the same amount at every setmaxnreg,
//    so one CTA-wide pool of 65536 is the same constraint as four quadrant pools;
//  - a warpgroup whose threads all exit keeps its registers (the PTX ISA does not say exiting
//    returns them to the pool), so an .inc that only an exit could satisfy is a deadlock;
//  - the instruction is one warpgroup collective: the last thread to arrive checks the operands
//    (reporting the first thread that differs) and moves the registers; an .inc the pool cannot
//    meet yet leaves its request, and every thread of the warpgroup waits in ThreadState::
//    at_setmaxnreg until a .dec elsewhere frees enough. A request that never fits is the
//    scheduler's deadlock finding (describe_register_wait). An invalid instruction is skipped.
#include <algorithm>
#include <string>

#include "emulator/machine.hpp"

namespace flashjit::emulator::detail {
namespace {

constexpr int kRegisterFile = 65536;
constexpr int kQuadrantRegisters = kRegisterFile / 4;
constexpr int kMaxLaunchRegisters = 255;  // ptxas' per-thread limit
constexpr int kMinCount = 24, kMaxCount = 256;

/// One thread's operands, on its suspended stack while the last thread computes.
struct SetmaxnregThread {
  bool increase;
  int count;
};

const SetmaxnregThread& at(void* const* threads, int t) {
  return *static_cast<const SetmaxnregThread*>(threads[t]);
}

std::string instruction(bool increase, int count) {
  return std::string(increase ? "setmaxnreg.inc" : "setmaxnreg.dec") + ".sync.aligned.u32 " +
         std::to_string(count);
}

int launch_registers(std::size_t threads) {
  const std::size_t warps = (threads + 31) / 32;
  const std::size_t warps_per_quadrant = (warps + 3) / 4;
  const auto per_thread = static_cast<int>(kQuadrantRegisters / (32 * warps_per_quadrant));
  return std::min(per_thread / 8 * 8, kMaxLaunchRegisters);
}

void report(Machine& m, int thread, int other, FindingKind kind, std::string text) {
  Finding finding;
  finding.kind = kind;
  finding.other_thread = other;
  finding.message = std::move(text) + "; the instruction is skipped";
  record(m, thread, std::move(finding));
}

// Every thread's instruction equals the warpgroup's first thread's; else the first thread that
// differs is reported.
bool uniform(Machine& m, void* const* threads, int base) {
  const SetmaxnregThread& lead = at(threads, 0);
  for (int t = 1; t < kWarpgroupThreads; ++t) {
    const SetmaxnregThread& x = at(threads, t);
    if (x.increase == lead.increase && x.count == lead.count) continue;
    report(m, base + t, base, FindingKind::setmaxnreg_nonuniform,
           instruction(x.increase, x.count) + " in this thread, but thread " +
               format(m.threads[static_cast<std::size_t>(base)].index) +
               " of its warpgroup executes " + instruction(lead.increase, lead.count) +
               ": .aligned needs the same instruction and count across the warpgroup");
    return false;
  }
  return true;
}

bool valid(Machine& m, const SetmaxnregThread& lead, int base, int current) {
  if (lead.count % 8 != 0 || lead.count < kMinCount || lead.count > kMaxCount) {
    report(
        m, base, -1, FindingKind::setmaxnreg_invalid_count,
        instruction(lead.increase, lead.count) + ": the count must be a multiple of 8 in 24..256");
    return false;
  }
  if (lead.increase ? lead.count < current : lead.count > current) {
    report(m, base, -1, FindingKind::setmaxnreg_wrong_direction,
           instruction(lead.increase, lead.count) + " while the warpgroup holds " +
               std::to_string(current) + " registers a thread: " +
               (lead.increase ? ".inc must not lower" : ".dec must not raise") +
               " the count (undefined behaviour in the PTX ISA)");
    return false;
  }
  return true;
}

std::int64_t registers_of(int per_thread) { return std::int64_t{per_thread} * kWarpgroupThreads; }

// Grants the waiting .inc requests the pool can meet now, lowest warpgroup first, and wakes
// their threads.
void grant_requests(Machine& m) {
  RegisterBudget& budget = m.registers;
  for (std::size_t g = 0; g < budget.requested.size(); ++g) {
    const int wanted = budget.requested[g];
    if (wanted == 0) continue;
    const std::int64_t needed = registers_of(wanted - budget.per_thread[g]);
    if (needed > budget.free) continue;
    budget.free -= needed;
    budget.per_thread[g] = wanted;
    budget.requested[g] = 0;
    for (std::size_t t = g * kWarpgroupThreads;
         t < (g + 1) * kWarpgroupThreads && t < m.threads.size(); ++t) {
      if (m.threads[t].state == ThreadState::at_setmaxnreg) {
        m.threads[t].state = ThreadState::runnable;
      }
    }
  }
}

void compute(void* const* threads) {
  Machine& m = *active();
  const int base = m.current - m.current % kWarpgroupThreads;
  const auto group = static_cast<std::size_t>(base / kWarpgroupThreads);
  RegisterBudget& budget = m.registers;
  const SetmaxnregThread& lead = at(threads, 0);
  if (!uniform(m, threads, base) || !valid(m, lead, base, budget.per_thread[group])) return;
  if (lead.increase) {
    budget.requested[group] = lead.count;  // granted at once when the pool has enough
  } else {
    budget.free += registers_of(budget.per_thread[group] - lead.count);
    budget.per_thread[group] = lead.count;
  }
  grant_requests(m);
}

constexpr WarpgroupExchange kSetmaxnreg{"setmaxnreg.sync.aligned.u32", &compute};

void run(bool increase, int count) {
  Machine& m = launch_machine(increase ? "setmaxnreg.inc" : "setmaxnreg.dec");
  SetmaxnregThread thread{increase, count};
  warpgroup_exchange(&thread, kSetmaxnreg);
  const auto group = static_cast<std::size_t>(m.current / kWarpgroupThreads);
  while (m.registers.requested[group] != 0) {
    m.threads[static_cast<std::size_t>(m.current)].state = ThreadState::at_setmaxnreg;
    yield_to_scheduler(m);  // resumed when grant_requests met the request
  }
}

}  // namespace

void reset_register_budget(Machine& m, std::size_t threads) {
  const std::size_t groups = (threads + kWarpgroupThreads - 1) / kWarpgroupThreads;
  const int per_thread = launch_registers(threads);
  m.registers.per_thread.assign(groups, per_thread);
  m.registers.requested.assign(groups, 0);
  const std::size_t warp_threads = (threads + 31) / 32 * 32;  // registers go to whole warps
  m.registers.free = kRegisterFile - static_cast<std::int64_t>(warp_threads) * per_thread;
}

std::string describe_register_wait(const Machine& m, int thread) {
  const RegisterBudget& budget = m.registers;
  const auto group = static_cast<std::size_t>(thread / kWarpgroupThreads);
  const int wanted = budget.requested[group], held = budget.per_thread[group];
  std::string holdings;
  for (std::size_t g = 0; g < budget.per_thread.size(); ++g) {
    holdings += (g == 0 ? "" : ", ") + std::to_string(budget.per_thread[g]);
  }
  return "waits in " + instruction(true, wanted) + " (warpgroup " + std::to_string(group) +
         ", holding " + std::to_string(held) + " registers a thread) for " +
         std::to_string(registers_of(wanted - held)) + " more registers; the CTA's pool of " +
         std::to_string(kRegisterFile) + " has " + std::to_string(budget.free) +
         " free and no warpgroup can release more (registers a thread by warpgroup: " + holdings +
         ")";
}

}  // namespace flashjit::emulator::detail

namespace flashjit::emulator {

void setmaxnreg_dec(int count) { detail::run(false, count); }

void setmaxnreg_inc(int count) { detail::run(true, count); }

int setmaxnreg_current() {
  detail::Machine& m = detail::launch_machine("setmaxnreg");
  return m.registers.per_thread[static_cast<std::size_t>(m.current / detail::kWarpgroupThreads)];
}

}  // namespace flashjit::emulator
