// Host overhead of cudlaSubmitTask: a one-op loadable on tiny buffers, so the time is validation,
// address resolution, locking and dispatch rather than compute. Also the engine call alone, for the
// split. Run: build/bench/submit_bench (numbers in docs/PERFORMANCE.md; target <= 10 us).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>

#include "cudla.h"
#include "engine.h"
#include "loadable.h"

namespace {

std::vector<uint8_t> one_op_loadable() {
  using namespace softdla;
  Model m;
  m.tensors.push_back({"x", {1, 1, 1, 32}, DataType::kInt8, 0.1f, -1});
  m.tensors.push_back({"y", {1, 1, 1, 32}, DataType::kInt8, 0.1f, -1});
  SdpParams p;
  SdpStep relu;
  relu.kind = SdpKind::kRelu;
  p.steps = {relu};
  p.requant = {{1}, {0}};
  m.ops.push_back({"relu", {0}, {1}, p});
  m.inputs.push_back({0, TensorFormat::kLinear, {}});
  m.outputs.push_back({1, TensorFormat::kLinear, {}});
  return write_loadable(m);
}

void BM_SubmitTask(benchmark::State& state) {
  const auto bytes = one_op_loadable();
  cudlaDevHandle dev;
  cudlaModule mod;
  cudlaCreateDevice(0, &dev, CUDLA_CUDA_DLA);
  cudlaModuleLoadFromMemory(dev, bytes.data(), bytes.size(), &mod, 0);
  auto* in = static_cast<uint64_t*>(std::aligned_alloc(64, 64));
  auto* out = static_cast<uint64_t*>(std::aligned_alloc(64, 64));
  std::memset(in, 1, 64);
  uint64_t *in_p, *out_p;
  cudlaMemRegister(dev, in, 32, &in_p, 0);
  cudlaMemRegister(dev, out, 32, &out_p, 0);
  const uint64_t* ins[] = {in_p};
  uint64_t* outs[] = {out_p};
  cudlaTask t{mod, outs, 1, 1, ins, nullptr, nullptr};
  const uint32_t flags = uint32_t(state.range(0));
  for (auto _ : state) {
    if (cudlaSubmitTask(dev, &t, 1, nullptr, flags) != cudlaSuccess) state.SkipWithError("submit failed");
  }
  cudlaDestroyDevice(dev);
  std::free(in);
  std::free(out);
}
BENCHMARK(BM_SubmitTask)->Arg(0)->Arg(CUDLA_SUBMIT_NOOP)->Arg(CUDLA_SUBMIT_SKIP_LOCK_ACQUIRE)->Unit(benchmark::kMicrosecond);

void BM_EngineRunOnly(benchmark::State& state) {
  const softdla::Engine e(softdla::read_loadable(one_op_loadable()));
  alignas(64) uint8_t in[32] = {1}, out[32];
  const void* ip[] = {in};
  void* op[] = {out};
  for (auto _ : state) e.run(ip, op);
}
BENCHMARK(BM_EngineRunOnly)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
