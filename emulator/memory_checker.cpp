// The memory checks: every global access must lie inside one registered buffer, every shared
// access inside the launch's dynamic shared size, and no shared byte may be touched by two
// warps between barriers with one of them writing. An access that fails is reported and
// skipped (a read yields zero), so one launch reports every bug rather than crashing.
#include <cstdint>
#include <cstdio>
#include <limits>

#include "emulator/machine.hpp"

namespace flashjit::emulator::detail {
namespace {

std::string access_text(std::size_t bytes, bool write, std::uintptr_t address) {
  char text[80];
  std::snprintf(text, sizeof text, "%s of %zu bytes at 0x%llx", write ? "write" : "read", bytes,
                static_cast<unsigned long long>(address));
  return text;
}

// Describes where `address` lies relative to the nearest registered buffer.
void locate(const LaunchConfig& config, std::uintptr_t address, std::size_t bytes,
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

struct Conflict {
  int other = -1;
  const char* what = nullptr;
};

// Updates the shadow of one shared byte for an access by `self`; a conflicting access by
// another warp in the same barrier interval is returned.
Conflict touch(ShadowByte& s, std::uint32_t epoch, int self, bool write) {
  if (s.epoch != epoch) s = ShadowByte{epoch, -1, -1};
  const auto other_warp = [self](int other) { return other >= 0 && other / 32 != self / 32; };
  Conflict conflict;
  if (other_warp(s.writer)) conflict = {s.writer, write ? "write after write" : "read after write"};
  if (write && conflict.what == nullptr && (other_warp(s.reader) || s.reader == kManyReaders)) {
    conflict = {s.reader, "write after read"};
  }
  if (write) {
    s.writer = self;
  } else if (s.reader == -1 || s.reader == self) {
    s.reader = self;
  } else if (s.reader != kManyReaders && s.reader / 32 != self / 32) {
    s.reader = kManyReaders;
  }
  return conflict;
}

}  // namespace
}  // namespace flashjit::emulator::detail

namespace flashjit::emulator {

void* shared_base() {
  detail::Machine* machine = detail::active();
  return machine != nullptr ? machine->shared_begin : nullptr;
}

bool check_global(const void* address, std::size_t bytes, bool write) {
  detail::Machine* machine = detail::active();
  if (machine == nullptr || machine->current < 0) return true;
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  for (const Buffer& buffer : machine->config->buffers) {
    const auto begin = reinterpret_cast<std::uintptr_t>(buffer.data);
    if (at >= begin && at + bytes <= begin + buffer.bytes) return true;
  }
  Finding finding;
  finding.kind = FindingKind::global_out_of_bounds;
  finding.address = at;
  finding.bytes = bytes;
  finding.write = write;
  finding.message = detail::access_text(bytes, write, at);
  detail::locate(*machine->config, at, bytes, finding);
  detail::record(*machine, machine->current, std::move(finding));
  return false;
}

bool check_shared(const void* address, std::size_t bytes, bool write) {
  detail::Machine* machine = detail::active();
  if (machine == nullptr || machine->current < 0) return true;
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  const auto offset =
      static_cast<long long>(at - reinterpret_cast<std::uintptr_t>(machine->shared_begin));
  const auto size = static_cast<long long>(machine->config->shared_bytes);
  Finding finding;
  finding.address = at;
  finding.bytes = bytes;
  finding.write = write;
  finding.offset = offset;
  finding.message =
      detail::access_text(bytes, write, at) + " at shared offset " + std::to_string(offset);
  if (offset < 0 || offset + static_cast<long long>(bytes) > size) {
    finding.kind = FindingKind::shared_out_of_bounds;
    finding.message += " (dynamic shared size " + std::to_string(size) + " bytes)";
    detail::record(*machine, machine->current, std::move(finding));
    return false;
  }
  for (std::size_t i = 0; i < bytes; ++i) {
    auto& shadow = machine->shadow[static_cast<std::size_t>(offset) + i];
    const detail::Conflict conflict =
        detail::touch(shadow, machine->epoch, machine->current, write);
    if (conflict.what == nullptr) continue;
    finding.kind = FindingKind::shared_race;
    finding.other_thread = conflict.other;
    finding.message +=
        std::string(": ") + conflict.what + " by another warp's thread " +
        (conflict.other >= 0
             ? detail::format(machine->threads[static_cast<std::size_t>(conflict.other)].index)
             : std::string("(several)")) +
        " with no __syncthreads between";
    detail::record(*machine, machine->current, std::move(finding));
    break;  // one report per access; the access itself still happens, as on the GPU
  }
  return true;
}

}  // namespace flashjit::emulator
