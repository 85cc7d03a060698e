#pragma once
// The one shared-memory swizzle of the Hopper kernels, stated once: TMA's 128-byte pattern
// (CU_TENSOR_MAP_SWIZZLE_128B), which wgmma reads as it landed (PTX ISA, wgmma's shared memory
// matrix layouts). A line is one row's 128 bytes; within each atom of 8 lines, 16-byte chunk j
// of line r sits at chunk j ^ r. The device tiles lay their operands out by it
// (swizzled_tile.cuh), and the host builds its tensor maps from it (boxes one line wide, the
// mode of that line's width: attention/hopper/attention_forward_tma.cpp), so the two cannot
// disagree. Plain constants, so the host includes this file too.

namespace flashjit {

struct Swizzle128 {
  // Enumerators, not static data members: NVRTC would emit those as PTX globals.
  enum : int {
    kLineBytes = 128,  // one row of a panel, and a tensor map box's width in bytes
    kChunkBytes = 16,  // what the pattern moves
    kAtomLines = 8,    // the pattern's period: chunk j of line r goes to j ^ (r % 8)
  };
};

}  // namespace flashjit
