// Deconvolution (ConvTranspose, groups 1, no padding): per output channel, GEMM of the transposed
// weights with the input, then col2im scatter-add; SDP fused as for convolution.
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

class DeconvKernel final : public OpKernel {
 public:
  DeconvKernel(const Model& m, const Op& op, const DeconvParams& p)
      : chain_(m, op, p.post), dtype_(m.tensors[op.outputs[0]].dtype), sh_(p.stride_h), sw_(p.stride_w) {
    in_ = m.tensors[op.inputs[0]].shape;
    out_ = m.tensors[op.outputs[0]].shape;
    const Constant& w = m.constants[p.weights];
    R_ = w.dims[2], S_ = w.dims[3];
    const size_t C = in_[1], K = out_[1], rs = size_t(R_) * S_;
    // Transpose [C][K][R][S] -> [K][R][S][C] so each (k, r, s) is one GEMM row over C.
    const size_t elem = element_size(w.dtype);
    auto src = [&](size_t c, size_t k, size_t q) { return w.data.data() + ((c * K + k) * rs + q) * elem; };
    std::vector<int8_t> w8;
    if (dtype_ == DataType::kInt8) w8.resize(C * K * rs);
    else wf_.resize(C * K * rs);
    for (size_t c = 0; c < C; ++c)
      for (size_t k = 0; k < K; ++k)
        for (size_t q = 0; q < rs; ++q) {
          const size_t dst = (k * rs + q) * C + c;
          if (dtype_ == DataType::kInt8) {
            w8[dst] = int8_t(*src(c, k, q));
          } else if (dtype_ == DataType::kFloat16) {
            uint16_t h;
            std::memcpy(&h, src(c, k, q), 2);
            wf_[dst] = num::half_to_float(h);
          } else {
            std::memcpy(&wf_[dst], src(c, k, q), 4);
          }
        }
    if (dtype_ == DataType::kInt8) w8_ = pack_a_s8(w8.data(), K * rs, C);
  }

  void run(const OpIo& io, ThreadPool& pool) const override {
    const size_t C = in_[1], K = out_[1], hw = size_t(in_[2]) * in_[3], ohw = size_t(out_[2]) * out_[3];
    const size_t rs = size_t(R_) * S_;
    for (uint32_t n = 0; n < in_[0]; ++n) {
      // The input image [C x HW] packed as the GEMM's right-hand side.
      std::vector<float> xf;
      std::vector<int16_t> x8;
      if (dtype_ == DataType::kInt8) {
        x8.assign(packed_s8_size(C, hw), 0);
        pack_b_s8(static_cast<const int8_t*>(io.inputs[0]) + n * C * hw, C, hw, hw, x8.data());
      } else {
        xf.assign(packed_f32_size(C, hw), 0.f);
        with_float_storage(dtype_, [&](auto* tag) {
          using T = std::remove_pointer_t<decltype(tag)>;
          const T* x = static_cast<const T*>(io.inputs[0]) + n * C * hw;
          for (size_t c = 0; c < C; ++c)
            for (size_t i = 0; i < hw; ++i) xf[packed_f32_index(c, i, C)] = load(x, c * hw + i);
        });
      }
      pool.parallel_for(K, [&](size_t k0, size_t k1) {
        std::vector<int64_t> cols8, acc8;
        std::vector<float> colsf, accf;
        for (size_t k = k0; k < k1; ++k) {
          if (dtype_ == DataType::kInt8) {
            cols8.resize(rs * hw);
            acc8.assign(ohw, 0);
            gemm_s8(w8_.data() + k * rs * k_pairs(C), x8.data(), cols8.data(), rs, hw, C, hw);
            scatter(cols8.data(), acc8.data());
            for (int64_t& v : acc8) v = num::sat32(v);
            int8_t* out = static_cast<int8_t*>(io.output) + (n * K + k) * ohw;
            chain_.run_int8(acc8.data(), ohw, n, uint32_t(k), 0, io.inputs.data(), out);
          } else {
            colsf.resize(rs * hw);
            accf.assign(ohw, 0.f);
            gemm_f32(wf_.data() + k * rs * C, xf.data(), colsf.data(), rs, hw, C, hw);
            scatter(colsf.data(), accf.data());
            chain_.run_float(accf.data(), ohw, n, uint32_t(k), 0, io.inputs.data());
            with_float_storage(dtype_, [&](auto* tag) {
              using T = std::remove_pointer_t<decltype(tag)>;
              T* out = static_cast<T*>(io.output) + (n * K + k) * ohw;
              for (size_t i = 0; i < ohw; ++i) store(out, i, accf[i]);
            });
          }
        }
      });
    }
  }

 private:
  // acc[ih*sh + r][iw*sw + s] += cols[(r, s)][(ih, iw)]
  template <class V>
  void scatter(const V* cols, V* acc) const {
    const size_t H = in_[2], W = in_[3], OW = out_[3];
    for (size_t r = 0; r < R_; ++r)
      for (size_t s = 0; s < S_; ++s) {
        const V* row = cols + (r * S_ + s) * H * W;
        for (size_t ih = 0; ih < H; ++ih)
          for (size_t iw = 0; iw < W; ++iw) acc[(ih * sh_ + r) * OW + iw * sw_ + s] += row[ih * W + iw];
      }
  }

  SdpChain chain_;
  DataType dtype_;
  uint32_t sh_, sw_, R_ = 1, S_ = 1;
  Shape in_{}, out_{};
  std::vector<int32_t> w8_;  // transposed weights as int16 pairs (pack_a_s8)
  std::vector<float> wf_;
};

}  // namespace

std::unique_ptr<OpKernel> make_deconv(const Model& m, const Op& op, const DeconvParams& p) {
  return std::make_unique<DeconvKernel>(m, op, p);
}

}  // namespace softdla::cpu
