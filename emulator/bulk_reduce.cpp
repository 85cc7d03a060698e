// Bulk reductions on the emulator, from the PTX ISA section "cp.reduce.async.bulk" (the
// .global.shared::cta.bulk_group.add.f32 form a Hopper backward accumulates dQ with):
//  - one thread adds `size` bytes of fp32 values from shared memory into global memory, each
//    element atomically; both addresses 16-byte aligned, the size a non-zero multiple of 16
//    (an operand off these rules is reported and the reduction skipped);
//  - the source is read through the async proxy: generic writes to it need a
//    fence.proxy.async first (proxy_fence.cpp), and it must not be written until a
//    cp.async.bulk.wait_group, .read or not, covers the reduction's bulk group;
//  - the destination is complete only after a cp.async.bulk.wait_group without .read covers
//    the group: a generic access of the block's threads to those bytes before that is reported
//    (bulk_reduce_in_flight), since it would see, or race with, a partial sum.
// Modelling choices: the values are added at issue (one order the hardware may take); a
// thread that exits, and every thread at block end, completes its reductions, as the hardware
// completes them before the grid does. The bytes count as shared bytes read and global bytes
// written.
#include <algorithm>
#include <cstring>
#include <string>

#include "emulator/machine.hpp"

namespace flashjit::emulator::detail {
namespace {

constexpr std::uint32_t kAlignment = 16;  // of both addresses and of the size; a chunk

bool overlaps(std::uintptr_t a, std::size_t a_bytes, std::uintptr_t b, std::size_t b_bytes) {
  return a < b + b_bytes && b < a + a_bytes;
}

void release_source(Machine& m, BulkReduce& reduce) {
  if (reduce.source_released) return;
  reduce.source_released = true;
  release_bulk_source(m, reduce.source);
}

// The operands' rules; false (reported) when one is broken.
bool valid_operands(Machine& m, int self, std::uintptr_t destination, std::uintptr_t source,
                    std::uint32_t bytes, const char* what) {
  Finding finding;
  if (bytes == 0 || bytes % kAlignment != 0) {
    finding.kind = FindingKind::invalid_operand;
    finding.message = std::string(what) + " of " + std::to_string(bytes) +
                      " bytes: the size must be a non-zero multiple of 16; skipped";
  } else if (destination % kAlignment != 0 || source % kAlignment != 0) {
    const bool global = destination % kAlignment != 0;
    finding.kind = FindingKind::misaligned_access;
    finding.address = global ? destination : source;
    finding.message = std::string(what) + " with its " +
                      (global ? "global destination" : "shared source") + " at 0x" +
                      hex(finding.address) + ": both addresses must be 16-byte aligned; skipped";
  } else {
    return true;
  }
  record(m, self, std::move(finding));
  return false;
}

}  // namespace

void complete_bulk_reductions(Machine& m, BulkQueue& queue, std::uint32_t last_group,
                              bool destinations) {
  auto& reductions = queue.reductions;
  for (BulkReduce& reduce : reductions) {
    if (reduce.source.group <= last_group) release_source(m, reduce);
  }
  if (!destinations) return;
  const auto done = [&](const BulkReduce& r) { return r.source.group <= last_group; };
  m.reductions_in_flight -=
      static_cast<std::size_t>(std::count_if(reductions.begin(), reductions.end(), done));
  reductions.erase(std::remove_if(reductions.begin(), reductions.end(), done), reductions.end());
}

void check_bulk_reduce_destination(Machine& m, int thread, std::uintptr_t address,
                                   std::size_t bytes, bool write, const char* what) {
  for (std::size_t t = 0; t < m.bulk_queues.size(); ++t) {
    for (const BulkReduce& reduce : m.bulk_queues[t].reductions) {
      if (!overlaps(address, bytes, reduce.destination, reduce.bytes)) continue;
      Finding finding;
      finding.kind = FindingKind::bulk_reduce_in_flight;
      finding.address = address;
      finding.bytes = bytes;
      finding.write = write;
      finding.other_thread = static_cast<int>(t);
      finding.message = std::string(*what ? what : "global") + (write ? " write" : " read") +
                        " of " + std::to_string(bytes) + " bytes at 0x" + hex(address) +
                        ", which a cp.reduce.async.bulk of thread " + format(m.threads[t].index) +
                        " still adds into (no cp.async.bulk.wait_group without .read has "
                        "completed it)";
      locate_global(*m.config, address, bytes, finding);
      record(m, thread, std::move(finding));
      return;
    }
  }
}

bool is_bulk_reduce_source(const Machine& m, std::size_t offset) {
  for (const BulkQueue& queue : m.bulk_queues) {
    for (const BulkReduce& reduce : queue.reductions) {
      const std::uint32_t first = reduce.source.chunks.front();  // a contiguous run
      if (!reduce.source_released && offset >= first && offset < first + reduce.bytes) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace flashjit::emulator::detail

namespace flashjit::emulator {

void bulk_reduce_add_f32(float* global_dst, const float* shared_src, std::uint32_t bytes) {
  const char* what = "cp.reduce.async.bulk .add.f32";
  detail::Machine& m = detail::launch_machine(what);
  const int self = m.current;
  const auto destination = reinterpret_cast<std::uintptr_t>(global_dst);
  const auto source = reinterpret_cast<std::uintptr_t>(shared_src);
  if (!detail::valid_operands(m, self, destination, source, bytes, what)) return;
  if (!detail::check_shared_access(m, self, shared_src, bytes, false, what)) return;
  const auto offset =
      static_cast<std::uint32_t>(source - reinterpret_cast<std::uintptr_t>(m.shared_begin));
  detail::check_proxy_fence(m, self, offset, bytes, what);
  if (!detail::check_global_bounds(m, self, global_dst, bytes, true, what)) return;
  detail::model_bulk_read(m, global_dst, bytes);  // an add reads the destination in L2
  detail::model_bulk_write(m, global_dst, bytes);
  for (std::uint32_t i = 0; i < bytes / sizeof(float); ++i) {
    float value = 0.0f;
    std::memcpy(&value, m.shared_begin + offset + i * sizeof(float), sizeof value);
    global_dst[i] += value;
  }
  detail::BulkQueue& queue = m.bulk_queues[static_cast<std::size_t>(self)];
  detail::BulkReduce reduce{{queue.open_group, {}}, bytes, destination, false};
  for (std::uint32_t chunk = offset; chunk < offset + bytes; chunk += detail::kAlignment) {
    reduce.source.chunks.push_back(chunk);
  }
  detail::guard_bulk_source(m, reduce.source);
  queue.reductions.push_back(std::move(reduce));
  ++m.reductions_in_flight;
}

}  // namespace flashjit::emulator
