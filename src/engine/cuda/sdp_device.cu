#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "sdp_chain.h"  // cpu::activation_lut: one table for every backend
#include "sdp_device.cuh"

namespace softdla::gpu {

ChainHolder::ChainHolder(const Model& m, const Op& op, const SdpParams& p) {
  if (p.steps.size() > size_t(kMaxSdpSteps))
    throw std::runtime_error("op '" + op.name + "': the CUDA backend takes SDP chains of up to " +
                             std::to_string(kMaxSdpSteps) + " steps, this one has " + std::to_string(p.steps.size()));
  const Tensor& out = m.tensors[op.outputs[0]];
  chain_.fp16 = out.dtype == DataType::kFloat16;
  chain_.nsteps = uint32_t(p.steps.size());
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const SdpStep& s = p.steps[i];
    DevStep& d = chain_.steps[i];
    d.kind = uint8_t(s.kind), d.shift = s.shift, d.tensor_shift = s.tensor_shift;
    d.tensor_multiplier = s.tensor_multiplier, d.lo_i = s.lo_i, d.hi_i = s.hi_i, d.lo = s.lo, d.hi = s.hi;
    if (out.dtype == DataType::kInt8 && !s.ivalues.empty()) {
      d.nvals = uint32_t(s.ivalues.size());
      buffers_.push_back(upload(s.ivalues));
      d.ivals = buffers_.back().as<int32_t>();
    } else if (out.dtype != DataType::kInt8 && !s.fvalues.empty()) {
      d.nvals = uint32_t(s.fvalues.size());
      buffers_.push_back(upload(s.fvalues));
      d.fvals = buffers_.back().as<float>();
    }
    if (is_eltwise(s.kind)) {
      const size_t slot = eltwise_operand_slot(op, s.tensor);
      if (slot >= size_t(kMaxOperands))
        throw std::runtime_error("op '" + op.name + "': too many element-wise operands for the CUDA backend");
      d.slot = uint8_t(slot);
      const Shape& e = m.tensors[uint32_t(s.tensor)].shape;
      d.en = e[0], d.ec = e[1], d.ehw = e[2] * e[3];
    }
  }
  if (out.dtype == DataType::kInt8) {
    chain_.nreq = uint32_t(p.requant.multiplier.size());
    buffers_.push_back(upload(p.requant.multiplier));
    chain_.req_mult = buffers_.back().as<int32_t>();
    buffers_.push_back(upload(p.requant.shift));
    chain_.req_shift = buffers_.back().as<uint8_t>();
    if (p.lut != ActivationLut::kNone) {
      chain_.has_lut = 1;
      const auto table = cpu::activation_lut(p.lut, p.lut_input_scale, out.scale);
      std::memcpy(chain_.lut, table.data(), 256);
    }
  }
}

Operands operands_of(const GpuOpIo& io) {
  Operands o;
  for (size_t i = 0; i < io.inputs.size() && i < size_t(kMaxOperands); ++i) o.p[i] = io.inputs[i];
  return o;
}

}  // namespace softdla::gpu
