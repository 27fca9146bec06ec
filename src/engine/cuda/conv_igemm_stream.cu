// The streaming INT8 1 x 1 convolution (see conv_igemm_stream.h). A block owns 128 output channels for
// the whole launch (the grid is a multiple of the channel tiles, tiles are numbered channel tile
// fastest), so their weights (one k-tile) and requantization windows are fetched once. It then walks
// its 128-pixel tiles: wait for the tile's pixels and residual operand, one product of KT bytes on the
// tensor cores (mma m16n8k32 s8, the core's 8 warps of 64 x 32 and swizzle), start the next tile's
// fetches, then the windowed epilogue of igemm_s8_epilogue.cuh in two halves of 64 rows (a parking
// space of half the tile keeps two blocks an SM with the operand double-buffered). The bytes are those
// of the implicit-GEMM kernel's windowed epilogue: the same accumulators through the same steps.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "conv_igemm_stream.h"
#include "igemm_core.cuh"
#include "igemm_s8_epilogue.cuh"

namespace softdla::gpu {

namespace {

using namespace igemm_s8;
using igemm::cp_async16;
using igemm::cp_async_commit;
using igemm::swizzle;

constexpr int kBM = 128, kBN = 128, kStreamThreads = igemm::kBlockThreads;
constexpr int kParkRows = kBM / 2;      // half the tile's rows parked at a time
constexpr int kParkStride = kBN + 8;    // int32 words, as the core's parking (few store wavefronts)

// Shared memory of one block, in bytes; every region starts on 128 bytes.
template <int KT>
struct StreamSmem {
  static constexpr int kWeights = 0;                                  // kBN rows of KT bytes, swizzled
  static constexpr int kPixels = kWeights + kBN * KT;                 // kBM rows of KT bytes, swizzled
  static constexpr int kWindows = kPixels + kBM * KT;                 // kBN windows
  static constexpr int kPark = kWindows + kBN * int(sizeof(num::RequantWindow));
  static constexpr int kOperand = kPark + kParkRows * kParkStride * 4;  // two tiles of kBM x kBN bytes
  static constexpr int kBytes = kOperand + 2 * kBM * kBN;
  static_assert(kBytes + 1024 <= 228 * 1024 / 2, "two blocks an SM");
};

// kUnroll: rows of the epilogue's loop unrolled (more loads and stores in flight, more registers).
template <int KT, int kUnroll>
__global__ void __launch_bounds__(kStreamThreads, 2)  // two blocks an SM: at most 128 registers
stream_kernel(const int8_t* __restrict x, const int8_t* __restrict w, int8_t* __restrict y, IgemmGeometry g,
              const num::RequantWindow* __restrict windows, int flags, num::ResidualWindow residual, SharedAdd shared,
              const int8_t* __restrict operand, int fused) {
  using L = StreamSmem<KT>;
  extern __shared__ __align__(128) uint8_t smem[];
  const uint32_t base = uint32_t(__cvta_generic_to_shared(smem));
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp / 4, warp_n = warp % 4;
  const uint32_t ntn = (g.K + kBN - 1) / kBN, tiles = (g.M + kBM - 1) / kBM * ntn;
  const uint32_t n0 = blockIdx.x % ntn * kBN;  // gridDim.x is a multiple of ntn: the same for every tile

  // Loaders: thread owns 16-byte chunk tid % kChunks of rows tid / kChunks + kRowStep * i.
  constexpr int kChunks = KT / 16, kRowStep = kStreamThreads / kChunks;
  const uint32_t chunk = uint32_t(tid) % kChunks, row0 = uint32_t(tid) / kChunks;
  // This op's constants first, before waiting for the previous kernel: the weights' tile (rows of kpad
  // == KT bytes, zeros past K) and the channels' windows (padded to whole 128-channel tiles).
#pragma unroll
  for (int i = 0; i < kBN / kRowStep; ++i) {
    const uint32_t r = row0 + kRowStep * i, n = n0 + r;
    const bool ok = n < g.K;
    cp_async16(base + L::kWeights + swizzle<KT>(r, chunk), ok ? w + uint64_t(n) * KT + chunk * 16 : w, ok);
  }
  for (int i = tid; i < kBN * int(sizeof(num::RequantWindow)) / 16; i += kStreamThreads)
    cp_async16(base + L::kWindows + i * 16, reinterpret_cast<const uint8_t*>(windows + n0) + i * 16, true);
  // Everything below may read what earlier kernels wrote (a programmatic dependent launch).
  asm volatile("griddepcontrol.wait;\n" ::: "memory");

  // Tile t's pixels (channels past Cp zero-filled) and, fused, its residual operand into buffer `buf`.
  auto load_tile = [&](uint32_t t, int buf) {
    const uint32_t m0 = t / ntn * kBM, c = chunk * 16;
#pragma unroll
    for (int i = 0; i < kBM / kRowStep; ++i) {
      const uint32_t r = row0 + kRowStep * i, m = m0 + r;
      const bool ok = m < g.M && c < g.Cp;
      cp_async16(base + L::kPixels + swizzle<KT>(r, chunk), ok ? x + uint64_t(m) * g.Cp + c : x, ok);
    }
    if (fused) {
      const uint32_t dst = base + L::kOperand + uint32_t(buf) * kBM * kBN;
      constexpr int kRuns = kBN / 16;
#pragma unroll
      for (int k = 0; k < kBM * kRuns / kStreamThreads; ++k) {
        const int i = tid + k * kStreamThreads;
        const uint32_t row = i / kRuns, ch = n0 + (i % kRuns) * 16, m = m0 + row;
        const bool ok = m < g.M && ch < g.K;
        cp_async16(dst + row * kBN + (i % kRuns) * 16, ok ? operand + uint64_t(m) * g.K + ch : operand, ok);
      }
    }
  };

  uint32_t t = blockIdx.x;
  if (t < tiles) load_tile(t, 0);
  cp_async_commit();
  for (int buf = 0; t < tiles; t += gridDim.x, buf ^= 1) {
    igemm::cp_async_wait<0>();
    __syncthreads();  // tile t's pixels and operand (and the first time the constants) visible to all

    int32_t acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int v = 0; v < 4; ++v) acc[i][j][v] = 0;
#pragma unroll
    for (int ks = 0; ks < KT / 32; ++ks) {
      uint32_t a[4][4], b[4][2];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        igemm::ldmatrix_x4(base + L::kPixels + swizzle<KT>(warp_m * 64 + i * 16 + (lane & 15), 2 * ks + (lane >> 4)),
                           a[i]);
#pragma unroll
      for (int jj = 0; jj < 2; ++jj) {
        uint32_t r[4];
        const uint32_t b_row = warp_n * 32 + jj * 16 + (lane & 7) + ((lane >> 4) << 3);
        igemm::ldmatrix_x4(base + L::kWeights + swizzle<KT>(b_row, 2 * ks + ((lane >> 3) & 1)), r);
        b[2 * jj][0] = r[0], b[2 * jj][1] = r[1], b[2 * jj + 1][0] = r[2], b[2 * jj + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) igemm::MmaS8::run(acc[i][j], a[i], b[j][0], b[j][1]);
    }
    __syncthreads();  // every warp is done with the pixels' buffer: the next tile's may come in
    const uint32_t next = t + gridDim.x;
    if (next < tiles) load_tile(next, buf ^ 1);
    else asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");  // the next kernel may be scheduled
    cp_async_commit();

    const uint32_t m0 = t / ntn * kBM;
    int32_t* parked = reinterpret_cast<int32_t*>(smem + L::kPark);
    const uint32_t* other = reinterpret_cast<const uint32_t*>(smem + L::kOperand + buf * kBM * kBN);
    const uint32_t group = uint32_t(tid) % (kBN / 4), ch = n0 + group * 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (h) __syncthreads();  // the first half's epilogue is done reading the parking space
      // Parked row p holds the tile's row p / 32 * 64 + 32 * h + p % 32 (each warp's fragments i = 2h, 2h + 1).
      const int grp = lane >> 2, quad = lane & 3;
#pragma unroll
      for (int ii = 0; ii < 2; ++ii)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int p = warp_m * 32 + ii * 16 + grp + 8 * half;
#pragma unroll
          for (int j = 0; j < 4; ++j)
            *reinterpret_cast<int2*>(parked + p * kParkStride + warp_n * 32 + j * 8 + 2 * quad) =
                int2{acc[2 * h + ii][j][2 * half], acc[2 * h + ii][j][2 * half + 1]};
        }
      __syncthreads();
      if (ch < g.K) {
        // 4-channel groups: a warp covers one row's 128 contiguous output bytes.
        Windows4 q;
        q.load(reinterpret_cast<const num::RequantWindow*>(smem + L::kWindows) + group * 4);
        with_window_forms(flags, [&](auto conv_form, auto add_form) {
          constexpr int kConv = decltype(conv_form)::value, kAdd = decltype(add_form)::value;
#pragma unroll kUnroll
          for (int p = tid / (kBN / 4); p < kParkRows; p += kStreamThreads / (kBN / 4)) {
            const uint32_t r = uint32_t(p / 32 * 64 + 32 * h + p % 32);  // increases with p
            if (m0 + r >= g.M) break;
            const int4 acc4 = *reinterpret_cast<const int4*>(parked + p * kParkStride + group * 4);
            const uint32_t out = window_group<kConv, kAdd>(q, acc4, fused, fused ? other[r * (kBN / 4) + group] : 0u,
                                                           shared, residual);
            *reinterpret_cast<uint32_t*>(y + uint64_t(m0 + r) * g.K + ch) = out;
          }
        });
      }
    }
  }
}

// SOFTDLA_CUDA_STREAM: "off" -1, a positive number n (the kernel wherever supported, at most n blocks),
// otherwise 0 (where it pays); read once.
int stream_setting() {
  static const int setting = [] {
    const char* v = std::getenv("SOFTDLA_CUDA_STREAM");
    if (!v || !*v) return 0;
    if (std::string(v) == "off") return -1;
    const int n = std::atoi(v);
    return n > 0 ? n : 0;
  }();
  return setting;
}

// SOFTDLA_CUDA_STREAM_UNROLL=4 (read once): the epilogue's row loop unrolled 4 times instead of 2 (A/B).
int stream_unroll() {
  static const int n = [] {
    const char* v = std::getenv("SOFTDLA_CUDA_STREAM_UNROLL");
    return v && std::string(v) == "4" ? 4 : 2;
  }();
  return n;
}

}  // namespace

bool stream_supports(const IgemmGeometry& g) {
  return g.pointwise && (g.kpad == 64 || g.kpad == 128) && g.K > 64 && g.K % 16 == 0;
}

int stream_blocks(const IgemmGeometry& g) {
  const int setting = stream_setting();
  if (setting < 0 || !stream_supports(g)) return 0;
  const uint64_t ntn = (g.K + kBN - 1) / kBN, tiles = (uint64_t(g.M) + kBM - 1) / kBM * ntn;
  int device = 0, sms = 0;
  SOFTDLA_CUDA(cudaGetDevice(&device));
  SOFTDLA_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  uint64_t blocks = uint64_t(sms) * 2 / ntn * ntn;  // two blocks an SM, each with one channel tile
  if (setting > 0) blocks = std::max<uint64_t>(ntn, std::min<uint64_t>(blocks, uint64_t(setting) / ntn * ntn));
  else if (blocks == 0 || tiles <= blocks) return 0;  // one tile a block: the implicit-GEMM kernel's case
  return int(std::min(blocks, tiles));  // tiles is a multiple of ntn
}

void enqueue_stream(const int8_t* x, const int8_t* w, int8_t* y, const IgemmGeometry& g, const StreamEpilogue& e,
                    int blocks, cudaStream_t stream) {
  auto go = [&](auto* kernel, int smem_bytes) {
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(unsigned(blocks));
    config.blockDim = dim3(kStreamThreads);
    config.dynamicSmemBytes = size_t(smem_bytes);
    config.stream = stream;
    cudaLaunchAttribute attr{};
    if (igemm::programmatic_launch()) {  // may overlap the previous kernel's tail (griddepcontrol above)
      attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr.val.programmaticStreamSerializationAllowed = 1;
      config.attrs = &attr;
      config.numAttrs = 1;
    }
    SOFTDLA_CUDA(cudaLaunchKernelEx(&config, kernel, x, w, y, g, e.windows, e.flags, e.residual, e.shared,
                                    e.operand, e.fused));
  };
  if (stream_unroll() == 4) {
    if (g.kpad == 64) go(stream_kernel<64, 4>, StreamSmem<64>::kBytes);
    else go(stream_kernel<128, 4>, StreamSmem<128>::kBytes);
    return;
  }
  if (g.kpad == 64) go(stream_kernel<64, 2>, StreamSmem<64>::kBytes);
  else go(stream_kernel<128, 2>, StreamSmem<128>::kBytes);
}

void allow_stream_shared_memory() {
  auto allow = [](auto* kernel, int bytes) {
    SOFTDLA_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  };
  allow(stream_kernel<64, 2>, StreamSmem<64>::kBytes), allow(stream_kernel<128, 2>, StreamSmem<128>::kBytes);
  allow(stream_kernel<64, 4>, StreamSmem<64>::kBytes), allow(stream_kernel<128, 4>, StreamSmem<128>::kBytes);
}

}  // namespace softdla::gpu
