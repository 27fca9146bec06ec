// The part of the implicit-GEMM convolution that does not depend on the element type: the loaders that
// read channels-last activations straight from memory (no im2col buffer), the cp.async pipeline, the
// tensor-core main loop (igemm_reduce: the accumulators stay in the mma fragments), the parking of the
// accumulators in shared memory and the split-K sum (igemm_accumulate). The INT8 kernel (conv_igemm.cu,
// mma m16n8k32 s8 -> s32) and the FP16 kernel (conv_igemm_f16.cu, mma m16n8k16 f16 -> f32) each add
// their own prologue and SDP epilogue around these.
//
// Everything here counts the reduction in bytes: a k-tile is KT = 64 or 128 bytes of (tap r, tap s,
// channel c) with the channels padded to Cp bytes, so one 16-byte run is one pixel's channels at one tap.
// 64 bytes are 64 int8 or 32 fp16 values; the two mma shapes read the same bytes into the same fragment
// registers (m16n8k32 s8 and m16n8k16 f16 both take 16 rows x 32 bytes of A and 8 rows x 32 bytes of B),
// so the shared-memory layout, the swizzle and every ldmatrix are shared.
//
// A block computes BM pixels x BN channels with 8 warps of 64 x 32, a cp.async pipeline (four stages of
// 64-byte k-tiles by default; the INT8 kernel's 128 x 128 tiles take three of 128 bytes, one barrier per
// four k-steps instead of two), XOR-swizzled shared memory for conflict-free ldmatrix. Split-K: a
// cluster of 2-8 blocks shares one output tile, each reducing a slice of the k-tiles; the partial
// accumulators are summed through distributed shared memory and each block of the cluster runs the
// epilogue on its share of the rows. On Hopper (sm_90a builds) the INT8 128 x 128 tiles of 128-byte
// k-tiles and 256 x 64 tiles of 64-byte ones run their products on warpgroup MMA instead
// (igemm_wgmma.cuh; same loaders, same pipeline). The 128 x 128 wgmma tiles can instead take a pipeline
// of per-stage mbarriers with no block barrier in the k-loop (TileShape's Pipe kPipeMbar,
// SOFTDLA_CUDA_WG_MBAR=1; measured slower on the H200, off by default: docs/PERFORMANCE.md), or keep the
// block barrier and have the bulk tensor copy engine (TMA) fill the weights' half of each stage (and
// the pixels' half in pointwise layers, and in k x k layers of whole 128-byte channel tiles through
// TMA's im2col mode) from tensor maps (kPipeTma, SOFTDLA_CUDA_WG_TMA; wai by default). Layers whose
// stages are all TMA copies drop the block barrier too (kPipeTmaFree, SOFTDLA_CUDA_WG_TMA_FREE, on by
// default: the two together 5-6 % faster on ResNet-50 INT8 at batch 32 and 128, docs/PERFORMANCE.md).
#pragma once
#include <cuda.h>  // CUtensorMap (the type only: no driver call is linked)
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>

#include "env_switch.h"
#include "gpu_ops.h"
#include "igemm_wgmma.cuh"

namespace softdla::gpu {

// GEMM view: rows are output pixels (all images), columns output channels. Sizes of the reduction
// (Cp, kpad) are in bytes.
struct IgemmGeometry {
  uint32_t N, H, W, Cp;  // input, channels-last, Cp bytes per pixel (channels padded)
  uint32_t K, OH, OW;    // output
  uint32_t R, S, sh, sw, dh, dw, pt, pl;
  uint32_t M;            // N * OH * OW
  uint32_t kpad;         // weight row bytes: R * S * Cp rounded up to 64
  uint32_t pointwise;    // 1 x 1, stride 1, no padding: output pixel m reads input row m of [M][Cp]
};

namespace igemm {

constexpr int kStages = 4;  // the default pipeline: 64-byte k-tiles, four stages
// wgmma main loops issue a k-tile's products before the copies of the stage that refills the slot freed
// at the barrier (igemm_reduce); -DSOFTDLA_WG_ISSUE_FIRST=0 builds the earlier order (copies first).
#ifndef SOFTDLA_WG_ISSUE_FIRST
#define SOFTDLA_WG_ISSUE_FIRST 1
#endif
constexpr bool kWgIssueFirst = SOFTDLA_WG_ISSUE_FIRST != 0;
constexpr int kBlockThreads = 256;

// The k-loop's synchronization (TileShape's Pipe): a block barrier a k-tile, every stage by cp.async
// (kPipeBarrier); per-stage mbarriers (kPipeMbar); a block barrier a k-tile with the weights' half of
// each stage (and, where TmaMaps::a_on, the pixels' half) copied by TMA on a per-stage mbarrier (kPipeTma);
// both halves by TMA (TmaMaps::a_on required) with no block barrier in the k-loop: the warps wait only on
// the stages' mbarriers, and the last warp done with a stage issues its refill (kPipeTmaFree).
constexpr int kPipeBarrier = 0, kPipeMbar = 1, kPipeTma = 2, kPipeTmaFree = 3;

// The tensor maps of kPipeTma (a __grid_constant__ kernel parameter): b, the weights [K][kpad] bytes;
// a, the pixels where a_on: 1, a pointwise layer's [M][Cp] bytes (a 2-D map); 2, a k x k layer's
// channels-last input [N][H][W][Cp] with Cp a multiple of 128 (every k-tile one tap's 128 channels) as an
// im2col map of 128 pixels x 128 channels a box, its pixel box and traversal strides the convolution's.
// Every box lands as 128 rows x 128 bytes with the hardware's 128-byte swizzle, which is swizzle<128>'s
// layout from a 1024-byte boundary.
struct TmaMaps {  // (128-byte aligned, as CUtensorMap)
  CUtensorMap b, a;
  int a_on;
};

// KT: bytes of the reduction per k-tile (64 or 128), Stages: cp.async stages in flight.
template <int BM, int BN, int KT = 64, int Stages = kStages, int Pipe = kPipeBarrier>
struct TileShape {
  static constexpr int kWarpsN = BN / 32;
  // Warps of kWarpM x 32: 64 rows (four m16 fragments, the usual) or 32 (two: half the accumulator
  // registers, for tiles of 64 x 128 or 128 x 64 that fit more blocks an SM).
  static constexpr int kWarpM = BM * kWarpsN / 8, kMI = kWarpM / 16;
  static_assert(kWarpM == 64 || kWarpM == 32, "8 warps of 64 x 32 or 32 x 32");
  static_assert(KT == 64 || KT == 128, "k-tiles of 64 or 128 bytes");
  static constexpr int kStageBytes = (BM + BN) * KT;
  // kPipeMbar (wgmma's 128 x 128 tiles): igemm_reduce's per-stage mbarrier pipeline, its 2 x Stages
  // barriers after the stages; kPipeTma: its Stages barriers of the TMA copies there; kPipeTmaFree: the
  // same barriers, then Stages 32-bit counts of the warps done with each stage.
  static constexpr bool kMbarriers = Pipe == kPipeMbar, kTmaFree = Pipe == kPipeTmaFree,
                        kTma = Pipe == kPipeTma || kTmaFree;
  static constexpr int kBarrierBytes = Pipe != kPipeBarrier ? 128 : 0;
  static constexpr int kPipelineBytes = Stages * kStageBytes + kBarrierBytes;
  // Parked accumulators: 4-byte words, rows padded by 8 words (16-byte aligned, and the 8-byte stores
  // of one warp land in as few wavefronts as their 256 bytes allow).
  static constexpr int kParkStride = BN + 8;
  static constexpr int kParkBytes = BM * kParkStride * 4;
  static constexpr int kSmemBytes = kPipelineBytes > kParkBytes ? kPipelineBytes : kParkBytes;
};

// Byte offset of 16-byte chunk `chunk` of row `row` in a tile of KT-byte rows, XOR-swizzled so that an
// 8-row ldmatrix (8 rows, one chunk) touches every bank once. 64-byte rows: rows 2i and 2i+1 share a
// 128-byte bank line, the chunk is XOR-ed with (row / 2) % 4. 128-byte rows: one row per bank line,
// the chunk is XOR-ed with row % 8.
template <int KT = 64>
__device__ __forceinline__ uint32_t swizzle(uint32_t row, uint32_t chunk) {
  if constexpr (KT == 64) return row * 64 + ((chunk ^ ((row >> 1) & 3)) << 4);
  else return row * 128 + ((chunk ^ (row & 7)) << 4);
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;  // 0: nothing is read, the 16 bytes are zero-filled
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
// Small-channel inputs (C <= 4, e.g. RGB): one tap is 4 (int8) or 8 (fp16) bytes.
template <int kBytes>
__device__ __forceinline__ void cp_async_small(uint32_t dst, const void* src, bool valid) {
  static_assert(kBytes == 4 || kBytes == 8, "cp.async.ca copies 4, 8 or 16 bytes");
  const int bytes = valid ? kBytes : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(src), "n"(kBytes), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// The two tensor-core products, on 16 x 32 bytes of A and 32 x 8 bytes of B (fragments as ldmatrix
// leaves them).
struct MmaS8 {
  using Acc = int32_t;
  __device__ __forceinline__ static void run(int32_t (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  __device__ __forceinline__ static int4 add(int4 a, int4 b) { return make_int4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }
};
struct MmaF16 {
  using Acc = float;
  __device__ __forceinline__ static void run(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  __device__ __forceinline__ static float4 add(float4 a, float4 b) {
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
  }
};

// Cluster barrier halves (split-K): arrive releases this block's shared-memory writes to the cluster,
// wait acquires the others'.
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory"); }
// The generic address of `p` (in this block's shared memory) in the shared memory of cluster block `rank`.
template <class T>
__device__ __forceinline__ const T* cluster_peer(const T* p, uint32_t rank) {
  uint64_t remote;
  asm volatile("mapa.u64 %0, %1, %2;\n" : "=l"(remote) : "l"(reinterpret_cast<uint64_t>(p)), "r"(rank));
  return reinterpret_cast<const T*>(remote);
}

// Where one thread's next 16-byte reduction run starts: byte c of the channels of tap (r, s). Advanced
// by whole 64-byte stages; r == R means past the reduction (zero fill).
struct TapCursor {
  uint32_t c, r, s;
  __device__ void advance(uint32_t bytes, const IgemmGeometry& g) {
    c += bytes;
    while (c >= g.Cp && r < g.R) {
      c -= g.Cp;
      if (++s == g.S) s = 0, ++r;
    }
  }
};

// Where igemm_reduce's accumulators lie in the tile: acc[i][j][v] of this thread is row row(i) (+ 8 for
// v >= 2), column column(i) + 8 j + 2 (lane % 4) (+ 1 for odd v). mma.sync: warps of kWarpM x 32,
// fragment i 16 rows below fragment i - 1. wgmma (kWg): warp w of warpgroup g holds rows 64 (i / 2) +
// 16 w + .., columns 64 g + 32 (i % 2) + .. (128 x 128 tiles; 256 x 64: rows 128 g + 64 (i / 2) + 16 w
// + .., columns 32 (i % 2) + ..), so fragments i and i + 2 share their channels.
template <int BM, int BN, bool kWg>
struct AccLayout {
  static constexpr int kWarpsN = BN / 32, kWarpM = BM * kWarpsN / 8;
  int row0, col0;  // of fragment 0
  __device__ AccLayout() {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if constexpr (kWg && BN == 64) row0 = (warp >> 2) * 128 + (warp & 3) * 16 + (lane >> 2), col0 = 0;
    else if constexpr (kWg) row0 = (warp & 3) * 16 + (lane >> 2), col0 = (warp >> 2) * 64;
    else row0 = (warp / kWarpsN) * kWarpM + (lane >> 2), col0 = (warp % kWarpsN) * 32;
  }
  __device__ int row(int i) const { return row0 + (kWg ? (i >> 1) * 64 : i * 16); }
  __device__ int column(int i) const { return col0 + (kWg ? (i & 1) * 32 : 0); }
};

// The rows of the block's tile whose epilogue this block runs (all of them without split-K).
struct TileRows {
  int begin, end;
};

// Nothing to do between the reduction and the parking (the default of igemm_accumulate's hook).
struct NoHook {
  __device__ void operator()() const {}
};

// One k-tile's products on mma.sync: the block's A (BM rows) and B (BN rows) of KT-byte rows in shared
// memory (swizzle<KT>), the first `ksteps` 32-byte k-steps, added into this warp's fragments (warps of
// TileShape's kWarpM x 32).
template <class Mma, int BM, int BN, int KT>
__device__ __forceinline__ void mma_ktile(uint32_t a_smem, uint32_t b_smem, int ksteps,
                                          typename Mma::Acc (&acc)[TileShape<BM, BN, KT>::kMI][4][4]) {
  using Tile = TileShape<BM, BN, KT>;
  constexpr int kMI = Tile::kMI;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warp_m = warp / Tile::kWarpsN, warp_n = warp % Tile::kWarpsN;
#pragma unroll
  for (int ks = 0; ks < KT / 32; ++ks) {
    if (ks >= ksteps) break;
    uint32_t a[kMI][4], b[4][2];
#pragma unroll
    for (int i = 0; i < kMI; ++i)
      ldmatrix_x4(a_smem + swizzle<KT>(warp_m * Tile::kWarpM + i * 16 + (lane & 15), 2 * ks + (lane >> 4)), a[i]);
#pragma unroll
    for (int jj = 0; jj < 2; ++jj) {
      uint32_t r[4];
      const uint32_t b_row = warp_n * 32 + jj * 16 + (lane & 7) + ((lane >> 4) << 3);
      ldmatrix_x4(b_smem + swizzle<KT>(b_row, 2 * ks + ((lane >> 3) & 1)), r);
      b[2 * jj][0] = r[0], b[2 * jj][1] = r[1], b[2 * jj + 1][0] = r[2], b[2 * jj + 1][1] = r[3];
    }
#pragma unroll
    for (int i = 0; i < kMI; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) Mma::run(acc[i][j], a[i], b[j][0], b[j][1]);
  }
}

// The convolution's accumulators for the block's tile (pixels m0.., channels n0..; split-K: this block's
// slice of the k-tiles) in acc, in the mma fragment layout: acc[i][j] (i < kMI) holds rows warp_m * kWarpM + i * 16 +
// lane / 4 (+ 8 for elements 2 and 3) and channels warp_n * 32 + j * 8 + 2 * (lane % 4) (+ 1 for the odd
// elements) of the tile. kTap: bytes of one tap's channels when below 16 (Cp == kTap: each 16-byte run
// spans 16 / kTap taps), else 16. KT, Stages: as TileShape (a k-tile may reach past kpad by 64 bytes:
// zeros there, and its second half is skipped).
// The caller has waited for the previous kernel (griddepcontrol.wait) and may have committed cp.async
// groups of its own, which complete here too. On return every cp.async group is complete, the block has
// passed a barrier after its last read of the pipeline's memory (free for any use), and the next kernel
// may be launched.
// kWg (INT8, 128 x 128 tiles of 128-byte k-tiles or 256 x 64 of 64-byte ones, sm_90a only): the
// products run as Hopper's warpgroup MMA instead (igemm_wgmma.cuh), both operands straight from shared
// memory (no ldmatrix): warpgroup g multiplies all 128 rows by columns 64 g .. 64 g + 63 (256 x 64: rows
// 128 g .. 128 g + 127 by all 64 columns; two m64n64 a k-step), and acc holds AccLayout's wgmma layout. (One m64n128 a warpgroup, on rows 64 g.., gives each thread 32 channels instead of 16,
// twice the requantization windows to read: measured slower on short reductions, docs/PERFORMANCE.md.)
// A k-tile's products run while the threads wait for the next one's copies; they are waited for
// before the barrier after which that k-tile's slot is refilled. The stage base must lie on a
// 1024-byte boundary (the hardware's swizzle; 512 bytes suffice for 64-byte rows).
template <class Mma, int BM, int BN, int kTap, int KT = 64, int Stages = kStages, bool kWg = false,
          int kPipe = kPipeBarrier>
__device__ __forceinline__ void igemm_reduce(const uint8_t* __restrict x, const uint8_t* __restrict w,
                                             const IgemmGeometry& g, uint8_t* smem,
                                             typename Mma::Acc (&acc)[TileShape<BM, BN, KT, Stages>::kMI][4][4],
                                             const TmaMaps* maps = nullptr) {
  using Tile = TileShape<BM, BN, KT, Stages, kPipe>;
  constexpr int kMI = Tile::kMI;
  static_assert(kTap == 4 || kTap == 8 || kTap == 16, "tap widths");
  const uint32_t smem_base = uint32_t(__cvta_generic_to_shared(smem));
  const int tid = threadIdx.x, warp = tid >> 5;
  const uint32_t m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  const uint32_t ohw = g.OH * g.OW;

  // ---- loaders: thread owns 16-byte chunk tid % kChunks of rows tid / kChunks + kRowStep * i ----
  constexpr int kChunks = KT / 16, kRowStep = kBlockThreads / kChunks;
  constexpr int kARows = BM / kRowStep, kBRows = BN / kRowStep;
  static_assert(BM % kRowStep == 0 && BN % kRowStep == 0, "whole loader passes");
  const uint32_t chunk = uint32_t(tid) % kChunks, row0 = uint32_t(tid) / kChunks;
  const uint8_t* a_image[kARows];
  int32_t a_ih0[kARows], a_iw0[kARows];
  bool a_ok[kARows];
#pragma unroll
  for (int i = 0; i < kARows; ++i) {
    const uint32_t m = m0 + row0 + kRowStep * i;
    a_ok[i] = m < g.M;
    const uint32_t mm = a_ok[i] ? m : 0;
    if (g.pointwise) {  // the row itself (no division, no bounds per tap)
      a_image[i] = x + uint64_t(mm) * g.Cp, a_ih0[i] = a_iw0[i] = 0;
    } else {
      const uint32_t n = mm / ohw, p = mm % ohw;
      a_image[i] = x + uint64_t(n) * g.H * g.W * g.Cp;
      a_ih0[i] = int32_t(p / g.OW) * int32_t(g.sh) - int32_t(g.pt);
      a_iw0[i] = int32_t(p % g.OW) * int32_t(g.sw) - int32_t(g.pl);
    }
  }
  // Split-K: block z of the cluster reduces k-tiles [kt_begin, kt_end).
  const int ktiles_all = int((g.kpad + KT - 1) / KT), splits = int(gridDim.z), rank = int(blockIdx.z);
  const int kt_begin = ktiles_all * rank / splits, kt_end = ktiles_all * (rank + 1) / splits;
  const int ktiles = kt_end - kt_begin;
  TapCursor cur{0, 0, 0};
  if (!g.pointwise) cur.advance(uint32_t(kt_begin) * KT + chunk * 16, g);

  // kPipeTma: the stages' barriers after the stages (one arrival, thread 0's, plus the copies' bytes);
  // thread 0 issues a stage's TMA copies. a_tma: the pixels' half by TMA too (TmaMaps::a_on).
  const uint32_t tma_bar0 = smem_base + Stages * Tile::kStageBytes;
  bool a_tma = false;
  int32_t a_w0 = 0, a_h0 = 0, a_n0 = 0;  // a_on == 2: where the im2col walk of the block's pixels starts
  if constexpr (Tile::kTma) {
    a_tma = maps->a_on != 0;
    if (maps->a_on == 2) {
      const uint32_t n = m0 / ohw, p = m0 % ohw;
      a_n0 = int32_t(n);
      a_h0 = int32_t(p / g.OW) * int32_t(g.sh) - int32_t(g.pt);
      a_w0 = int32_t(p % g.OW) * int32_t(g.sw) - int32_t(g.pl);
    }
  }
  // The pixels' half of k-tile kt by TMA into `dst`, completing on `bar`: the block's rows, or (im2col)
  // its pixels at the k-tile's tap (r, s) and channels c.. (a k-tile never spans two taps: Cp % 128 == 0).
  auto load_a_tma = [&](uint32_t dst, int kt, uint32_t bar) {
    if constexpr (!Tile::kTma) return (void)dst, (void)kt, (void)bar;
    else if (maps->a_on == 2) {
      const uint32_t k = uint32_t(kt) * KT, tap = k / g.Cp, r = tap / g.S, s = tap % g.S;
      wgmma::tma_load_im2col_4d(dst, &maps->a, int32_t(k % g.Cp), a_w0, a_h0, a_n0, uint16_t(s * g.dw),
                                uint16_t(r * g.dh), bar);
    } else {
      wgmma::tma_load_2d(dst, &maps->a, kt * KT, int32_t(m0), bar);
    }
  };
  // kPipeTma: `tma` issues the stage's TMA copies, `copies` the threads' cp.async ones (the k-loop issues
  // the former before a k-tile's products, the latter after).
  auto load_stage = [&](int slot, int kt, bool tma = true, bool copies = true) {
    const uint32_t a_smem = smem_base + slot * Tile::kStageBytes, b_smem = a_smem + BM * KT;
    const uint32_t k_here = uint32_t(kt) * KT + chunk * 16;  // this thread's byte of the reduction
    if constexpr (Tile::kTma) {
      if (tma && tid == 0) {
        const uint32_t bar = tma_bar0 + 8 * slot;
        wgmma::mbar_expect_tx(bar, uint32_t(a_tma ? (BM + BN) * KT : BN * KT));
        wgmma::tma_load_2d(b_smem, &maps->b, kt * KT, int32_t(n0), bar);
        if (a_tma) load_a_tma(a_smem, kt, bar);
      }
      if (a_tma || !copies) return;  // (no tap cursor in use)
    }
    if constexpr (kTap == 16) {
      if (g.pointwise) {
        const uint32_t c = k_here;  // the reduction is the row's channels
#pragma unroll
        for (int i = 0; i < kARows; ++i) {
          const bool ok = a_ok[i] && c < g.Cp;
          cp_async16(a_smem + swizzle<KT>(row0 + kRowStep * i, chunk), ok ? a_image[i] + c : x, ok);
        }
      } else {
        const bool in_k = cur.r < g.R;
        const int32_t dy = int32_t(cur.r * g.dh), dx = int32_t(cur.s * g.dw);
#pragma unroll
        for (int i = 0; i < kARows; ++i) {
          const int32_t ih = a_ih0[i] + dy, iw = a_iw0[i] + dx;
          const bool ok = a_ok[i] && in_k && ih >= 0 && ih < int32_t(g.H) && iw >= 0 && iw < int32_t(g.W);
          const uint8_t* src = ok ? a_image[i] + (uint32_t(ih) * g.W + uint32_t(iw)) * g.Cp + cur.c : x;
          cp_async16(a_smem + swizzle<KT>(row0 + kRowStep * i, chunk), src, ok);
        }
      }
    } else {
#pragma unroll
      for (int j = 0; j < 16 / kTap; ++j) {
        const uint32_t tap = (k_here + j * kTap) / kTap, r = tap / g.S, s = tap % g.S;
        const int32_t dy = int32_t(r * g.dh), dx = int32_t(s * g.dw);
#pragma unroll
        for (int i = 0; i < kARows; ++i) {
          const int32_t ih = a_ih0[i] + dy, iw = a_iw0[i] + dx;
          const bool ok = a_ok[i] && r < g.R && ih >= 0 && ih < int32_t(g.H) && iw >= 0 && iw < int32_t(g.W);
          const uint8_t* src = ok ? a_image[i] + (uint32_t(ih) * g.W + uint32_t(iw)) * kTap : x;
          cp_async_small<kTap>(a_smem + swizzle<KT>(row0 + kRowStep * i, chunk) + j * kTap, src, ok);
        }
      }
    }
    // Weights: rows of kpad bytes; a 128-byte k-tile may reach past kpad (a multiple of 64): zeros there.
    if constexpr (!Tile::kTma) {
      const bool k_ok = KT == 64 || k_here < g.kpad;
#pragma unroll
      for (int i = 0; i < kBRows; ++i) {
        const uint32_t n = n0 + row0 + kRowStep * i;
        const bool ok = n < g.K && k_ok;
        cp_async16(b_smem + swizzle<KT>(row0 + kRowStep * i, chunk), ok ? w + uint64_t(n) * g.kpad + k_here : w,
                   ok);
      }
    }
    if (!g.pointwise) cur.advance(KT, g);
  };

#pragma unroll
  for (int i = 0; i < kMI; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int v = 0; v < 4; ++v) acc[i][j][v] = 0;

  if constexpr (Tile::kTmaFree) {
    // ---- layers with both halves of every stage copied by TMA (maps->a_on: pointwise rows or im2col
    // boxes; the host launches this form only then), wgmma, 128 x 128 tiles, three 32 KB stages of 128-byte k-tiles: no block
    // barrier and no cp.async in the k-loop. Thread 0 fills every stage once before the loop; each stage's
    // "full" mbarrier takes one arrival (the issuing thread's expect_tx) and the copies' bytes. At k-tile
    // kt a warp waits for stage kt to be full, issues its products without waiting for k-tile kt - 1's
    // (the tensor cores' queue does not drain between k-tiles), then waits for those (wgmma.wait_group 1)
    // and, lane 0, adds 1 to the count of warps done with kt - 1's stage (acquire-release); the warp that
    // brings it to a multiple of 8 (the last of the block's warps) refills the stage with k-tile kt + 2.
    // No warp waits for another's products, and none polls an "empty" barrier. ----
    static_assert(kWg && BM == 128 && BN == 128 && KT == 128 && kMI == 4 && kTap == 16,
                  "the barrier-free TMA pipeline's shape");
    const int lane = tid & 31;
    const uint32_t done0 = tma_bar0 + 8 * Stages;  // the counts, after the stages' mbarriers
    auto issue = [&](int slot, int kt) {  // both halves of k-tile kt into `slot`, completing on its mbarrier
      const uint32_t a_smem = smem_base + slot * Tile::kStageBytes, bar = tma_bar0 + 8 * slot;
      wgmma::mbar_expect_tx(bar, uint32_t((BM + BN) * KT));
      wgmma::tma_load_2d(a_smem + BM * KT, &maps->b, kt * KT, int32_t(n0), bar);
      load_a_tma(a_smem, kt, bar);
    };
    if (tid == 0) {
#pragma unroll
      for (int s = 0; s < Stages; ++s) {
        wgmma::mbar_init(tma_bar0 + 8 * s, 1);
        reinterpret_cast<uint32_t*>(smem + Stages * Tile::kStageBytes + 8 * Stages)[s] = 0;
      }
      wgmma::mbar_init_fence();
#pragma unroll
      for (int s = 0; s < Stages; ++s)
        if (s < ktiles) issue(s, kt_begin + s);
    }
    __syncthreads();  // the barriers and counts initialized before any thread waits on them
    // This warpgroup's 64 channels (B rows), all 128 rows of A as two m64 blocks.
    const uint32_t b_off = uint32_t(warp >> 2) * 64 * KT;
    int slot = 0;
    uint32_t phase = 0;  // of stage `slot`'s mbarrier in this round
    for (int kt = 0; kt < ktiles; ++kt) {
      wgmma::mbar_wait(tma_bar0 + 8 * slot, phase);  // (TMA writes through the async proxy: no fence)
      const uint32_t a_smem = smem_base + slot * Tile::kStageBytes, b_rows = a_smem + BM * KT + b_off;
      // A k-tile whose second half lies past kpad holds zeros there: its two k-steps are skipped.
      if (uint32_t(kt_begin + kt) * KT + 64 < g.kpad) wgmma::ktile_products<KT / 32, KT>(acc, a_smem, b_rows);
      else wgmma::ktile_products<2, KT>(acc, a_smem, b_rows);
      wgmma::commit();
      wgmma::wait<1>();  // k-tile kt - 1's products done: this warp is done with its stage
      const int prev = slot == 0 ? Stages - 1 : slot - 1, next = kt - 1 + Stages;
      if (kt > 0 && next < ktiles && lane == 0) {
        if (wgmma::consumed_add(done0 + 4 * prev) % (kBlockThreads / 32) == kBlockThreads / 32 - 1)
          issue(prev, kt_begin + next);
      }
      __syncwarp();
      if (++slot == Stages) slot = 0, phase ^= 1u;
    }
  } else if constexpr (Tile::kMbarriers) {
    // ---- the per-stage mbarrier pipeline (wgmma, 128 x 128 tiles, three 32 KB stages of 128-byte
    // k-tiles): no block barrier and no wait for a thread's own copies in the loop. Every thread loads
    // and every warpgroup multiplies; they meet only on each stage's two barriers: "full" (every
    // thread's copies of the stage landed: cp.async.mbarrier.arrive, 256 arrivals made by the copy
    // engine) and "empty" (each warp arrives once its warpgroup's products that read the stage
    // completed: 8 arrivals). At k-tile kt a warp waits for stage kt to be full, fences it to the async
    // proxy and issues its products without waiting for k-tile kt - 1's (the tensor cores' queue does
    // not drain between k-tiles), then waits for those (wgmma.wait_group 1), marks their stage empty,
    // and refills it with k-tile kt + 2 once every warp has. ----
    static_assert(kWg && BM == 128 && BN == 128 && KT == 128 && kMI == 4, "the mbarrier pipeline's shape");
    constexpr int kAhead = Stages - 1;  // k-tile kt + kAhead is loaded at k-tile kt, into kt - 1's stage
    const int lane = tid & 31;
    const uint32_t full0 = smem_base + Stages * Tile::kStageBytes, empty0 = full0 + Stages * 8;
    if (tid == 0) {
#pragma unroll
      for (int s = 0; s < Stages; ++s)
        wgmma::mbar_init(full0 + 8 * s, kBlockThreads), wgmma::mbar_init(empty0 + 8 * s, kBlockThreads / 32);
    }
    __syncthreads();  // the barriers initialized before any warp uses them
#pragma unroll
    for (int s = 0; s < kAhead; ++s) {
      if (s < ktiles) {
        load_stage(s, kt_begin + s);
        wgmma::mbar_arrive_copies(full0 + 8 * s);
      }
      cp_async_commit();  // (groups only for the final cp_async_wait<0>)
    }
    // This warpgroup's 64 channels (B rows), all 128 rows of A as two m64 blocks.
    const uint32_t b_off = uint32_t(warp >> 2) * 64 * KT;
    int slot = 0;
    uint32_t phase = 0;  // of stage `slot`'s barriers in this round
    for (int kt = 0; kt < ktiles; ++kt) {
      wgmma::mbar_wait(full0 + 8 * slot, phase);
      wgmma::fence_proxy_async();  // the stage's copies (generic proxy), seen through the barrier, to wgmma
      const uint32_t a_smem = smem_base + slot * Tile::kStageBytes, b_rows = a_smem + BM * KT + b_off;
      // A k-tile whose second half lies past kpad holds zeros there: its two k-steps are skipped.
      if (uint32_t(kt_begin + kt) * KT + 64 < g.kpad) wgmma::ktile_products<KT / 32, KT>(acc, a_smem, b_rows);
      else wgmma::ktile_products<2, KT>(acc, a_smem, b_rows);
      wgmma::commit();
      wgmma::wait<1>();  // k-tile kt - 1's products done: its stage is empty for this warp
      const int prev = slot == 0 ? Stages - 1 : slot - 1;
      if (kt > 0 && lane == 0) wgmma::mbar_arrive(empty0 + 8 * prev);
      const int next = kt + kAhead;
      if (next < ktiles) {
        // Every warp's products of k-tile kt - 1 (round phase - 1 of stage prev, or phase of it when it
        // wrapped) done before its stage is refilled.
        if (next >= Stages) wgmma::mbar_wait(empty0 + 8 * prev, slot == 0 ? phase ^ 1u : phase);
        load_stage(prev, kt_begin + next);
        wgmma::mbar_arrive_copies(full0 + 8 * prev);
      }
      cp_async_commit();
      if (++slot == Stages) slot = 0, phase ^= 1u;
    }
  } else {
  if constexpr (Tile::kTma) {
    static_assert(kWg && BM == 128 && BN == 128 && KT == 128, "TMA stages: the 128 x 128 wgmma tiles");
    if (tid == 0) {
#pragma unroll
      for (int s = 0; s < Stages; ++s) wgmma::mbar_init(tma_bar0 + 8 * s, 1);
      wgmma::mbar_init_fence();
    }
    __syncthreads();  // the barriers initialized before any copy completes on them or any thread waits
  }
#pragma unroll
  for (int s = 0; s < Stages - 1; ++s) {
    if (s < ktiles) load_stage(s, kt_begin + s);
    cp_async_commit();
  }

  int read_slot = 0, write_slot = Stages - 1;  // kt % Stages and (kt + Stages - 1) % Stages
  uint32_t tma_phase = 0;                      // of stage read_slot's TMA barrier in this round
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<Stages - 2>();
    if constexpr (kWg) {
      wgmma::fence_proxy_async();  // this thread's copies, to the tensor cores' proxy
      wgmma::wait<0>();            // the previous k-tile's products: its slot is refilled after the barrier
    }
    __syncthreads();  // stage kt visible to all; stage kt-1 fully consumed
    const int next_kt = kt + Stages - 1, load_slot = write_slot;
    // mma.sync: the next stage's copies first, then the products. wgmma: the products first (they run
    // asynchronously while this thread issues the copies), so that the tensor cores' gap between k-tiles
    // is the barrier alone, not the copies' address arithmetic too.
    if constexpr (!kWg || !kWgIssueFirst) {
      if (next_kt < ktiles) load_stage(load_slot, kt_begin + next_kt);
      cp_async_commit();
    } else if constexpr (Tile::kTma) {
      // The TMA copies first: one thread, a few instructions, and the copy engine starts at once.
      if (next_kt < ktiles) load_stage(load_slot, kt_begin + next_kt, true, false);
    }

    const uint32_t a_smem = smem_base + read_slot * Tile::kStageBytes, b_smem = a_smem + BM * KT;
    if constexpr (Tile::kTma) {
      // The stage's TMA copies landed (the barrier's wait makes their bytes visible to this thread's
      // wgmma; the slot was last read by k-tile kt - 1's products, waited for before the barrier above).
      wgmma::mbar_wait(tma_bar0 + 8 * read_slot, tma_phase);
      if (read_slot == Stages - 1) tma_phase ^= 1u;
    }
    read_slot = read_slot == Stages - 1 ? 0 : read_slot + 1;
    write_slot = write_slot == Stages - 1 ? 0 : write_slot + 1;
    // A 128-byte k-tile whose second half lies past kpad holds zeros there: its two k-steps are skipped.
    const int ksteps = KT == 64 || uint32_t(kt_begin + kt) * KT + 64 < g.kpad ? KT / 32 : 2;
    if constexpr (kWg) {
      static_assert(!kWg || (BM == 128 && BN == 128 && KT == 128 && kMI == 4) ||
                        (BM == 256 && BN == 64 && KT == 64 && kMI == 4),
                    "wgmma: 128 x 128 tiles of 128-byte k-tiles, 256 x 64 of 64-byte ones");
      // 128 x 128: this warpgroup's 64 channels, all rows; 256 x 64: its 128 rows, all channels.
      const uint32_t b_rows = b_smem + (BN == 128 ? uint32_t(warp >> 2) * 64 * KT : 0u);
      const uint32_t a_rows = a_smem + (BN == 64 ? uint32_t(warp >> 2) * 128 * KT : 0u);
      if (ksteps == KT / 32) wgmma::ktile_products<KT / 32, KT>(acc, a_rows, b_rows);
      else wgmma::ktile_products<2, KT>(acc, a_rows, b_rows);
      wgmma::commit();  // waited for at the next k-tile's barrier, or below
      if constexpr (kWgIssueFirst) {
        if (next_kt < ktiles) load_stage(load_slot, kt_begin + next_kt, !Tile::kTma, true);
        cp_async_commit();
      }
    } else {
      mma_ktile<Mma, BM, BN, KT>(a_smem, b_smem, ksteps, acc);
    }
  }
  }
  if constexpr (kWg) wgmma::wait<0>();
  cp_async_wait<0>();
  __syncthreads();  // the pipeline's memory is free
  // The next kernel may be scheduled once every block got this far (it still waits for this one to
  // finish before it reads anything): its launch and set-up overlap this grid's last epilogues.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

// igemm_reduce's accumulators parked in shared memory as Mma::Acc parked[BM][kParkStride] (split-K:
// summed over the cluster in each block's rows), so that an epilogue can take contiguous channels of a
// row. `after_reduce` runs once the pipeline's memory is free, before the accumulators are parked (it
// may start cp.async copies into the pipeline's memory past kParkBytes, which the caller waits for).
// With split-K the caller ends with cluster_wait() (no block leaves while another may still read its
// parking space).
template <class Mma, int BM, int BN, int kTap, int KT = 64, int Stages = kStages, bool kWg = false,
          int kPipe = kPipeBarrier, class Hook = NoHook>
__device__ __forceinline__ TileRows igemm_accumulate(const uint8_t* __restrict x, const uint8_t* __restrict w,
                                                     const IgemmGeometry& g, uint8_t* smem,
                                                     const Hook& after_reduce = Hook{},
                                                     const TmaMaps* maps = nullptr) {
  using Tile = TileShape<BM, BN, KT, Stages>;
  using Acc = typename Mma::Acc;
  Acc acc[Tile::kMI][4][4];
  igemm_reduce<Mma, BM, BN, kTap, KT, Stages, kWg, kPipe>(x, w, g, smem, acc, maps);
  after_reduce();
  const int tid = threadIdx.x, lane = tid & 31;
  const AccLayout<BM, BN, kWg> layout;
  const int splits = int(gridDim.z), rank = int(blockIdx.z);

  // ---- the accumulators are parked in shared memory (the pipeline's, now free), so that the epilogue
  // can take contiguous channels of a row; no accumulator is live past this point. ----
  using Vec2 = std::conditional_t<std::is_same_v<Acc, float>, float2, int2>;
  using Vec = std::conditional_t<std::is_same_v<Acc, float>, float4, int4>;
  Acc* parked = reinterpret_cast<Acc*>(smem);
  const int quad = lane & 3;
#pragma unroll
  for (int i = 0; i < Tile::kMI; ++i)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = layout.row(i) + 8 * half;
#pragma unroll
      for (int j = 0; j < 4; ++j)
        *reinterpret_cast<Vec2*>(parked + row * Tile::kParkStride + layout.column(i) + j * 8 + 2 * quad) =
            Vec2{acc[i][j][2 * half], acc[i][j][2 * half + 1]};
    }
  __syncthreads();

  // Split-K: once every block of the cluster has parked, each sums the partials of its share of the
  // rows into its own parking space; the others' memory must stay until they have read it (the
  // caller's final cluster_wait).
  const TileRows rows{BM * rank / splits, BM * (rank + 1) / splits};
  if (splits > 1) {
    cluster_arrive();
    cluster_wait();
    constexpr int kVecs = BN / 4;
    for (int i = tid; i < (rows.end - rows.begin) * kVecs; i += kBlockThreads) {
      Acc* mine = parked + (rows.begin + i / kVecs) * Tile::kParkStride + (i % kVecs) * 4;
      Vec sum = *reinterpret_cast<const Vec*>(mine);
      for (int peer = 0; peer < splits; ++peer) {
        if (peer == rank) continue;
        sum = Mma::add(sum, *cluster_peer(reinterpret_cast<const Vec*>(mine), uint32_t(peer)));
      }
      *reinterpret_cast<Vec*>(mine) = sum;
    }
    cluster_arrive();  // done reading the others
    __syncthreads();
  }
  return rows;
}

// ---- host side ----

// Programmatic dependent launch of the convolutions; SOFTDLA_CUDA_PDL=0 turns it off.
inline bool programmatic_launch() {
  static const bool on = !env_is("SOFTDLA_CUDA_PDL", "0");
  return on;
}

// Launches an implicit-GEMM kernel over the output tiles of g, `splits` blocks per tile (a cluster),
// as a programmatic dependent of the previous kernel.
template <int BM, int BN, class Kernel, class... Args>
void launch_tiles(Kernel* kernel, const IgemmGeometry& g, int splits, int smem_bytes, cudaStream_t stream,
                  Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3((g.M + BM - 1) / BM, (g.K + BN - 1) / BN, unsigned(splits));
  config.blockDim = dim3(kBlockThreads);
  config.dynamicSmemBytes = size_t(smem_bytes);
  config.stream = stream;
  cudaLaunchAttribute attrs[2] = {};
  unsigned count = 0;
  if (programmatic_launch()) {  // may overlap the previous kernel's tail (griddepcontrol in the kernel)
    attrs[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[count++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (splits > 1) {
    attrs[count].id = cudaLaunchAttributeClusterDimension;
    attrs[count++].val.clusterDim = {1, 1, unsigned(splits)};
  }
  config.attrs = attrs;
  config.numAttrs = count;
  SOFTDLA_CUDA(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

// The current device's multiprocessors.
inline int sm_count() {
  int device = 0, sms = 0;
  SOFTDLA_CUDA(cudaGetDevice(&device));
  SOFTDLA_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

// SOFTDLA_CUDA_SPLITK=n (1, 2, 4 or 8) forces every launch's split-K count (tests); 0 where unset.
inline int forced_splits() {
  const uint32_t n = env_uint("SOFTDLA_CUDA_SPLITK", 0);
  return n == 1 || n == 2 || n == 4 || n == 8 ? int(n) : 0;
}

// SOFTDLA_CUDA_SPLIT_MODEL, read once: how the split-K counts are chosen. `fitted` (the default since
// 2026-12-07): the wgmma tiles on their measured costs (choose_splits_wgmma), the mma.sync tiles with up to
// 8 splits whatever their height and a split's reduction fitted on batch 1's launches (ResNet-50 INT8 at
// batch 1 10 % faster on whole tasks than `measured` on an H100, every other row within 1 %:
// docs/PERFORMANCE.md); `measured`: the mma.sync tiles on waves of block slots with at most BM / 16 splits
// (the default from 2026-12-06); `waves`: every tile on waves of block slots (the choice before
// 2026-12-06). The last two are for A/B runs (bench/gpu_ab.py); all give the same bytes.
enum class SplitModel { kMeasured, kWaves, kFitted };
inline SplitModel split_model() {
  static const SplitModel model = env_is("SOFTDLA_CUDA_SPLIT_MODEL", "waves")      ? SplitModel::kWaves
                                  : env_is("SOFTDLA_CUDA_SPLIT_MODEL", "measured") ? SplitModel::kMeasured
                                                                                   : SplitModel::kFitted;
  return model;
}

// The split-K count (a power of two up to `most`, at most 8: a portable cluster) whose cost(s) is lowest,
// taking more splits only where they cost at least 5 % less than the best count before them.
template <class Cost>
int cheapest_splits(int most, Cost cost) {
  int best = 1;
  double best_cost = 0;
  for (int s = 1; s <= 8 && s <= most; s *= 2) {
    const double c = cost(s);
    if (s == 1 || c < best_cost * 0.95) best = s, best_cost = c;
  }
  return best;
}

// How many blocks share one output tile (split-K): the fewest that bring the k-tiles of the busiest SM
// down the most, counting a cost per block for the epilogue and the reduction. `direct`: without split-K
// the epilogue runs straight from the mma fragments (cheaper than on parked accumulators, which split-K
// needs). blocks_per_sm: how many of the kernel's blocks an SM runs side by side at full speed. For the
// mma.sync tiles (choose_splits_wgmma: the wgmma ones): at most BM / 16 splits, a split's reduction 1 + s/4
// k-tiles, under SOFTDLA_CUDA_SPLIT_MODEL=measured. By default (`fitted`), up to 8 splits on every tile
// and a reduction of 1.5 + s/2 k-tiles: fitted on an H200 (ResNet-50 INT8 at batch 1, every launch of the 64 x 128 and
// 128 x 64 tiles forced to 1, 2, 4 and 8 splits, blocks alone on their SMs: docs/PERFORMANCE.md), a k-tile
// 0.43 us and a split 2.6, 3.0 and 3.6 us more than the direct epilogue at 2, 4 and 8 splits (5.5, 6.5 and
// 8.5 k-tiles here); the small layers of batch 1 (4 to 16 tiles of 32 to 72 k-tiles) took 20-27 % less time
// on 8 splits than on the 4 that BM / 16 allows 64-row tiles.
inline int choose_splits(uint64_t tiles, int ktiles, int BM, bool direct = false, int blocks_per_sm = 2) {
  if (const int n = forced_splits()) return n;
  const bool fitted = split_model() == SplitModel::kFitted;
  const uint64_t slots = uint64_t(sm_count()) * unsigned(blocks_per_sm);  // (registers and shared memory)
  // An epilogue costs about as much as this many k-tiles: on parked accumulators, and straight from the
  // fragments (1 measured best against 2 and 4 on the H200's ResNet-50: docs/PERFORMANCE.md).
  constexpr double kParkedEpilogueTiles = 4, kDirectEpilogueTiles = 1;
  return cheapest_splits(fitted ? 8 : BM / 16, [&](int s) {
    const double waves = double((tiles * s + slots - 1) / slots);
    const double epilogue = s == 1 && direct ? kDirectEpilogueTiles : kParkedEpilogueTiles;
    const double reduction = s == 1 ? 0.0 : fitted ? 1.5 + s / 2.0 : 1.0 + s / 4.0;
    return waves * (double((ktiles + s - 1) / s) + epilogue + reduction);
  });
}

// Split-K for the wgmma tiles with the windowed epilogue (two warpgroups a block, two blocks an SM), on
// costs measured launch by launch on an H100 (ResNet-50 INT8, batches 32 and 128, every launch forced to
// 1, 2 and 4 splits: docs/PERFORMANCE.md), in units of one 64-byte k-tile of a block alone on its SM
// (about 0.35 us): a block costs its k-tiles, plus kFixedTiles (its prologue, the epilogue straight from
// the fragments), plus kSplitTiles more when split (accumulators parked in shared memory, the cluster's
// reduction: 4 us and more). Two blocks on one SM finish in
// kPairTime times one block's time (each leaves the tensor cores idle part of the time: 196 blocks of 72
// k-tiles took 33.3 us on 132 SMs, 52 of them 25.3); a third block waits for a slot. These costs
// reproduce the measured launches within 10 % and their best counts (layer 3 unsplit and layer 4 on two
// or four at batch 32, everything unsplit at batch 128), where counting slot waves took two splits for
// layer 3 at batch 32 (its launches then sum 5 % more with programmatic dependent launch off, the task
// takes 1.8 % more with it on) and counting one block an SM two for layer 4's 3 x 3 convolutions at 128
// (46.4 us a launch against 33.3; +1.5 % on the task). On whole tasks against that slot-wave count (H200,
// bench/gpu_ab.py): ResNet-50 INT8 -1.8 % at batch 32, -0.1 % at 128; MobileNetV2 -1.4 % and -0.5 %.
inline int choose_splits_wgmma(uint64_t tiles, int ktiles, int BM) {
  if (const int n = forced_splits()) return n;
  constexpr double kFixedTiles = 7, kSplitTiles = 12, kPairTime = 1.33;
  const uint64_t sms = uint64_t(sm_count());
  return cheapest_splits(BM / 16, [&](int s) {
    const uint64_t busiest = (tiles * s + sms - 1) / sms;  // blocks on the busiest SM
    const double block_times = double(busiest / 2) * kPairTime + double(busiest % 2);
    return block_times * (double((ktiles + s - 1) / s) + kFixedTiles + (s > 1 ? kSplitTiles : 0.0));
  });
}

}  // namespace igemm
}  // namespace softdla::gpu
