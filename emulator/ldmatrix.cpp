// ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16 on the emulator. From the PTX ISA,
// section "Warp-level matrix load instruction: ldmatrix" (9.7.14.5.15 or 9.7.15.5.15 depending
// on the ISA version):
//  - "The eight addresses required for each matrix are provided by eight threads": threads
//    8i..8i+7 give the row addresses of matrix i; "a group of four consecutive threads loads
//    16 bytes" (one row of eight .b16), and the addresses "must be naturally aligned".
//  - Figure "ldmatrix fragment layout for one 8x8 Matrix with 16-bit elements": "each thread
//    in a warp loads fragments of a row", a group of four threads one entire row, so lane l
//    holds row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1, the lower column in the low half.
//  - "the elements of the second matrix are loaded in the next destination register", and so
//    on for x4.
//  - ".trans indicates that the matrix is loaded in column-major format": the same layout over
//    the transposed matrix, so lane l holds element l / 4 of rows 2 (l % 4) and 2 (l % 4) + 1.
#include <array>
#include <cstring>
#include <stdexcept>

#include "emulator/machine.hpp"

namespace flashjit::emulator {
namespace {

/// One lane's destination and the row it read before arriving (its own checked shared read).
struct LdmatrixLane {
  std::uint32_t* out;
  std::array<std::uint16_t, 8> row;
};

const std::array<std::uint16_t, 8>& row_of(void* const* lanes, int lane) {
  return static_cast<const LdmatrixLane*>(lanes[lane])->row;
}

template <int Count, bool Transpose>
void compute(void* const* lanes) {
  for (int lane = 0; lane < 32; ++lane) {
    const int r = lane / 4, c = 2 * (lane % 4);
    std::uint32_t* out = static_cast<const LdmatrixLane*>(lanes[lane])->out;
    for (int matrix = 0; matrix < Count; ++matrix) {
      const int first_row = 8 * matrix;  // lane giving row 0 of this matrix
      const std::uint32_t low =
          Transpose ? row_of(lanes, first_row + c)[r] : row_of(lanes, first_row + r)[c];
      const std::uint32_t high =
          Transpose ? row_of(lanes, first_row + c + 1)[r] : row_of(lanes, first_row + r)[c + 1];
      out[matrix] = low | high << 16;
    }
  }
}

constexpr WarpExchange kX1{"ldmatrix.m8n8.x1.b16", &compute<1, false>};
constexpr WarpExchange kX2{"ldmatrix.m8n8.x2.b16", &compute<2, false>};
constexpr WarpExchange kX4{"ldmatrix.m8n8.x4.b16", &compute<4, false>};
constexpr WarpExchange kX1Trans{"ldmatrix.m8n8.x1.trans.b16", &compute<1, true>};
constexpr WarpExchange kX2Trans{"ldmatrix.m8n8.x2.trans.b16", &compute<2, true>};
constexpr WarpExchange kX4Trans{"ldmatrix.m8n8.x4.trans.b16", &compute<4, true>};

const WarpExchange* variant(int count, bool transpose) {
  switch (count) {
    case 1:
      return transpose ? &kX1Trans : &kX1;
    case 2:
      return transpose ? &kX2Trans : &kX2;
    case 4:
      return transpose ? &kX4Trans : &kX4;
    default:
      return nullptr;
  }
}

// This lane's 16-byte row; zeros when the address is misaligned or the read is rejected.
void read_row(detail::Machine& m, int self, const void* address,
              std::array<std::uint16_t, 8>& row, const std::source_location& site) {
  row.fill(0);
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  if (at % 16 != 0) {
    Finding finding;
    finding.kind = FindingKind::misaligned_access;
    finding.address = at;
    finding.bytes = 16;
    finding.offset = static_cast<long long>(at - reinterpret_cast<std::uintptr_t>(m.shared_begin));
    finding.message = "ldmatrix row address 0x" + detail::hex(at) + " (shared offset " +
                      std::to_string(finding.offset) + ") is not 16-byte aligned";
    detail::record(m, self, std::move(finding));
    return;
  }
  if (detail::check_shared_access(m, self, address, 16, false, "ldmatrix")) {
    std::memcpy(row.data(), address, 16);
    m.report.work.ldmatrix_bytes += 16;
    detail::model_access(m, self, address, 16,
                         detail::site_at(site, "ldmatrix", AccessKind::shared_load));
  }
}

}  // namespace

void ldmatrix(int count, bool transpose, std::uint32_t* out, const void* row_address,
              std::source_location site) {
  detail::Machine* machine = detail::active();
  if (machine == nullptr || machine->current < 0) {
    throw std::logic_error("ldmatrix needs a warp: call it in an emulated launch");
  }
  const int self = machine->current;
  const WarpExchange* kind = variant(count, transpose);
  if (kind == nullptr) {
    Finding finding;
    finding.kind = FindingKind::invalid_operand;
    finding.message = "ldmatrix.m8n8.x" + std::to_string(count) + ": .num must be x1, x2 or x4";
    detail::record(*machine, self, std::move(finding));
    detail::abandon_block(*machine);
  }
  LdmatrixLane lane{out, {}};
  if (self % 32 < 8 * count) read_row(*machine, self, row_address, lane.row, site);
  warp_exchange(0xffffffffu, &lane, *kind);
}

}  // namespace flashjit::emulator
