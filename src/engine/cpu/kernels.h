// Factories of the CPU kernels, one per op kind (each in its own file).
#pragma once
#include <memory>

#include "kernel.h"

namespace softdla::cpu {

std::unique_ptr<OpKernel> make_conv(const Model& m, const Op& op, const ConvParams& p);
std::unique_ptr<OpKernel> make_deconv(const Model& m, const Op& op, const DeconvParams& p);
std::unique_ptr<OpKernel> make_sdp(const Model& m, const Op& op, const SdpParams& p);
std::unique_ptr<OpKernel> make_pool(const Model& m, const Op& op, const PoolParams& p);
std::unique_ptr<OpKernel> make_lrn(const Model& m, const Op& op, const LrnParams& p);
std::unique_ptr<OpKernel> make_resize(const Model& m, const Op& op, const ResizeParams& p);
std::unique_ptr<OpKernel> make_concat(const Model& m, const Op& op);
std::unique_ptr<OpKernel> make_slice(const Model& m, const Op& op, const SliceParams& p);
std::unique_ptr<OpKernel> make_shuffle(const Model& m, const Op& op, const ShuffleParams& p);
std::unique_ptr<OpKernel> make_softmax(const Model& m, const Op& op, const SoftmaxParams& p);
std::unique_ptr<OpKernel> make_unary(const Model& m, const Op& op, const UnaryParams& p);
std::unique_ptr<OpKernel> make_reduce_max(const Model& m, const Op& op, const ReduceMaxParams& p);
std::unique_ptr<OpKernel> make_convert(const Model& m, const Op& op);

}  // namespace softdla::cpu
