// ONNX IR -> a DLA-shaped FP32 Model: every node becomes DLA ops (Conv with fused BN/bias/activation,
// SDP, Pool, ...); tensors of rank < 4 take the DLA's NCHW view. The FP32 model is runnable by the
// engine (calibration) and is the input of the precision passes.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "ir.h"
#include "model.h"

namespace softdla::builder {

struct Lowered {
  Model model;                                  // all tensors fp32, I/O linear
  std::map<std::string, uint32_t> tensor_of;    // ONNX value name -> model tensor
  std::map<uint32_t, float> qdq_amax;           // model tensor -> |range| from Q/DQ nodes
  std::vector<std::string> input_names, output_names;  // ONNX names, in model I/O order
};

// With `issues`, unsupported nodes are recorded and skipped (for `softdla check`); without, the first
// one throws Error naming the node, the rule and the fix. fuse = false lowers every BatchNormalization and
// activation as its own op instead of a step of its producer, so that each ONNX value a fusion would
// hide is a tensor of the model (the calibration cache lists those too, as TensorRT's does).
Lowered lower(Graph& g, Target target, std::vector<NodeIssue>* issues = nullptr, bool fuse = true);

// The DLA's NCHW view of an ONNX shape (rank <= 4).
Shape dla_shape(const std::vector<int64_t>& dims);

}  // namespace softdla::builder
