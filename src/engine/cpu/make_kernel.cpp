#include <variant>

#include "kernels.h"

namespace softdla::cpu {

std::unique_ptr<OpKernel> make_kernel(const Model& m, size_t op_index) {
  const Op& op = m.ops[op_index];
  return std::visit(
      [&](const auto& p) -> std::unique_ptr<OpKernel> {
        using P = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<P, ConvParams>) return make_conv(m, op, p);
        else if constexpr (std::is_same_v<P, DeconvParams>) return make_deconv(m, op, p);
        else if constexpr (std::is_same_v<P, SdpParams>) return make_sdp(m, op, p);
        else if constexpr (std::is_same_v<P, PoolParams>) return make_pool(m, op, p);
        else if constexpr (std::is_same_v<P, LrnParams>) return make_lrn(m, op, p);
        else if constexpr (std::is_same_v<P, ResizeParams>) return make_resize(m, op, p);
        else if constexpr (std::is_same_v<P, ConcatParams>) return make_concat(m, op);
        else if constexpr (std::is_same_v<P, SliceParams>) return make_slice(m, op, p);
        else if constexpr (std::is_same_v<P, ShuffleParams>) return make_shuffle(m, op, p);
        else if constexpr (std::is_same_v<P, SoftmaxParams>) return make_softmax(m, op, p);
        else if constexpr (std::is_same_v<P, UnaryParams>) return make_unary(m, op, p);
        else if constexpr (std::is_same_v<P, ReduceMaxParams>) return make_reduce_max(m, op, p);
        else return make_convert(m, op);
      },
      op.params);
}

}  // namespace softdla::cpu
