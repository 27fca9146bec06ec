// A standalone SDP op (bias, batch-norm/scale, element-wise, activations, requantize) on a tensor.
#include <optional>
#include <vector>

#include "element.h"
#include "half_convert.h"
#include "int8_requant.h"
#include "kernels.h"
#include "sdp_chain.h"
#include "sdp_forms.h"
#include "thread_pool.h"

namespace softdla::cpu {
namespace {

class SdpKernel final : public OpKernel {
 public:
  SdpKernel(const Model& m, const Op& op, const SdpParams& p)
      : chain_(m, op, p), dtype_(m.tensors[op.outputs[0]].dtype), shape_(m.tensors[op.outputs[0]].shape) {
    if (dtype_ != DataType::kInt8) return;
    // The shortcut forms (requant_window.h): one input and [Bias] [ReLU | Clip] requantize, or the
    // residual add of two tensors of the output's shape.
    if (op.inputs.size() == 1) windows_ = conv_windows(p, shape_[1]);
    else if (op.inputs.size() == 2 && m.tensors[op.inputs[1]].shape == shape_)
      if (const auto w = residual_window(op, p)) residual_ = residual_form(*w);
  }

  void run(const OpIo& io, ThreadPool& pool) const override {
    const size_t hw = size_t(shape_[2]) * shape_[3];
    pool.parallel_for(size_t(shape_[0]) * shape_[1], [&](size_t b, size_t e) {
      std::vector<int64_t> vi;
      std::vector<float> vf;
      for (size_t nc = b; nc < e; ++nc) {
        const uint32_t n = uint32_t(nc / shape_[1]), c = uint32_t(nc % shape_[1]);
        if (dtype_ == DataType::kInt8 && (windows_ || residual_)) {
          const int8_t* x = static_cast<const int8_t*>(io.inputs[0]) + nc * hw;
          int8_t* y = static_cast<int8_t*>(io.output) + nc * hw;
          if (windows_) requantize_window_s8(active_isa(), x, (*windows_)[c], y, hw);
          else residual_add(active_isa(), x, static_cast<const int8_t*>(io.inputs[1]) + nc * hw, *residual_, y, hw);
        } else if (dtype_ == DataType::kInt8) {
          const int8_t* x = static_cast<const int8_t*>(io.inputs[0]) + nc * hw;
          vi.assign(x, x + hw);
          chain_.run_int8(vi.data(), hw, n, c, 0, io.inputs.data(), static_cast<int8_t*>(io.output) + nc * hw);
        } else {
          with_float_storage(dtype_, [&](auto* tag) {
            using T = std::remove_pointer_t<decltype(tag)>;
            const T* x = static_cast<const T*>(io.inputs[0]) + nc * hw;
            vf.resize(hw);
            if constexpr (std::is_same_v<T, uint16_t>) halves_to_floats(x, vf.data(), hw);
            else for (size_t i = 0; i < hw; ++i) vf[i] = load(x, i);
            chain_.run_float(vf.data(), hw, n, c, 0, io.inputs.data());
            T* y = static_cast<T*>(io.output) + nc * hw;
            if constexpr (std::is_same_v<T, uint16_t>) floats_to_halves(vf.data(), y, hw);
            else for (size_t i = 0; i < hw; ++i) store(y, i, vf[i]);
          });
        }
      }
    }, ThreadPool::min_items(hw * (chain_.empty() ? 1 : 4)));
  }

 private:
  SdpChain chain_;
  DataType dtype_;
  Shape shape_;
  std::optional<std::vector<num::RequantWindow>> windows_;
  std::optional<ResidualForm> residual_;
};

}  // namespace

std::unique_ptr<OpKernel> make_sdp(const Model& m, const Op& op, const SdpParams& p) {
  return std::make_unique<SdpKernel>(m, op, p);
}

}  // namespace softdla::cpu
