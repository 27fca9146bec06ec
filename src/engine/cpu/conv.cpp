// Direct convolution (groups, dilation, padding, stride) as im2col + GEMM, with the SDP stage fused
// on each output row. INT8 accumulates exactly and saturates to int32 (docs/NUMERICS.md §Convolution).
#include <algorithm>
#include <cstring>
#include <vector>

#include "element.h"
#include "gemm.h"
#include "half_convert.h"
#include "multiversion.h"
#include "kernels.h"
#include "numerics.h"
#include "sdp_chain.h"
#include "thread_pool.h"

namespace softdla::cpu {
namespace {

constexpr size_t kIm2colBudget = size_t(1) << 22;  // elements of packed im2col scratch per unit
constexpr double kSerialMacs = 1 << 18;             // below this a convolution is not worth splitting

struct ConvGeometry {
  uint32_t C, H, W, K, R, S, OH, OW, groups, Cg, Kg;
  uint32_t sh, sw, dh, dw, pt, pl;
  size_t kdim() const { return size_t(Cg) * R * S; }
};

// Where element (k, j) of a packed right-hand side lives: k_offset(k) + panel * panel_stride +
// lane * lane_stride, with j = panel * kPanel + lane (see gemm.h).
struct PackedLayout {
  size_t panel_stride, lane_stride;
  bool pairs;  // int8 layout: k packed in int16 pairs
  size_t k_offset(size_t k) const { return pairs ? (k / 2) * kPanel * 2 + k % 2 : k * kPanel; }
};

// Writes the receptive fields of output pixels [col0, col0 + cols) into the packed layout. `x` holds
// channel planes of `rows` input rows starting at input row `row0` (rows outside read 0, as do columns
// outside the input). Work goes by output-row segments: for each tap the in-bounds columns of a
// segment are a strided run of one input row, so the inner loop has no division and no bounds test.
template <class T>
void im2col_packed(const T* x, size_t row0, size_t rows, const ConvGeometry& g, size_t col0, size_t cols,
                   T* b, const PackedLayout& lay) {
  for (uint32_t c = 0; c < g.Cg; ++c)
    for (uint32_t r = 0; r < g.R; ++r)
      for (uint32_t s = 0; s < g.S; ++s) {
        const size_t k = (size_t(c) * g.R + r) * g.S + s;
        const T* plane = x + size_t(c) * rows * g.W;
        // Output columns whose input column is inside [0, W): ow in [ow_lo, ow_hi).
        const int64_t shift = int64_t(s) * g.dw - g.pl;  // iw = ow * sw + shift
        const int64_t ow_lo = shift >= 0 ? 0 : (-shift + g.sw - 1) / g.sw;
        const int64_t last = int64_t(g.W) - 1 - shift;  // needs floor division: may be negative
        const int64_t ow_hi = last < 0 ? 0 : std::min<int64_t>(last / g.sw + 1, g.OW);
        T* dst = b + lay.k_offset(k);
        size_t lane = 0;
        auto put = [&](T v) {
          dst[lane * lay.lane_stride] = v;
          if (++lane == kPanel) lane = 0, dst += lay.panel_stride;
        };
        size_t j = 0, oh = col0 / g.OW, ow = col0 % g.OW;
        while (j < cols) {
          const size_t len = std::min<size_t>(cols - j, g.OW - ow);
          const int64_t ih = int64_t(oh) * g.sh - g.pt + int64_t(r) * g.dh;
          if (ih < int64_t(row0) || ih >= int64_t(row0 + rows)) {
            for (size_t i = 0; i < len; ++i) put(T(0));
          } else {
            const T* src = plane + size_t(ih - int64_t(row0)) * g.W;
            const int64_t a = std::clamp<int64_t>(ow_lo, int64_t(ow), int64_t(ow + len));
            const int64_t e = std::clamp<int64_t>(ow_hi, a, int64_t(ow + len));
            for (int64_t o = int64_t(ow); o < a; ++o) put(T(0));
            const T* p = src + (a * g.sw + shift);
            for (int64_t o = a; o < e; ++o, p += g.sw) put(*p);
            for (int64_t o = e; o < int64_t(ow + len); ++o) put(T(0));
          }
          j += len, ow = 0, ++oh;
        }
      }
}

// One input channel per group (depthwise, or a channel multiplier): a direct sliding window over one
// plane. INT8 sums are exact in int32 (at most 32 x 32 x 2^14 per output).
template <class Acc, class In>
__attribute__((always_inline)) inline void depthwise_accumulate(const ConvGeometry& g, const In* x, const Acc* w,
                                                                Acc* acc) {
  std::fill(acc, acc + size_t(g.OH) * g.OW, Acc(0));
  for (uint32_t r = 0; r < g.R; ++r)
    for (uint32_t s = 0; s < g.S; ++s) {
      const Acc wv = w[r * g.S + s];
      const int64_t shift = int64_t(s) * g.dw - g.pl;  // iw = ow * sw + shift
      const int64_t ow_lo = shift >= 0 ? 0 : (-shift + g.sw - 1) / g.sw;
      const int64_t last = int64_t(g.W) - 1 - shift;
      const int64_t ow_hi = last < 0 ? 0 : std::min<int64_t>(last / g.sw + 1, g.OW);
      for (uint32_t oh = 0; oh < g.OH; ++oh) {
        const int64_t ih = int64_t(oh) * g.sh - g.pt + int64_t(r) * g.dh;
        if (ih < 0 || ih >= g.H) continue;
        const In* __restrict row = x + size_t(ih) * g.W + shift;
        Acc* __restrict out = acc + size_t(oh) * g.OW;
        if (g.sw == 1)
          for (int64_t ow = ow_lo; ow < ow_hi; ++ow) out[ow] += wv * Acc(row[ow]);
        else
          for (int64_t ow = ow_lo; ow < ow_hi; ++ow) out[ow] += wv * Acc(row[ow * g.sw]);
      }
    }
}

SOFTDLA_MULTIVERSION
void depthwise_s8(const ConvGeometry& g, const int8_t* x, const int32_t* w, int32_t* acc) {
  depthwise_accumulate(g, x, w, acc);
}
SOFTDLA_MULTIVERSION
void depthwise_f32(const ConvGeometry& g, const float* x, const float* w, float* acc) {
  depthwise_accumulate(g, x, w, acc);
}

class ConvKernel final : public OpKernel {
 public:
  ConvKernel(const Model& m, const Op& op, const ConvParams& p)
      : chain_(m, op, p.post), dtype_(m.tensors[op.outputs[0]].dtype) {
    const Shape& x = m.tensors[op.inputs[0]].shape;
    const Shape& y = m.tensors[op.outputs[0]].shape;
    const Constant& w = m.constants[p.weights];
    g_ = {x[1], x[2], x[3], y[1], w.dims[2], w.dims[3], y[2], y[3], p.groups, x[1] / p.groups,
          y[1] / p.groups, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w, p.pad_top, p.pad_left};
    batch_ = x[0];
    const size_t count = w.data.size() / element_size(w.dtype);
    depthwise_ = g_.Cg == 1;
    if (dtype_ == DataType::kInt8) {
      const auto* raw = reinterpret_cast<const int8_t*>(w.data.data());
      if (depthwise_) w8_raw_.assign(raw, raw + count);
      else w8_ = pack_a_s8(raw, g_.K, g_.kdim());
    } else {
      wf_.resize(count);
      for (size_t i = 0; i < count; ++i) {
        if (dtype_ == DataType::kFloat16) {
          uint16_t h;
          std::memcpy(&h, w.data.data() + 2 * i, 2);
          wf_[i] = num::half_to_float(h);
        } else {
          std::memcpy(&wf_[i], w.data.data() + 4 * i, 4);
        }
      }
    }
  }

  void run(const OpIo& io, ThreadPool& pool) const override {
    const size_t kdim = g_.kdim(), ohw = size_t(g_.OH) * g_.OW;
    if (depthwise_) {
      const size_t planes = size_t(batch_) * g_.K;
      pool.parallel_for(planes, [&](size_t b, size_t e) {
        for (size_t p = b; p < e; ++p) run_depthwise_plane(io, p);
      }, ThreadPool::min_items(ohw * kdim));
      return;
    }
    // Column tiles: whole panels, small enough for the scratch budget, and enough of them to keep
    // every core busy.
    const size_t per_image = size_t(batch_) * g_.groups;
    const size_t want_tiles = std::max<size_t>(1, (2 * pool.size() + per_image - 1) / per_image);
    size_t tile = std::max<size_t>(kPanel, kIm2colBudget / std::max<size_t>(kdim, 1) / kPanel * kPanel);
    tile = std::min(tile, std::max<size_t>(kPanel, (ohw / want_tiles + kPanel - 1) / kPanel * kPanel));
    const size_t tiles = (ohw + tile - 1) / tile;
    const size_t units = per_image * tiles;
    // Waking the workers costs tens of microseconds: tiny convolutions run on the calling thread.
    const double macs = double(batch_) * double(g_.K) * double(ohw) * double(kdim);
    if (macs < kSerialMacs) {
      for (size_t u = 0; u < units; ++u) run_unit(io, u, tile, tiles, nullptr);
      return;
    }
    if (units >= pool.size() || g_.Kg < 8) {
      pool.parallel_for(units, [&](size_t b, size_t e) {
        for (size_t u = b; u < e; ++u) run_unit(io, u, tile, tiles, nullptr);
      });
    } else {
      for (size_t u = 0; u < units; ++u) run_unit(io, u, tile, tiles, &pool);
    }
  }

 private:
  // One (image, group, column tile): packed im2col, GEMM over the group's output channels, SDP.
  // With `split`, the output channels are shared out over the pool.
  void run_unit(const OpIo& io, size_t unit, size_t tile, size_t tiles, ThreadPool* split) const {
    const size_t t = unit % tiles, ng = unit / tiles;
    const uint32_t grp = uint32_t(ng % g_.groups), n = uint32_t(ng / g_.groups);
    const size_t ohw = size_t(g_.OH) * g_.OW, col0 = t * tile, cols = std::min(tile, ohw - col0);
    const size_t kdim = g_.kdim(), in_plane = size_t(g_.H) * g_.W;
    const size_t in_offset = size_t(n) * g_.C * in_plane;
    const size_t out_base = size_t(n) * g_.K;
    const size_t k_first = size_t(grp) * g_.Kg;
    const size_t chan0 = in_offset + size_t(grp) * g_.Cg * in_plane;
    // Input rows this tile reads: converted once into scratch (int8 -> int16, fp16 -> fp32) instead of
    // once per kernel tap.
    const size_t oh0 = col0 / g_.OW, oh1 = (col0 + cols - 1) / g_.OW;
    const int64_t lo = std::max<int64_t>(0, int64_t(oh0) * g_.sh - g_.pt);
    const int64_t hi = std::min<int64_t>(g_.H, int64_t(oh1) * g_.sh - g_.pt + int64_t(g_.R - 1) * g_.dh + 1);
    const size_t row0 = size_t(lo), rows = hi > lo ? size_t(hi - lo) : 0;
    if (dtype_ == DataType::kInt8) {
      thread_local std::vector<int16_t> src, b;
      src.resize(size_t(g_.Cg) * rows * g_.W);
      const int8_t* x = static_cast<const int8_t*>(io.inputs[0]) + chan0;
      for (uint32_t c = 0; c < g_.Cg; ++c)
        std::copy_n(x + c * in_plane + row0 * g_.W, rows * g_.W, src.data() + size_t(c) * rows * g_.W);
      b.assign(packed_s8_size(kdim, cols), 0);
      im2col_packed<int16_t>(src.data(), row0, rows, g_, col0, cols, b.data(), {k_pairs(kdim) * kPanel * 2, 2, true});
      // A thread_local named inside the lambda would be the worker's own copy: pass the pointer.
      const int16_t* packed = b.data();
      auto rows = [&](size_t r0, size_t r1) {
        thread_local std::vector<int64_t> acc;
        acc.resize((r1 - r0) * cols);
        const size_t kp = k_pairs(kdim);
        gemm_s8(w8_.data() + (k_first + r0) * kp, packed, acc.data(), r1 - r0, cols, kdim, cols);
        for (size_t r = r0; r < r1; ++r) {
          int64_t* v = acc.data() + (r - r0) * cols;
          for (size_t j = 0; j < cols; ++j) v[j] = num::sat32(v[j]);
          const uint32_t k = uint32_t(k_first + r);
          int8_t* out = static_cast<int8_t*>(io.output) + (out_base + k) * ohw + col0;
          chain_.run_int8(v, cols, n, k, col0, io.inputs.data(), out);
        }
      };
      split_rows(rows, g_.Kg, split);
    } else {
      thread_local std::vector<float> src, b;
      b.assign(packed_f32_size(kdim, cols), 0.f);
      const PackedLayout lay{kdim * kPanel, 1, false};
      if (dtype_ == DataType::kFloat16) {
        src.resize(size_t(g_.Cg) * rows * g_.W);
        const uint16_t* x = static_cast<const uint16_t*>(io.inputs[0]) + chan0;
        for (uint32_t c = 0; c < g_.Cg; ++c)
          halves_to_floats(x + c * in_plane + row0 * g_.W, src.data() + size_t(c) * rows * g_.W, rows * g_.W);
        im2col_packed<float>(src.data(), row0, rows, g_, col0, cols, b.data(), lay);
      } else {
        im2col_packed<float>(static_cast<const float*>(io.inputs[0]) + chan0, 0, g_.H, g_, col0, cols, b.data(), lay);
      }
      const float* packed = b.data();
      auto rows = [&](size_t r0, size_t r1) {
        thread_local std::vector<float> acc;
        acc.resize((r1 - r0) * cols);
        gemm_f32(wf_.data() + (k_first + r0) * kdim, packed, acc.data(), r1 - r0, cols, kdim, cols);
        for (size_t r = r0; r < r1; ++r) {
          float* v = acc.data() + (r - r0) * cols;
          const uint32_t k = uint32_t(k_first + r);
          chain_.run_float(v, cols, n, k, col0, io.inputs.data());
          const size_t o = (out_base + k) * ohw + col0;
          if (dtype_ == DataType::kFloat16)
            floats_to_halves(v, static_cast<uint16_t*>(io.output) + o, cols);
          else
            std::memcpy(static_cast<float*>(io.output) + o, v, cols * sizeof(float));
        }
      };
      split_rows(rows, g_.Kg, split);
    }
  }

  void run_depthwise_plane(const OpIo& io, size_t plane) const {
    const uint32_t n = uint32_t(plane / g_.K), k = uint32_t(plane % g_.K);
    const uint32_t c = k / g_.Kg;  // the group's single input channel
    const size_t in_plane = size_t(g_.H) * g_.W, ohw = size_t(g_.OH) * g_.OW, taps = size_t(g_.R) * g_.S;
    const size_t x_off = (size_t(n) * g_.C + c) * in_plane, y_off = (size_t(n) * g_.K + k) * ohw;
    if (dtype_ == DataType::kInt8) {
      thread_local std::vector<int32_t> acc, w;
      thread_local std::vector<int64_t> wide;
      acc.resize(ohw), wide.resize(ohw);
      w.assign(w8_raw_.begin() + long(k * taps), w8_raw_.begin() + long((k + 1) * taps));
      depthwise_s8(g_, static_cast<const int8_t*>(io.inputs[0]) + x_off, w.data(), acc.data());
      std::copy(acc.begin(), acc.end(), wide.begin());
      chain_.run_int8(wide.data(), ohw, n, k, 0, io.inputs.data(), static_cast<int8_t*>(io.output) + y_off);
      return;
    }
    thread_local std::vector<float> acc, xf;
    acc.resize(ohw);
    const float* x;
    if (dtype_ == DataType::kFloat16) {
      xf.resize(in_plane);
      halves_to_floats(static_cast<const uint16_t*>(io.inputs[0]) + x_off, xf.data(), in_plane);
      x = xf.data();
    } else {
      x = static_cast<const float*>(io.inputs[0]) + x_off;
    }
    depthwise_f32(g_, x, wf_.data() + k * taps, acc.data());
    chain_.run_float(acc.data(), ohw, n, k, 0, io.inputs.data());
    if (dtype_ == DataType::kFloat16)
      floats_to_halves(acc.data(), static_cast<uint16_t*>(io.output) + y_off, ohw);
    else
      std::memcpy(static_cast<float*>(io.output) + y_off, acc.data(), ohw * sizeof(float));
  }

  template <class Fn>
  static void split_rows(const Fn& fn, size_t rows, ThreadPool* pool) {
    if (!pool) return fn(0, rows);
    // Chunks of 12 rows keep the micro-kernels' 4- and 6-row blocks whole.
    const size_t blocks = (rows + 11) / 12;
    pool->parallel_for(blocks, [&](size_t b, size_t e) { fn(b * 12, std::min(rows, e * 12)); });
  }

  SdpChain chain_;
  DataType dtype_;
  ConvGeometry g_{};
  uint32_t batch_ = 1;
  bool depthwise_ = false;
  std::vector<int32_t> w8_;  // int16 pairs (pack_a_s8)
  std::vector<int8_t> w8_raw_;  // depthwise: [K][R][S] as stored
  std::vector<float> wf_;
};

}  // namespace

std::unique_ptr<OpKernel> make_conv(const Model& m, const Op& op, const ConvParams& p) {
  return std::make_unique<ConvKernel>(m, op, p);
}

}  // namespace softdla::cpu
