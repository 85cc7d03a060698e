// The memory checks: every global access must lie inside one registered buffer, every shared
// access inside the launch's dynamic shared size, no shared byte may be touched by two threads
// unordered with one of them writing (race_shadow.cpp has the rule), and none while a cp.async
// is still copying into it, and no byte an in-flight wgmma reads may be written. An access
// that fails is reported and skipped (a read yields zero), so one launch reports every bug
// rather than crashing. The clean path builds no text.
#include <cstdint>
#include <cstdio>
#include <limits>

#include "emulator/machine.hpp"

namespace flashjit::emulator::detail {
namespace {

std::string access_text(const char* what, std::size_t bytes, bool write, std::uintptr_t address) {
  char text[112];
  std::snprintf(text, sizeof text, "%s%s%s of %zu bytes at 0x%llx", what, *what ? " " : "",
                write ? "write" : "read", bytes, static_cast<unsigned long long>(address));
  return text;
}

std::string thread_name(const Machine& machine, int thread) {
  return thread >= 0 ? format(machine.threads[static_cast<std::size_t>(thread)].index)
                     : std::string("(several)");
}

Finding shared_finding(FindingKind kind, const char* what, std::uintptr_t at, std::size_t bytes,
                       bool write, long long offset) {
  Finding finding;
  finding.kind = kind;
  finding.address = at;
  finding.bytes = bytes;
  finding.write = write;
  finding.offset = offset;
  finding.message =
      access_text(what, bytes, write, at) + " at shared offset " + std::to_string(offset);
  return finding;
}

void report_race(Machine& machine, int thread, Conflict conflict, Finding finding) {
  finding.kind = FindingKind::shared_race;
  finding.other_thread = conflict.other;
  const std::string who = conflict.other >= 0
                              ? "thread " + thread_name(machine, conflict.other) + " of "
                              : std::string("several threads of ");
  finding.message += std::string(": ") + conflict.what + " by " + who +
                     (conflict.same_warp ? "the same warp with no __syncwarp between"
                                         : "another warp with no __syncthreads between");
  record(machine, thread, std::move(finding));
}

void report_pending_copy(Machine& machine, int thread, const std::byte* byte, Finding finding) {
  finding.kind = FindingKind::async_copy_pending;
  finding.other_thread = async_copy_owner(machine, byte);
  finding.message += ": a cp.async by thread " + thread_name(machine, finding.other_thread) +
                     " is still copying into it (no cp.async.wait_group has completed it)";
  record(machine, thread, std::move(finding));
}

// The generic-proxy write must wait for the wgmma's wgmma.wait_group (PTX ISA: the operands
// may be read at any time until then).
void report_wgmma_operand(Machine& machine, int thread, std::size_t offset, Finding finding) {
  finding.kind = FindingKind::wgmma_operand_in_flight;
  int warpgroup = -1;
  const WgmmaOp* op = wgmma_reader(machine, offset, warpgroup);
  finding.other_thread = warpgroup * kWarpgroupThreads;
  finding.message += ": shared offset " + std::to_string(offset) + " is an operand of " +
                     (op != nullptr ? op->name : "a wgmma.mma_async") + " issued by warpgroup " +
                     std::to_string(warpgroup) + " (threads " +
                     std::to_string(warpgroup * kWarpgroupThreads) + ".." +
                     std::to_string(warpgroup * kWarpgroupThreads + kWarpgroupThreads - 1) +
                     "), still in flight (no wgmma.wait_group has completed it)";
  record(machine, thread, std::move(finding));
}

// The bytes belong to a TMA load whose mbarrier phase has not completed (PTX ISA: the data
// is visible only once a wait observes the phase complete).
void report_pending_tma(Machine& machine, int thread, std::size_t offset, Finding finding) {
  finding.kind = FindingKind::tma_load_pending;
  const TmaLoad* load = tma_load_covering(machine, offset);
  finding.other_thread = load != nullptr ? load->thread : -1;
  finding.message += ": shared offset " + std::to_string(offset) +
                     " is written by a cp.async.bulk.tensor load issued by thread " +
                     thread_name(machine, finding.other_thread) +
                     " whose mbarrier (shared offset " +
                     (load != nullptr ? std::to_string(load->barrier) : std::string("?")) +
                     ") phase has not completed (wait on the mbarrier first)";
  record(machine, thread, std::move(finding));
}

void report_tma_store_source(Machine& machine, int thread, std::size_t offset, Finding finding) {
  finding.kind = FindingKind::tma_store_in_flight;
  finding.message += ": shared offset " + std::to_string(offset) + " is the source of a " +
                     (is_bulk_reduce_source(machine, offset) ? "cp.reduce.async.bulk"
                                                             : "cp.async.bulk.tensor store") +
                     " still in flight (no cp.async.bulk.wait_group has completed it)";
  record(machine, thread, std::move(finding));
}

/// A GPU's loads and stores of 2, 4, 8 or 16 bytes need an address aligned to their size: one
/// that is not faults there, so it is reported here (and the access skipped).
bool check_alignment(Machine& machine, int thread, std::uintptr_t at, std::size_t bytes, bool write,
                     const char* what, const char* space) {
  const bool sized = bytes == 2 || bytes == 4 || bytes == 8 || bytes == 16;
  if (!sized || at % bytes == 0) return true;
  Finding finding;
  finding.kind = FindingKind::misaligned_access;
  finding.address = at;
  finding.bytes = bytes;
  finding.write = write;
  finding.message = access_text(what, bytes, write, at) + " to " + space +
                    " memory: not aligned to " + std::to_string(bytes) + " bytes";
  record(machine, thread, std::move(finding));
  return false;
}

}  // namespace

void locate_global(const LaunchConfig& config, std::uintptr_t address, std::size_t bytes,
                   Finding& finding) {
  std::uintptr_t best_distance = std::numeric_limits<std::uintptr_t>::max();
  for (const Buffer& buffer : config.buffers) {
    const auto begin = reinterpret_cast<std::uintptr_t>(buffer.data);
    const std::uintptr_t end = begin + buffer.bytes;
    const std::uintptr_t distance = address < begin         ? begin - address
                                    : address + bytes > end ? address + bytes - end
                                                            : 0;
    if (distance >= best_distance) continue;
    best_distance = distance;
    finding.buffer = buffer.name;
    finding.offset = static_cast<long long>(address - begin);
  }
  if (finding.buffer.empty()) {
    finding.message += " (no buffer registered)";
    return;
  }
  finding.message += ", " + std::to_string(finding.offset) + " bytes from the start of '" +
                     finding.buffer + "' (nearest buffer)";
}

namespace {
// A global access of a thread that has not waited for the grid its launch may overlap.
void check_grid_dependency(Machine& machine, int thread, std::uintptr_t at, std::size_t bytes,
                           bool write, const char* what) {
  if (!machine.config->overlaps_previous_grid ||
      machine.threads[static_cast<std::size_t>(thread)].waited_previous_grid) {
    return;
  }
  Finding finding;
  finding.kind = FindingKind::global_before_grid_wait;
  finding.address = at;
  finding.bytes = bytes;
  finding.write = write;
  finding.message = access_text(what, bytes, write, at) +
                    " before this thread's griddepcontrol.wait, in a launch that may overlap the "
                    "grid before it: that grid may not have finished with this memory";
  locate_global(*machine.config, at, bytes, finding);
  record(machine, thread, std::move(finding));
}
}  // namespace

bool check_global_bounds(Machine& machine, int thread, const void* address, std::size_t bytes,
                         bool write, const char* what) {
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  check_grid_dependency(machine, thread, at, bytes, write, what);
  for (const Buffer& buffer : machine.config->buffers) {
    const auto begin = reinterpret_cast<std::uintptr_t>(buffer.data);
    if (at >= begin && at + bytes <= begin + buffer.bytes) {
      (write ? machine.report.work.global_bytes_written : machine.report.work.global_bytes_read) +=
          bytes;
      return true;
    }
  }
  Finding finding;
  finding.kind = FindingKind::global_out_of_bounds;
  finding.address = at;
  finding.bytes = bytes;
  finding.write = write;
  finding.message = access_text(what, bytes, write, at);
  locate_global(*machine.config, at, bytes, finding);
  record(machine, thread, std::move(finding));
  return false;
}

bool check_global_access(Machine& machine, int thread, const void* address, std::size_t bytes,
                         bool write, const char* what) {
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  if (!check_alignment(machine, thread, at, bytes, write, what, "global")) return false;
  if (!check_global_bounds(machine, thread, address, bytes, write, what)) return false;
  if (machine.reductions_in_flight > 0) {
    check_bulk_reduce_destination(machine, thread, reinterpret_cast<std::uintptr_t>(address), bytes,
                                  write, what);
  }
  return true;
}

bool check_shared_access(Machine& machine, int thread, const void* address, std::size_t bytes,
                         bool write, const char* what) {
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  if (!check_alignment(machine, thread, at, bytes, write, what, "shared")) return false;
  const auto offset =
      static_cast<long long>(at - reinterpret_cast<std::uintptr_t>(machine.shared_begin));
  const auto size = static_cast<long long>(machine.config->shared_bytes);
  if (offset < 0 || offset + static_cast<long long>(bytes) > size) {
    Finding finding =
        shared_finding(FindingKind::shared_out_of_bounds, what, at, bytes, write, offset);
    finding.message += " (dynamic shared size " + std::to_string(size) + " bytes)";
    record(machine, thread, std::move(finding));
    return false;
  }
  (write ? machine.report.work.shared_bytes_written : machine.report.work.shared_bytes_read) +=
      bytes;
  // One report per access; the access itself still happens, as on a GPU.
  const RangeCheck check = touch_range(
      machine, machine.shadow.data() + static_cast<std::size_t>(offset), bytes, thread, write);
  if (!check.found) {
    if (write) {
      forget_landings(machine, static_cast<std::size_t>(offset), bytes);
    } else {
      check_landing_seen(machine, thread, static_cast<std::size_t>(offset), bytes, what);
    }
    return true;
  }
  Finding finding = shared_finding(FindingKind::shared_race, what, at, bytes, write, offset);
  const std::size_t first = static_cast<std::size_t>(offset) + check.index;
  if (check.tma) {
    report_pending_tma(machine, thread, first, std::move(finding));
  } else if (check.tma_store) {
    report_tma_store_source(machine, thread, first, std::move(finding));
  } else if (check.wgmma) {
    report_wgmma_operand(machine, thread, first, std::move(finding));
  } else if (check.pending) {
    report_pending_copy(machine, thread, static_cast<const std::byte*>(address) + check.index,
                        std::move(finding));
  } else {
    report_race(machine, thread, check.conflict, std::move(finding));
  }
  return true;
}

}  // namespace flashjit::emulator::detail

namespace flashjit::emulator {

void* shared_base() {
  detail::Machine* machine = detail::active();
  return machine != nullptr ? machine->shared_begin : nullptr;
}

namespace {

// check_global's work, the load marked held (check_global_held_load) when `held`.
bool check_and_model_global(const void* address, std::size_t bytes, bool write,
                            std::source_location site, bool held) {
  detail::Machine* machine = detail::active();
  if (machine == nullptr || machine->current < 0) return true;
  if (!detail::check_global_access(*machine, machine->current, address, bytes, write, "")) {
    return false;
  }
  detail::Site at = detail::site_at(site, write ? "st.global" : "ld.global",
                                    write ? AccessKind::global_store : AccessKind::global_load);
  at.held = held;
  detail::model_access(*machine, machine->current, address, bytes, at);
  if (held) detail::model_held_load(*machine, machine->current, static_cast<std::int64_t>(bytes));
  return true;
}

}  // namespace

bool check_global(const void* address, std::size_t bytes, bool write, std::source_location site) {
  return check_and_model_global(address, bytes, write, site, false);
}

bool check_global_held_load(const void* address, std::size_t bytes, std::source_location site) {
  return check_and_model_global(address, bytes, false, site, true);
}

void release_held_load(std::size_t bytes) {
  detail::Machine* machine = detail::active();
  if (machine == nullptr || machine->current < 0) return;
  detail::model_held_load(*machine, machine->current, -static_cast<std::int64_t>(bytes));
}

bool check_shared(const void* address, std::size_t bytes, bool write, std::source_location site) {
  detail::Machine* machine = detail::active();
  if (machine == nullptr || machine->current < 0) return true;
  if (!detail::check_shared_access(*machine, machine->current, address, bytes, write, "")) {
    return false;
  }
  detail::model_access(*machine, machine->current, address, bytes,
                       detail::site_at(site, write ? "st.shared" : "ld.shared",
                                       write ? AccessKind::shared_store : AccessKind::shared_load));
  return true;
}

}  // namespace flashjit::emulator
