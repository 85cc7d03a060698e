#pragma once
// Host twins of the PTX instructions the tile library issues as inline assembly on the device:
// mma.sync (tensor cores), ldmatrix, cp.async with its commit/wait groups, and Hopper's
// wgmma.mma_async with its shared-memory matrix descriptors and fence/commit/wait, and the rest of
// Hopper's asynchronous machinery: mbarriers, TMA bulk tensor copies with their tensor maps,
// named barriers, fence.proxy.async and setmaxnreg. Each is modelled
// from the PTX ISA's documented semantics and fragment layouts (section names at each
// definition) and checked like every other access: findings, not crashes.
#include <array>
#include <cstdint>
#include <source_location>
#include <string>

namespace flashjit::emulator {

/// Element type of mma.sync's and wgmma's A and B operands. e4m3: fp8 codes, two to each 16-bit
/// element of the 16-bit forms' fragments and shared operands (the low byte first), so one
/// 16-bit k step is an 8-bit one of twice the k (m16n8k32, m64nNk32), K-major only in wgmma.
enum class MmaInput { f16, bf16, e4m3 };

/// mma.sync.aligned.m16n8k16.row.col.f32.{f16|bf16}.{f16|bf16}.f32 d, a, b, c: a warp collective
/// over all 32 lanes; each lane passes its own fragment registers exactly as the PTX ISA defines
/// them (a: 4 x .b32 each holding two 16-bit elements, b: 2 x .b32, c/d: 4 x f32). `d` may be
/// `c`. Products are exact in fp32 and summed in k order, so results can differ from the tensor
/// cores' internal summation in the last bits.
void mma_m16n8k16(MmaInput input, float (&d)[4], const std::uint32_t (&a)[4],
                  const std::uint32_t (&b)[2], const float (&c)[4]);

/// mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 d, a, b, c (sm_89 on): as mma_m16n8k16
/// with fp8 e4m3 operands, four a register (a: 16 x 32, b: 32 x 8), the lowest byte first.
void mma_m16n8k32_e4m3(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2],
                       const float (&c)[4]);

/// ldmatrix.sync.aligned.m8n8.x{count}{.trans}.shared.b16: count is 1, 2 or 4; `row_address` is
/// this lane's row pointer into shared memory (lanes 8i..8i+7 give the 8 rows, 16 bytes each, of
/// matrix i; lanes >= 8*count pass anything, it is ignored); `out` receives this lane's `count`
/// registers. Each row read is checked as the giving lane's own 16-byte shared read; a row
/// address that is not 16-byte aligned is reported and reads as zeros.
/// `site` names the instruction in the memory model's report.
void ldmatrix(int count, bool transpose, std::uint32_t* out, const void* row_address,
              std::source_location site = std::source_location::current());

/// cp.async.{ca|cg}.shared.global [dst], [src], bytes, src_bytes: asynchronous copy of `bytes`
/// (4, 8 or 16) from global to shared; bytes past `src_bytes` are zero-filled, src_bytes == 0
/// reads no global memory at all. Both addresses must be aligned to `bytes`. The global read
/// happens (and is checked) now; the shared bytes change only when the copy's group completes
/// in cp_async_wait, and touching them before that is reported.
/// `site` names the instruction in the memory model's report.
void cp_async(void* shared_dst, const void* global_src, int bytes, int src_bytes,
              std::source_location site = std::source_location::current());

/// cp.async.commit_group: the copies this thread issued since its last commit become one group.
void cp_async_commit();

/// cp.async.wait_group N: waits until at most `pending_groups` of this thread's newest committed
/// groups are still in flight (0: all complete). Copies not yet committed are not waited for.
void cp_async_wait(int pending_groups);

/// The layout field (bits 62-63) of a wgmma matrix descriptor.
enum class WgmmaSwizzle : std::uint8_t { none = 0, b128 = 1, b64 = 2, b32 = 3 };

/// A wgmma shared-memory matrix descriptor, decoded (PTX ISA "Matrix Descriptor Format";
/// CUTLASS GmmaDescriptor). Addresses and offsets are in bytes; the emulator's shared address
/// space starts at the block's dynamic shared memory, so `start` is an offset into it.
struct WgmmaDescriptor {
  std::uint32_t start = 0;    // bits 0-13: start address >> 4
  std::uint32_t leading = 0;  // bits 16-29: leading dimension byte offset >> 4 (LBO)
  std::uint32_t stride = 0;   // bits 32-45: stride dimension byte offset >> 4 (SBO)
  int base_offset = 0;        // bits 49-51
  WgmmaSwizzle swizzle = WgmmaSwizzle::none;

  bool operator==(const WgmmaDescriptor&) const = default;
};

/// The fields of a 64-bit descriptor, and back (offsets are kept to their 18 bits, >> 4).
WgmmaDescriptor decode_wgmma_descriptor(std::uint64_t bits);
std::uint64_t encode_wgmma_descriptor(const WgmmaDescriptor& descriptor);

/// The shared byte offset of element (mn, k) of a 16-bit wgmma operand (A: mn = m; B: mn = n)
/// in `descriptor`'s canonical layout: K-major (k contiguous; trans 0) or MN-major (trans 1).
std::uint32_t wgmma_operand_offset(const WgmmaDescriptor& descriptor, bool mn_major, int mn, int k);

/// Why the emulator rejects `descriptor` for a 16-bit operand, or nullptr when it can be used:
/// a non-zero base offset, or a swizzled start outside the first row of its swizzle atom (the
/// pattern would not start on the atom, which base offset 0 promises).
const char* wgmma_descriptor_problem(const WgmmaDescriptor& descriptor, bool mn_major);

/// wgmma.fence.sync.aligned: orders this warpgroup's register accesses before later wgmma.
void wgmma_fence();
/// wgmma.commit_group.sync.aligned: the warpgroup's uncommitted wgmma become one group.
void wgmma_commit_group();
/// wgmma.wait_group.sync.aligned N: waits until at most `pending_groups` of the warpgroup's
/// newest committed groups are in flight. Completed groups' results land in the accumulator
/// registers here, not earlier; until then they hold a NaN tagged as an in-flight accumulator,
/// and a thread writing them or storing a value read from them is reported.
void wgmma_wait_group(int pending_groups);

/// wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{input}.{input}, both operands from shared
/// memory: d (this thread's n / 2 accumulators) = scale_a·A · scale_b·B (+ d when scale_d).
/// trans_a / trans_b select the MN-major layout of that operand. A warpgroup collective: the
/// descriptors and immediates must be the same in all 128 threads. Shared operands are read
/// (and checked) at issue and guarded until a wait_group completes the operation.
void wgmma_ss(MmaInput input, int n, float* d, std::uint64_t a_descriptor,
              std::uint64_t b_descriptor, bool scale_d, int scale_a, int scale_b, bool trans_a,
              bool trans_b, std::source_location site = std::source_location::current());

/// The same with A from registers: this thread's 4 x .b32 hold its warp's 16 rows of A in the
/// mma.sync m16n8k16 A-fragment layout (warp w of the warpgroup: rows 16w..16w+15).
void wgmma_rs(MmaInput input, int n, float* d, const std::uint32_t (&a)[4],
              std::uint64_t b_descriptor, bool scale_d, int scale_a, int scale_b, bool trans_b,
              std::source_location site = std::source_location::current());

// --- mbarrier (PTX ISA "mbarrier"; emulator/mbarrier.cpp). `bar` points at the 8-byte object
// in dynamic shared memory; the emulator keeps its state (arrival counts, tx-count, phase).

/// mbarrier.init.shared::cta.b64 [bar], count: phase 0 with `count` arrivals expected.
void mbarrier_init(void* bar, std::uint32_t count);
/// mbarrier.inval.shared::cta.b64 [bar]: the barrier is no longer live (may be re-initialised).
void mbarrier_inval(void* bar);
/// mbarrier.arrive.shared::cta.b64 _, [bar]: one arrival.
void mbarrier_arrive(void* bar);
/// mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], bytes: expect `bytes` more, then arrive.
void mbarrier_arrive_expect_tx(void* bar, std::uint32_t bytes);
/// mbarrier.expect_tx.shared::cta.b64 [bar], bytes: expect `bytes` more transaction bytes.
void mbarrier_expect_tx(void* bar, std::uint32_t bytes);
/// mbarrier.test_wait.parity: whether the phase with `parity` has completed, never waiting.
bool mbarrier_test_wait_parity(void* bar, std::uint32_t parity);
/// mbarrier.try_wait.parity: whether the phase with `parity` has completed, suspending the
/// thread until it does (the emulator's time limit is unbounded: it returns true, or the
/// block ends in a deadlock finding naming the barrier and phase). Exploring orderings
/// (LaunchConfig::explore_seed), it sometimes returns false on an open phase instead.
bool mbarrier_try_wait_parity(void* bar, std::uint32_t parity);
/// The usual loop around try_wait: returns once the phase with `parity` has completed.
void mbarrier_wait_parity(void* bar, std::uint32_t parity);

// --- TMA (cp.async.bulk.tensor with a CUtensorMap; emulator/tma.cpp, tensor_map.cpp).

/// CUtensorMapSwizzle: 16-byte chunk index ^= (address >> 7) & (span / 16 - 1) within rows
/// of at most `span` bytes (CUDA Driver API, "Tensor Map Object Management").
enum class TmaSwizzle : std::uint8_t { none, b32, b64, b128 };

/// What cuTensorMapEncodeTiled takes, kept decoded: the emulator's stand-in for the opaque
/// 128-byte CUtensorMap. Dimension 0 is the innermost; `strides[i]` is the byte stride of
/// dimension i (strides[0] is implied: the element size; the driver's globalStrides[i - 1] is
/// strides[i]). Out-of-bounds elements are filled with zeros (CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
/// no interleave. `element_strides[i]` (i >= 1) visits every s-th element of the box's
/// dimension i, ceil(box[i] / s) of them; element_strides[0] is ignored, as without interleave
/// the hardware does.
struct TensorMap {
  int element_bytes = 2;  // dataType's size: 1, 2, 4 or 8
  int rank = 2;           // 1 to 5
  const void* global_address = nullptr;
  std::array<std::uint64_t, 5> dims{1, 1, 1, 1, 1};     // globalDim, elements
  std::array<std::uint64_t, 5> strides{0, 0, 0, 0, 0};  // bytes; [0] unused
  std::array<std::uint32_t, 5> box{1, 1, 1, 1, 1};      // boxDim, elements
  std::array<std::uint32_t, 5> element_strides{1, 1, 1, 1, 1};
  TmaSwizzle swizzle = TmaSwizzle::none;
};

/// Why the CUDA driver's cuTensorMapEncodeTiled would reject `map` (the field named first, as
/// the driver API documents it: "globalStrides[0]: ..."), or "" when it is valid.
std::string tensor_map_problem(const TensorMap& map);

/// Elements of dimension `dimension` the box holds in shared memory: box[d], divided by its
/// element stride (rounded up) for d >= 1.
std::uint32_t tensor_map_box_elements(const TensorMap& map, int dimension);
/// Bytes of one box in shared memory (every element, out-of-bounds ones included).
std::uint32_t tensor_map_box_bytes(const TensorMap& map);

/// The shared byte offset (from the box's start at `box_offset`, a shared offset) of byte `byte`
/// of the dense box image, under `swizzle`.
std::uint32_t tma_swizzled_offset(TmaSwizzle swizzle, std::uint32_t box_offset, std::uint32_t byte);

/// cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes
/// [dst], [map, coords], [bar]: copies the box at element `coords` (map->rank of them,
/// innermost first, may be negative or past the end: those elements are zero) into shared
/// memory at `shared_dst` (128-byte aligned) in the map's swizzle, then complete_tx(box bytes)
/// on `bar`. The bytes are checked as global reads now and are pending until the barrier
/// phase they complete on completes: touching them earlier is reported.
void tma_load(void* shared_dst, const TensorMap* map, const std::int32_t* coords, void* bar);

/// The same with .multicast::cluster: the box is read once and written at `shared_dst`'s
/// offset in every block of the cluster whose rank bit is set in `cta_mask`, completing on
/// the mbarrier at `bar`'s offset in each of them. A rank outside the cluster, a block that
/// has exited, or a peer's barrier whose init no cluster barrier ordered first is reported.
void tma_load_multicast(void* shared_dst, const TensorMap* map, const std::int32_t* coords,
                        void* bar, std::uint16_t cta_mask);

/// cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group [map, coords], [src]: writes
/// the box at `coords` from shared `shared_src` (in the map's swizzle) to global memory; only
/// in-bounds elements are written, and no coordinate may be negative (reported, skipped). The
/// source is read by the async proxy, so generic writes to it need a fence.proxy.async first,
/// and it must not change until a bulk wait_group.
void tma_store(const TensorMap* map, const std::int32_t* coords, const void* shared_src);
/// cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [dst], [src], bytes
/// (emulator/bulk_reduce.cpp): adds the `bytes` / 4 floats at shared `shared_src` into those at
/// global `global_dst`, each element atomically, in this thread's open bulk group. Both
/// addresses 16-byte aligned, `bytes` a non-zero multiple of 16. The source is read through the
/// async proxy (generic writes to it need a fence.proxy.async first) and must not change until
/// a bulk wait_group covers the group; the block's threads must not touch the destination until
/// a wait_group without .read does.
void bulk_reduce_add_f32(float* global_dst, const float* shared_src, std::uint32_t bytes);
/// cp.async.bulk.commit_group: this thread's uncommitted bulk stores and reductions become one
/// group.
void bulk_commit_group();
/// cp.async.bulk.wait_group N: waits until at most N of this thread's newest bulk groups are
/// in flight; the others are complete (their shared sources free again, their writes done).
void bulk_wait_group(int pending_groups);
/// cp.async.bulk.wait_group.read N: the same, but only for the reading of the sources: the
/// older groups' shared sources are free again, their global writes may still be in flight.
void bulk_wait_group_read(int pending_groups);

/// fence.proxy.async.shared::cta: this thread's earlier generic-proxy shared writes become
/// visible to the async proxy (TMA stores, wgmma operand reads).
void fence_proxy_async_shared();

// --- global semaphores (PTX ISA "ld" .acquire, "red" .release; emulator/semaphore.cpp).

/// ld.acquire.gpu.global.b32 in a loop until the integer at `address` equals `value`: this
/// thread's later accesses are ordered after what the releasing thread wrote or completed
/// before its release. A value no earlier block will set is the scheduler's deadlock finding.
void semaphore_wait_equal(const int* address, int value);
/// red.release.gpu.global.add.s32: adds `value` to the integer at `address`, after this
/// thread's earlier writes; a bulk reduction of this thread still in flight (no wait_group
/// without .read has completed it) is reported, since the release would not cover it.
void semaphore_release_add(int* address, int value);
/// atom.acq_rel.gpu.global.add.s32: adds `value` to the 32-bit integer at `address` and returns
/// what it held before, released after the thread's earlier writes and acquiring the writes of
/// the arrivals before it (how the last of several blocks learns it is last: a split-KV merge).
/// Blocks run in linear order, so the read-modify-write is atomic.
int semaphore_arrive_add(int* address, int value);

// --- programmatic dependent launch (PTX ISA "griddepcontrol"; emulator/grid_dependency.cpp).

/// griddepcontrol.wait: waits until the grids this one depends on have completed and their
/// writes are visible. Blocks of one stream run one launch after another here, so it returns at
/// once; what it models is the rule: in a launch that overlaps the grid before it
/// (LaunchConfig::overlaps_previous_grid) a thread's global access before its wait is reported.
void grid_dependency_wait();
/// griddepcontrol.launch_dependents: the grid after this one may start launching. No effect
/// here (launches run one after another); checked only for being called inside a launch.
void launch_dependent_grids();

// --- clusters (PTX ISA "Cluster of Cooperative Thread Arrays"; emulator/cluster.cpp).

/// %cluster_ctarank: the running block's rank in its cluster (x fastest).
unsigned cluster_ctarank();
/// %cluster_nctarank: the blocks in the running block's cluster.
unsigned cluster_nctarank();
/// barrier.cluster.arrive.release.aligned: counts this thread toward the cluster barrier's
/// open phase without waiting.
void cluster_arrive();
/// barrier.cluster.wait.acquire.aligned: waits until every non-exited thread of the cluster
/// arrived in the phase this thread arrived in.
void cluster_wait();
/// mapa.shared::cluster then mbarrier.arrive.release.cluster.shared::cluster.b64: one arrival
/// on the mbarrier at `bar`'s offset in the block of rank `rank` (this block's own included).
void mbarrier_arrive_cluster(void* bar, unsigned rank);
/// mapa.shared::cluster then ld.shared::cluster: the `bytes` (4, 8 or 16; `local` aligned to
/// them) at `local`'s offset in the shared memory of the block of rank `rank` (this block's own
/// included), copied to `out`; false (reported) when out of bounds or the peer has exited.
bool load_shared_cluster(const void* local, unsigned rank, void* out, std::size_t bytes);

// --- named barriers (PTX ISA "bar, barrier"; emulator/named_barrier.cpp).

/// bar.sync id, threads: waits until `threads` (a multiple of 32) threads arrived at `id`
/// (0 to 15; 0 is __syncthreads' barrier) with bar.sync or bar.arrive.
void named_barrier_sync(int id, int threads);
/// bar.arrive id, threads: counts this thread toward `id` without waiting.
void named_barrier_arrive(int id, int threads);

// --- setmaxnreg (PTX ISA "setmaxnreg"; emulator/register_budget.cpp).

/// setmaxnreg.dec.sync.aligned.u32 count: a warpgroup collective; the warpgroup's threads drop
/// to `count` registers each (a multiple of 8 in 24..256, at most what they hold) and the
/// registers freed return to the CTA's pool.
void setmaxnreg_dec(int count);
/// setmaxnreg.inc.sync.aligned.u32 count: a warpgroup collective; the warpgroup's threads grow
/// to `count` registers each (at least what they hold), waiting until the CTA's pool has the
/// registers (freed by other warpgroups' .dec). A request the pool can never meet is the
/// scheduler's deadlock finding, naming setmaxnreg and the registers missing.
void setmaxnreg_inc(int count);
/// The registers each thread of the running thread's warpgroup holds now.
int setmaxnreg_current();

}  // namespace flashjit::emulator
