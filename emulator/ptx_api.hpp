#pragma once
// Host twins of the PTX instructions the tile library issues as inline assembly on the device:
// mma.sync (tensor cores), ldmatrix and cp.async with its commit/wait groups. Each is modelled
// from the PTX ISA's documented semantics and fragment layouts (section names at each
// definition) and checked like every other access: findings, not crashes.
#include <cstdint>

namespace flashjit::emulator {

/// Element type of mma.sync's A and B operands.
enum class MmaInput { f16, bf16 };

/// mma.sync.aligned.m16n8k16.row.col.f32.{f16|bf16}.{f16|bf16}.f32 d, a, b, c: a warp collective
/// over all 32 lanes; each lane passes its own fragment registers exactly as the PTX ISA defines
/// them (a: 4 x .b32 each holding two 16-bit elements, b: 2 x .b32, c/d: 4 x f32). `d` may be
/// `c`. Products are exact in fp32 and summed in k order, so results can differ from the tensor
/// cores' internal summation in the last bits.
void mma_m16n8k16(MmaInput input, float (&d)[4], const std::uint32_t (&a)[4],
                  const std::uint32_t (&b)[2], const float (&c)[4]);

/// ldmatrix.sync.aligned.m8n8.x{count}{.trans}.shared.b16: count is 1, 2 or 4; `row_address` is
/// this lane's row pointer into shared memory (lanes 8i..8i+7 give the 8 rows, 16 bytes each, of
/// matrix i; lanes >= 8*count pass anything, it is ignored); `out` receives this lane's `count`
/// registers. Each row read is checked as the giving lane's own 16-byte shared read; a row
/// address that is not 16-byte aligned is reported and reads as zeros.
void ldmatrix(int count, bool transpose, std::uint32_t* out, const void* row_address);

/// cp.async.{ca|cg}.shared.global [dst], [src], bytes, src_bytes: asynchronous copy of `bytes`
/// (4, 8 or 16) from global to shared; bytes past `src_bytes` are zero-filled, src_bytes == 0
/// reads no global memory at all. Both addresses must be aligned to `bytes`. The global read
/// happens (and is checked) now; the shared bytes change only when the copy's group completes
/// in cp_async_wait, and touching them before that is reported.
void cp_async(void* shared_dst, const void* global_src, int bytes, int src_bytes);

/// cp.async.commit_group: the copies this thread issued since its last commit become one group.
void cp_async_commit();

/// cp.async.wait_group N: waits until at most `pending_groups` of this thread's newest committed
/// groups are still in flight (0: all complete). Copies not yet committed are not waited for.
void cp_async_wait(int pending_groups);

}  // namespace flashjit::emulator
