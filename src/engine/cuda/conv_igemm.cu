// The INT8 implicit-GEMM convolution (see conv_igemm.h). GEMM view: rows are output pixels (all images),
// columns are output channels, the reduction runs over (tap r, tap s, input channel c) with the channels
// padded to Cp, a multiple of 16, so every 16-byte run of the reduction is one pixel's channels at one
// tap: a single cp.async, zero-filled where the tap falls into the padding. Inputs of up to 4 channels
// (images) use Cp = 4 instead, four taps per 16-byte run.
//
// A block computes BM pixels x BN channels with 8 warps of 64 x 32, three cp.async stages of 64
// reduction bytes, XOR-swizzled shared memory for conflict-free ldmatrix. The epilogue evaluates the SDP
// chain on the int32 accumulators (exact: the same integer steps as the CPU backend), stages the int8
// results in shared memory and writes whole 16-byte runs (NHWC, where a fused residual add is applied
// to each run) or channel planes (NCHW).

#include "channels_last.h"
#include "conv_igemm.h"

namespace softdla::gpu {

struct IgemmConv::Geometry {
  uint32_t N, H, W, Cp;  // input, channels-last, channels padded to Cp
  uint32_t K, OH, OW;    // output
  uint32_t R, S, sh, sw, dh, dw, pt, pl;
  uint32_t M;            // N * OH * OW
  uint32_t kpad;         // weight row length: R * S * Cp rounded up to 64
};

namespace {

using Geo = IgemmConv::Geometry;
constexpr int kStages = 3;
constexpr int kBlockThreads = 256;

struct FastChain {
  const int32_t* bias;   // per output channel (zeros without a bias step)
  const int32_t* mult;   // requantization, per output channel
  const uint8_t* shift;
  int32_t lo, hi;        // the clamp of ReLU/Clip (INT32_MIN/MAX without)
};

template <int BM, int BN>
struct TileShape {
  static constexpr int kWarpsN = BN / 32;
  static_assert((BM / 64) * kWarpsN == 8, "8 warps of 64 x 32");
  static constexpr int kStageBytes = (BM + BN) * 64;
  static constexpr int kPipelineBytes = kStages * kStageBytes;
  // Parked accumulators: int32, rows padded by 8 words (16-byte aligned, and the
  // 8-byte stores of one warp land in as few wavefronts as their 256 bytes allow).
  static constexpr int kParkStride = BN + 8;
  static constexpr int kParkBytes = BM * kParkStride * 4;
  static constexpr int kSmemBytes = kPipelineBytes > kParkBytes ? kPipelineBytes : kParkBytes;
};

// Byte offset of 16-byte chunk `chunk` (0..3) of row `row` in a tile of 64-byte rows. Rows 2i and 2i+1
// share a 128-byte bank line; XOR-ing the chunk with (row / 2) % 4 spreads an 8-row ldmatrix over all banks.
__device__ __forceinline__ uint32_t swizzle(uint32_t row, uint32_t chunk) {
  return row * 64 + ((chunk ^ ((row >> 1) & 3)) << 4);
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;  // 0: nothing is read, the 16 bytes are zero-filled
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
// Small-channel inputs (C <= 4, e.g. RGB): one tap is 4 bytes.
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void mma_s8(int32_t (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Where one thread's next 16-byte reduction run starts: channel c of tap (r, s). Advanced by whole
// 64-byte stages; r == R means past the reduction (zero fill).
struct TapCursor {
  uint32_t c, r, s;
  __device__ void advance(uint32_t bytes, const Geo& g) {
    c += bytes;
    while (c >= g.Cp && r < g.R) {
      c -= g.Cp;
      if (++s == g.S) s = 0, ++r;
    }
  }
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

// kTap: bytes of one tap's channels when below 16 (Cp == 4: each 16-byte run spans 4 taps), else 16.
template <int BM, int BN, int kTap>
__global__ void __launch_bounds__(kBlockThreads)
igemm_kernel(const int8_t* __restrict x, const int8_t* __restrict w, int8_t* __restrict y, Geo g, int output_nhwc,
             int fast_form, FastChain fast, const __grid_constant__ DevChain chain, const __grid_constant__ Operands ops,
             int fused, const __grid_constant__ DevChain next, const __grid_constant__ Operands next_ops) {
  using Tile = TileShape<BM, BN>;
  extern __shared__ __align__(128) uint8_t smem[];
  const uint32_t smem_base = uint32_t(__cvta_generic_to_shared(smem));
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp / Tile::kWarpsN, warp_n = warp % Tile::kWarpsN;
  const uint32_t m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  const uint32_t ohw = g.OH * g.OW;

  // ---- loaders: thread owns 16-byte chunk (tid % 4) of rows tid / 4 + 64 i ----
  constexpr int kARows = BM / 64, kBRows = BN / 64;
  const uint32_t chunk = tid & 3, row0 = tid >> 2;
  const int8_t* a_image[kARows];
  int32_t a_ih0[kARows], a_iw0[kARows];
  bool a_ok[kARows];
#pragma unroll
  for (int i = 0; i < kARows; ++i) {
    const uint32_t m = m0 + row0 + 64 * i;
    a_ok[i] = m < g.M;
    const uint32_t mm = a_ok[i] ? m : 0, n = mm / ohw, p = mm % ohw;
    a_image[i] = x + uint64_t(n) * g.H * g.W * g.Cp;
    a_ih0[i] = int32_t(p / g.OW) * int32_t(g.sh) - int32_t(g.pt);
    a_iw0[i] = int32_t(p % g.OW) * int32_t(g.sw) - int32_t(g.pl);
  }
  TapCursor cur{0, 0, 0};
  cur.advance(chunk * 16, g);
  const int ktiles = int(g.kpad / 64);

  auto load_stage = [&](int slot, int kt) {
    const uint32_t a_smem = smem_base + slot * Tile::kStageBytes, b_smem = a_smem + BM * 64;
    if constexpr (kTap == 16) {
      const bool in_k = cur.r < g.R;
      const int32_t dy = int32_t(cur.r * g.dh), dx = int32_t(cur.s * g.dw);
#pragma unroll
      for (int i = 0; i < kARows; ++i) {
        const int32_t ih = a_ih0[i] + dy, iw = a_iw0[i] + dx;
        const bool ok = a_ok[i] && in_k && ih >= 0 && ih < int32_t(g.H) && iw >= 0 && iw < int32_t(g.W);
        const int8_t* src = ok ? a_image[i] + (uint32_t(ih) * g.W + uint32_t(iw)) * g.Cp + cur.c : x;
        cp_async16(a_smem + swizzle(row0 + 64 * i, chunk), src, ok);
      }
    } else {
#pragma unroll
      for (int j = 0; j < 16 / kTap; ++j) {
        const uint32_t tap = (uint32_t(kt) * 64 + chunk * 16 + j * kTap) / kTap, r = tap / g.S, s = tap % g.S;
        const int32_t dy = int32_t(r * g.dh), dx = int32_t(s * g.dw);
#pragma unroll
        for (int i = 0; i < kARows; ++i) {
          const int32_t ih = a_ih0[i] + dy, iw = a_iw0[i] + dx;
          const bool ok = a_ok[i] && r < g.R && ih >= 0 && ih < int32_t(g.H) && iw >= 0 && iw < int32_t(g.W);
          const int8_t* src = ok ? a_image[i] + (uint32_t(ih) * g.W + uint32_t(iw)) * kTap : x;
          cp_async4(a_smem + swizzle(row0 + 64 * i, chunk) + j * kTap, src, ok);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kBRows; ++i) {
      const uint32_t n = n0 + row0 + 64 * i;
      const bool ok = n < g.K;
      const int8_t* src = ok ? w + uint64_t(n) * g.kpad + uint32_t(kt) * 64 + chunk * 16 : w;
      cp_async16(b_smem + swizzle(row0 + 64 * i, chunk), src, ok);
    }
    cur.advance(64, g);
  };

  int32_t acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int v = 0; v < 4; ++v) acc[i][j][v] = 0;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ktiles) load_stage(s, s);
    cp_async_commit();
  }

  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage kt visible to all; stage kt-1 fully consumed
    const int next_kt = kt + kStages - 1;
    if (next_kt < ktiles) load_stage(next_kt % kStages, next_kt);
    cp_async_commit();

    const uint32_t a_smem = smem_base + (kt % kStages) * Tile::kStageBytes, b_smem = a_smem + BM * 64;
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {
      uint32_t a[4][4], b[4][2];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        ldmatrix_x4(a_smem + swizzle(warp_m * 64 + i * 16 + (lane & 15), 2 * ks + (lane >> 4)), a[i]);
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) {
        uint32_t r[4];
        ldmatrix_x4(b_smem + swizzle(warp_n * 32 + jj * 16 + (lane & 7) + ((lane >> 4) << 3), 2 * ks + ((lane >> 3) & 1)), r);
        b[2 * jj][0] = r[0], b[2 * jj][1] = r[1], b[2 * jj + 1][0] = r[2], b[2 * jj + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma_s8(acc[i][j], a[i], b[j][0], b[j][1]);
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the pipeline's memory becomes the epilogue's parking space

  // ---- epilogue: the accumulators are parked in shared memory (the pipeline's, now free), then every
  // thread takes 16-channel runs of a row, so the SDP chain runs on contiguous channels and each store
  // is 16 bytes. No accumulator is live past the parking, so the chain code can be a real call. ----
  int32_t* parked = reinterpret_cast<int32_t*>(smem);
  constexpr int kRuns = BN / 16, kRowsPerSweep = kBlockThreads / kRuns;
  static_assert(BM % kRowsPerSweep == 0, "whole sweeps");
  const int grp = lane >> 2, quad = lane & 3;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = warp_m * 64 + i * 16 + grp + 8 * half;
#pragma unroll
      for (int j = 0; j < 4; ++j)
        *reinterpret_cast<int2*>(parked + row * Tile::kParkStride + warp_n * 32 + j * 8 + 2 * quad) =
            make_int2(acc[i][j][2 * half], acc[i][j][2 * half + 1]);
    }
  __syncthreads();
  const uint32_t run = tid % kRuns, ch0 = n0 + run * 16;  // this thread's channels, the same in every row
  if (ch0 >= g.K) return;
  for (int r = tid / kRuns; r < BM; r += kRowsPerSweep) {
    const uint32_t m = m0 + r;
    if (m >= g.M) break;
    store_run(parked + r * Tile::kParkStride + run * 16, m, ch0, g, output_nhwc, fast_form, fast, chain, ops, fused,
              next, next_ops, y);
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

template <int BM, int BN, int kTap>
void launch(const int8_t* x, const int8_t* w, int8_t* y, const Geo& g, bool output_nhwc, bool fast_form,
            const FastChain& fast, const DevChain& chain, const Operands& ops, bool fused, const DevChain& next,
            const Operands& next_ops, cudaStream_t stream) {
  using Tile = TileShape<BM, BN>;
  const dim3 grid((g.M + BM - 1) / BM, (g.K + BN - 1) / BN);
  igemm_kernel<BM, BN, kTap><<<grid, kBlockThreads, Tile::kSmemBytes, stream>>>(
      x, w, y, g, output_nhwc, fast_form, fast, chain, ops, fused, next, next_ops);
  check_launch("igemm_kernel");
}

// Dynamic shared memory above 48 KB needs an opt-in per kernel (set at load time, never while a stream
// is being captured).
void allow_shared_memory() {
  auto allow = [](auto* kernel, int bytes) {
    SOFTDLA_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  };
  allow(igemm_kernel<128, 128, 16>, TileShape<128, 128>::kSmemBytes);
  allow(igemm_kernel<256, 64, 16>, TileShape<256, 64>::kSmemBytes);
  allow(igemm_kernel<128, 128, 4>, TileShape<128, 128>::kSmemBytes);
  allow(igemm_kernel<256, 64, 4>, TileShape<256, 64>::kSmemBytes);
}

// The chain as (bias?, clamp?, requant) when it has that form, which covers convolution + BatchNorm +
// ReLU/ReLU6/Clip; every other chain takes the general per-element path.
bool fast_form(const SdpParams& p, int32_t& lo, int32_t& hi, const SdpStep*& bias) {
  if (p.lut != ActivationLut::kNone) return false;
  size_t i = 0;
  bias = nullptr;
  if (i < p.steps.size() && p.steps[i].kind == SdpKind::kBias) bias = &p.steps[i++];
  lo = INT32_MIN, hi = INT32_MAX;
  if (i < p.steps.size() && p.steps[i].kind == SdpKind::kRelu) lo = 0, ++i;
  else if (i < p.steps.size() && p.steps[i].kind == SdpKind::kClip) lo = p.steps[i].lo_i, hi = p.steps[i].hi_i, ++i;
  return i == p.steps.size() && lo <= hi;
}

// One value per output channel, padded with zeros to whole 16-channel runs (the epilogue's vector loads).
template <class T>
std::vector<T> per_channel(const std::vector<T>& v, uint32_t K, T absent) {
  std::vector<T> out((K + 15) / 16 * 16, T(0));
  for (uint32_t k = 0; k < K; ++k) out[k] = v.empty() ? absent : v[v.size() == 1 ? 0 : k];
  return out;
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
    : g_(std::make_unique<Geometry>()), chain_(m, op, p.post, &ctx.channels_last) {
  const Shape& x = m.tensors[op.inputs[0]].shape;
  const Shape& yv = m.tensors[op.outputs[0]].shape;
  const Constant& w = m.constants[p.weights];
  const uint32_t C = x[1], R = w.dims[2], S = w.dims[3];
  const SdpStep* bias = nullptr;
  fast_ = fast_form(p.post, lo_, hi_, bias);
  // Up to 4 channels (RGB images) take 4 bytes per tap instead of 16: a quarter of the reduction.
  // The input is then never channels-last already (C % 16 != 0) and is converted at each run.
  const uint32_t Cp = C <= 4 && fast_ ? 4 : (C + 15) / 16 * 16;
  channels_ = C;
  *g_ = {x[0], x[2], x[3], Cp, yv[1], yv[2], yv[3], R, S, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w,
         p.pad_top, p.pad_left, x[0] * yv[2] * yv[3], (R * S * Cp + 63) / 64 * 64};
  input_nhwc_ = ctx.channels_last[op.inputs[0]] != 0;
  output_nhwc_ = ctx.channels_last[op.outputs[0]] != 0;
  if (!input_nhwc_) convert_bytes_ = (uint64_t(g_->N) * g_->H * g_->W * Cp + 255) / 256 * 256;
  // Weights [K][C][R][S] -> [K][(r, s, c) with c padded to Cp][.. kpad], zeros in the padding.
  const uint32_t K = g_->K;
  std::vector<int8_t> packed(size_t(K) * g_->kpad, 0);
  const int8_t* src = reinterpret_cast<const int8_t*>(w.data.data());
  for (uint32_t k = 0; k < K; ++k)
    for (uint32_t c = 0; c < C; ++c)
      for (uint32_t r = 0; r < R; ++r)
        for (uint32_t s = 0; s < S; ++s)
          packed[size_t(k) * g_->kpad + (r * S + s) * Cp + c] = src[((size_t(k) * C + c) * R + r) * S + s];
  weights_ = upload(packed);
  if (fast_) {
    bias_ = upload(per_channel<int32_t>(bias ? bias->ivalues : std::vector<int32_t>{}, K, 0));
    mult_ = upload(per_channel<int32_t>(p.post.requant.multiplier, K, 1));
    shift_ = upload(per_channel<uint8_t>(p.post.requant.shift, K, 0));
  }
  // Narrow layers waste half of a 128-channel tile: take 256 pixels x 64 channels instead.
  tile_ = K <= 64 ? 1 : 0;
  allow_shared_memory();
}

IgemmConv::~IgemmConv() = default;

bool IgemmConv::fuse_next(const Model& m, const Op& next, const OpContext& ctx) {
  const auto* p = std::get_if<SdpParams>(&next.params);
  if (!p || p->steps.size() > size_t(kMaxSdpSteps) || m.tensors[next.outputs[0]].dtype != DataType::kInt8 ||
      m.tensors[next.inputs[0]].shape != m.tensors[next.outputs[0]].shape)
    return false;
  fused_.emplace(m, next, *p, &ctx.channels_last);
  output_nhwc_ = ctx.channels_last[next.outputs[0]] != 0;
  return true;
}

void IgemmConv::enqueue(const GpuOpIo& io, const OpContext&, cudaStream_t stream) const {
  const int8_t* x = static_cast<const int8_t*>(io.inputs[0]);
  if (!input_nhwc_) {
    int8_t* converted = static_cast<int8_t*>(io.scratch);
    enqueue_to_channels_last(x, converted, g_->N, channels_, g_->H * g_->W, g_->Cp, stream);
    x = converted;
  }
  GpuOpIo next_io;
  next_io.inputs = io.fused_inputs;
  const Operands ops = operands_of(io), next_ops = operands_of(next_io);
  const FastChain fast{bias_.as<int32_t>(), mult_.as<int32_t>(), shift_.as<uint8_t>(), lo_, hi_};
  const DevChain& next = fused_ ? fused_->chain() : chain_.chain();
  int8_t* y = static_cast<int8_t*>(io.output);
  const bool fused = fused_.has_value();
  auto go = [&](auto tile_tag, auto tap_tag) {
    constexpr int BM = decltype(tile_tag)::value ? 256 : 128, BN = decltype(tile_tag)::value ? 64 : 128;
    launch<BM, BN, decltype(tap_tag)::value>(x, weights_.as<int8_t>(), y, *g_, output_nhwc_, fast_, fast,
                                             chain_.chain(), ops, fused, next, next_ops, stream);
  };
  using Tap4 = std::integral_constant<int, 4>;  // only chosen with the fast chain
  using Tap16 = std::integral_constant<int, 16>;
  if (g_->Cp == 4) tile_ ? go(std::true_type{}, Tap4{}) : go(std::false_type{}, Tap4{});
  else tile_ ? go(std::true_type{}, Tap16{}) : go(std::false_type{}, Tap16{});
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
