#include "channels_last.h"

#include "conv_depthwise_f16.h"
#include "conv_depthwise_s8.h"
#include "conv_igemm.h"
#include "conv_igemm_f16.h"
#include "model_checks.h"

namespace softdla::gpu {
namespace {

bool is_conv_with_nhwc_input(const Model& m, const Op& op) {
  const auto* p = std::get_if<ConvParams>(&op.params);
  return p && (igemm_supports(m, op, *p) || igemm_f16_supports(m, op, *p) || depthwise_f16_supports(m, op, *p) ||
              depthwise_s8_supports(m, op, *p));
}

// Ops whose NHWC kernel walks input 0 and the output in one order: an INT8 or FP16 standalone SDP op
// and INT8 or FP16 pooling.
bool follows_layout(const Model& m, const Op& op) {
  const DataType out = m.tensors[op.outputs[0]].dtype;
  if (out != DataType::kInt8 && out != DataType::kFloat16) return false;
  if (out == DataType::kFloat16 && m.tensors[op.inputs[0]].dtype != out) return false;  // the FP16 kernels read fp16
  if (std::holds_alternative<PoolParams>(op.params)) return true;
  return std::holds_alternative<SdpParams>(op.params) &&
         m.tensors[op.inputs[0]].shape == m.tensors[op.outputs[0]].shape;
}

// Input slot `slot` of op may be NHWC: the implicit-GEMM convolution's activations, input 0 of a
// layout-following op, and any SDP-chain element-wise operand (read through DevStep::nhwc).
bool reads_nhwc(const Model& m, const Op& op, size_t slot) {
  const bool has_chain = std::holds_alternative<ConvParams>(op.params) ||
                         std::holds_alternative<DeconvParams>(op.params) || std::holds_alternative<SdpParams>(op.params);
  if (slot > 0) return has_chain;
  return is_conv_with_nhwc_input(m, op) || follows_layout(m, op);
}

bool writes_nhwc(const Model& m, const Op& op) { return is_conv_with_nhwc_input(m, op) || follows_layout(m, op); }

// One pixel per image: NHWC and NCHW are the same bytes, so any reader and writer will do.
bool single_pixel(const Tensor& t) { return t.shape[2] * t.shape[3] == 1; }

}  // namespace

std::vector<uint8_t> plan_channels_last(const Model& m) {
  // Intermediates only: users and the format packers see graph inputs and outputs as NCHW.
  const std::vector<bool> intermediate = intermediate_mask(m);
  std::vector<uint8_t> nhwc(m.tensors.size(), 0), free_layout(m.tensors.size(), 0);
  for (size_t t = 0; t < m.tensors.size(); ++t) {
    const Tensor& tensor = m.tensors[t];
    // Whole 16-byte runs of channels: 16 int8 or 8 fp16 values.
    nhwc[t] = intermediate[t] && ((tensor.dtype == DataType::kInt8 && tensor.shape[1] % 16 == 0) ||
                                  (tensor.dtype == DataType::kFloat16 && tensor.shape[1] % 8 == 0));
    free_layout[t] = nhwc[t] && single_pixel(tensor);
  }
  for (const Op& op : m.ops) {
    for (size_t slot = 0; slot < op.inputs.size(); ++slot)
      if (!reads_nhwc(m, op, slot) && !free_layout[op.inputs[slot]]) nhwc[op.inputs[slot]] = 0;
    for (uint32_t out : op.outputs)
      if (!writes_nhwc(m, op) && !free_layout[out]) nhwc[out] = 0;
  }
  // A layout-following op needs its input and output in the same layout, unless one is a single pixel.
  for (bool changed = true; changed;) {
    changed = false;
    for (const Op& op : m.ops) {
      const uint32_t in = op.inputs[0], out = op.outputs[0];
      if (follows_layout(m, op) && !free_layout[in] && !free_layout[out] && nhwc[in] != nhwc[out]) {
        nhwc[in] = nhwc[out] = 0;
        changed = true;
      }
    }
  }
  return nhwc;
}

}  // namespace softdla::gpu
