// Writes bars.loadable and bars_images.npy: a small hand-designed INT8 network that tells which way a
// bright bar runs in a 16x16 grayscale image (0 horizontal, 1 vertical, 2 diagonal, 3 anti-diagonal).
// It exercises the image input format (int8 dla_hwc4), a fused conv + ReLU, max and average pooling, a
// fully connected layer as a 1x1 convolution, an INT8 -> FP16 conversion, softmax and chw16 output.
// The builder (ONNX -> loadable) replaces hand-written weights with trained ones; this model exists so
// the engine can be run and checked before any builder is involved.
#include <cstdio>
#include <cstring>
#include <string>

#include "loadable.h"
#include "npy.h"

using namespace softdla;

namespace {

uint32_t add_tensor(Model& m, const std::string& name, Shape s, DataType t, float scale = 1.f) {
  m.tensors.push_back({name, s, t, scale, -1});
  return uint32_t(m.tensors.size() - 1);
}

uint32_t add_int8_constant(Model& m, std::vector<uint32_t> dims, const std::vector<int8_t>& v) {
  Constant c{DataType::kInt8, std::move(dims), std::vector<uint8_t>(v.size())};
  std::memcpy(c.data.data(), v.data(), v.size());
  m.constants.push_back(std::move(c));
  return uint32_t(m.constants.size() - 1);
}

Model make_model() {
  Model m;
  m.target = Target::kOrin;
  const DataType i8 = DataType::kInt8;
  const uint32_t images = add_tensor(m, "images", {4, 1, 16, 16}, i8, 1.f / 127);
  const uint32_t edges = add_tensor(m, "edges", {4, 4, 16, 16}, i8, 0.01f);
  const uint32_t pooled = add_tensor(m, "pooled", {4, 4, 8, 8}, i8, 0.01f);
  const uint32_t mean = add_tensor(m, "mean", {4, 4, 1, 1}, i8, 0.01f);
  const uint32_t logits = add_tensor(m, "logits", {4, 4, 1, 1}, i8, 0.05f);
  const uint32_t logits16 = add_tensor(m, "logits_fp16", {4, 4, 1, 1}, DataType::kFloat16);
  const uint32_t probs = add_tensor(m, "probabilities", {4, 4, 1, 1}, DataType::kFloat16);
  m.inputs.push_back({images, TensorFormat::kDlaHwc4, {}});
  m.outputs.push_back({probs, TensorFormat::kChw16, {}});

  // Line detectors: +2 along the line, -1 beside it (zero response to the other orientations).
  const int8_t a = 80, b = -40;
  const std::vector<int8_t> w = {b, b, b, a, a, a, b, b, b,   // horizontal
                                 b, a, b, b, a, b, b, a, b,   // vertical
                                 a, b, b, b, a, b, b, b, a,   // diagonal
                                 b, b, a, b, a, b, a, b, b};  // anti-diagonal
  ConvParams conv;
  conv.weights = add_int8_constant(m, {4, 1, 3, 3}, w);
  conv.pad_top = conv.pad_left = conv.pad_bottom = conv.pad_right = 1;
  SdpStep relu;
  relu.kind = SdpKind::kRelu;
  conv.post.steps = {relu};
  conv.post.requant = {{4128}, {20}};  // 3 * 80 * 127 = 30480 -> 120
  m.ops.push_back({"conv1 + relu", {images}, {edges}, conv});

  PoolParams max2;
  max2.kernel_h = max2.kernel_w = max2.stride_h = max2.stride_w = 2;
  m.ops.push_back({"maxpool", {edges}, {pooled}, max2});
  PoolParams avg8;
  avg8.kind = PoolKind::kAverage;
  avg8.kernel_h = avg8.kernel_w = avg8.stride_h = avg8.stride_w = 8;
  m.ops.push_back({"global average pool", {pooled}, {mean}, avg8});

  ConvParams fc;  // each class reads its own detector, minus the mean of the others
  std::vector<int8_t> fw(16, -16);
  for (int k = 0; k < 4; ++k) fw[size_t(k * 4 + k)] = 64;
  fc.weights = add_int8_constant(m, {4, 4, 1, 1}, fw);
  fc.post.requant = {{107}, {10}};
  m.ops.push_back({"fc", {mean}, {logits}, fc});
  m.ops.push_back({"to fp16", {logits}, {logits16}, ConvertParams{}});
  m.ops.push_back({"softmax", {logits16}, {probs}, SoftmaxParams{1}});
  m.build_info.precisions = "int8 (softmax in fp16)";
  m.build_info.flags = "hand-written example: examples/models/make_bars_model.cpp";
  return m;
}

NpyArray make_images() {
  NpyArray a{"f4", {4, 1, 16, 16}, std::vector<uint8_t>(4 * 256 * 4)};
  auto set = [&](int n, int y, int x) {
    const float one = 1.f;
    std::memcpy(&a.data[size_t((n * 256 + y * 16 + x) * 4)], &one, 4);
  };
  for (int i = 2; i < 14; ++i) {
    set(0, 6, i);       // horizontal
    set(1, i, 9);       // vertical
    set(2, i, i);       // diagonal
    set(3, i, 15 - i);  // anti-diagonal
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : ".";
  try {
    write_loadable_file(make_model(), dir + "/bars.loadable");
    write_npy(dir + "/bars_images.npy", make_images());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_bars_model: %s\n", e.what());
    return 1;
  }
  std::printf("wrote %s/bars.loadable and %s/bars_images.npy\n", dir.c_str(), dir.c_str());
  return 0;
}
