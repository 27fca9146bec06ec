// The per-layer description of a loadable (issue 16, "See inside a DLA run"): one LayerInfo per op, in
// execution order, with its tensors, geometry, fused SDP stages, precision, multiply-accumulates and
// bytes, computed from the loadable alone. `softdla inspect --json`, softdla.inspect()["layer_info"],
// `softdla run --exportLayerInfo` and the Orin latency model all use it; docs/PROFILING.md ("Layer
// information") is the schema's reference. JSON form of one layer (every key always present):
//   {"index": 0, "name": "conv1 + relu", "op": "conv", "precision": "int8",
//    "inputs":  [{"name": "images", "shape": [4, 1, 16, 16], "dtype": "int8", "scale": 0.00787402}],
//    "outputs": [{"name": "edges", "shape": [4, 8, 16, 16], "dtype": "int8", "scale": 0.0527}],
//    "params": {"kernel": [3, 3], "stride": [1, 1], "pad": [1, 1, 1, 1], "dilation": [1, 1], "groups": 1,
//               "out_channels": 8},
//    "fused": ["bias", "relu", "requantize"],
//    "weight_bytes": 136, "macs": 73728, "input_bytes": 1024, "output_bytes": 8192}
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model.h"

namespace softdla {

class JsonWriter;

struct LayerTensorInfo {
  std::string name;
  Shape shape{1, 1, 1, 1};  // N C H W
  std::string dtype;        // fp32 | fp16 | int8 | int32
  float scale = 1.0f;       // the INT8 scale (1 for other types)
  // Not in the JSON form:
  bool constant = false;    // a constant operand stored in the loadable (counted in weight_bytes, not input_bytes)
  uint64_t bytes = 0;       // N*C*H*W * element size (dense, unpadded)
};

// One entry of "params": a whole number, a list of them, a number or a string.
struct LayerParam {
  enum class Type : uint8_t { kInt, kInts, kFloat, kString, kBool } type = Type::kInt;
  std::string key;
  int64_t i = 0;
  std::vector<int64_t> ints;
  double f = 0;
  std::string s;
  bool b = false;
};

struct LayerInfo {
  uint32_t index = 0;     // position in the loadable's op list (execution order)
  std::string name;       // the op's name, as inspect's "layers" list gives it
  std::string op;         // op_kind_name(): conv deconv sdp pool lrn resize concat slice shuffle softmax
                          // unary reduce_max convert
  std::string precision;  // the type the op computes in and writes: int8 | fp16 | fp32
  std::vector<LayerTensorInfo> inputs, outputs;
  std::vector<LayerParam> params;  // "params", in the order written (op-dependent; PROFILING.md)
  // Geometry of conv, deconv and pool, also in `params` (kernel {0, 0} for other ops).
  std::array<uint32_t, 2> kernel{0, 0}, stride{1, 1}, dilation{1, 1};  // {h, w}
  std::array<uint32_t, 4> pad{0, 0, 0, 0};                            // top, left, bottom, right
  uint32_t groups = 1, out_channels = 0;
  // Stages fused into the op, in the order they run: a conv's/deconv's SDP post-ops, an sdp op's steps
  // after its "operation" (to_string(SdpKind): bias scale prelu relu clip add sub mul max min div
  // sigmoid tanh), then "sigmoid-lut"/"tanh-lut" (INT8 activation tables) and "requantize" (INT8).
  std::vector<std::string> fused;
  uint64_t weight_bytes = 0;  // conv/deconv weights + constant operands + SDP per-channel operands, as stored
  uint64_t macs = 0;          // conv N*K*Ho*Wo*(C/groups)*kh*kw; deconv N*C*Hi*Wi*K*kh*kw; 0 for data
                              // movement (concat slice shuffle convert); one per output element otherwise
  uint64_t input_bytes = 0;   // non-constant inputs read (dense)
  uint64_t output_bytes = 0;  // outputs written (dense)
};

// The parameter named `key`, or nullptr.
const LayerParam* find_param(const LayerInfo& l, const std::string& key);

std::vector<LayerInfo> describe_layers(const Model& m);
// Writes one layer as a JSON object, or the whole list as an array, into `w` (to embed it in a larger
// document such as --exportLayerInfo's {"loadable": ..., "layers": [...]}).
void write_layer_info(JsonWriter& w, const LayerInfo& l);
void write_layer_info(JsonWriter& w, const std::vector<LayerInfo>& layers);
// The JSON array of describe_layers(m) (indent: spaces per level; 0: one line).
std::string layer_info_json(const Model& m, int indent = 2);

// Where each intermediate tensor lives in the arena and for which ops (the report's memory view): its
// bytes are in use from the op that writes it to the last op that reads it, inclusive. In the order the
// ops write them; I/O tensors and constants live outside the arena.
struct MemoryPlanEntry {
  std::string tensor;
  uint64_t offset = 0, bytes = 0;
  int32_t first_op = 0, last_op = 0;  // last_op -1: never read
};
std::vector<MemoryPlanEntry> describe_memory_plan(const Model& m);
void write_memory_plan(JsonWriter& w, const std::vector<MemoryPlanEntry>& plan);

}  // namespace softdla
