// cp.async with commit/wait groups on the emulator, from the PTX ISA sections
// "Data Movement and Conversion Instructions: cp.async", "cp.async.commit_group" and
// "cp.async.wait_group / cp.async.wait_all" (9.7.9.25.3.1-3 in ISA 8.5):
//  - cp-size is 4, 8 or 16; src-size < cp-size zero-fills the rest; the addresses must be
//    aligned to cp-size ("Addresses as Operands": naturally aligned to the access size).
//  - commit_group "batches all prior cp.async instructions initiated by the executing thread
//    but not committed to any cp.async-group" into a new per-thread group.
//  - wait_group N waits "till only N or fewer of the most recent cp.async-groups are pending";
//    copies not yet committed belong to no group, so no wait covers them.
//  - "reading from the destination memory location before the asynchronous operation
//    completes exhibits undefined behavior", and modifying the source likewise.
// So the emulator reads (and bounds-checks) the global bytes at issue - the same bytes any
// defined program would copy later - and checks the shared write at issue under the race rule.
// The shared bytes change only when the copy's group completes in this thread's wait; until
// then any access to them is reported (async_copy_pending) and sees the old contents, as a GPU
// could. The landed bytes count as the issuing thread's write at the wait, so other threads
// still need a __syncthreads (or __syncwarp) after it. A __syncthreads completes nothing.
// A thread that exits with copies in flight, committed or not, has them land at its exit (the
// hardware finishes them): not a finding of itself, but a thread still touching those bytes
// races with them.
#include <cstring>
#include <stdexcept>

#include "emulator/machine.hpp"

namespace flashjit::emulator::detail {
namespace {

std::size_t shared_offset(const Machine& m, const std::byte* address) {
  return static_cast<std::size_t>(address - m.shared_begin);
}

void report(Machine& m, int self, FindingKind kind, std::string message) {
  Finding finding;
  finding.kind = kind;
  finding.message = std::move(message);
  record(m, self, std::move(finding));
}

bool valid_operands(Machine& m, int self, const void* dst, const void* src, int bytes,
                    int src_bytes) {
  if ((bytes != 4 && bytes != 8 && bytes != 16) || src_bytes < 0 || src_bytes > bytes) {
    report(m, self, FindingKind::invalid_operand,
           "cp.async of " + std::to_string(bytes) + " bytes with src-size " +
               std::to_string(src_bytes) + ": cp-size must be 4, 8 or 16 and src-size 0 to it");
    return false;
  }
  const auto dst_at = reinterpret_cast<std::uintptr_t>(dst);
  const auto src_at = reinterpret_cast<std::uintptr_t>(src);
  const auto alignment = static_cast<std::uintptr_t>(bytes);
  if (dst_at % alignment == 0 && src_at % alignment == 0) return true;
  Finding finding;
  finding.kind = FindingKind::misaligned_access;
  finding.address = dst_at % alignment != 0 ? dst_at : src_at;
  finding.bytes = static_cast<std::size_t>(bytes);
  finding.write = dst_at % alignment != 0;
  finding.message = "cp.async of " + std::to_string(bytes) + " bytes from global 0x" + hex(src_at) +
                    " to shared 0x" + hex(dst_at) + ": " +
                    (finding.write ? "the shared destination" : "the global source") +
                    " is not aligned to " + std::to_string(bytes) + " bytes";
  record(m, self, std::move(finding));
  return false;
}

void land_range(Machine& m, int thread, AsyncQueue& queue, std::size_t end) {
  for (; queue.head < end; ++queue.head) land_async_copy(m, thread, queue.copies[queue.head]);
  if (queue.head == queue.copies.size()) {
    queue.copies.clear();  // keeps its capacity: no allocation on the next issue
    queue.head = 0;
  }
}

AsyncQueue& queue_of(Machine& m, int thread) {
  return m.async_queues[static_cast<std::size_t>(thread)];
}

}  // namespace

Machine& launch_machine(const char* instruction) {
  Machine* machine = active();
  if (machine == nullptr || machine->current < 0) {
    throw std::logic_error(std::string(instruction) +
                           " needs a thread: call it in an emulated launch");
  }
  return *machine;
}

void land_async_copy(Machine& m, int thread, const AsyncCopy& copy) {
  std::memcpy(copy.dst, copy.data.data(), copy.bytes);
  model_in_flight(m, -static_cast<std::int64_t>(copy.source_bytes));
  const std::size_t offset = shared_offset(m, copy.dst);
  for (std::size_t i = 0; i < copy.bytes; ++i) {
    ShadowByte& shadow = m.shadow[offset + i];
    if (shadow.pending_copies != 0) --shadow.pending_copies;
    shadow.writer = static_cast<std::int16_t>(thread);
    shadow.write_time = m.time;
  }
}

void reset_async_copies(Machine& m, std::size_t threads) {
  if (m.async_queues.size() < threads) m.async_queues.resize(threads);
  for (AsyncQueue& queue : m.async_queues) {
    for (std::size_t i = queue.head; i < queue.copies.size(); ++i) {  // an abandoned block's
      const AsyncCopy& copy = queue.copies[i];
      const std::size_t offset = shared_offset(m, copy.dst);
      for (std::size_t b = 0; b < copy.bytes; ++b) m.shadow[offset + b].pending_copies = 0;
    }
    queue.copies.clear();
    queue.head = 0;
    queue.open_group = 1;
  }
}

void drain_async_copies(Machine& m, int thread) {
  AsyncQueue& queue = queue_of(m, thread);
  land_range(m, thread, queue, queue.copies.size());
}

int async_copy_owner(const Machine& m, const std::byte* address) {
  for (std::size_t thread = 0; thread < m.async_queues.size(); ++thread) {
    const AsyncQueue& queue = m.async_queues[thread];
    for (std::size_t i = queue.head; i < queue.copies.size(); ++i) {
      const AsyncCopy& copy = queue.copies[i];
      if (address >= copy.dst && address < copy.dst + copy.bytes) return static_cast<int>(thread);
    }
  }
  return -1;
}

}  // namespace flashjit::emulator::detail

namespace flashjit::emulator {

void cp_async(void* shared_dst, const void* global_src, int bytes, int src_bytes,
              std::source_location site) {
  detail::Machine& m = detail::launch_machine("cp.async");
  const int self = m.current;
  if (!detail::valid_operands(m, self, shared_dst, global_src, bytes, src_bytes)) return;
  detail::AsyncQueue& queue = detail::queue_of(m, self);
  detail::AsyncCopy copy{
      static_cast<std::byte*>(shared_dst), queue.open_group, static_cast<std::uint32_t>(bytes), 0,
      {}};
  const auto source_bytes = static_cast<std::size_t>(src_bytes);
  if (source_bytes > 0 &&
      detail::check_global_access(m, self, global_src, source_bytes, false, "cp.async")) {
    std::memcpy(copy.data.data(), global_src, source_bytes);
    copy.source_bytes = static_cast<std::uint32_t>(source_bytes);
  }
  // Lanes that zero-fill take no part in the global request.
  detail::model_access(m, self, global_src, copy.source_bytes,
                       detail::site_at(site, "cp.async", AccessKind::global_load));
  if (!detail::check_shared_access(m, self, shared_dst, copy.bytes, true, "cp.async")) return;
  detail::model_access(m, self, shared_dst, copy.bytes,
                       detail::site_at(site, "cp.async", AccessKind::shared_store));
  detail::model_in_flight(m, copy.source_bytes);
  const std::size_t offset = detail::shared_offset(m, copy.dst);
  for (std::size_t i = 0; i < copy.bytes; ++i) ++m.shadow[offset + i].pending_copies;
  queue.copies.push_back(copy);
}

void cp_async_commit() {
  detail::Machine& m = detail::launch_machine("cp.async.commit_group");
  ++detail::queue_of(m, m.current).open_group;
}

void cp_async_wait(int pending_groups) {
  detail::Machine& m = detail::launch_machine("cp.async.wait_group");
  const int self = m.current;
  if (pending_groups < 0) {
    detail::report(m, self, FindingKind::invalid_operand,
                   "cp.async.wait_group " + std::to_string(pending_groups) +
                       ": N must be a non-negative constant (waited for all)");
    pending_groups = 0;
  }
  detail::AsyncQueue& queue = detail::queue_of(m, self);
  const std::uint32_t committed = queue.open_group - 1;  // groups 1..committed
  const auto keep = static_cast<std::uint32_t>(pending_groups);
  if (committed <= keep) return;  // at most N committed groups at all: nothing to wait for
  const std::uint32_t last_complete = committed - keep;
  std::size_t end = queue.head;
  while (end < queue.copies.size() && queue.copies[end].group <= last_complete) ++end;
  detail::land_range(m, self, queue, end);
}

}  // namespace flashjit::emulator
