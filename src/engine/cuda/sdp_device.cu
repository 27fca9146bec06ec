#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "int8_tables.h"  // num::activation_lut: one table for every backend
#include "sdp_device.cuh"

namespace softdla::gpu {

ChainHolder::ChainHolder(const Model& m, const Op& op, const SdpParams& p, const std::vector<uint8_t>* channels_last) {
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
      d.nhwc = channels_last && (*channels_last)[uint32_t(s.tensor)];
      d.full = e == out.shape;
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
      const auto table = num::activation_lut(p.lut, p.lut_input_scale, out.scale);
      std::memcpy(chain_.lut, table.data(), 256);
    }
    // SOFTDLA_CUDA_SDP_PATH (tests): "steps" keeps every chain on the step interpreter, "residual"
    // allows the residual form but no pair table; anything else (default) allows both.
    const char* path = std::getenv("SOFTDLA_CUDA_SDP_PATH");
    const std::string choice = path ? path : "";
    if (choice != "steps") recognize_residual();
    if (choice != "steps" && choice != "residual") build_pair_table();
  }
}

namespace {

// Entry (x << 8 | e) of the pair table: chain_int8's steps on input x with operand element e.
__global__ void pair_table_kernel(const __grid_constant__ DevChain ch, int8_t* table) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= 65536) return;
  const int8_t x = int8_t(uint8_t(i >> 8)), e = int8_t(uint8_t(i & 255));
  int32_t v = x;
  for (uint32_t k = 0; k < ch.nsteps; ++k) {
    const DevStep& s = ch.steps[k];
    const SdpKind kind = SdpKind(s.kind);
    v = is_eltwise(kind) ? eltwise_step(kind, s, v, e) : channel_step(kind, s, v, step_value(s, 0));
  }
  table[i] = requant_and_lut(ch, v, 0);
}

}  // namespace

void ChainHolder::build_pair_table() {
  int eltwise = 0;
  for (uint32_t i = 0; i < chain_.nsteps; ++i) {
    const DevStep& s = chain_.steps[i];
    if (is_eltwise(SdpKind(s.kind))) {
      if (!s.full || !s.nhwc) return;
      ++eltwise;
      chain_.pair_slot = s.slot;
    } else if (s.nvals > 1) {
      return;  // per-channel values
    }
  }
  if (eltwise != 1 || chain_.nreq != 1) return;
  DeviceBuffer table(65536);
  // At load time, on a private stream: the user's streams keep running.
  cudaStream_t stream = nullptr;
  SOFTDLA_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  pair_table_kernel<<<256, 256, 0, stream>>>(chain_, table.as<int8_t>());
  const cudaError_t launched = cudaGetLastError(), finished = cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  check(launched, "pair_table_kernel");
  check(finished, "pair_table_kernel");
  chain_.pair_table = table.as<int8_t>();
  buffers_.push_back(std::move(table));
}

void ChainHolder::recognize_residual() {
  DevResidual r;
  uint32_t i = 0;
  const DevStep* steps = chain_.steps;
  if (i < chain_.nsteps && SdpKind(steps[i].kind) == SdpKind::kScale) {
    r.has_scale = 1, r.nscale = steps[i].nvals, r.scale = steps[i].ivals, r.scale_shift = steps[i].shift;
    if (r.nscale == 0) return;  // no values: leave it to the general path
    ++i;
  }
  if (i >= chain_.nsteps || SdpKind(steps[i].kind) != SdpKind::kEltAdd || !steps[i].full || !steps[i].nhwc) return;
  r.slot = steps[i].slot, r.tensor_multiplier = steps[i].tensor_multiplier, r.tensor_shift = steps[i].tensor_shift;
  ++i;
  if (i < chain_.nsteps && SdpKind(steps[i].kind) == SdpKind::kRelu) r.lo = 0, ++i;
  else if (i < chain_.nsteps && SdpKind(steps[i].kind) == SdpKind::kClip) r.lo = steps[i].lo_i, r.hi = steps[i].hi_i, ++i;
  if (i != chain_.nsteps || chain_.has_lut || r.lo > r.hi || chain_.nreq == 0) return;
  r.valid = 1;
  chain_.residual = r;
}

Operands operands_of(const GpuOpIo& io) {
  Operands o;
  for (size_t i = 0; i < io.inputs.size() && i < size_t(kMaxOperands); ++i) o.p[i] = io.inputs[i];
  return o;
}

}  // namespace softdla::gpu
