// Direct convolution (groups, dilation, padding, stride) as im2col + GEMM, with the SDP stage fused
// on each output row. INT8 accumulates exactly and saturates to int32 (docs/NUMERICS.md §Convolution).
#include <algorithm>
#include <cstring>
#include <vector>

#include "element.h"
#include "gemm.h"
#include "kernels.h"
#include "numerics.h"
#include "sdp_chain.h"
#include "thread_pool.h"

namespace softdla::cpu {
namespace {

constexpr size_t kIm2colBudget = size_t(1) << 23;  // elements of im2col scratch per tile

struct ConvGeometry {
  uint32_t C, H, W, K, R, S, OH, OW, groups, Cg, Kg;
  uint32_t sh, sw, dh, dw, pt, pl;
  size_t kdim() const { return size_t(Cg) * R * S; }
};

// Fills b[kdim x cols] with the receptive fields of output pixels [col0, col0 + cols).
template <class In, class Out>
void im2col(const In* x, const ConvGeometry& g, uint32_t c0, size_t col0, size_t cols, Out* b,
            Out (*convert)(In)) {
  for (uint32_t c = 0; c < g.Cg; ++c)
    for (uint32_t r = 0; r < g.R; ++r)
      for (uint32_t s = 0; s < g.S; ++s) {
        Out* row = b + ((size_t(c) * g.R + r) * g.S + s) * cols;
        const In* plane = x + size_t(c0 + c) * g.H * g.W;
        for (size_t j = 0; j < cols; ++j) {
          const size_t o = col0 + j;
          const int64_t ih = int64_t(o / g.OW) * g.sh - g.pt + int64_t(r) * g.dh;
          const int64_t iw = int64_t(o % g.OW) * g.sw - g.pl + int64_t(s) * g.dw;
          row[j] = (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W) ? convert(plane[ih * g.W + iw]) : Out(0);
        }
      }
}

inline float f32_of(float v) { return v; }
inline float f32_of_half(uint16_t v) { return num::half_to_float(v); }
inline int8_t s8_of(int8_t v) { return v; }

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
    if (dtype_ == DataType::kInt8) {
      w8_.assign(reinterpret_cast<const int8_t*>(w.data.data()),
                 reinterpret_cast<const int8_t*>(w.data.data()) + count);
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
    const size_t tile = std::clamp<size_t>(kIm2colBudget / kdim, 1, ohw);
    const size_t tiles = (ohw + tile - 1) / tile;
    const size_t units = size_t(batch_) * g_.groups * tiles;
    // Many independent (image, group, tile) units: one per thread. Few: split each unit's rows.
    if (units >= 2 * size_t(pool.size()) || g_.Kg < 8) {
      pool.parallel_for(units, [&](size_t b, size_t e) {
        for (size_t u = b; u < e; ++u) run_unit(io, u, tile, tiles, 0, g_.Kg, nullptr);
      });
    } else {
      for (size_t u = 0; u < units; ++u) run_unit(io, u, tile, tiles, 0, g_.Kg, &pool);
    }
  }

 private:
  // One (image, group, column tile): im2col, GEMM over output channels [k0, k1) of the group, SDP.
  void run_unit(const OpIo& io, size_t unit, size_t tile, size_t tiles, uint32_t k0, uint32_t k1,
                ThreadPool* split) const {
    const size_t t = unit % tiles, ng = unit / tiles;
    const uint32_t grp = uint32_t(ng % g_.groups), n = uint32_t(ng / g_.groups);
    const size_t ohw = size_t(g_.OH) * g_.OW, col0 = t * tile, cols = std::min(tile, ohw - col0);
    const size_t kdim = g_.kdim(), in_plane = size_t(g_.H) * g_.W;
    const size_t in_offset = (size_t(n) * g_.C) * in_plane;
    const size_t out_base = size_t(n) * g_.K;
    if (dtype_ == DataType::kInt8) {
      thread_local std::vector<int8_t> b;
      b.resize(kdim * cols);
      im2col(static_cast<const int8_t*>(io.inputs[0]) + in_offset, g_, grp * g_.Cg, col0, cols,
             b.data(), s8_of);
      // A thread_local named inside the lambda would be the worker's own copy: pass the pointer.
      const int8_t* cols_data = b.data();
      auto rows = [&](size_t r0, size_t r1) {
        thread_local std::vector<int64_t> acc;
        acc.resize((r1 - r0) * cols);
        const size_t kg0 = size_t(grp) * g_.Kg + k0 + r0;
        gemm_s8(w8_.data() + kg0 * kdim, cols_data, acc.data(), r1 - r0, cols, kdim);
        for (size_t r = r0; r < r1; ++r) {
          int64_t* v = acc.data() + (r - r0) * cols;
          for (size_t j = 0; j < cols; ++j) v[j] = num::sat32(v[j]);
          const uint32_t k = uint32_t(grp * g_.Kg + k0 + r);
          int8_t* out = static_cast<int8_t*>(io.output) + (out_base + k) * ohw + col0;
          chain_.run_int8(v, cols, n, k, col0, io.inputs.data(), out);
        }
      };
      split_rows(rows, k1 - k0, split);
    } else {
      thread_local std::vector<float> b;
      b.resize(kdim * cols);
      if (dtype_ == DataType::kFloat16)
        im2col(static_cast<const uint16_t*>(io.inputs[0]) + in_offset, g_, grp * g_.Cg, col0, cols,
               b.data(), f32_of_half);
      else
        im2col(static_cast<const float*>(io.inputs[0]) + in_offset, g_, grp * g_.Cg, col0, cols,
               b.data(), f32_of);
      const float* cols_data = b.data();
      auto rows = [&](size_t r0, size_t r1) {
        thread_local std::vector<float> acc;
        acc.resize((r1 - r0) * cols);
        const size_t kg0 = size_t(grp) * g_.Kg + k0 + r0;
        gemm_f32(wf_.data() + kg0 * kdim, cols_data, acc.data(), r1 - r0, cols, kdim);
        for (size_t r = r0; r < r1; ++r) {
          float* v = acc.data() + (r - r0) * cols;
          const uint32_t k = uint32_t(grp * g_.Kg + k0 + r);
          chain_.run_float(v, cols, n, k, col0, io.inputs.data());
          const size_t o = (out_base + k) * ohw + col0;
          if (dtype_ == DataType::kFloat16)
            for (size_t j = 0; j < cols; ++j) store(static_cast<uint16_t*>(io.output), o + j, v[j]);
          else
            std::memcpy(static_cast<float*>(io.output) + o, v, cols * sizeof(float));
        }
      };
      split_rows(rows, k1 - k0, split);
    }
  }

  template <class Fn>
  static void split_rows(const Fn& fn, size_t rows, ThreadPool* pool) {
    if (!pool) return fn(0, rows);
    // Chunks of 4 rows keep the GEMM's 4-row register block whole.
    const size_t blocks = (rows + 3) / 4;
    pool->parallel_for(blocks, [&](size_t b, size_t e) { fn(b * 4, std::min(rows, e * 4)); });
  }

  SdpChain chain_;
  DataType dtype_;
  ConvGeometry g_{};
  uint32_t batch_ = 1;
  std::vector<int8_t> w8_;
  std::vector<float> wf_;
};

}  // namespace

std::unique_ptr<OpKernel> make_conv(const Model& m, const Op& op, const ConvParams& p) {
  return std::make_unique<ConvKernel>(m, op, p);
}

}  // namespace softdla::cpu
