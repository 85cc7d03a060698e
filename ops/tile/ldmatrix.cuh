#pragma once
// ldmatrix: a warp loads 8x8 matrices of 16-bit elements from shared memory straight into the
// mma fragment layout (lanes 8i..8i+7 give the row addresses of matrix i; lane l receives
// row l/4, columns 2(l%4) and 2(l%4)+1 of each matrix, or of its transpose with .trans).
#include "tile/async_copy.cuh"

namespace flashjit {

#if defined(FJ_DEVICE_CODE)

/// Four 8x8 matrices; `row` is this lane's row address (16-byte aligned).
FJ_DEVICE void ldmatrix_x4(unsigned (&regs)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(regs[0]), "=r"(regs[1]), "=r"(regs[2]), "=r"(regs[3])
               : "r"(shared_address(row)));
}

/// Four 8x8 matrices, each transposed on the way.
FJ_DEVICE void ldmatrix_x4_trans(unsigned (&regs)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(regs[0]), "=r"(regs[1]), "=r"(regs[2]), "=r"(regs[3])
               : "r"(shared_address(row)));
}

#else

inline void ldmatrix_x4(unsigned (&regs)[4], const void* row,
                        std::source_location site = std::source_location::current()) {
  emulator::ldmatrix(4, false, regs, row, site);
}
inline void ldmatrix_x4_trans(unsigned (&regs)[4], const void* row,
                              std::source_location site = std::source_location::current()) {
  emulator::ldmatrix(4, true, regs, row, site);
}

#endif

}  // namespace flashjit
