// Convolution throughput of the CPU engine on ResNet-50-sized layers, INT8 and FP16, with the fused
// bias + ReLU post-processing. Run: build/bench/conv_bench (numbers in docs/PERFORMANCE.md).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <span>

#include "engine.h"
#include "loadable.h"

namespace softdla {
namespace {

struct Layer {
  const char* name;
  uint32_t c, k, hw, r, stride;
  uint32_t groups = 1;
  uint32_t batch = 1;
  bool residual = false;  // the residual add after the convolution, fused into it (INT8: and ReLU)
  bool relu = true;       // false: bias only, as a bottleneck's downsample (its results keep their sign)
  bool relu6 = false;     // FP16 only: ReLU6 (a clip to [0, 6]) for the ReLU, as MobileNetV2's layers
  // With `residual` and relu false: the convolution linear and the ReLU after the add (a ResNet
  // bottleneck's downsample with its block's add), in both precisions; otherwise relu false with
  // `residual` is MobileNetV2's add (FP16 only, no ReLU).
  bool relu_after_add = false;
};

// Representative ResNet-50 layers (224x224 input, batch 1 unless named _b8).
constexpr Layer kLayers[] = {
    {"res2_3x3_64", 64, 64, 56, 3, 1},
    {"res3_1x1_512to128", 512, 128, 28, 1, 1},
    {"res3_3x3_128", 128, 128, 28, 3, 1},
    {"res4_3x3_256", 256, 256, 14, 3, 1},
    {"res5_1x1_512to2048", 512, 2048, 7, 1, 1},
    {"res3_3x3s2_128", 128, 128, 56, 3, 2},
    {"res4_3x3s2_256", 256, 256, 28, 3, 2},
    {"res5_3x3s2_512", 512, 512, 14, 3, 2},  // the last stage's first 3x3: 9 MB of weights over a 7x7 grid
    {"res5_3x3_512", 512, 512, 7, 3, 1},      // the last stage's other 3x3 layers (ResNet-18's layer 4)
    {"res5_3x3_512_b8", 512, 512, 7, 3, 1, 1, 8},
    {"stem_7x7s2_64", 3, 64, 224, 7, 2},
    {"res3_1x1s2_256to512", 256, 512, 56, 1, 2},
    {"res5_1x1s2_1024to2048", 1024, 2048, 14, 1, 2},  // the last stage's downsample: 7 x 7 outputs
    {"r18_1x1s2_64to128", 64, 128, 56, 1, 2},  // ResNet-18's first downsample
    {"res2_1x1_64to256", 64, 256, 56, 1, 1},
    {"res2_1x1_256to64", 256, 64, 56, 1, 1},
    {"res4_1x1_1024to256", 1024, 256, 14, 1, 1},  // wide input, small grid: the widened input is L2-sized
    // The bottleneck's last 1x1 convolutions with the residual add fused.
    {"res2_1x1_64to256_add", 64, 256, 56, 1, 1, 1, 1, true},
    // The downsamples: no ReLU, so their requantization has negative results to round.
    {"res2_1x1_64to256_linear", 64, 256, 56, 1, 1, 1, 1, false, false},
    {"res3_1x1s2_256to512_linear", 256, 512, 56, 1, 2, 1, 1, false, false},
    {"res4_1x1_256to1024_add", 256, 1024, 14, 1, 1, 1, 1, true},
    {"res5_1x1_512to2048_add_b8", 512, 2048, 7, 1, 1, 1, 8, true},
    // MobileNetV2 depthwise layers (224x224 input).
    {"mbv2_stem_3x3s2_32", 3, 32, 224, 3, 2},
    {"mbv2_dw3x3_96_112", 96, 96, 112, 3, 2, 96},
    {"mbv2_dw3x3_144_56", 144, 144, 56, 3, 1, 144},
    {"mbv2_dw3x3_960_7", 960, 960, 7, 3, 1, 960},
    {"mbv2_dw3x3_32_112", 32, 32, 112, 3, 1, 32},
    {"mbv2_dw3x3_192_28", 192, 192, 28, 3, 1, 192},
    {"mbv2_dw3x3_576_14", 576, 576, 14, 3, 1, 576},
    {"mbv2_dw3x3s2_144_56", 144, 144, 56, 3, 2, 144},  // the other stride-2 depthwise layers
    {"mbv2_dw3x3s2_192_28", 192, 192, 28, 3, 2, 192},
    {"mbv2_dw3x3s2_576_14", 576, 576, 14, 3, 2, 576},
    // MobileNetV2 1x1 layers: expansions, projections with few channels, the last stage's wide ones.
    {"mbv2_1x1_16to96_112", 16, 96, 112, 1, 1},
    {"mbv2_1x1_16to96_112_relu6", 16, 96, 112, 1, 1, 1, 1, false, true, true},  // as the model has it
    {"mbv2_1x1_144to24_56", 144, 24, 56, 1, 1},
    {"mbv2_1x1_32to16_112", 32, 16, 112, 1, 1},
    {"mbv2_1x1_96to24_56", 96, 24, 56, 1, 1},
    {"mbv2_1x1_192to32_28", 192, 32, 28, 1, 1},
    {"mbv2_1x1_24to144_56", 24, 144, 56, 1, 1},
    {"mbv2_1x1_24to144_56_relu6", 24, 144, 56, 1, 1, 1, 1, false, true, true},
    {"mbv2_1x1_64to384_14", 64, 384, 14, 1, 1},
    {"mbv2_1x1_576to96_14", 576, 96, 14, 1, 1},
    {"mbv2_1x1_160to960_7", 160, 960, 7, 1, 1},
    {"mbv2_1x1_320to1280_7", 320, 1280, 7, 1, 1},
    {"mbv2_1x1_384to64_14", 384, 64, 14, 1, 1},
    // MobileNetV2's projections with the block's residual add (no ReLU: linear bottlenecks).
    {"mbv2_1x1_384to64_14_add", 384, 64, 14, 1, 1, 1, 1, true, false},
    {"mbv2_1x1_144to24_56_add", 144, 24, 56, 1, 1, 1, 1, true, false},
    {"mbv2_1x1_960to160_7", 960, 160, 7, 1, 1},
    {"mbv2_1x1_960to320_7", 960, 320, 7, 1, 1},
    {"mbv2_1x1_32to192_28", 32, 192, 28, 1, 1},
    {"mbv2_1x1_96to576_14", 96, 576, 14, 1, 1},
    // Short reductions into many output channels (which FP16 kernel AMX CPUs take for them).
    {"res3_1x1_128to512", 128, 512, 28, 1, 1},
    {"r18_1x1s2_128to256", 128, 256, 28, 1, 2},
    {"wide_1x1_32to256_56", 32, 256, 56, 1, 1},
    // Batch 8: the stage-1 and stage-4 layers, whose per-image cost batching should not raise.
    {"res2_3x3_64_b8", 64, 64, 56, 3, 1, 1, 8},
    {"res5_3x3_512_b8", 512, 512, 7, 3, 1, 1, 8},
    {"res4_3x3_256_b8", 256, 256, 14, 3, 1, 1, 8},  // layer 3's 3 x 3 layers (six of them)
    {"res3_1x1_512to128_b8", 512, 128, 28, 1, 1, 1, 8},  // layer 2's reduces
    {"res3_3x3s2_128_b8", 128, 128, 56, 3, 2, 1, 8},  // layer 2's first 3 x 3 (stride 2)
    {"res5_1x1_512to2048_b8", 512, 2048, 7, 1, 1, 1, 8},
    {"res2_1x1_256to64_b8", 256, 64, 56, 1, 1, 1, 8},
    {"res2_1x1_64to256_b8", 64, 256, 56, 1, 1, 1, 8},
    {"res4_1x1_1024to256_b8", 1024, 256, 14, 1, 1, 1, 8},
    {"res2_1x1_64to256_add_b8", 64, 256, 56, 1, 1, 1, 8, true},
    {"res3_1x1_128to512_b8", 128, 512, 28, 1, 1, 1, 8},
    {"res3_1x1s2_256to512_linear_b8", 256, 512, 56, 1, 2, 1, 8, false, false},  // layer 2's downsample
    {"res3_1x1s2_256to512_add_b8", 256, 512, 56, 1, 2, 1, 8, true, false, false, true},  // with its block's add
    {"res4_1x1_256to1024_add_b8", 256, 1024, 14, 1, 1, 1, 8, true},
    {"stem_7x7s2_64_b8", 3, 64, 224, 7, 2, 1, 8},
    {"mbv2_1x1_32to16_112_b8", 32, 16, 112, 1, 1, 1, 8, false, false},  // MobileNetV2's first projection
};

Model conv_model(const Layer& l, DataType t) {
  Model m;
  const uint32_t pad = l.r / 2, out = (l.hw + 2 * pad - l.r) / l.stride + 1;
  m.tensors.push_back({"x", {l.batch, l.c, l.hw, l.hw}, t, 0.05f, -1});
  m.tensors.push_back({"y", {l.batch, l.k, out, out}, t, 0.05f, -1});
  const size_t n = size_t(l.k) * (l.c / l.groups) * l.r * l.r;
  Constant w{t, {l.k, l.c / l.groups, l.r, l.r}, std::vector<uint8_t>(n * element_size(t))};
  std::mt19937 rng(1);
  if (t == DataType::kInt8) {
    for (auto& b : w.data) b = uint8_t(rng());
  } else {
    for (size_t i = 0; i < n; ++i) {  // fp16 values in [-0.06, 0.06]
      const uint16_t h = uint16_t(0x2800 + rng() % 0x400) | uint16_t((rng() & 1) << 15);
      std::memcpy(&w.data[2 * i], &h, 2);
    }
  }
  m.constants.push_back(std::move(w));
  ConvParams p;
  p.weights = 0;
  p.stride_h = p.stride_w = l.stride;
  p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = pad;
  p.groups = l.groups;
  SdpStep bias, relu;
  bias.kind = SdpKind::kBias;
  relu.kind = SdpKind::kRelu;
  if (t == DataType::kInt8) {
    bias.ivalues = std::vector<int32_t>(l.k, 1000);
    p.post.requant = {{12345}, {24}};
  } else {
    bias.fvalues = std::vector<float>(l.k, 0.1f);
  }
  if (l.relu6) relu.kind = SdpKind::kClip, relu.lo = 0.f, relu.hi = 6.f;
  p.post.steps = {bias, relu};
  // A ResNet bottleneck's FP16 convolution before its add keeps its bias only: the ReLU comes after the add.
  if (!l.relu || (l.residual && t == DataType::kFloat16)) p.post.steps.pop_back();
  m.ops.push_back({"conv", {0}, {1}, p});
  m.inputs.push_back({0, TensorFormat::kLinear, {}});
  if (l.residual) {
    // The block's input (a second model input) added after the convolution. INT8: ResNet's bottleneck
    // end, the add then ReLU, with the multipliers and shifts softdla's builder gives ResNet-50's residual
    // adds (both operands on one scale). FP16: the plain add (ReLU after it where the layer has one).
    m.tensors.push_back({"r", m.tensors[1].shape, t, 0.05f, -1});
    m.tensors.push_back({"z", m.tensors[1].shape, t, 0.05f, -1});
    SdpParams add;
    SdpStep scale, elt, relu_after;
    elt.kind = SdpKind::kEltAdd;
    elt.tensor = 2;
    relu_after.kind = SdpKind::kRelu;
    if (t == DataType::kInt8) {
      p.post.requant = {{2052713361}, {39}};
      m.ops.back().params = p;
      scale.kind = SdpKind::kScale;
      scale.ivalues = {65536};
      elt.tensor_multiplier = 1 << 30;
      elt.tensor_shift = 14;
      add.steps = {scale, elt, relu_after};
      add.requant = {{1975184545}, {47}};
    } else {
      add.steps = {elt};
      if (l.relu || l.relu_after_add) add.steps.push_back(relu_after);
    }
    m.ops.push_back({"add", {1, 2}, {3}, add});
    m.inputs.push_back({2, TensorFormat::kLinear, {}});
    m.outputs.push_back({3, TensorFormat::kLinear, {}});
  } else {
    m.outputs.push_back({1, TensorFormat::kLinear, {}});
  }
  return read_loadable(write_loadable(m));
}

void BM_Conv(benchmark::State& state, Layer l, DataType t) {
  const Engine e(conv_model(l, t));
  std::vector<uint8_t> in(e.model().inputs[0].desc.size), out(e.model().outputs[0].desc.size);
  std::mt19937 rng(2);
  for (size_t i = 0; i < in.size(); ++i) in[i] = t == DataType::kInt8 ? uint8_t(rng()) : uint8_t(i % 2 ? 0x30 : rng());
  // The residual operand was written layers before the add reads it: runs take turns over copies
  // that together outgrow the caches, so each run finds its own cold.
  const size_t other_size = e.model().inputs.size() > 1 ? e.model().inputs[1].desc.size : 0;
  std::vector<uint8_t> other(other_size);
  for (auto& b : other) b = uint8_t(rng());
  const std::vector<std::vector<uint8_t>> others(other_size ? std::max<size_t>(2, (64u << 20) / other_size) : 0, other);
  // CONV_BENCH_COLD_OUT=1: each run writes to its own output buffer, in turn over buffers that together
  // outgrow the caches, as a layer inside a network writes to memory last touched layers before.
  const bool cold_out = std::getenv("CONV_BENCH_COLD_OUT") && std::atoi(std::getenv("CONV_BENCH_COLD_OUT")) != 0;
  std::vector<std::vector<uint8_t>> outs(cold_out ? std::max<size_t>(2, (64u << 20) / out.size()) : 0,
                                         std::vector<uint8_t>(out.size()));
  size_t turn = 0;
  for (auto _ : state) {
    const void* ip[] = {in.data(), others.empty() ? nullptr : others[turn % others.size()].data()};
    void* op[] = {outs.empty() ? out.data() : outs[turn % outs.size()].data()};
    ++turn;
    e.run(std::span<const void* const>(ip, e.model().inputs.size()), op);
  }
  const Shape& y = e.model().tensors[1].shape;
  const double macs = double(y[0]) * y[1] * y[2] * y[3] * (l.c / l.groups) * l.r * l.r;
  state.counters["GOPS"] = benchmark::Counter(2 * macs * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

}  // namespace
}  // namespace softdla

int main(int argc, char** argv) {
  using namespace softdla;
  // CONV_BENCH_ITERS=n runs each benchmark exactly n times: a fixed amount of work for counters such
  // as `perf stat -e cycles`, steadier than wall time on a shared machine.
  const char* iters = std::getenv("CONV_BENCH_ITERS");
  for (const Layer& l : kLayers)
    for (const DataType t : {DataType::kInt8, DataType::kFloat16}) {
      // ResNet's adds (with ReLU) in both precisions, MobileNetV2's (without) as FP16.
      if (l.residual && t == DataType::kInt8 && !l.relu && !l.relu_after_add) continue;
      if (l.relu6 && t == DataType::kInt8) continue;
      const std::string name = std::string(t == DataType::kInt8 ? "conv_int8/" : "conv_fp16/") + l.name;
      auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_Conv, l, t)->Unit(benchmark::kMillisecond)->UseRealTime();
      if (iters) b->Iterations(std::atoi(iters));
    }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
