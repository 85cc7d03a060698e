// Accumulators of an in-flight wgmma, made visible (PTX ISA: the results "must be" waited for
// with wgmma.wait_group "before the results are accessed"). The emulator computes a wgmma at
// issue and delivers its result at the wait_group that completes it (wgmma.cpp); in between,
// the accumulator registers hold a poison: a signalling NaN whose payload says "in-flight
// accumulator of operation id":
//   0x7fad6000 | id   (exponent all ones, quiet bit clear, tag 0x2d6 in bits 12-21, id 1..4095)
// Arithmetic on a NaN keeps its payload on the host (x86 quiets it: bit 22 set; negation flips
// the sign), so what a thread computes from a poisoned register still carries the tag:
//  - at the wait_group, registers that no longer hold the exact poison were written by the
//    thread while the operation was in flight (a rescale of O before the wait, say);
//  - a stored value carrying the tag was read from the accumulators before the wait.
// What counts as carrying it, by the store's width:
//  - a 32-bit word: the fp32 form (sign, quiet bit and id ignored), or two 16-bit halves that
//    are each the bf16 rounding of it (a packed pair: tile/fragment_store.cuh). bf16 keeps the
//    top 16 bits of the fp32 (to_bfloat16 keeps a NaN's payload), so the bf16 form is 0x7fad
//    or 0x7fed with either sign: a NaN with that payload, which no finite or infinite value is;
//  - a 16-bit element: the bf16 form;
//  - wider stores (16-byte chunks) word by word.
// An f16 rounding loses the payload (to_half gives the canonical 0x7e00, as cvt.rn.f16.f32
// does), so a poisoned value stored as f16 goes unnoticed here unless it is stored as fp32
// first; store_global checks the fp32 value before narrowing it.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "emulator/machine.hpp"

namespace flashjit::emulator::detail {
namespace {

constexpr std::uint32_t kPoisonTag = 0x7fad6000u;
constexpr std::uint32_t kPoisonMask = 0x7fbff000u;  // not the sign, quiet bit or id
constexpr std::uint32_t kPoisonIdMask = 0xfffu;
constexpr std::uint16_t kHalfTag = 0x7fad;
constexpr std::uint16_t kHalfMask = 0x7fbf;  // not the sign or quiet bit

bool fp32_poison(std::uint32_t bits) { return (bits & kPoisonMask) == kPoisonTag; }
bool bf16_poison(std::uint16_t bits) { return (bits & kHalfMask) == kHalfTag; }

bool word_poison(std::uint32_t word) {
  return fp32_poison(word) || (bf16_poison(static_cast<std::uint16_t>(word)) &&
                               bf16_poison(static_cast<std::uint16_t>(word >> 16)));
}

std::string hex_bits(std::uint32_t bits, int digits) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%0*x", digits, bits);
  return text;
}

// The first poisoned word (or half) of `value`, as text, or "" when none.
std::string find_poison(const void* value, std::size_t bytes) {
  if (bytes == 2) {
    std::uint16_t half = 0;
    std::memcpy(&half, value, 2);
    return bf16_poison(half) ? "bf16 " + hex_bits(half, 4) : "";
  }
  for (std::size_t at = 0; at + 4 <= bytes; at += 4) {
    std::uint32_t word = 0;
    std::memcpy(&word, static_cast<const std::byte*>(value) + at, 4);
    if (!word_poison(word)) continue;
    std::string text = hex_bits(word, 8);
    if (fp32_poison(word)) {
      text += " (operation " + std::to_string(word & kPoisonIdMask) + ")";
    }
    return text;
  }
  return "";
}

}  // namespace

std::uint32_t accumulator_poison(std::uint32_t issued) {
  return kPoisonTag | (issued % kPoisonIdMask + 1);  // ids 1..4095: never a zero payload
}

void poison_accumulators(const WgmmaOp& op) {
  float poison = 0.0f;
  std::memcpy(&poison, &op.poison, sizeof poison);
  for (float* d : op.d) std::fill(d, d + op.registers, poison);
}

bool check_accumulators_untouched(Machine& m, const WgmmaOp& op, int slot) {
  const float* d = op.d[static_cast<std::size_t>(slot)];
  for (int i = 0; i < op.registers; ++i) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, d + i, sizeof bits);
    if (bits == op.poison) continue;
    Finding finding;
    finding.kind = FindingKind::wgmma_accumulator_in_flight;
    finding.message = std::string(op.name) + ": this thread wrote accumulator register " +
                      std::to_string(i) + " (now " + hex_bits(bits, 8) +
                      ") while the operation was in flight; the PTX ISA allows accessing "
                      "them only after the wgmma.wait_group that completes it";
    const int base = m.current - m.current % kWarpgroupThreads;
    record(m, base + slot, std::move(finding));
    return false;
  }
  return true;
}

}  // namespace flashjit::emulator::detail

namespace flashjit::emulator {

void check_stored_value(const void* address, const void* value, std::size_t bytes) {
  detail::Machine* m = detail::active();
  if (m == nullptr || m->current < 0) return;
  const std::string poison = detail::find_poison(value, bytes);
  if (poison.empty()) return;
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  const auto shared = reinterpret_cast<std::uintptr_t>(m->shared_begin);
  Finding finding;
  finding.kind = FindingKind::wgmma_accumulator_in_flight;
  finding.address = at;
  finding.bytes = bytes;
  finding.write = true;
  finding.message = "stores a value read from a wgmma accumulator before its wgmma.wait_group (" +
                    poison + ": the emulator's mark for the accumulators of an in-flight " +
                    "wgmma.mma_async) to ";
  if (at >= shared && at < shared + m->config->shared_bytes) {
    finding.offset = static_cast<long long>(at - shared);
    finding.message += "shared offset " + std::to_string(finding.offset);
  } else {
    finding.message += "global address 0x" + detail::hex(at);
    detail::locate_global(*m->config, at, bytes, finding);
  }
  detail::record(*m, m->current, std::move(finding));
}

}  // namespace flashjit::emulator
