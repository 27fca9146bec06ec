// The INT8 implicit-GEMM convolution (see conv_igemm.h): the loaders, pipeline, main loop and split-K of
// igemm_core.cuh with mma m16n8k32 s8 (on Hopper, wgmma m64n64k32 s8 for the 128 x 128 tiles of
// 128-byte k-tiles and the 256 x 64 ones of 64-byte k-tiles with the windowed epilogue), then the SDP chain on the int32 accumulators. Inputs of
// up to 4 channels (images) are converted space-to-depth when the stride is 2 (2 x 2 pixels become one
// of 16 channels) and otherwise use Cp = 4, four taps per 16-byte run.
//
// The SDP chain runs exactly (the same integer steps as the CPU backend) in one of two epilogues:
//  - windowed (the usual case: bias, ReLU/Clip, requantization, NHWC output): without split-K straight
//    from the mma fragments (each thread's 8 channels are fixed, so it reads their requant windows,
//    requant_window.h, once; the int8 results are exchanged within each quad of lanes into 16-byte
//    stores; no parking, no block barrier); with split-K on the parked and summed accumulators, four
//    channels' windows a thread in registers and 4-byte stores. Windows with no
//    negative rounding tie take the short rounding (fold_rounding_sign), and with every shift of 32 or
//    more the value is the product's high word. A fused residual add on one shared scale (what the
//    builder gives) runs in the CPU backend's 32-bit form of it (SharedAdd), otherwise in the window
//    form; its other input is fetched into shared memory during the reduction. The shared-scale form
//    leaves out its saturation before the add where every channel's rescaled value lies in int8, and its
//    upper clamp where that is 127 (the saturating pack does it): kAddInRange, kAddHighSat;
//  - general (any chain, NCHW output): 16-channel runs through the step interpreter of sdp_device.cuh.
//
// Launches are programmatic dependents of the previous kernel (griddepcontrol), so a block's set-up
// overlaps the previous layer's last wave. Pointwise layers whose reduction is one 64-byte k-tile, over
// more than a wave of tiles, take igemm_stream_kernel instead: blocks that walk their pixel tiles with
// the next tile's loads in flight during this one's epilogue. The 128 x 128 wgmma tiles take their
// weights, and in pointwise layers their pixels too, through the bulk tensor copy engine (TMA) from 2-D
// tensor maps made on the host, and the pixels of k x k layers over whole 128-byte channel tiles through
// TMA's im2col mode (igemm::kPipeTma; SOFTDLA_CUDA_WG_TMA=off|w|wa|wai, wai by default); launches
// whose stages are then all TMA copies also drop the k-loop's block barrier (igemm::kPipeTmaFree;
// SOFTDLA_CUDA_WG_TMA_FREE=0|1, 1 by default).

#include <algorithm>
#include <cstdlib>
#include <string>

#include "channels_last.h"
#include "conv_igemm.h"
#include "env_switch.h"
#include "igemm_core.cuh"
#include "igemm_s8_epilogue.cuh"
#include "sdp_forms.h"
#include "kernel.h"  // eltwise_operand_slot
#include "requant_window.h"
#include "int8_tables.h"  // the residual add's shared-scale form, found as the CPU backend finds it

namespace softdla::gpu {

namespace {

using Geo = IgemmGeometry;
using igemm::kBlockThreads;
using igemm::cp_async16;
using igemm::cp_async_commit;
using namespace igemm_s8;

struct FastChain {
  const int32_t* bias;   // per output channel (zeros without a bias step)
  const int32_t* mult;   // requantization, per output channel
  const uint8_t* shift;
  int32_t lo, hi;        // the clamp of ReLU/Clip (INT32_MIN/MAX without)
};

// Narrow tiles (warps of 32 x 32: half the accumulators) are built for this many blocks an SM (a cap of
// 65536 / (256 * n) registers); tiles of 64 x 32 warps for two (128 registers).
#ifndef SOFTDLA_IGEMM_NARROW_BLOCKS
#define SOFTDLA_IGEMM_NARROW_BLOCKS 3
#endif
constexpr int kNarrowBlocks = SOFTDLA_IGEMM_NARROW_BLOCKS;
template <int BM, int BN>
constexpr int blocks_per_sm() { return igemm::TileShape<BM, BN>::kMI == 4 ? 2 : kNarrowBlocks; }

// The tile's shared memory with the windowed epilogue's side region after it: the tile's channel
// windows, then (fused) the other input's tile, both fetched with cp.async while the reduction runs.
// Where that would leave no room for two blocks an SM (the deeper pipeline of 128-byte k-tiles), the
// other input's tile goes into the pipeline's memory past the parked accumulators instead, fetched once
// the reduction is done (while the accumulators are parked and summed).
template <int BM, int BN, int KT = 64, int Stages = igemm::kStages, int Pipe = igemm::kPipeBarrier>
struct TileShape : igemm::TileShape<BM, BN, KT, Stages, Pipe> {
  using Base = igemm::TileShape<BM, BN, KT, Stages, Pipe>;
  static constexpr int kWindowBytes = BN * int(sizeof(num::RequantWindow));
  static constexpr int kOperandBytes = BM * BN;
  // 228 KB an SM, 1 KB of it reserved per block: 113 KB each for two blocks.
  static constexpr int kBlockBudget = 228 * 1024 / blocks_per_sm<BM, BN>() - 1024;
  static constexpr bool kOperandInSide = Base::kSmemBytes + kWindowBytes + kOperandBytes <= kBlockBudget;
  static_assert(kOperandInSide || Base::kParkBytes + kOperandBytes <= Base::kSmemBytes, "room for the operand");
  static constexpr int kOperandOffset = kOperandInSide ? Base::kSmemBytes + kWindowBytes : Base::kParkBytes;
  static constexpr int kWindowSmemBytes = Base::kSmemBytes + kWindowBytes + (kOperandInSide ? kOperandBytes : 0);
};

// chain_int8 as one shared copy (the general path is rare; inlining it 16 times would only grow the kernel).
__device__ __noinline__ int8_t chain_int8_call(const DevChain& ch, int32_t v, uint32_t n, uint32_t c, uint32_t hw,
                                               const Operands& ops) {
  return chain_int8(ch, v, n, c, hw, ops);
}

// The fast chain's parameters for one thread's 16 output channels (padded arrays: whole runs).
struct RunParams {
  union { uint4 q[4]; int32_t w[16]; } bias, mult;
  union { uint4 q; uint8_t b[16]; } shift;
  __device__ void load(const FastChain& fast, uint32_t ch0) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      bias.q[k] = __ldg(reinterpret_cast<const uint4*>(fast.bias + ch0) + k);
      mult.q[k] = __ldg(reinterpret_cast<const uint4*>(fast.mult + ch0) + k);
    }
    shift.q = __ldg(reinterpret_cast<const uint4*>(fast.shift + ch0));
  }
};

// Output channels ch0..ch0+15 of pixel m from their parked int32 accumulators: the convolution's SDP
// chain, the fused op's chain when there is one, and the store. A real call: one copy of this code
// serves every row (inlined into the row loop it holds too many registers at once).
__device__ __forceinline__ void store_run(const int32_t* parked, uint32_t m, uint32_t ch0, const Geo& g,
                                       int output_nhwc, int fast_form, const FastChain& fast, const DevChain& chain,
                                       const Operands& ops, int fused, const DevChain& next,
                                       const Operands& next_ops, int8_t* __restrict y) {
  const uint32_t ohw = g.OH * g.OW, n = m / ohw, hw = m % ohw;
  union { uint4 q[4]; int32_t w[16]; } acc;
#pragma unroll
  for (int k = 0; k < 4; ++k) acc.q[k] = reinterpret_cast<const uint4*>(parked)[k];
  union { uint4 q; int8_t b[16]; } out;
  if (fast_form) {
    RunParams rp;
    rp.load(fast, ch0);
#pragma unroll
    for (int e = 0; e < 16; ++e) {
      int32_t t = add_sat(acc.w[e], rp.bias.w[e]);
      t = t < fast.lo ? fast.lo : (t > fast.hi ? fast.hi : t);
      out.b[e] = requant_i8(t, rp.mult.w[e], rp.shift.b[e]);
    }
  } else {
#pragma unroll
    for (int e = 0; e < 16; ++e)
      out.b[e] = ch0 + e < g.K ? chain_int8_call(chain, acc.w[e], n, ch0 + e, hw, ops) : int8_t(0);
  }
  if (output_nhwc) {  // K % 16 == 0: the run is whole
    const uint64_t index = uint64_t(m) * g.K + ch0;
    if (fused) out.q = chain_int8_run16(next, out.q, n, ch0, hw, index, next_ops);
    *reinterpret_cast<uint4*>(y + index) = out.q;
    return;
  }
#pragma unroll
  for (int e = 0; e < 16; ++e) {
    const uint32_t ch = ch0 + e;
    if (ch < g.K)
      y[(uint64_t(n) * g.K + ch) * ohw + hw] = fused ? chain_int8_call(next, out.b[e], n, ch, hw, next_ops) : out.b[e];
  }
}

// The 16-byte runs of the tile that window_from_fragments gives a thread: for fragment i, the row of
// igemm::AccLayout's fragment + 8 * (lane % 4 / 2) and its channels + (lane % 2) * 16 .. + 15 (mma.sync:
// row warp_m * kWarpM + i * 16 + lane / 4 + .., channels warp_n * 32 + ..; wgmma: igemm_reduce's kWg).
template <int BM, int BN, bool kWg = false>
struct FragmentRuns {
  static constexpr int kWarpsN = BN / 32, kWarpM = BM * kWarpsN / 8, kMI = kWarpM / 16;
  // Channel groups of 32 that a thread's fragments lie in (requant_fragments' kWinGroups).
  static constexpr int kWinGroups = kWg ? 2 : 1;
  igemm::AccLayout<BM, BN, kWg> layout;
  int row_in, col_in;  // within the fragment
  __device__ FragmentRuns() {
    const int lane = threadIdx.x & 31;
    row_in = 8 * ((lane >> 1) & 1), col_in = (lane & 1) * 16;
  }
  __device__ int row(int i) const { return layout.row(i) + row_in; }
  __device__ int column(int i) const { return layout.column(i) + col_in; }
  // Where run i of this thread lies in the other input's copy in shared memory: each thread's own runs,
  // so that no barrier is needed between their fetch and their use, and a warp's 32 runs of one i
  // contiguous (conflict-free).
  __device__ static uint32_t slot(int i) { return ((threadIdx.x >> 5) * kMI + i) * 512 + (threadIdx.x & 31) * 16; }
};

// The fused residual add's other input at this thread's runs (FragmentRuns), into `dst` (BM * BN bytes of
// shared memory).
template <int BM, int BN, bool kWg = false>
__device__ __forceinline__ void fetch_own_operand(uint32_t dst, const int8_t* operand, const Geo& g, uint32_t m0,
                                                  uint32_t n0) {
  using Runs = FragmentRuns<BM, BN, kWg>;
  const Runs runs;
#pragma unroll
  for (int i = 0; i < Runs::kMI; ++i) {
    const uint32_t m = m0 + runs.row(i), c = n0 + runs.column(i);
    const bool ok = m < g.M && c < g.K;
    cp_async16(dst + Runs::slot(i), ok ? operand + uint64_t(m) * g.K + c : operand, ok);
  }
}

// The windowed epilogue without split-K, on the accumulators as the mma left them (igemm_reduce): each
// thread's 8 channels are fixed, so it reads their windows once (side: the tile's windows in shared
// memory); the int8 results are exchanged within each quad of lanes (quad_transpose) into 16-byte runs,
// which take the fused residual add (operand: the other input's runs, fetch_own_operand) and one
// 16-byte store each. No block barrier, no parking. kPending: cp.async groups this thread committed after
// the operand's, left in flight.
template <int BM, int BN, bool kWg = false, int kPending = 0>
__device__ __forceinline__ void window_from_fragments(const int32_t (&acc)[FragmentRuns<BM, BN>::kMI][4][4],
                                                      const uint8_t* side,
                                                      const uint8_t* operand, const Geo& g, uint32_t m0, uint32_t n0,
                                                      int flags, int fused, const SharedAdd& shared,
                                                      const num::ResidualWindow& residual, int8_t* __restrict y) {
  using Runs = FragmentRuns<BM, BN, kWg>;
  const int quad = threadIdx.x & 3;
  const Runs runs;
  const num::RequantWindow* win = reinterpret_cast<const num::RequantWindow*>(side) + runs.layout.column(0) + 2 * quad;
  constexpr int kMI = Runs::kMI;
  uint32_t bytes[kMI][2][2];
  with_conv_form(flags, [&](auto conv_form) {
    requant_fragments<decltype(conv_form)::value, kMI, Runs::kWinGroups>(acc, win, bytes);
  });
  uint4 run[kMI];
#pragma unroll
  for (int i = 0; i < kMI; ++i) run[i] = quad_transpose(bytes[i], quad);
  if (!kWg && n0 + runs.column(0) >= g.K) return;
  auto store = [&](int i, uint4 v) {
    const uint32_t m = m0 + runs.row(i), ch = n0 + runs.column(i);
    if (m >= g.M || ch >= g.K) return;
    int8_t* dst = y + uint64_t(m) * g.K + ch;
    if (ch + 16 <= g.K) {
      *reinterpret_cast<uint4*>(dst) = v;
    } else {  // a channel count that is a multiple of 4 only: the run's whole groups
      const uint32_t words[4] = {v.x, v.y, v.z, v.w};
      for (uint32_t k = 0; k < 4 && ch + 4 * k < g.K; ++k) reinterpret_cast<uint32_t*>(dst)[k] = words[k];
    }
  };
  if (!fused) {
#pragma unroll
    for (int i = 0; i < kMI; ++i) store(i, run[i]);
    return;
  }
  igemm::cp_async_wait<kPending>();  // this thread's own copies of the other input (no other thread reads them)
  with_run_add_form(flags, [&](auto add_form) {
#pragma unroll
    for (int i = 0; i < kMI; ++i) {
      const uint4 other = *reinterpret_cast<const uint4*>(operand + Runs::slot(i));
      store(i, add_run16<decltype(add_form)::value>(run[i], other, fused == 2, shared, residual));
    }
  });
}

// kTap: bytes of one tap's channels when below 16 (Cp == 4: each 16-byte run spans 4 taps), else 16.
// kEpi: kEpiGeneral (any chain, NHWC or NCHW output, any fused op) or kEpiWindow (the fast chain with
// every channel's requantization window, NHWC output, a fused op only as a residual window): the latter
// keeps four channels' parameters in registers and works on 4-byte groups. `fused` there: 0 none, 1 the
// convolution computes the residual add's first input (x), 2 its second (e); the other is read.
// KT, Stages: the pipeline (igemm::TileShape). kWg: the products run on wgmma (igemm_reduce; 128 x 128
// tiles of 128-byte k-tiles, sm_90a builds); kPipe: igemm_reduce's k-loop (igemm::kPipeMbar: per-stage
// mbarriers; kPipeTma: TMA copies of the weights (and pointwise pixels) from the tensor maps in `maps`;
// kPipeTmaFree: both halves by TMA with no block barrier in the k-loop, layers with maps.a_on).
constexpr int kEpiGeneral = 0, kEpiWindow = 1;
template <int BM, int BN, int kTap, int kEpi, int KT, int Stages, bool kWg = false, int kPipe = igemm::kPipeBarrier>
__global__ void __launch_bounds__(kBlockThreads, blocks_per_sm<BM, BN>())
igemm_kernel(const int8_t* __restrict x, const int8_t* __restrict w, int8_t* __restrict y, Geo g, int output_nhwc,
             int fast_form, FastChain fast, const num::RequantWindow* __restrict windows, int flags,
             num::ResidualWindow residual, SharedAdd shared,
             const __grid_constant__ DevChain chain, const __grid_constant__ Operands ops, int fused,
             const __grid_constant__ DevChain next, const __grid_constant__ Operands next_ops,
             const __grid_constant__ igemm::TmaMaps maps) {
  using Tile = TileShape<BM, BN, KT, Stages, kPipe>;
  extern __shared__ __align__(128) uint8_t smem[];
  const uint32_t smem_base = uint32_t(__cvta_generic_to_shared(smem));
  // wgmma reads the stages with the hardware's swizzle, which igemm::swizzle matches only from a
  // 1024-byte boundary (dynamic shared memory starts on one when the kernel has no static part).
  if (kWg && (smem_base & 1023u)) __trap();
  const int tid = threadIdx.x;
  const uint32_t m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  // The fused residual add's other input.
  const int8_t* operand = static_cast<const int8_t*>(next_ops.p[fused == 2 ? 0 : 1]);
  // Its tile, 16 bytes a thread at a time, into `dst` ([BM][BN], for the epilogue on parked rows).
  auto fetch_operand = [&](uint32_t dst) {
    constexpr int kChunks = BN / 16;
    for (int i = tid; i < BM * kChunks; i += kBlockThreads) {
      const uint32_t row = i / kChunks, c = n0 + (i % kChunks) * 16, m = m0 + row;
      const bool ok = m < g.M && c < g.K;
      cp_async16(dst + row * BN + (i % kChunks) * 16, ok ? operand + uint64_t(m) * g.K + c : operand, ok);
    }
  };
  // Without split-K the windowed epilogue runs straight from the mma fragments (window_from_fragments);
  // with it, on the accumulators parked in shared memory and summed over the cluster.
  const bool direct = kEpi == kEpiWindow && gridDim.z == 1;
  // The windowed epilogue's inputs, fetched first (their own cp.async group) so that the epilogue
  // starts without a trip to memory.
  if constexpr (kEpi == kEpiWindow) {
    const uint32_t side = smem_base + Tile::kSmemBytes;
    // windows is padded to whole 128-channel tiles: every tile's BN windows exist.
    for (int i = tid; i < Tile::kWindowBytes / 16; i += kBlockThreads)
      cp_async16(side + i * 16, reinterpret_cast<const uint8_t*>(windows + n0) + i * 16, true);
  }
  // Launched as a programmatic dependent of the previous kernel (launch()): this block may start while
  // that kernel finishes; everything above reads only this op's constants, everything below may read
  // what earlier kernels wrote, so wait here for them to complete (a no-op for a plain launch).
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  if constexpr (kEpi == kEpiWindow) {
    if (Tile::kOperandInSide && fused) {
      if (direct) fetch_own_operand<BM, BN, kWg>(smem_base + Tile::kOperandOffset, operand, g, m0, n0);
      else fetch_operand(smem_base + Tile::kOperandOffset);
    }
    cp_async_commit();
    if (direct) {
      int32_t acc[Tile::kMI][4][4];
      igemm::igemm_reduce<igemm::MmaS8, BM, BN, kTap, KT, Stages, kWg, kPipe>(
          reinterpret_cast<const uint8_t*>(x), reinterpret_cast<const uint8_t*>(w), g, smem, acc, &maps);
      if (!Tile::kOperandInSide && fused) {  // into the pipeline's memory, now free
        fetch_own_operand<BM, BN, kWg>(smem_base + Tile::kOperandOffset, operand, g, m0, n0);
        cp_async_commit();
      }
      window_from_fragments<BM, BN, kWg>(acc, smem + Tile::kSmemBytes, smem + Tile::kOperandOffset, g, m0, n0,
                                         flags, fused, shared, residual, y);
      return;
    }
  }
  // Otherwise the other input's tile is fetched between the reduction and the parking.
  auto before_park = [&] {
    if constexpr (kEpi == kEpiWindow && !Tile::kOperandInSide) {
      if (fused) fetch_operand(smem_base + Tile::kOperandOffset);
      cp_async_commit();
    }
  };
  const igemm::TileRows share = igemm::igemm_accumulate<igemm::MmaS8, BM, BN, kTap, KT, Stages, kWg, kPipe>(
      reinterpret_cast<const uint8_t*>(x), reinterpret_cast<const uint8_t*>(w), g, smem, before_park, &maps);
  if constexpr (kEpi == kEpiWindow && !Tile::kOperandInSide) {
    if (fused) {
      igemm::cp_async_wait<0>();
      __syncthreads();
    }
  }
  const int row_begin = share.begin, row_end = share.end, splits = int(gridDim.z);
  // ---- epilogue: every thread takes channel groups or runs of a row of the parked int32 accumulators,
  // so the SDP chain runs on contiguous channels and each store is 4 or 16 bytes. ----
  const int32_t* parked = reinterpret_cast<const int32_t*>(smem);
  constexpr int kRuns = BN / 16, kRowsPerSweep = kBlockThreads / kRuns;
  static_assert(BM % kRowsPerSweep == 0, "whole sweeps");
  if constexpr (kEpi == kEpiWindow) {
    // 4-channel groups: a warp covers 128 contiguous output bytes of a row (one or two rows).
    constexpr int kGroups = BN / 4, kGroupRows = kBlockThreads / kGroups;
    const uint32_t group = tid % kGroups, ch = n0 + group * 4;
    if (ch < g.K) {
      const uint8_t* side_smem = smem + Tile::kSmemBytes;
      Windows4 q;
      q.load(reinterpret_cast<const num::RequantWindow*>(side_smem) + group * 4);
      const uint32_t* other_tile = reinterpret_cast<const uint32_t*>(smem + Tile::kOperandOffset);
      const int row_limit = min(row_end, int(g.M - m0));
      // One copy of the loop per sign case, so that the short forms are straight-line code.
      with_window_forms(flags, [&](auto conv_form, auto add_form) {
        constexpr int kConv = decltype(conv_form)::value, kAdd = decltype(add_form)::value;
#pragma unroll 2
        for (int r = row_begin + tid / kGroups; r < row_limit; r += kGroupRows) {
          const int4 acc = *reinterpret_cast<const int4*>(parked + r * Tile::kParkStride + group * 4);
          const uint32_t out = window_group<kConv, kAdd>(q, acc, fused, fused ? other_tile[r * (BN / 4) + group] : 0u,
                                                         shared, residual);
          *reinterpret_cast<uint32_t*>(y + uint64_t(m0 + r) * g.K + ch) = out;
        }
      });
    }
  } else {
    const uint32_t run = tid % kRuns, ch0 = n0 + run * 16;  // this thread's channels, the same in every row
    if (ch0 < g.K) {
      for (int r = row_begin + tid / kRuns; r < row_end; r += kRowsPerSweep) {
        const uint32_t m = m0 + r;
        if (m >= g.M) break;
        store_run(parked + r * Tile::kParkStride + run * 16, m, ch0, g, output_nhwc, fast_form, fast, chain, ops,
                  fused, next, next_ops, y);
      }
    }
  }
  if (splits > 1) igemm::cluster_wait();  // no block leaves while another may still read its parking space
}

// Pointwise convolutions whose whole reduction is one k-tile (kpad == KT: 64 or 128 bytes of channels)
// on 128 x 128 tiles with the windowed epilogue straight from the fragments (no split-K): each block
// keeps one column of 128 channels (its weights and windows loaded once) and walks the 128-pixel tiles
// blockIdx.x, + gridDim.x, ..., with the next kBufs - 1 tiles' pixels and residual operand fetched
// (cp.async, kBufs buffers: 2; 3 measured no faster) while this tile's products and epilogue run. One
// barrier a tile (its pixels visible to every warp; the buffer the next fetch overwrites was last read
// before it). Shared memory: the weights, kBufs pixel and operand buffers, the windows. Two blocks an SM
// (122-124 registers, no spills); one an SM was 7-10 % slower (docs/PERFORMANCE.md).
template <int KT, int kBufs>
struct StreamTile {
  static constexpr int kTileBytes = 128 * KT, kOperandBytes = 128 * 128;
  static constexpr int kWeights = 0, kPixels = kTileBytes, kOperand = (1 + kBufs) * kTileBytes,
                       kWindows = kOperand + kBufs * kOperandBytes;
  static constexpr int kSmemBytes = kWindows + 128 * int(sizeof(num::RequantWindow));
};

template <int KT, int kBufs>
__global__ void __launch_bounds__(kBlockThreads, 2)
igemm_stream_kernel(const int8_t* __restrict x, const int8_t* __restrict w, int8_t* __restrict y, Geo g,
                    const num::RequantWindow* __restrict windows, int flags, num::ResidualWindow residual,
                    SharedAdd shared, const int8_t* __restrict operand, int fused) {
  using Layout = StreamTile<KT, kBufs>;
  extern __shared__ __align__(128) uint8_t smem[];
  const uint32_t base = uint32_t(__cvta_generic_to_shared(smem));
  const int tid = threadIdx.x;
  const uint32_t n0 = blockIdx.y * 128, m_tiles = (g.M + 127) / 128;
  constexpr int kChunks = KT / 16, kRowStep = kBlockThreads / kChunks, kRows = 128 / kRowStep;
  const uint32_t chunk = uint32_t(tid) % kChunks, row0 = uint32_t(tid) / kChunks;
  // This op's constants (before the wait for the previous kernel): the windows (padded to whole
  // 128-channel tiles) and the weights.
  constexpr int kWindowChunks = 128 * int(sizeof(num::RequantWindow)) / 16;
  for (int i = tid; i < kWindowChunks; i += kBlockThreads)
    cp_async16(base + Layout::kWindows + i * 16, reinterpret_cast<const uint8_t*>(windows + n0) + i * 16, true);
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    const uint32_t row = row0 + kRowStep * i, n = n0 + row;
    const bool ok = n < g.K;
    cp_async16(base + Layout::kWeights + igemm::swizzle<KT>(row, chunk), ok ? w + uint64_t(n) * g.kpad + chunk * 16 : w,
               ok);
  }
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  // Tile t's pixels (the reduction is the row's channels, Cp bytes) and, fused, the other input's runs
  // at this thread's fragments, into buffer `buf`.
  auto fetch = [&](uint32_t t, int buf) {
    const uint32_t m0 = t * 128, c = chunk * 16;
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const uint32_t row = row0 + kRowStep * i, m = m0 + row;
      const bool ok = m < g.M && c < g.Cp;
      cp_async16(base + Layout::kPixels + buf * Layout::kTileBytes + igemm::swizzle<KT>(row, chunk),
                 ok ? x + uint64_t(m) * g.Cp + c : x, ok);
    }
    if (fused) fetch_own_operand<128, 128>(base + Layout::kOperand + buf * Layout::kOperandBytes, operand, g, m0, n0);
  };
  uint32_t t = blockIdx.x;
#pragma unroll
  for (int b = 0; b < kBufs - 1; ++b) {
    if (t + b * gridDim.x < m_tiles) fetch(t + b * gridDim.x, b);
    cp_async_commit();
  }
  for (int buf = 0; t < m_tiles; t += gridDim.x, buf = buf == kBufs - 1 ? 0 : buf + 1) {
    igemm::cp_async_wait<kBufs - 2>();
    __syncthreads();  // tile t's pixels (and the weights) visible to all; the buffer fetched next free
    const uint32_t next = t + (kBufs - 1) * gridDim.x;
    if (next < m_tiles) fetch(next, buf == 0 ? kBufs - 1 : buf - 1);
    if (t + gridDim.x >= m_tiles) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");  // last tile
    cp_async_commit();
    int32_t acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int v = 0; v < 4; ++v) acc[i][j][v] = 0;
    igemm::mma_ktile<igemm::MmaS8, 128, 128, KT>(base + Layout::kPixels + buf * Layout::kTileBytes,
                                                 base + Layout::kWeights, KT / 32, acc);
    window_from_fragments<128, 128, false, kBufs - 1>(acc, smem + Layout::kWindows,
                                                      smem + Layout::kOperand + buf * Layout::kOperandBytes, g,
                                                      t * 128, n0, flags, fused, shared, residual, y);
  }
}

// x: [N][C][HW] -> y: [N][HW][Cp]; one thread per 16 channels of one pixel (one 16-byte store).
__global__ void to_channels_last_kernel(const int8_t* __restrict x, int8_t* __restrict y, uint32_t N, uint32_t C,
                                        uint32_t HW, uint32_t Cp) {
  // y is a scratch copy below 2^31 bytes (checked at load): 32-bit indices.
  const uint32_t runs = Cp / 16, total = N * HW * runs;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    // Consecutive threads take consecutive pixels of one channel run: the strided reads coalesce.
    const uint32_t q = i % HW, rest = i / HW, run = rest % runs, n = rest / runs;
    const int8_t* src = x + (uint64_t(n) * C + run * 16) * HW + q;
    union { uint4 v; int8_t b[16]; } out;
#pragma unroll
    for (uint32_t e = 0; e < 16; ++e) out.b[e] = run * 16 + e < C ? src[uint64_t(e) * HW] : int8_t(0);
    *reinterpret_cast<uint4*>(y + ((uint64_t(n) * HW + q) * runs + run) * 16) = out.v;
  }
}

// x: [N][C][HW] -> y: [N][HW][4] for C <= 4; one thread per pixel, one 4-byte store.
__global__ void to_channels_last4_kernel(const int8_t* __restrict x, int8_t* __restrict y, uint32_t N, uint32_t C,
                                         uint32_t HW) {
  const uint32_t total = N * HW;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const uint32_t q = i % HW, n = i / HW;
    union { uint32_t w; int8_t b[4]; } out;
#pragma unroll
    for (uint32_t e = 0; e < 4; ++e) out.b[e] = e < C ? x[(uint64_t(n) * C + e) * HW + q] : int8_t(0);
    reinterpret_cast<uint32_t*>(y)[i] = out.w;
  }
}

// x: [N][C][H][W], C <= 4 -> y: [N][ceil(H/2)][ceil(W/2)][16], channel (dy * 2 + dx) * 4 + c holding
// x[c][2h + dy][2w + dx] (zero past the image or C); one thread per output pixel, one 16-byte store.
__global__ void space_to_depth_kernel(const int8_t* __restrict x, int8_t* __restrict y, uint32_t N, uint32_t C,
                                      uint32_t H, uint32_t W) {
  const uint32_t H2 = (H + 1) / 2, W2 = (W + 1) / 2, total = N * H2 * W2;  // below 2^31 (checked at load)
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const uint32_t w2 = i % W2, h2 = (i / W2) % H2, n = i / (W2 * H2);
    union { uint4 v; int8_t b[16]; } out;
#pragma unroll
    for (uint32_t q = 0; q < 16; ++q) {
      const uint32_t c = q % 4, dx = (q / 4) % 2, dy = q / 8, h = 2 * h2 + dy, w = 2 * w2 + dx;
      out.b[q] = c < C && h < H && w < W ? x[((uint64_t(n) * C + c) * H + h) * W + w] : int8_t(0);
    }
    reinterpret_cast<uint4*>(y)[i] = out.v;
  }
}

void enqueue_space_to_depth(const int8_t* x, int8_t* y, uint32_t N, uint32_t C, uint32_t H, uint32_t W,
                            cudaStream_t stream) {
  space_to_depth_kernel<<<blocks_for(uint64_t(N) * ((H + 1) / 2) * ((W + 1) / 2)), kThreads, 0, stream>>>(x, y, N, C, H, W);
  check_launch("space_to_depth_kernel");
}

constexpr int kNarrowStages = 3;  // narrow tiles: 64-byte k-tiles, three stages (48 KB with the side region)

template <int BM, int BN, int kTap, int kEpi, int KT, int Stages, bool kWg = false, int kPipe = igemm::kPipeBarrier>
void launch(const int8_t* x, const int8_t* w, int8_t* y, const Geo& g, int splits, bool output_nhwc, bool fast_form,
            const FastChain& fast, const num::RequantWindow* windows, int flags, const num::ResidualWindow& residual,
            const SharedAdd& shared, const DevChain& chain, const Operands& ops, int fused, const DevChain& next,
            const Operands& next_ops, const igemm::TmaMaps& maps, cudaStream_t stream) {
  using Tile = TileShape<BM, BN, KT, Stages, kPipe>;
  igemm::launch_tiles<BM, BN>(igemm_kernel<BM, BN, kTap, kEpi, KT, Stages, kWg, kPipe>, g, splits,
                              kEpi == kEpiWindow ? Tile::kWindowSmemBytes : Tile::kSmemBytes, stream, x, w, y, g,
                              int(output_nhwc), int(fast_form), fast, windows, flags, residual, shared, chain, ops,
                              fused, next, next_ops, maps);
}

// igemm_stream_kernel over `columns` blocks for each 128-channel tile, a programmatic dependent of the
// previous kernel.
template <int KT, int kBufs>
void launch_stream(const int8_t* x, const int8_t* w, int8_t* y, const Geo& g, uint32_t columns,
                   const num::RequantWindow* windows, int flags, const num::ResidualWindow& residual,
                   const SharedAdd& shared, const int8_t* operand, int fused, cudaStream_t stream) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(columns, (g.K + 127) / 128, 1);
  config.blockDim = dim3(kBlockThreads);
  config.dynamicSmemBytes = size_t(StreamTile<KT, kBufs>::kSmemBytes);
  config.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attr;
  config.numAttrs = igemm::programmatic_launch() ? 1 : 0;
  SOFTDLA_CUDA(cudaLaunchKernelEx(&config, igemm_stream_kernel<KT, kBufs>, x, w, y, g, windows, flags, residual, shared,
                                  operand, fused));
}

// Dynamic shared memory above 48 KB needs an opt-in per kernel (set at load time, never while a stream
// is being captured).
void allow_shared_memory() {
  auto allow = [](auto* kernel, int bytes) {
    SOFTDLA_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  };
  auto pipeline = [&](auto bm, auto bn, auto kt, auto stages) {
    constexpr int BM = decltype(bm)::value, BN = decltype(bn)::value, KT = decltype(kt)::value,
                  S = decltype(stages)::value;
    using Tile = TileShape<BM, BN, KT, S>;
    auto taps = [&](auto tap) {
      constexpr int kTap = decltype(tap)::value;
      allow(igemm_kernel<BM, BN, kTap, kEpiGeneral, KT, S>, Tile::kSmemBytes);
      allow(igemm_kernel<BM, BN, kTap, kEpiWindow, KT, S>, Tile::kWindowSmemBytes);
    };
    taps(std::integral_constant<int, 4>{}), taps(std::integral_constant<int, 16>{});
  };
  using std::integral_constant;
  pipeline(integral_constant<int, 128>{}, integral_constant<int, 128>{}, integral_constant<int, 64>{},
           integral_constant<int, 4>{});
  pipeline(integral_constant<int, 128>{}, integral_constant<int, 128>{}, integral_constant<int, 128>{},
           integral_constant<int, 3>{});
  pipeline(integral_constant<int, 256>{}, integral_constant<int, 64>{}, integral_constant<int, 64>{},
           integral_constant<int, 4>{});
#ifdef SOFTDLA_WGMMA
  allow(igemm_kernel<128, 128, 16, kEpiWindow, 128, 3, true>, TileShape<128, 128, 128, 3>::kWindowSmemBytes);
  allow(igemm_kernel<128, 128, 16, kEpiWindow, 128, 3, true, igemm::kPipeMbar>,
        TileShape<128, 128, 128, 3, igemm::kPipeMbar>::kWindowSmemBytes);
  allow(igemm_kernel<128, 128, 16, kEpiWindow, 128, 3, true, igemm::kPipeTma>,
        TileShape<128, 128, 128, 3, igemm::kPipeTma>::kWindowSmemBytes);
  allow(igemm_kernel<128, 128, 16, kEpiWindow, 128, 3, true, igemm::kPipeTmaFree>,
        TileShape<128, 128, 128, 3, igemm::kPipeTmaFree>::kWindowSmemBytes);
  allow(igemm_kernel<256, 64, 16, kEpiWindow, 64, 4, true>, TileShape<256, 64, 64, 4>::kWindowSmemBytes);
#endif
  // Narrow tiles: channels of at least 16 bytes a tap only.
  auto narrow = [&](auto bm, auto bn) {
    constexpr int BM = decltype(bm)::value, BN = decltype(bn)::value;
    using Tile = TileShape<BM, BN, 64, kNarrowStages>;
    allow(igemm_kernel<BM, BN, 16, kEpiGeneral, 64, kNarrowStages>, Tile::kSmemBytes);
    allow(igemm_kernel<BM, BN, 16, kEpiWindow, 64, kNarrowStages>, Tile::kWindowSmemBytes);
  };
  narrow(integral_constant<int, 64>{}, integral_constant<int, 128>{});
  narrow(integral_constant<int, 128>{}, integral_constant<int, 64>{});
  allow(igemm_stream_kernel<64, 2>, StreamTile<64, 2>::kSmemBytes);
  allow(igemm_stream_kernel<128, 2>, StreamTile<128, 2>::kSmemBytes);
}

// Narrow tiles (64 pixels x 128 channels, 128 x 64 where K <= 64; warps of 32 x 32, three blocks an SM)
// for convolutions whose wide tiles would leave most of the GPU idle: fewer than narrow_fill() times the
// SMs' slots for wide blocks (two an SM). Default 1/8: on the H200 that is every ResNet-50 convolution
// at batch 1 but the stem and layer 1's 1 x 1 convolutions to 256 channels (-7 % latency), and none at
// batch 32 or 128; 1/4 also took layer 4's reduce and 3 x 3 convolutions at batch 32 (+5 % there), 1
// most of layers 2-4's (+11 %) (docs/PERFORMANCE.md). SOFTDLA_CUDA_NARROW_FILL=<fraction>, read
// once (0: never), and SOFTDLA_CUDA_NARROW=<bytes>: narrow tiles also for every reduction of at most that
// many bytes (default 0; 64, layer 1's one-k-tile 1 x 1 convolutions, measured 1 % slower at batch 128).
uint32_t narrow_kpad() {
  static const uint32_t bound = env_uint("SOFTDLA_CUDA_NARROW", 0);
  return bound;
}
double narrow_fill() {
  static const double fill = env_double("SOFTDLA_CUDA_NARROW_FILL", 0.125);
  return fill;
}

// 128 x 128 tiles reduce over 128-byte k-tiles in three stages (half the barriers and loop overhead of
// 64-byte ones per product), except where the whole reduction is one 64-byte k-tile; 256 x 64 tiles keep
// 64-byte k-tiles in four stages (measured: 128-byte ones in two stages, and loaders sharing one
// address per 64 bytes, did not pay; docs/PERFORMANCE.md). SOFTDLA_CUDA_IGEMM=base, read once, takes
// 64-byte k-tiles everywhere (tests, and the before/after comparison).
bool wide_k_tiles() {
  static const bool on = !env_is("SOFTDLA_CUDA_IGEMM", "base");
  return on;
}

// SOFTDLA_CUDA_REQUANT=full, read once, keeps every channel's requantization in the form
// make_requant_window gives (no fold_rounding_sign, no high-word form): tests and the comparison.
bool short_requant() {
  static const bool on = !env_is("SOFTDLA_CUDA_REQUANT", "full");
  return on;
}

// SOFTDLA_CUDA_ADD=exact, read once, keeps a fused residual add in its exact window form even where it
// has the shared-scale one (tests, and the before/after comparison).
bool shared_scale_adds() {
  static const bool on = !env_is("SOFTDLA_CUDA_ADD", "exact");
  return on;
}

// SOFTDLA_CUDA_TRIM=off, read once, keeps the shared-scale add's saturation before the add and its upper
// clamp where they cannot change a byte (kAddInRange, kAddHighSat): tests, and the comparison.
bool trimmed_adds() {
  static const bool on = !env_is("SOFTDLA_CUDA_TRIM", "off");
  return on;
}

// The longest one-k-tile reduction (kpad, bytes) whose pointwise convolutions on 128 x 128 tiles take
// igemm_stream_kernel (the next tile's loads during this tile's epilogue) where their tiles fill more
// than one wave of the SMs' block slots: SOFTDLA_CUDA_PERSIST=off|64|128, read once (default 64).
// SOFTDLA_CUDA_PERSIST_GRID=<n>: n blocks a channel column whatever the tile count (tests: every block
// walks several tiles).
uint32_t stream_kpad() {
  static const uint32_t bound = env_is("SOFTDLA_CUDA_PERSIST", "off") ? 0 : env_uint("SOFTDLA_CUDA_PERSIST", 64);
  return bound;
}
uint32_t stream_grid() {
  static const uint32_t forced = env_uint("SOFTDLA_CUDA_PERSIST_GRID", 0);
  return forced;
}

// Whether the 128 x 128 tiles of 128-byte k-tiles (and 256 x 64 ones: wgmma_tall) run their products on
// wgmma (igemm_reduce's kWg): only in sm_90a builds on a device of compute capability 9.0 (the
// arch-specific code runs nowhere else). SOFTDLA_CUDA_WGMMA=off, read once, keeps mma.sync (tests, and the before/after comparison).
bool wgmma_device() {
#ifdef SOFTDLA_WGMMA
  static const bool wanted = !env_is("SOFTDLA_CUDA_WGMMA", "off");
  if (!wanted) return false;
  int device = 0, major = 0, minor = 0;
  SOFTDLA_CUDA(cudaGetDevice(&device));
  SOFTDLA_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  SOFTDLA_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major == 9 && minor == 0;
#else
  return false;
#endif
}

// Which pipeline the 128 x 128 wgmma tiles (three 32 KB stages of 128-byte k-tiles) take:
// SOFTDLA_CUDA_WG_MBAR=1, read once, per-stage mbarriers with one k-tile's products in flight while the
// next k-tile's are issued (igemm_reduce's kMbarriers); 0, a block barrier a k-tile. Only where the TMA
// stages are off (SOFTDLA_CUDA_WG_TMA=off: wgmma_tma).
bool wgmma_mbarriers() {
  static const bool on = env_is("SOFTDLA_CUDA_WG_MBAR", "1");
  return on;
}

// Whether the 128 x 128 wgmma tiles have the bulk tensor copy engine (TMA) fill their stages
// (igemm::kPipeTma): SOFTDLA_CUDA_WG_TMA, read once: wai (the default: the weights from a 2-D tensor map
// of [K][kpad], one thread issuing each stage's copy; the pixels of pointwise layers from one of [M][Cp],
// and those of k x k layers whose channels are whole 128-byte k-tiles through TMA's im2col mode, a 4-D
// map of the input made at each enqueue, so that no cp.async is left in their k-loops), wa (the k x k
// layers' pixels by cp.async), w (the weights alone) or off (every stage by cp.async;
// SOFTDLA_CUDA_WG_MBAR=1 then takes effect). Measured on the H200, ResNet-50 INT8 (docs/PERFORMANCE.md):
// wa -3 % of the time of off at batch 32, -4 % at 128; wai -3 % of wa's at batch 32, -4 % at 128.
int wgmma_tma() {
  static const int mode = [] {
    const char* v = std::getenv("SOFTDLA_CUDA_WG_TMA");
    const std::string s = v ? v : "";
    return s == "off" ? 0 : s == "w" ? 1 : s == "wa" ? 2 : 3;
  }();
  return mode;
}

// Whether launches whose stages are all TMA copies (a pixels' map, wgmma_tma() >= 2) drop the block
// barrier from their k-loop (igemm::kPipeTmaFree: the warps meet only on the stages' mbarriers; the last
// warp done with a stage refills it): SOFTDLA_CUDA_WG_TMA_FREE, read once: 1 (the default) or 0.
// Measured on the H200, ResNet-50 INT8, against the same launches with the barrier kept
// (docs/PERFORMANCE.md): every launch of wai barrier-free, -2.5 % of the time at batch 32 and -1.5 % at
// 128; only the pointwise ones (with wa), +4.4 % and +5.7 %; only the k x k ones (with wai), +4.6 % at
// both. It pays only with every wgmma launch of the task on it (why, not yet known).
bool wgmma_tma_free() {
  static const bool on = !env_is("SOFTDLA_CUDA_WG_TMA_FREE", "0");
  return on;
}

// A driver function (of CUDA 12.0's signature) through the runtime's entry-point query, since the plugin
// links no libcuda; null where the driver has none.
void* driver_entry(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return p;
}

// cuTensorMapEncodeTiled, looked up once.
using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
EncodeTiled encode_tiled() {
  static const auto fn = reinterpret_cast<EncodeTiled>(driver_entry("cuTensorMapEncodeTiled"));
  return fn;
}

// A 2-D tensor map of `rows` rows of `row_bytes` bytes at `base`, read in boxes of 128 rows x 128 bytes
// with the 128-byte swizzle (igemm::swizzle<128>), zeros outside. False where it cannot be made.
bool encode_rows(CUtensorMap* map, const void* base, uint64_t row_bytes, uint64_t rows) {
  const EncodeTiled fn = encode_tiled();
  if (!fn || reinterpret_cast<uintptr_t>(base) % 16 || row_bytes % 16) return false;
  const cuuint64_t dims[2] = {row_bytes, rows}, strides[1] = {row_bytes};
  const cuuint32_t box[2] = {128, 128}, element_strides[2] = {1, 1};
  return fn(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(base), dims, strides, box, element_strides,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// cuTensorMapEncodeIm2col, looked up once.
using EncodeIm2col = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                  const cuuint64_t*, const int*, const int*, cuuint32_t, cuuint32_t, const cuuint32_t*,
                                  CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                  CUtensorMapFloatOOBfill);
EncodeIm2col encode_im2col_fn() {
  static const auto fn = reinterpret_cast<EncodeIm2col>(driver_entry("cuTensorMapEncodeIm2col"));
  return fn;
}

// The im2col tensor map of a k x k layer's channels-last input x ([N][H][W][Cp] bytes) for
// igemm::TmaMaps::a_on == 2: boxes of 128 output pixels x 128 channels (the 128-byte swizzle), the pixel
// box from (-pl, -pt) to the last output pixel's tap-(0, 0) corner ((OW - 1) sw - pl, (OH - 1) sh - pt;
// the driver takes it as an offset from (W - 1, H - 1)), walked with the convolution's strides; the tap's
// offset (s dw, r dh) comes with each copy. Only where every 128-byte k-tile is one tap's channels
// (Cp % 128 == 0) and the geometry fits the map's ranges (corners in [-128, 127], strides up to 8,
// offsets in 16 bits). False where it cannot be made.
bool encode_im2col(CUtensorMap* map, const void* x, const IgemmGeometry& g) {
  const EncodeIm2col fn = encode_im2col_fn();
  if (!fn || reinterpret_cast<uintptr_t>(x) % 16 || g.pointwise || g.Cp % 128 || g.kpad != g.R * g.S * g.Cp)
    return false;
  if (g.sh < 1 || g.sh > 8 || g.sw < 1 || g.sw > 8 || (g.R - 1) * g.dh > 65535 || (g.S - 1) * g.dw > 65535)
    return false;
  const int64_t lower_w = -int64_t(g.pl), lower_h = -int64_t(g.pt);
  const int64_t upper_w = int64_t(g.OW - 1) * g.sw + 1 - int64_t(g.W) - int64_t(g.pl);
  const int64_t upper_h = int64_t(g.OH - 1) * g.sh + 1 - int64_t(g.H) - int64_t(g.pt);
  for (const int64_t v : {lower_w, lower_h, upper_w, upper_h})
    if (v < -128 || v > 127) return false;
  const cuuint64_t dims[4] = {g.Cp, g.W, g.H, g.N};
  const cuuint64_t strides[3] = {g.Cp, uint64_t(g.W) * g.Cp, uint64_t(g.H) * g.W * g.Cp};
  const int lower[2] = {int(lower_w), int(lower_h)}, upper[2] = {int(upper_w), int(upper_h)};  // W, then H
  const cuuint32_t element_strides[4] = {1, g.sw, g.sh, 1};
  return fn(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 4, const_cast<void*>(x), dims, strides, lower, upper, 128, 128,
            element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
            CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// Whether the 256 x 64 tiles (64-byte k-tiles, 16-byte taps, the windowed epilogue: the stem and layer 1
// of ResNet-50) take wgmma as well where the 128 x 128 ones do: SOFTDLA_CUDA_WGMMA_TALL=off, read once,
// keeps them on mma.sync (the comparison; measured 1-2 % faster at batch 128, docs/PERFORMANCE.md).
bool wgmma_tall() {
  static const bool on = !env_is("SOFTDLA_CUDA_WGMMA_TALL", "off");
  return on;
}

}  // namespace

bool igemm_supports(const Model& m, const Op& op, const ConvParams& p) {
  const Shape& x = m.tensors[op.inputs[0]].shape;
  const Shape& y = m.tensors[op.outputs[0]].shape;
  const Constant& w = m.constants[p.weights];
  const uint64_t limit = uint64_t(1) << 31;  // the kernel's 32-bit pixel and in-image offsets
  const uint64_t padded_input = uint64_t(x[0]) * x[2] * x[3] * ((x[1] + 15) / 16 * 16);
  return m.tensors[op.outputs[0]].dtype == DataType::kInt8 && p.groups == 1 &&
         uint64_t(x[1]) * w.dims[2] * w.dims[3] < kMaxExactTerms && uint64_t(y[0]) * y[2] * y[3] < limit &&
         padded_input < limit;
}

IgemmConv::IgemmConv(const Model& m, const Op& op, const ConvParams& p, const OpContext& ctx)
    : g_(std::make_unique<IgemmGeometry>()), chain_(m, op, p.post, &ctx.channels_last) {
  const Shape& x = m.tensors[op.inputs[0]].shape;
  const Shape& yv = m.tensors[op.outputs[0]].shape;
  const Constant& w = m.constants[p.weights];
  const uint32_t C = x[1], R = w.dims[2], S = w.dims[3];
  const SdpStep* bias = nullptr;
  fast_ = fast_form(p.post, lo_, hi_, bias);
  channels_ = C, in_h_ = x[2], in_w_ = x[3];
  input_nhwc_ = ctx.channels_last[op.inputs[0]] != 0;
  output_nhwc_ = ctx.channels_last[op.outputs[0]] != 0;
  const int8_t* src = reinterpret_cast<const int8_t*>(w.data.data());
  auto weight = [&](uint32_t k, uint32_t c, uint32_t r, uint32_t s) { return src[((size_t(k) * C + c) * R + r) * S + s]; };
  const uint32_t K = yv[1];
  // Inputs of up to 4 channels (images) are never channels-last already (C % 16 != 0): converted at
  // each run. With stride 2 (the usual first layer) they become space-to-depth: each 2 x 2 block of
  // pixels is one pixel of 16 channels (4 x 4 with the padding), and the convolution one of stride 1
  // over ceil(R / 2) x ceil(S / 2) taps, a whole 16-byte run per tap. Other strides take 4 bytes per
  // tap instead of 16.
  space_to_depth_ = C <= 4 && fast_ && p.stride_h == 2 && p.stride_w == 2 && p.dilation_h == 1 && p.dilation_w == 1;
  if (space_to_depth_) {
    // Original tap r = 2 * ry + dy + off with off = pad - 2 * ceil(pad / 2) (0 or -1); the new padding
    // is ceil(pad / 2) pixels of the half-size image.
    const uint32_t at = (p.pad_top + 1) / 2, al = (p.pad_left + 1) / 2;
    const int32_t offy = int32_t(p.pad_top) - 2 * int32_t(at), offx = int32_t(p.pad_left) - 2 * int32_t(al);
    const uint32_t R2 = uint32_t(int32_t(R) - 1 - offy) / 2 + 1, S2 = uint32_t(int32_t(S) - 1 - offx) / 2 + 1;
    *g_ = {x[0], (x[2] + 1) / 2, (x[3] + 1) / 2, 16, K, yv[2], yv[3], R2, S2, 1, 1, 1, 1, at, al,
           x[0] * yv[2] * yv[3], (R2 * S2 * 16 + 63) / 64 * 64, 0};
    std::vector<int8_t> packed(size_t(K) * g_->kpad, 0);
    for (uint32_t k = 0; k < K; ++k)
      for (uint32_t ry = 0; ry < R2; ++ry)
        for (uint32_t rx = 0; rx < S2; ++rx)
          for (uint32_t dy = 0; dy < 2; ++dy)
            for (uint32_t dx = 0; dx < 2; ++dx) {
              const int32_t r = int32_t(2 * ry + dy) + offy, s = int32_t(2 * rx + dx) + offx;
              if (r < 0 || r >= int32_t(R) || s < 0 || s >= int32_t(S)) continue;
              for (uint32_t c = 0; c < C; ++c)
                packed[size_t(k) * g_->kpad + (ry * S2 + rx) * 16 + (dy * 2 + dx) * 4 + c] = weight(k, c, uint32_t(r), uint32_t(s));
            }
    weights_ = upload(packed);
  } else {
    const uint32_t Cp = C <= 4 && fast_ ? 4 : (C + 15) / 16 * 16;
    *g_ = {x[0], x[2], x[3], Cp, K, yv[2], yv[3], R, S, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w,
           p.pad_top, p.pad_left, x[0] * yv[2] * yv[3], (R * S * Cp + 63) / 64 * 64, 0};
    g_->pointwise = R == 1 && S == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_top == 0 && p.pad_left == 0 &&
                    yv[2] == x[2] && yv[3] == x[3] && Cp % 16 == 0;
    // Weights [K][C][R][S] -> [K][(r, s, c) with c padded to Cp][.. kpad], zeros in the padding.
    std::vector<int8_t> packed(size_t(K) * g_->kpad, 0);
    for (uint32_t k = 0; k < K; ++k)
      for (uint32_t c = 0; c < C; ++c)
        for (uint32_t r = 0; r < R; ++r)
          for (uint32_t s = 0; s < S; ++s) packed[size_t(k) * g_->kpad + (r * S + s) * Cp + c] = weight(k, c, r, s);
    weights_ = upload(packed);
  }
  if (!input_nhwc_) convert_bytes_ = (uint64_t(g_->N) * g_->H * g_->W * g_->Cp + 255) / 256 * 256;
  if (fast_) {
    const auto biases = per_channel<int32_t>(bias ? bias->ivalues : std::vector<int32_t>{}, K, 0);
    const auto mults = per_channel<int32_t>(p.post.requant.multiplier, K, 1);
    const auto shifts = per_channel<uint8_t>(p.post.requant.shift, K, 0);
    bias_ = upload(biases), mult_ = upload(mults), shift_ = upload(shifts);
    // The windowed form when every channel has one (padding channels: all zero, never stored).
    std::vector<num::RequantWindow> windows((K + 127) / 128 * 128, num::RequantWindow{});
    // A window whose products never land on a negative rounding tie takes the short rounding as well
    // (fold_rounding_sign), and where every shift is 32 or more the value is the product's high word.
    bool all = true, nonnegative = true, high = true, in_range = true;
    for (uint32_t k = 0; k < K && all; ++k) {
      auto window = num::make_requant_window(biases[k], lo_, hi_, mults[k], shifts[k]);
      if (window && short_requant()) num::fold_rounding_sign(*window);
      if (window) windows[k] = *window;
      all = window.has_value();
      nonnegative = nonnegative && all && (window->shifts & num::RequantWindow::kNonNegative);
      high = high && all && (window->shifts & 255u) >= 32;
      in_range = in_range && all && num::window_in_int8(*window);
    }
    conv_in_range_ = all && in_range;
    if (all) windows_ = upload(windows);
    if (all && nonnegative) window_flags_ = kConvNonNegative | (high && short_requant() ? kConvHigh : 0);
  }
  // Narrow layers waste half of a 128-channel tile: take 256 pixels x 64 channels instead. Where those
  // wide tiles would not fill the GPU, narrow ones (narrow_fill), 64 x 128 or 128 x 64.
  const uint32_t wide_m = K <= 64 ? 256 : 128, wide_n = K <= 64 ? 64 : 128;
  const uint64_t wide_tiles = uint64_t((g_->M + wide_m - 1) / wide_m) * ((K + wide_n - 1) / wide_n);
  const bool narrow = g_->Cp >= 16 && (g_->kpad <= narrow_kpad() ||
                                       double(wide_tiles) < narrow_fill() * 2.0 * igemm::sm_count());
  tile_ = (K <= 64 ? 1 : 0) + (narrow ? 2 : 0);
  static constexpr uint32_t kTileM[4] = {128, 256, 64, 128}, kTileN[4] = {128, 64, 128, 64};
  const uint32_t BM = kTileM[tile_], BN = kTileN[tile_];
  // Every channel with a window: the windowed epilogue, straight from the fragments without split-K
  // (unless a fused op or the output layout rules it out, known only later).
  const uint64_t tiles = uint64_t((g_->M + BM - 1) / BM) * ((K + BN - 1) / BN);
  wgmma_ = wgmma_device();
  // Split-K: the tiles that the enqueue runs on wgmma (the windowed epilogue's, on 16-byte taps: 128 x 128
  // of 128-byte k-tiles, and 256 x 64 unless wgmma_tall is off) on their own measured costs
  // (choose_splits_wgmma) unless SOFTDLA_CUDA_SPLIT_MODEL=waves.
  const bool on_wgmma = wgmma_ && windows_.get() != nullptr && g_->Cp != 4 &&
                        (tile_ == 0 ? wide_k_tiles() && g_->kpad > 64 : tile_ == 1 && wgmma_tall());
  const int ktiles = int(g_->kpad / 64);
  splits_ = on_wgmma && igemm::split_model() != igemm::SplitModel::kWaves
                ? igemm::choose_splits_wgmma(tiles, ktiles, int(BM))
                : igemm::choose_splits(tiles, ktiles, int(BM), windows_.get() != nullptr, narrow ? kNarrowBlocks : 2);
  // The weights' tensor map for the TMA pipeline of the 128 x 128 wgmma tiles (SOFTDLA_CUDA_WG_TMA).
  if (wgmma_ && wgmma_tma() && tile_ == 0 && g_->kpad > 64) {
    maps_ = std::make_unique<igemm::TmaMaps>();
    if (!encode_rows(&maps_->b, weights_.get(), g_->kpad, K)) maps_.reset();
  }
  // One-k-tile pointwise layers over more than a wave of tiles walk their tiles (igemm_stream_kernel).
  const uint32_t m_tiles = (g_->M + 127) / 128, n_tiles = (K + 127) / 128;
  if (tile_ == 0 && g_->pointwise && (g_->kpad == 64 || g_->kpad == 128) && g_->kpad <= stream_kpad() &&
      windows_.get() && (stream_grid() || tiles > uint64_t(2 * igemm::sm_count())))
    stream_columns_ = std::min(m_tiles, stream_grid() ? stream_grid()
                                                      : std::max(1u, uint32_t(2 * igemm::sm_count()) / n_tiles));
  allow_shared_memory();
}

IgemmConv::~IgemmConv() = default;

bool IgemmConv::fuse_next(const Model& m, const Op& next, size_t input, const OpContext& ctx) {
  const auto* p = std::get_if<SdpParams>(&next.params);
  if (!p || p->steps.size() > size_t(kMaxSdpSteps) || m.tensors[next.outputs[0]].dtype != DataType::kInt8 ||
      m.tensors[next.inputs[input]].shape != m.tensors[next.outputs[0]].shape)
    return false;
  // The residual window form: both inputs channels-last with the output's shape, and every channel of
  // this convolution in the window form. The general epilogue computes only the add's first input.
  const Shape& out = m.tensors[next.outputs[0]].shape;
  const bool same_position = next.inputs.size() == 2 && ctx.channels_last[next.outputs[0]] &&
                             ctx.channels_last[next.inputs[0]] && ctx.channels_last[next.inputs[1]] &&
                             m.tensors[next.inputs[0]].shape == out && m.tensors[next.inputs[1]].shape == out;
  auto residual = same_position && windows_.get() ? residual_window(next, *p) : std::nullopt;
  if (input == 1 && !residual) return false;
  fused_.emplace(m, next, *p, &ctx.channels_last);
  residual_ = residual;
  shared_add_.reset();
  if (residual && shared_scale_adds()) {
    const num::SharedScaleSum s = num::shared_scale_sum(*residual);
    if (s.ok) shared_add_ = SharedAdd{s.mult, s.add, s.shift, s.lo, s.hi};
  }
  fused_swapped_ = input == 1;
  output_nhwc_ = ctx.channels_last[next.outputs[0]] != 0;
  return true;
}

void IgemmConv::enqueue(const GpuOpIo& io, const OpContext&, cudaStream_t stream) const {
  const int8_t* x = static_cast<const int8_t*>(io.inputs[0]);
  if (!input_nhwc_) {
    int8_t* converted = static_cast<int8_t*>(io.scratch);
    if (space_to_depth_) enqueue_space_to_depth(x, converted, g_->N, channels_, in_h_, in_w_, stream);
    else enqueue_to_channels_last(x, converted, g_->N, channels_, g_->H * g_->W, g_->Cp, stream);
    x = converted;
  }
  GpuOpIo next_io;
  next_io.inputs = io.fused_inputs;
  const Operands ops = operands_of(io), next_ops = operands_of(next_io);
  const FastChain fast{bias_.as<int32_t>(), mult_.as<int32_t>(), shift_.as<uint8_t>(), lo_, hi_};
  const DevChain& next = fused_ ? fused_->chain() : chain_.chain();
  int8_t* y = static_cast<int8_t*>(io.output);
  const int fused = fused_ ? (fused_swapped_ ? 2 : 1) : 0;
  // The windowed epilogue needs every channel's window, an NHWC output, and a fused op (if any) in the
  // residual window form.
  const bool window = windows_.get() && output_nhwc_ && (!fused || residual_);
  const bool wide = wide_k_tiles() && g_->kpad > 64;
  const int flags = window_flags_ |
                    (residual_ && (residual_->out.shifts & num::RequantWindow::kNonNegative) ? kAddNonNegative : 0) |
                    (residual_ && residual_->x_product ? kAddPlainX : 0) | (shared_add_ ? kAddShared : 0) |
                    (shared_add_ && trimmed_adds() && conv_in_range_ ? kAddInRange : 0) |
                    (shared_add_ && trimmed_adds() && shared_add_->hi == 127 ? kAddHighSat : 0);
  if (stream_columns_ && window && splits_ == 1) {
    const int8_t* operand = static_cast<const int8_t*>(next_ops.p[fused == 2 ? 0 : 1]);
    const auto* windows = windows_.as<num::RequantWindow>();
    const num::ResidualWindow residual = residual_ ? *residual_ : num::ResidualWindow{};
    const SharedAdd shared = shared_add_ ? *shared_add_ : SharedAdd{};
    if (g_->kpad == 64)
      return launch_stream<64, 2>(x, weights_.as<int8_t>(), y, *g_, stream_columns_, windows, flags, residual,
                                  shared, operand, fused, stream);
    return launch_stream<128, 2>(x, weights_.as<int8_t>(), y, *g_, stream_columns_, windows, flags, residual,
                                 shared, operand, fused, stream);
  }
  // The TMA pipeline's tensor maps (wgmma_tma): the weights' made at load; with `wa`, a pointwise
  // layer's pixels, made here (the input's address is known only now; a host-side encoding).
  igemm::TmaMaps maps{};
  if (maps_) {
    maps = *maps_;
    maps.a_on = wgmma_tma() >= 2 && g_->pointwise && encode_rows(&maps.a, x, g_->Cp, g_->M) ? 1 : 0;
    if (wgmma_tma() == 3 && !g_->pointwise && encode_im2col(&maps.a, x, *g_)) maps.a_on = 2;
  }
  auto go = [&](auto tile_tag, auto tap_tag, auto epi_tag) {
    constexpr int kTile = decltype(tile_tag)::value;
    constexpr int BM = kTile == 0 ? 128 : kTile == 1 ? 256 : kTile == 2 ? 64 : 128, BN = kTile % 2 ? 64 : 128;
    using std::integral_constant;
    // The launch of tiles bm x bn, k-tiles of kt bytes in `stages` stages, products on wgmma (wg) and the
    // k-loop `pipe` (igemm::kPipe*); `run` the mma.sync ones of this op's tile.
    auto launch_as = [&](auto bm, auto bn, auto kt, auto stages, auto wg, auto pipe) {
      launch<decltype(bm)::value, decltype(bn)::value, decltype(tap_tag)::value, decltype(epi_tag)::value,
             decltype(kt)::value, decltype(stages)::value, decltype(wg)::value, decltype(pipe)::value>(
          x, weights_.as<int8_t>(), y, *g_, splits_, output_nhwc_, fast_, fast, windows_.as<num::RequantWindow>(),
          flags, residual_ ? *residual_ : num::ResidualWindow{}, shared_add_ ? *shared_add_ : SharedAdd{},
          chain_.chain(), ops, fused, next, next_ops, maps, stream);
    };
    using Barrier = integral_constant<int, igemm::kPipeBarrier>;
    auto run = [&](auto kt, auto stages) {
      launch_as(integral_constant<int, BM>{}, integral_constant<int, BN>{}, kt, stages, std::false_type{}, Barrier{});
    };
    if constexpr (kTile >= 2) {
      return run(integral_constant<int, 64>{}, integral_constant<int, kNarrowStages>{});
    } else {
#ifdef SOFTDLA_WGMMA
      // wgmma: 128 x 128 tiles of 128-byte k-tiles, and 256 x 64 ones, over 16-byte taps with the windowed
      // epilogue (in the general one, whose chain interpreter holds more registers, ptxas serializes the
      // wgmma).
      if constexpr (kTile == 0 && decltype(tap_tag)::value == 16 && decltype(epi_tag)::value == kEpiWindow)
        if (wide && wgmma_) {
          const integral_constant<int, 128> w128;
          const integral_constant<int, 3> three;
          if (maps_ && maps.a_on && wgmma_tma_free())
            return launch_as(w128, w128, w128, three, std::true_type{}, integral_constant<int, igemm::kPipeTmaFree>{});
          if (maps_) return launch_as(w128, w128, w128, three, std::true_type{}, integral_constant<int, igemm::kPipeTma>{});
          return wgmma_mbarriers()
                     ? launch_as(w128, w128, w128, three, std::true_type{}, integral_constant<int, igemm::kPipeMbar>{})
                     : launch_as(w128, w128, w128, three, std::true_type{}, Barrier{});
        }
      if constexpr (kTile == 1 && decltype(tap_tag)::value == 16 && decltype(epi_tag)::value == kEpiWindow)
        if (wgmma_ && wgmma_tall())
          return launch_as(integral_constant<int, 256>{}, integral_constant<int, 64>{}, integral_constant<int, 64>{},
                           integral_constant<int, 4>{}, std::true_type{}, Barrier{});
#endif
      if constexpr (BM == 128)
        if (wide) return run(integral_constant<int, 128>{}, integral_constant<int, 3>{});
      run(integral_constant<int, 64>{}, integral_constant<int, 4>{});
    }
  };
  auto with_epilogue = [&](auto tile_tag, auto tap_tag) {
    window ? go(tile_tag, tap_tag, std::integral_constant<int, kEpiWindow>{})
           : go(tile_tag, tap_tag, std::integral_constant<int, kEpiGeneral>{});
  };
  auto with_tap = [&](auto tile_tag) {
    constexpr int kTile = decltype(tile_tag)::value;
    if constexpr (kTile < 2)  // narrow tiles: Cp >= 16 only
      if (g_->Cp == 4) return with_epilogue(tile_tag, std::integral_constant<int, 4>{});  // only with the fast chain
    with_epilogue(tile_tag, std::integral_constant<int, 16>{});
  };
  using std::integral_constant;
  switch (tile_) {
    case 0: return with_tap(integral_constant<int, 0>{});
    case 1: return with_tap(integral_constant<int, 1>{});
    case 2: return with_tap(integral_constant<int, 2>{});
    default: return with_tap(integral_constant<int, 3>{});
  }
}

void enqueue_to_channels_last(const int8_t* x, int8_t* y, uint32_t N, uint32_t C, uint32_t HW, uint32_t Cp,
                              cudaStream_t stream) {
  if (Cp == 4) {
    to_channels_last4_kernel<<<blocks_for(uint64_t(N) * HW), kThreads, 0, stream>>>(x, y, N, C, HW);
    return check_launch("to_channels_last4_kernel");
  }
  to_channels_last_kernel<<<blocks_for(uint64_t(N) * HW * (Cp / 16)), kThreads, 0, stream>>>(x, y, N, C, HW, Cp);
  check_launch("to_channels_last_kernel");
}

}  // namespace softdla::gpu
