// Hopper's warpgroup MMA (wgmma) for the INT8 implicit GEMM's main loop (igemm_core.cuh, kWg): the
// shared-memory matrix descriptors, the fences and the m64n64k32 s8 product. The tiles the cp.async
// loaders leave in shared memory are already in wgmma's K-major swizzled layouts: igemm::swizzle XORs
// the 16-byte chunk with address bits 7-8 (64-byte rows) or 7-9 (128-byte rows), which is the hardware's
// 64- and 128-byte swizzle when a tile starts on a 512- or 1024-byte boundary.
//
// wgmma exists only in the arch-specific sm_90a target (__CUDA_ARCH_FEAT_SM90_ALL). Other targets (the
// compute_90 PTX that serves non-Hopper GPUs) compile these to a trap: the host launches the wgmma
// kernels only on compute capability 9.0 and only from an sm_90a build (SOFTDLA_WGMMA).
#pragma once
#include <cstdint>

namespace softdla::gpu::wgmma {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
constexpr bool kAvailable = true;
#else
constexpr bool kAvailable = false;
#endif

// A K-major operand of 8-row groups `group_bytes` apart (1024 for 128-byte rows, 512 for 64-byte rows),
// swizzled as its row width: swizzle mode 1 (128 bytes) or 2 (64 bytes) in bits 62-63. The leading
// offset is unused for swizzled K-major operands whose k-extent (32 bytes) fits in one row.
__device__ __forceinline__ uint64_t descriptor(uint32_t smem_addr, uint32_t group_bytes, uint32_t row_bytes) {
  const uint64_t mode = row_bytes == 128 ? 1 : 2;
  return uint64_t((smem_addr >> 4) & 0x3FFF) | (uint64_t(1) << 16) | (uint64_t((group_bytes >> 4) & 0x3FFF) << 32) |
         (mode << 62);
}

// Shared memory written by cp.async (the generic proxy) made visible to wgmma (the async proxy): each
// writing thread, after its copies completed and before the barrier.
__device__ __forceinline__ void fence_proxy_async() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// Orders this warpgroup's register accesses before the wgmma that follows.
__device__ __forceinline__ void fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

// Shared-memory mbarriers (the per-stage pipeline of igemm_reduce's kMbarriers): init by one thread
// (a block barrier after it), arrive (release, one per warp in the pipeline), and the wait for the
// completion of the phase of parity `parity` (acquire). Built where wgmma is (sm_90a), a trap elsewhere.
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#else
  (void)bar, (void)count;
  __trap();
#endif
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(bar) : "memory");
#else
  (void)bar;
  __trap();
#endif
}
// An arrival on `bar` made by the copy engine once every cp.async this thread issued before it has
// landed (noinc: the barrier's count includes it); the thread does not wait.
__device__ __forceinline__ void mbar_arrive_copies(uint32_t bar) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
#else
  (void)bar;
  __trap();
#endif
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
#else
  (void)bar, (void)parity;
  __trap();
#endif
}

// The bulk tensor copy engine (TMA) for igemm_reduce's kTma pipeline. mbar_init_fence: the barriers' init
// made visible to the async proxy (and the cluster) before the block barrier after it. mbar_expect_tx:
// one arrival on `bar` that also expects `bytes` of transactions (the copies' completions) in this
// phase. tma_load_2d: the box at (c0 bytes, row c1) of the 2-D tensor map `map` (a __grid_constant__
// kernel parameter) into shared memory at `dst`, completing its bytes on `bar` (parts of the box
// outside the tensor arrive as zeros and count too).
__device__ __forceinline__ void mbar_init_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(bar),
               "r"(bytes)
               : "memory");
#else
  (void)bar, (void)bytes;
  __trap();
#endif
}
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void* map, int32_t c0, int32_t c1, uint32_t bar) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
      ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
#else
  (void)dst, (void)map, (void)c0, (void)c1, (void)bar;
  __trap();
#endif
}

// The im2col box of the 4-D tensor map `map` ({C, W, H, N} from the innermost, channels-last pixels): the
// map's pixels-per-column pixels from (w, h, n), walked along W, H, then N inside the map's pixel box with
// its traversal strides, each moved by (off_w, off_h) (the filter tap), channels c.. (the map's channels
// per pixel) of each, into shared memory at `dst`; zeros outside the tensor. Completes on `bar`.
__device__ __forceinline__ void tma_load_im2col_4d(uint32_t dst, const void* map, int32_t c, int32_t w, int32_t h,
                                                   int32_t n, uint16_t off_w, uint16_t off_h, uint32_t bar) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6], {%7, %8};\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c), "r"(w), "r"(h), "r"(n), "r"(bar), "h"(off_w), "h"(off_h)
      : "memory");
#else
  (void)dst, (void)map, (void)c, (void)w, (void)h, (void)n, (void)off_w, (void)off_h, (void)bar;
  __trap();
#endif
}

// kPipeTmaFree's count of the warps done with a stage: adds 1 to the shared-memory word at `addr` and
// returns the value before (acquire-release at the block's scope: the caller's completed wgmma reads of
// the stage come before the add, and the warp that sees the last add issues the refill after it).
__device__ __forceinline__ uint32_t consumed_add(uint32_t addr) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  uint32_t before = 0;
  asm volatile("atom.acq_rel.cta.shared::cta.add.u32 %0, [%1], 1;\n" : "=r"(before) : "r"(addr) : "memory");
  return before;
#else
  (void)addr;
  __trap();
  return 0;
#endif
}

// d += A (64 rows x 32 bytes, descriptor a) * B^T (64 rows x 32 bytes, descriptor b), s8 -> s32. Thread
// `lane` of warp w (of the warpgroup) holds, for columns 8 J .. 8 J + 7 (J < 4 in d0[J], J >= 4 in
// d1[J - 4]), v = 0..3: row 16 w + lane / 4 (+ 8 for v >= 2), column 8 J + 2 (lane % 4) (+ 1 for odd v):
// per 8 columns, mma.sync's m16n8 accumulator layout.
__device__ __forceinline__ void m64n64k32_s8(int32_t (&d0)[4][4], int32_t (&d1)[4][4], uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define SOFTDLA_D4(d, j) "+r"(d[j][0]), "+r"(d[j][1]), "+r"(d[j][2]), "+r"(d[j][3])
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p;\n}\n"
      : SOFTDLA_D4(d0, 0), SOFTDLA_D4(d0, 1), SOFTDLA_D4(d0, 2), SOFTDLA_D4(d0, 3), SOFTDLA_D4(d1, 0),
        SOFTDLA_D4(d1, 1), SOFTDLA_D4(d1, 2), SOFTDLA_D4(d1, 3)
      : "l"(a), "l"(b), "n"(1)  // scale-d: accumulate into d
      : "memory");
#undef SOFTDLA_D4
#else
  (void)d0, (void)d1, (void)a, (void)b;
  __trap();
#endif
}

// One k-tile's products for a warpgroup: Steps k-steps of 32 bytes, each two m64n64k32 (A rows a_rows..
// and 64 rows further) against the 64 channels of b_rows, A and B in 8-row groups of KT-byte swizzled rows
// (a k-step advances the start by 32 bytes inside the row; the hardware swizzles the address it forms).
// Straight-line code: a branch between the k-steps makes ptxas fence the accumulators.
template <int Steps, int KT, class Acc>
__device__ __forceinline__ void ktile_products(Acc& acc, uint32_t a_rows, uint32_t b_rows) {
  fence();
#pragma unroll
  for (int ks = 0; ks < Steps; ++ks) {
    const uint64_t b = descriptor(b_rows + ks * 32, 8 * KT, KT);
#pragma unroll
    for (int mb = 0; mb < 2; ++mb)
      m64n64k32_s8(acc[2 * mb], acc[2 * mb + 1], descriptor(a_rows + mb * 64 * KT + ks * 32, 8 * KT, KT), b);
  }
}

}  // namespace softdla::gpu::wgmma
