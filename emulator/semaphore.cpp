// Global semaphores on the emulator: how one block waits for its turn after others (the fixed
// order of a deterministic backward's dQ sums), from the PTX ISA's ld.acquire and red.release
// and its memory consistency model:
//  - semaphore_wait_equal: ld.acquire.gpu in a loop until the 32-bit integer holds the value;
//    the acquire orders the block's later accesses after the writes the releasing thread made
//    (or completed) before its release;
//  - semaphore_release_add: red.release.gpu .add.s32. A release orders only writes that are
//    complete, so a bulk reduction of this thread not yet completed by a wait_group without
//    .read is reported (bulk_reduce_in_flight): the block it lets go could add before this
//    one's sum has landed, and the order of the sums would be lost.
// Modelling choices: blocks run one cluster at a time in linear order, so a wait passes only if
// an earlier block (or a thread of its own cluster) set the value: the forward progress a GPU
// gives a block that waits for blocks of lower index, which start first. A wait nothing can
// satisfy (a later block's turn, a count off by one) is the scheduler's deadlock finding
// naming the semaphore, where a GPU would hang. Neither instruction counts as work: a few bytes
// a block, against megabytes of operands.
#include <cstring>
#include <string>

#include "emulator/machine.hpp"

namespace flashjit::emulator::detail {
namespace {

int load_value(const int* address) {
  int value = 0;
  std::memcpy(&value, address, sizeof value);
  return value;
}

// Lets every thread of the cluster spinning on `address` check it again.
void wake_waiters(Machine& m, const int* address) {
  const auto wake = [address](Machine& machine) {
    for (ThreadSlot& t : machine.threads) {
      if (t.state == ThreadState::at_semaphore && t.wait_semaphore == address) {
        t.state = ThreadState::runnable;
      }
    }
  };
  if (m.cluster == nullptr) {
    wake(m);
    return;
  }
  for (Machine* machine : m.cluster->ranks) wake(*machine);
}

}  // namespace

std::string describe_semaphore_wait(const Machine& machine, int thread) {
  const ThreadSlot& t = machine.threads[static_cast<std::size_t>(thread)];
  return "spins on the semaphore at 0x" + hex(reinterpret_cast<std::uintptr_t>(t.wait_semaphore)) +
         " until it holds " + std::to_string(t.wait_value) + " (it holds " +
         std::to_string(load_value(t.wait_semaphore)) +
         "), which no block before this one set: on a GPU the grid could hang";
}

}  // namespace flashjit::emulator::detail

namespace flashjit::emulator {

void semaphore_wait_equal(const int* address, int value) {
  const char* what = "ld.acquire.gpu (semaphore wait)";
  detail::Machine& m = detail::launch_machine(what);
  const int self = m.current;
  if (!detail::check_global_access(m, self, address, sizeof(int), false, what)) return;
  detail::ThreadSlot& slot = m.threads[static_cast<std::size_t>(self)];
  while (detail::load_value(address) != value) {
    slot.state = detail::ThreadState::at_semaphore;
    slot.wait_semaphore = address;
    slot.wait_value = value;
    detail::yield_to_scheduler(m);
  }
  slot.wait_semaphore = nullptr;
}

void semaphore_release_add(int* address, int value) {
  const char* what = "red.release.gpu .add.s32 (semaphore release)";
  detail::Machine& m = detail::launch_machine(what);
  const int self = m.current;
  const auto& reductions = m.bulk_queues[static_cast<std::size_t>(self)].reductions;
  if (!reductions.empty()) {
    const detail::BulkReduce& pending = reductions.front();
    Finding finding;
    finding.kind = FindingKind::bulk_reduce_in_flight;
    finding.address = reinterpret_cast<std::uintptr_t>(address);
    finding.bytes = sizeof(int);
    finding.write = true;
    finding.message = std::string(what) + " at 0x" + detail::hex(finding.address) +
                      " while this thread's cp.reduce.async.bulk into 0x" +
                      detail::hex(pending.destination) +
                      " is in flight (no cp.async.bulk.wait_group without .read has completed "
                      "it): the block this lets go may add before that sum lands";
    detail::record(m, self, std::move(finding));
  }
  if (!detail::check_global_access(m, self, address, sizeof(int), true, what)) return;
  const int updated = detail::load_value(address) + value;
  std::memcpy(address, &updated, sizeof updated);
  detail::wake_waiters(m, address);
}

int semaphore_arrive_add(int* address, int value) {
  const char* what = "atom.acq_rel.gpu .add.s32 (arrival count)";
  detail::Machine& m = detail::launch_machine(what);
  if (!detail::check_global_access(m, m.current, address, sizeof(int), true, what)) return 0;
  const int before = detail::load_value(address);
  const int updated = before + value;
  std::memcpy(address, &updated, sizeof updated);
  detail::wake_waiters(m, address);
  return before;
}

}  // namespace flashjit::emulator
