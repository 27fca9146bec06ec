// The non-convolution ops on the GPU, one thread per output element (or per softmax row). Each mirrors
// its CPU kernel in src/engine/cpu/ operation for operation, so INT8 results are byte-identical and
// float results differ only by the order of float sums and the device's exp/pow/tanh.
#include <cuda_fp16.h>

#include <cfloat>
#include <cmath>

#include "resize_rules.h"
#include "sdp_device.cuh"

namespace softdla::gpu {
namespace {

#define SOFTDLA_GRID_STRIDE(i, total) \
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < (total); i += uint64_t(gridDim.x) * blockDim.x)

// ---- standalone SDP ----
// blockIdx.x is the (image, channel) plane: no per-element 64-bit division, uniform channel parameters.
template <class T>
__global__ void sdp_kernel(const T* __restrict x, T* __restrict y, Shape s, const __grid_constant__ DevChain chain,
                           const __grid_constant__ Operands ops) {
  const uint32_t hw = s[2] * s[3], nc = blockIdx.x, c = nc % s[1], n = nc / s[1];
  const uint64_t base = uint64_t(nc) * hw;
  for (uint32_t p = blockIdx.y * blockDim.x + threadIdx.x; p < hw; p += gridDim.y * blockDim.x) {
    if constexpr (std::is_same_v<T, int8_t>) y[base + p] = chain_int8(chain, x[base + p], n, c, p, ops);
    else store_f(y, base + p, chain_float(chain, load_f(x, base + p), n, c, p, ops));
  }
}

// INT8 channels-last (C % 16 == 0): one thread per 16 channels of one pixel, 16-byte loads and stores.
__global__ void sdp_nhwc_kernel(const int8_t* __restrict x, int8_t* __restrict y, Shape s,
                                const __grid_constant__ DevChain chain, const __grid_constant__ Operands ops) {
  // An intermediate (the arena is below 4 GiB): 32-bit indices.
  const uint32_t hw_count = s[2] * s[3], runs_per_pixel = s[1] / 16, runs = uint32_t(element_count(s) / 16);
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < runs; i += gridDim.x * blockDim.x) {
    const uint32_t pixel = i / runs_per_pixel;
    const uint32_t c0 = i % runs_per_pixel * 16, n = pixel / hw_count, hw = pixel % hw_count;
    reinterpret_cast<uint4*>(y)[i] = chain_int8_run16(chain, reinterpret_cast<const uint4*>(x)[i], n, c0, hw,
                                                      uint64_t(i) * 16, ops);
  }
}

// FP16 channels-last (C % 8 == 0): one thread per 8 channels of one pixel, 16-byte loads and stores,
// each element through the same conversions and chain as sdp_kernel.
__global__ void sdp_nhwc_f16_kernel(const uint4* __restrict x, uint4* __restrict y, Shape s,
                                    const __grid_constant__ DevChain chain, const __grid_constant__ Operands ops) {
  // An intermediate (the arena is below 4 GiB): 32-bit indices.
  const uint32_t hw_count = s[2] * s[3], runs_per_pixel = s[1] / 8, runs = uint32_t(element_count(s) / 8);
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < runs; i += gridDim.x * blockDim.x) {
    const uint32_t pixel = i / runs_per_pixel;
    const uint32_t c0 = i % runs_per_pixel * 8, n = pixel / hw_count, hw = pixel % hw_count;
    union { uint4 q; uint16_t h[8]; } v;
    v.q = x[i];
#pragma unroll
    for (int k = 0; k < 8; ++k)
      v.h[k] = num::float_to_half(chain_float(chain, num::half_to_float(v.h[k]), n, c0 + k, hw, ops));
    y[i] = v.q;
  }
}

class SdpOp final : public GpuOp {
 public:
  SdpOp(const Model& m, const Op& op, const SdpParams& p, const OpContext& ctx)
      : chain_(m, op, p, &ctx.channels_last), dtype_(m.tensors[op.outputs[0]].dtype),
        shape_(m.tensors[op.outputs[0]].shape),
        nhwc_((dtype_ == DataType::kInt8 || dtype_ == m.tensors[op.inputs[0]].dtype) &&
              m.tensors[op.inputs[0]].shape == shape_ && ctx.channels_last[op.inputs[0]] &&
              ctx.channels_last[op.outputs[0]]) {}
  void enqueue(const GpuOpIo& io, const OpContext&, cudaStream_t stream) const override {
    const Operands ops = operands_of(io);
    if (nhwc_ && dtype_ == DataType::kFloat16) {
      sdp_nhwc_f16_kernel<<<blocks_for(element_count(shape_) / 8), kThreads, 0, stream>>>(
          static_cast<const uint4*>(io.inputs[0]), static_cast<uint4*>(io.output), shape_, chain_.chain(), ops);
      return check_launch("sdp_nhwc_f16_kernel");
    }
    if (nhwc_) {
      sdp_nhwc_kernel<<<blocks_for(element_count(shape_) / 16), kThreads, 0, stream>>>(
          static_cast<const int8_t*>(io.inputs[0]), static_cast<int8_t*>(io.output), shape_, chain_.chain(), ops);
      return check_launch("sdp_nhwc_kernel");
    }
    with_storage(dtype_, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      const dim3 grid(shape_[0] * shape_[1], std::min(blocks_for(uint64_t(shape_[2]) * shape_[3]), 65535u));
      sdp_kernel<T><<<grid, kThreads, 0, stream>>>(
          static_cast<const T*>(io.inputs[0]), static_cast<T*>(io.output), shape_, chain_.chain(), ops);
    });
    check_launch("sdp_kernel");
  }

 private:
  ChainHolder chain_;
  DataType dtype_;
  Shape shape_;
  bool nhwc_;  // channels-last INT8 or FP16 input and output
};

// ---- pooling ----
// The clipped window of output pixel (oh, ow) and the divisor extents of an average.
struct PoolWindow {
  int32_t hb, he, wb, we;
  unsigned kh, kw;
  __device__ PoolWindow(uint32_t oh, uint32_t ow, int32_t H, int32_t W, const PoolParams& p) {
    const int32_t h0 = int32_t(oh) * int32_t(p.stride_h) - int32_t(p.pad_top);
    const int32_t w0 = int32_t(ow) * int32_t(p.stride_w) - int32_t(p.pad_left);
    hb = h0 > 0 ? h0 : 0, he = h0 + int32_t(p.kernel_h) < H ? h0 + int32_t(p.kernel_h) : H;
    wb = w0 > 0 ? w0 : 0, we = w0 + int32_t(p.kernel_w) < W ? w0 + int32_t(p.kernel_w) : W;
    kh = p.exclude_padding ? unsigned(he - hb) : p.kernel_h;
    kw = p.exclude_padding ? unsigned(we - wb) : p.kernel_w;
  }
  // INT8 result of a max (acc) or of a sum (Q16 reciprocals, width first, each step rounded).
  __device__ int8_t int8_result(int64_t acc, bool is_max) const {
    if (!is_max) {
      acc = num::rshift_rhaz(acc * num::q16_reciprocal(kw), 16);
      acc = num::rshift_rhaz(acc * num::q16_reciprocal(kh), 16);
    }
    return num::sat8(acc);
  }
};

// NCHW, one thread per output element. Index: uint32_t when both tensors have fewer than 2^32
// elements (cheap division), else uint64_t.
template <class T, class Index>
__global__ void pool_kernel(const T* __restrict x, T* __restrict y, Shape in, Shape out, PoolParams p) {
  const Index total = Index(element_count(out)), OH = out[2], OW = out[3];
  for (Index i = blockIdx.x * Index(blockDim.x) + threadIdx.x; i < total; i += Index(gridDim.x) * blockDim.x) {
    const Index ow = i % OW, oh = i / OW % OH, nc = i / (OW * OH);
    const int32_t H = int32_t(in[2]), W = int32_t(in[3]);
    const T* plane = x + nc * Index(H) * Index(W);
    const PoolWindow win(uint32_t(oh), uint32_t(ow), H, W, p);
    const bool is_max = p.kind == PoolKind::kMax;
    if constexpr (std::is_same_v<T, int8_t>) {
      int64_t acc = is_max ? -128 : 0;
      for (int32_t h = win.hb; h < win.he; ++h)
        for (int32_t w = win.wb; w < win.we; ++w) {
          const int64_t v = plane[Index(h * W + w)];
          acc = is_max ? (acc > v ? acc : v) : acc + v;
        }
      y[i] = win.int8_result(acc, is_max);
    } else {
      float acc = is_max ? -INFINITY : 0.f;
      bool nan = false;
      for (int32_t h = win.hb; h < win.he; ++h)
        for (int32_t w = win.wb; w < win.we; ++w) {
          const float v = load_f(plane, Index(h * W + w));
          nan |= isnan(v);
          acc = is_max ? (acc < v ? v : acc) : acc + v;
        }
      if (!is_max) acc /= float(win.kh * win.kw);
      store_f(y, i, nan ? NAN : acc);
    }
  }
}

// INT8 channels-last pooling (C % 16 == 0), one thread per 16 channels of one output pixel: the same
// arithmetic as pool_kernel with 16-byte loads and stores. An intermediate: 32-bit indices.
__global__ void pool_nhwc16_kernel(const int8_t* __restrict x, int8_t* __restrict y, Shape in, Shape out, PoolParams p) {
  const uint32_t runs_per_pixel = out[1] / 16, OH = out[2], OW = out[3], total = uint32_t(element_count(out) / 16);
  const int32_t H = int32_t(in[2]), W = int32_t(in[3]);
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const uint32_t run = i % runs_per_pixel, pixel = i / runs_per_pixel;
    const PoolWindow win(pixel / OW % OH, pixel % OW, H, W, p);
    const uint32_t n = pixel / (OW * OH);
    const bool is_max = p.kind == PoolKind::kMax;
    int32_t acc[16];
#pragma unroll
    for (int e = 0; e < 16; ++e) acc[e] = is_max ? -128 : 0;
    const int8_t* image = x + uint32_t(n) * uint32_t(H * W) * in[1] + run * 16;
    for (int32_t h = win.hb; h < win.he; ++h)
      for (int32_t w = win.wb; w < win.we; ++w) {
        union { uint4 q; int8_t b[16]; } v;
        v.q = *reinterpret_cast<const uint4*>(image + uint32_t(h * W + w) * in[1]);
#pragma unroll
        for (int e = 0; e < 16; ++e) acc[e] = is_max ? (acc[e] > v.b[e] ? acc[e] : v.b[e]) : acc[e] + v.b[e];
      }
    union { uint4 q; int8_t b[16]; } o;
#pragma unroll
    for (int e = 0; e < 16; ++e) o.b[e] = win.int8_result(acc[e], is_max);
    reinterpret_cast<uint4*>(y)[i] = o.q;
  }
}

// FP16 channels-last pooling (C % 8 == 0), one thread per 8 channels of one output pixel: the same
// float arithmetic as pool_kernel (window order, NaN rule, divisor) with 16-byte loads and stores.
// A maximum is one of its inputs, so it is taken on fp16 pairs (__hmax2_nan) and only the store's rules
// applied after: NaN as the CPU's quiet NaN, infinity saturated (only +-0 may pick the other sign).
__device__ __forceinline__ uint16_t stored_max(uint16_t h) {
  if ((h & 0x7fffu) > 0x7c00u) return 0x7e00u;  // NaN
  if ((h & 0x7fffu) == 0x7c00u) return uint16_t(h - 1u);  // +-inf (0x7c00 / 0xfc00) -> +-65504 (0x7bff / 0xfbff)
  return h;
}

__global__ void pool_nhwc_f16_kernel(const uint16_t* __restrict x, uint16_t* __restrict y, Shape in, Shape out,
                                     PoolParams p) {
  const uint32_t runs_per_pixel = out[1] / 8, OH = out[2], OW = out[3], total = uint32_t(element_count(out) / 8);
  const int32_t H = int32_t(in[2]), W = int32_t(in[3]);
  const bool is_max = p.kind == PoolKind::kMax;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const uint32_t run = i % runs_per_pixel, pixel = i / runs_per_pixel;
    const PoolWindow win(pixel / OW % OH, pixel % OW, H, W, p);
    const uint32_t n = pixel / (OW * OH);
    const uint16_t* image = x + uint32_t(n) * uint32_t(H * W) * in[1] + run * 8;
    union { uint4 q; uint16_t h[8]; __half2 h2[4]; } o;
    if (is_max) {
#pragma unroll
      for (int k = 0; k < 4; ++k) o.h2[k] = __half2half2(__ushort_as_half(0xfc00u));  // -inf
      for (int32_t h = win.hb; h < win.he; ++h)
        for (int32_t w = win.wb; w < win.we; ++w) {
          union { uint4 q; __half2 h2[4]; } v;
          v.q = *reinterpret_cast<const uint4*>(image + uint32_t(h * W + w) * in[1]);
#pragma unroll
          for (int k = 0; k < 4; ++k) o.h2[k] = __hmax2_nan(o.h2[k], v.h2[k]);
        }
#pragma unroll
      for (int k = 0; k < 8; ++k) o.h[k] = stored_max(o.h[k]);
    } else {
      float acc[8] = {};
      bool nan[8] = {};
      for (int32_t h = win.hb; h < win.he; ++h)
        for (int32_t w = win.wb; w < win.we; ++w) {
          union { uint4 q; uint16_t h[8]; } v;
          v.q = *reinterpret_cast<const uint4*>(image + uint32_t(h * W + w) * in[1]);
#pragma unroll
          for (int k = 0; k < 8; ++k) {
            const float f = num::half_to_float(v.h[k]);
            nan[k] |= isnan(f);
            acc[k] += f;
          }
        }
#pragma unroll
      for (int k = 0; k < 8; ++k) o.h[k] = num::float_to_half(nan[k] ? NAN : acc[k] / float(win.kh * win.kw));
    }
    reinterpret_cast<uint4*>(y)[i] = o.q;
  }
}

// ---- LRN (float) ----
template <class T>
__global__ void lrn_kernel(const T* __restrict x, T* __restrict y, Shape s, LrnParams p) {
  const uint64_t hw = uint64_t(s[2]) * s[3];
  const int64_t before = (int64_t(p.size) - 1) / 2, after = int64_t(p.size) - 1 - before;
  SOFTDLA_GRID_STRIDE(i, element_count(s)) {
    const uint64_t q = i % hw, nc = i / hw;
    const int64_t c = int64_t(nc % s[1]), n = int64_t(nc / s[1]), C = s[1];
    float sq = 0.f;
    const int64_t lo = c - before > 0 ? c - before : 0, hi = c + after < C - 1 ? c + after : C - 1;
    for (int64_t j = lo; j <= hi; ++j) {
      const float v = load_f(x, (uint64_t(n) * C + uint64_t(j)) * hw + q);
      sq += v * v;
    }
    store_f(y, i, load_f(x, i) / powf(p.bias + p.alpha / float(p.size) * sq, p.beta));
  }
}

// ---- resize (coordinate rules: resize_rules.h) ----
template <class T>
__global__ void resize_kernel(const T* __restrict x, T* __restrict y, Shape in, Shape out, ResizeParams p) {
  SOFTDLA_GRID_STRIDE(i, element_count(out)) {
    const Nchw o = unflatten(i, out);
    const int64_t H = in[2], W = in[3], sh = p.scale_h, sw = p.scale_w;
    const T* plane = x + (uint64_t(o.n) * in[1] + o.c) * uint64_t(H * W);
    if (p.mode == ResizeMode::kNearest) {
      y[i] = plane[nearest_source(o.h, sh, H, p.nearest) * W + nearest_source(o.w, sw, W, p.nearest)];
      continue;
    }
    const Taps th = bilinear_taps(o.h, sh, H), tw = bilinear_taps(o.w, sw, W);
    const int64_t ys[2] = {th.x0, th.x1}, xs[2] = {tw.x0, tw.x1};
    const int64_t wy[2] = {2 * sh - th.frac, th.frac}, wx[2] = {2 * sw - tw.frac, tw.frac};
    const int64_t dh = 2 * sh, dw = 2 * sw;
    if constexpr (std::is_same_v<T, int8_t>) {
      int64_t acc = 0;
      for (int a = 0; a < 2; ++a)
        for (int c = 0; c < 2; ++c) acc += wy[a] * wx[c] * plane[ys[a] * W + xs[c]];
      y[i] = num::sat8(num::div_rhaz(acc, dh * dw));
    } else {
      float acc = 0.f;
      for (int a = 0; a < 2; ++a)
        for (int c = 0; c < 2; ++c)
          acc += float(wy[a] * wx[c]) / float(dh * dw) * load_f(plane, uint64_t(ys[a] * W + xs[c]));
      store_f(y, i, acc);
    }
  }
}

// ---- softmax (float), one thread per row ----
template <class T>
__global__ void softmax_kernel(const T* __restrict x, T* __restrict y, uint64_t rows, uint64_t len, uint64_t inner) {
  SOFTDLA_GRID_STRIDE(r, rows) {
    const uint64_t base = (r / inner) * len * inner + r % inner;
    float mx = -INFINITY;
    for (uint64_t i = 0; i < len; ++i) {
      const float v = load_f(x, base + i * inner);
      mx = mx < v ? v : mx;  // std::max
    }
    float sum = 0.f;
    for (uint64_t i = 0; i < len; ++i) sum += expf(load_f(x, base + i * inner) - mx);
    for (uint64_t i = 0; i < len; ++i) store_f(y, base + i * inner, expf(load_f(x, base + i * inner) - mx) / sum);
  }
}

// Ops whose kernel takes (input, output, shapes, params) and runs one thread per output element.
template <class Params, int Kind>
class ElementOp final : public GpuOp {
 public:
  ElementOp(const Model& m, const Op& op, const Params& p, const OpContext& ctx)
      : p_(p), dtype_(m.tensors[op.outputs[0]].dtype), in_(m.tensors[op.inputs[0]].shape),
        out_(m.tensors[op.outputs[0]].shape), nhwc_(ctx.channels_last[op.inputs[0]] != 0) {}
  void enqueue(const GpuOpIo& io, const OpContext&, cudaStream_t stream) const override {
    with_storage(dtype_, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      const T* x = static_cast<const T*>(io.inputs[0]);
      T* y = static_cast<T*>(io.output);
      const unsigned blocks = blocks_for(element_count(out_));
      if constexpr (Kind == 0) {
        if (nhwc_ && std::is_same_v<T, int8_t>)
          pool_nhwc16_kernel<<<blocks_for(element_count(out_) / 16), kThreads, 0, stream>>>(
              reinterpret_cast<const int8_t*>(x), reinterpret_cast<int8_t*>(y), in_, out_, p_);
        else if (nhwc_ && std::is_same_v<T, uint16_t>)
          pool_nhwc_f16_kernel<<<blocks_for(element_count(out_) / 8), kThreads, 0, stream>>>(
              reinterpret_cast<const uint16_t*>(x), reinterpret_cast<uint16_t*>(y), in_, out_, p_);
        else if (element_count(in_) < (uint64_t(1) << 32) && element_count(out_) < (uint64_t(1) << 32))
          pool_kernel<T, uint32_t><<<blocks, kThreads, 0, stream>>>(x, y, in_, out_, p_);
        else
          pool_kernel<T, uint64_t><<<blocks, kThreads, 0, stream>>>(x, y, in_, out_, p_);
      } else if constexpr (Kind == 1) {
        resize_kernel<T><<<blocks, kThreads, 0, stream>>>(x, y, in_, out_, p_);
      } else if constexpr (Kind == 2) {
        if constexpr (!std::is_same_v<T, int8_t>) lrn_kernel<T><<<blocks, kThreads, 0, stream>>>(x, y, out_, p_);
      } else {
        if constexpr (!std::is_same_v<T, int8_t>) {
          uint64_t outer = 1, inner = 1;
          for (uint32_t a = 0; a < p_.axis; ++a) outer *= out_[a];
          for (uint32_t a = p_.axis + 1; a < 4; ++a) inner *= out_[a];
          softmax_kernel<T><<<blocks_for(outer * inner), kThreads, 0, stream>>>(x, y, outer * inner, out_[p_.axis], inner);
        }
      }
    });
    check_launch("element op kernel");
  }

 private:
  Params p_;
  DataType dtype_;
  Shape in_, out_;
  bool nhwc_;  // pooling: channels-last input and output (channels_last.h), INT8 or FP16
};

// ---- data movement: every output element copies one input element ----
struct CopyMap {
  // Output element i (as NCHW of `out`) reads input element sum(index[a] * stride[a]) with
  // index = (perm-ordered) coordinates plus start offsets.
  Shape out{};
  uint64_t stride[4] = {};
  uint64_t base = 0;
};

template <class E>
__global__ void copy_kernel(const E* __restrict x, E* __restrict y, CopyMap map) {
  SOFTDLA_GRID_STRIDE(i, element_count(map.out)) {
    const Nchw o = unflatten(i, map.out);
    y[i] = x[map.base + o.n * map.stride[0] + o.c * map.stride[1] + o.h * map.stride[2] + o.w * map.stride[3]];
  }
}

class DataMovementOp final : public GpuOp {
 public:
  DataMovementOp(const Model& m, const Op& op) : elem_(element_size(m.tensors[op.outputs[0]].dtype)) {
    const Shape out = m.tensors[op.outputs[0]].shape;
    auto dense_strides = [](const Shape& s, uint64_t st[4]) {
      st[3] = 1;
      for (int a = 2; a >= 0; --a) st[a] = st[a + 1] * s[a + 1];
    };
    if (std::holds_alternative<ConcatParams>(op.params)) {
      // Each input is a block of rows (one per image) landing at its channel offset in the output.
      const uint64_t plane = uint64_t(out[2]) * out[3];
      out_image_bytes_ = out[1] * plane * elem_;
      uint64_t c0 = 0;
      for (uint32_t t : op.inputs) {
        const Shape& s = m.tensors[t].shape;
        concat_.push_back({c0 * plane * elem_, s[1] * plane * elem_});
        c0 += s[1];
      }
      images_ = out[0];
      return;
    }
    const Shape in = m.tensors[op.inputs[0]].shape;
    uint64_t ist[4];
    dense_strides(in, ist);
    CopyMap map;
    if (const auto* slice = std::get_if<SliceParams>(&op.params)) {
      map.out = out;
      for (int a = 0; a < 4; ++a) map.stride[a] = ist[a], map.base += slice->start[a] * ist[a];
    } else {
      // Shuffle: the transposed tensor (dims in[perm[a]]) read in order is the reshaped output.
      const auto& perm = std::get<ShuffleParams>(op.params).perm;
      for (int a = 0; a < 4; ++a) map.out[a] = in[perm[a]], map.stride[a] = ist[perm[a]];
    }
    map_ = map;
  }
  void enqueue(const GpuOpIo& io, const OpContext&, cudaStream_t stream) const override {
    if (concat_.empty()) return copy(io.inputs[0], io.output, map_, stream);
    for (size_t k = 0; k < concat_.size(); ++k)
      SOFTDLA_CUDA(cudaMemcpy2DAsync(static_cast<uint8_t*>(io.output) + concat_[k].offset, out_image_bytes_,
                                     io.inputs[k], concat_[k].bytes, concat_[k].bytes, images_,
                                     cudaMemcpyDeviceToDevice, stream));
  }

 private:
  void copy(const void* x, void* y, const CopyMap& map, cudaStream_t stream) const {
    by_element_size(elem_, [&](auto* tag) {
      using E = std::remove_pointer_t<decltype(tag)>;
      copy_kernel<E><<<blocks_for(element_count(map.out)), kThreads, 0, stream>>>(static_cast<const E*>(x),
                                                                                   static_cast<E*>(y), map);
    });
    check_launch("copy_kernel");
  }
  struct ConcatPart {
    uint64_t offset, bytes;  // in one output image
  };
  size_t elem_;
  CopyMap map_;                    // slice, shuffle
  std::vector<ConcatPart> concat_;  // concat, one per input
  uint64_t out_image_bytes_ = 0;
  uint32_t images_ = 0;
};

// ---- abs, reduce max, convert ----
template <class T>
__global__ void abs_kernel(const T* __restrict x, T* __restrict y, uint64_t count) {
  SOFTDLA_GRID_STRIDE(i, count) {
    if constexpr (std::is_same_v<T, int8_t>) y[i] = num::sat8(x[i] < 0 ? -int64_t(x[i]) : int64_t(x[i]));
    else store_f(y, i, fabsf(load_f(x, i)));
  }
}

template <class T>
__global__ void reduce_max_kernel(const T* __restrict x, T* __restrict y, Shape in, Shape out) {
  SOFTDLA_GRID_STRIDE(i, element_count(out)) {
    const Nchw o = unflatten(i, out);
    // Reduced axes have extent 1 in `out`: iterate them over the input's extent.
    const uint32_t n1 = out[0] == in[0] ? 1 : in[0], c1 = out[1] == in[1] ? 1 : in[1];
    const uint32_t h1 = out[2] == in[2] ? 1 : in[2], w1 = out[3] == in[3] ? 1 : in[3];
    int best8 = -128;
    float best = -INFINITY;
    bool nan = false;
    for (uint32_t a = 0; a < n1; ++a)
      for (uint32_t b = 0; b < c1; ++b)
        for (uint32_t c = 0; c < h1; ++c)
          for (uint32_t d = 0; d < w1; ++d) {
            const uint64_t n = n1 == 1 ? o.n : a, ch = c1 == 1 ? o.c : b, h = h1 == 1 ? o.h : c, w = w1 == 1 ? o.w : d;
            const uint64_t j = ((n * in[1] + ch) * in[2] + h) * in[3] + w;
            if constexpr (std::is_same_v<T, int8_t>) {
              best8 = best8 > x[j] ? best8 : x[j];
            } else {
              const float v = load_f(x, j);
              if (isnan(v)) nan = true;
              else best = best < v ? v : best;
            }
          }
    if constexpr (std::is_same_v<T, int8_t>) y[i] = int8_t(best8);
    else store_f(y, i, nan ? NAN : best);
  }
}

struct TypeScale {
  DataType type;
  float scale;
};

__global__ void convert_kernel(const void* __restrict x, void* __restrict y, uint64_t count, TypeScale from, TypeScale to) {
  SOFTDLA_GRID_STRIDE(i, count) {
    float v;
    if (from.type == DataType::kInt8) v = float(static_cast<const int8_t*>(x)[i]) * from.scale;
    else if (from.type == DataType::kFloat16) v = load_f(static_cast<const uint16_t*>(x), i);
    else v = static_cast<const float*>(x)[i];
    if (to.type == DataType::kInt8) static_cast<int8_t*>(y)[i] = num::quantize(v / to.scale);
    else if (to.type == DataType::kFloat16) store_f(static_cast<uint16_t*>(y), i, v);
    else static_cast<float*>(y)[i] = v;
  }
}

class PointwiseOp final : public GpuOp {
 public:
  PointwiseOp(const Model& m, const Op& op)
      : params_(op.params), from_(m.tensors[op.inputs[0]]), to_(m.tensors[op.outputs[0]]) {}
  void enqueue(const GpuOpIo& io, const OpContext&, cudaStream_t stream) const override {
    const uint64_t count = element_count(to_.shape);
    if (std::holds_alternative<ConvertParams>(params_)) {
      convert_kernel<<<blocks_for(count), kThreads, 0, stream>>>(io.inputs[0], io.output, count,
                                                                 {from_.dtype, from_.scale}, {to_.dtype, to_.scale});
      return check_launch("convert_kernel");
    }
    with_storage(to_.dtype, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      const T* x = static_cast<const T*>(io.inputs[0]);
      T* y = static_cast<T*>(io.output);
      if (std::holds_alternative<UnaryParams>(params_))
        abs_kernel<T><<<blocks_for(count), kThreads, 0, stream>>>(x, y, count);
      else
        reduce_max_kernel<T><<<blocks_for(count), kThreads, 0, stream>>>(x, y, from_.shape, to_.shape);
    });
    check_launch("pointwise kernel");
  }

 private:
  OpParams params_;
  Tensor from_, to_;
};

}  // namespace

std::unique_ptr<GpuOp> make_gpu_sdp(const Model& m, const Op& op, const SdpParams& p, const OpContext& ctx) {
  return std::make_unique<SdpOp>(m, op, p, ctx);
}
std::unique_ptr<GpuOp> make_gpu_pool(const Model& m, const Op& op, const PoolParams& p, const OpContext& ctx) {
  return std::make_unique<ElementOp<PoolParams, 0>>(m, op, p, ctx);
}
std::unique_ptr<GpuOp> make_gpu_resize(const Model& m, const Op& op, const ResizeParams& p, const OpContext& ctx) {
  return std::make_unique<ElementOp<ResizeParams, 1>>(m, op, p, ctx);
}
std::unique_ptr<GpuOp> make_gpu_lrn(const Model& m, const Op& op, const LrnParams& p, const OpContext& ctx) {
  return std::make_unique<ElementOp<LrnParams, 2>>(m, op, p, ctx);
}
std::unique_ptr<GpuOp> make_gpu_softmax(const Model& m, const Op& op, const SoftmaxParams& p, const OpContext& ctx) {
  return std::make_unique<ElementOp<SoftmaxParams, 3>>(m, op, p, ctx);
}
std::unique_ptr<GpuOp> make_gpu_data_movement(const Model& m, const Op& op) {
  return std::make_unique<DataMovementOp>(m, op);
}
std::unique_ptr<GpuOp> make_gpu_pointwise(const Model& m, const Op& op) {
  return std::make_unique<PointwiseOp>(m, op);
}

}  // namespace softdla::gpu
