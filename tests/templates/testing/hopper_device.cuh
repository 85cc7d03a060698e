#pragma once
// Kernels that instantiate the tile library's Hopper device PTX, for the NVRTC compile test
// (tests/templates/test_tile_device_compile.cpp): they are built for sm_90a and never run, so
// each only has to use every instruction variant it is about.
#include "tile/bulk_reduce.cuh"
#include "tile/cluster.cuh"
#include "tile/memory.cuh"
#include "tile/register_budget.cuh"
#include "tile/wgmma.cuh"

namespace flashjit::testing {

/// setmaxnreg as FlashAttention-3 uses it: warpgroup 0 (the producer) releases registers, the
/// other two (the consumers) claim them. setmaxnreg needs a register count known at launch,
/// which __launch_bounds__ gives ptxas.
template <int Producer, int Consumer>
FJ_GLOBAL void __launch_bounds__(384, 1) register_budget_probe(const float* in, float* out) {
  const int t = static_cast<int>(threadIdx.x);
  if (t / 128 == 0) {
    warpgroup_release_registers<Producer>();
  } else {
    warpgroup_claim_registers<Consumer>();
  }
  store_global(out, t, load_global(in, t));
}

/// Every wgmma variant of one N: SS and RS, f16 and bf16, K- and MN-major operands. The
/// results are summed into out so that none is optimized away.
template <int N>
FJ_DEVICE void wgmma_every_form(float* out, unsigned long long desc, const FragmentA& a) {
  float d[N / 2] = {};
  wgmma_fence();
  wgmma_ss<half_t, N>(d, desc, desc, false);
  wgmma_ss<bfloat16_t, N, true, false>(d, desc, desc, true);
  wgmma_ss<half_t, N, false, true>(d, desc, desc, true);
  wgmma_ss<bfloat16_t, N, true, true>(d, desc, desc, true);
  wgmma_rs<half_t, N>(d, a, desc, true);
  wgmma_rs<bfloat16_t, N, true>(d, a, desc, true);
  wgmma_commit_group();
  wgmma_wait_group<0>();
  float sum = 0.0f;
  for (int i = 0; i < N / 2; ++i) sum += d[i];
  store_global(out, static_cast<int>(threadIdx.x), sum);
}

/// wgmma_every_form for each of `Ns` (one warpgroup; operands at the start of shared memory).
template <int... Ns>
FJ_GLOBAL void wgmma_n_probe(const float* in, float* out) {
  FragmentA a;
  for (int r = 0; r < 4; ++r) a.regs[r] = static_cast<unsigned>(load_global(in, r));
  const unsigned long long desc =
      make_descriptor(dynamic_shared<half_t>(), 128, 256, WgmmaLayout::interleave);
  (wgmma_every_form<Ns>(out, desc, a), ...);
}

/// The cluster wrappers in a cluster of two: ranks, the cluster barrier, multicast TMA loads
/// of ranks 2 to 4 and an arrival on the peer's mbarrier.
template <int ClusterBlocks>
FJ_GLOBAL void __cluster_dims__(ClusterBlocks, 1, 1)
    cluster_probe(const FJ_GRID_CONSTANT tma_descriptor map, unsigned* out) {
  mbarrier_t* bar = dynamic_shared<mbarrier_t>();
  unsigned char* box = dynamic_shared<unsigned char>() + 1024;
  if (threadIdx.x == 0) {
    mbarrier_init(bar, 1);
    mbarrier_init_fence();
  }
  cluster_sync();
  const unsigned rank = cluster_ctarank();
  const unsigned short everyone = (1u << ClusterBlocks) - 1;
  if (threadIdx.x == 0) {
    mbarrier_arrive_expect_tx(bar, 3 * 2048);
    const int at2[2] = {0, static_cast<int>(rank) * 8};
    const int at3[3] = {0, 0, static_cast<int>(rank)};
    const int at4[4] = {0, 0, static_cast<int>(rank), 1};
    tma_load_multicast(box, map, at2, bar, everyone);
    tma_load_multicast(box, map, at3, bar, everyone);
    tma_load_multicast(box, map, at4, bar, everyone);
  }
  mbarrier_wait_parity(bar, 0);
  if (threadIdx.x == 0) mbarrier_arrive_cluster(bar, (rank + 1) % ClusterBlocks);
  store_global_raw(out + threadIdx.x, rank + box[threadIdx.x]);
  cluster_sync();
}

/// One warp's partial sums handed to the copy engine: each lane writes its floats to shared
/// memory, one thread fences them for the async proxy and adds the run into `sums` with a bulk
/// reduction, then frees the source (.read) and waits for the writes.
FJ_GLOBAL void bulk_reduce_probe(float* sums) {
  float* partial = dynamic_shared<float>();
  store_shared(partial, threadIdx.x, 1.0f + threadIdx.x);
  fence_proxy_async();
  __syncwarp();
  if (threadIdx.x == 0) {
    bulk_reduce_add(sums, partial, 32 * sizeof(float));
    bulk_commit_group();
    bulk_wait_group_read<0>();
    bulk_wait_group<0>();
  }
}

}  // namespace flashjit::testing
