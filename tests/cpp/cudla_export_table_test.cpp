// cudlaGetExternalExportTable and etiTranslateStats (include/cudlaExternalEtbl.hpp, docs/RUNTIME.md "The
// export table"): a statistics buffer written by a real task on the CPU backend, translated the way NVIDIA's
// cuDLALayerwiseStatsHybrid sample does (length, allocate, text), checked row by row against the buffer's
// records at two clock frequencies; then every error path returns its documented status.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cudlaExternalEtbl.hpp"
#include "cudla_fixture.h"
#include "sample_model.h"
#include "softdla/cudla_ext.h"

namespace softdla::testing {
namespace {

const cudlaExternalEtbl* export_table() {
  const cudlaExternalEtbl* etbl = nullptr;
  EXPECT_EQ(cudlaGetExternalExportTable(&etbl, 0), cudlaSuccess);
  return etbl;
}

// One task of `model` with its statistics buffer; the handle stays open with the module loaded.
struct StatsRun {
  explicit StatsRun(const Model& model) {
    const auto bytes = write_loadable(model);
    EXPECT_EQ(cudlaCreateDevice(1, &dev, CUDLA_CUDA_DLA), cudlaSuccess);
    EXPECT_EQ(cudlaModuleLoadFromMemory(dev, bytes.data(), bytes.size(), &mod, 0), cudlaSuccess);
    cudlaModuleAttribute a;
    EXPECT_EQ(cudlaModuleGetAttributes(mod, CUDLA_NUM_INPUT_TENSORS, &a), cudlaSuccess);
    in_d.resize(a.numInputTensors);
    EXPECT_EQ(cudlaModuleGetAttributes(mod, CUDLA_NUM_OUTPUT_TENSORS, &a), cudlaSuccess);
    out_d.resize(a.numOutputTensors);
    EXPECT_EQ(cudlaModuleGetAttributes(mod, CUDLA_NUM_OUTPUT_TASK_STATISTICS, &a), cudlaSuccess);
    EXPECT_EQ(a.numOutputTensors, 1u);
    a.inputTensorDesc = in_d.data();
    EXPECT_EQ(cudlaModuleGetAttributes(mod, CUDLA_INPUT_TENSOR_DESCRIPTORS, &a), cudlaSuccess);
    a.outputTensorDesc = out_d.data();
    EXPECT_EQ(cudlaModuleGetAttributes(mod, CUDLA_OUTPUT_TENSOR_DESCRIPTORS, &a), cudlaSuccess);
    a.outputTensorDesc = &st_d;
    EXPECT_EQ(cudlaModuleGetAttributes(mod, CUDLA_OUTPUT_TASK_STATISTICS_DESCRIPTORS, &a), cudlaSuccess);
    std::vector<const uint64_t*> ins;
    std::vector<uint64_t*> outs;
    for (const auto& d : in_d) {
      buffers.push_back(std::make_unique<AlignedBuffer>(d.size));
      std::memset(buffers.back()->data, 1, d.size);
      uint64_t* p = nullptr;
      EXPECT_EQ(cudlaMemRegister(dev, buffers.back()->ptr(), d.size, &p, 0), cudlaSuccess);
      ins.push_back(p);
    }
    for (const auto& d : out_d) {
      buffers.push_back(std::make_unique<AlignedBuffer>(d.size));
      uint64_t* p = nullptr;
      EXPECT_EQ(cudlaMemRegister(dev, buffers.back()->ptr(), d.size, &p, 0), cudlaSuccess);
      outs.push_back(p);
    }
    stats = std::make_unique<AlignedBuffer>(st_d.size);
    std::memset(stats->data, 0, st_d.size);
    uint64_t* sp = nullptr;
    EXPECT_EQ(cudlaMemRegister(dev, stats->ptr(), st_d.size, &sp, CUDLA_TASK_STATISTICS), cudlaSuccess);
    outs.push_back(sp);
    cudlaTask t{mod, outs.data(), uint32_t(outs.size()), uint32_t(ins.size()), ins.data(), nullptr, nullptr};
    EXPECT_EQ(cudlaSubmitTask(dev, &t, 1, nullptr, 0), cudlaSuccess);
    EXPECT_EQ(cudlaGetLastError(dev), cudlaSuccess);
  }
  ~StatsRun() {
    if (dev) cudlaDestroyDevice(dev);
  }
  softdlaStatsRecord record(size_t i) const {
    softdlaStatsRecord r;
    std::memcpy(&r, stats->data + sizeof(softdlaStatsHeader) + i * sizeof r, sizeof r);
    return r;
  }
  cudlaDevHandle dev = nullptr;
  cudlaModule mod = nullptr;
  std::vector<cudlaModuleTensorDescriptor> in_d, out_d;
  cudlaModuleTensorDescriptor st_d{};
  std::vector<std::unique_ptr<AlignedBuffer>> buffers;
  std::unique_ptr<AlignedBuffer> stats;
};

// The sample's two calls: the length, then the text into a buffer of exactly that length.
std::string translate(const StatsRun& run, uint32_t freq_mhz, uint64_t* length_out = nullptr) {
  const cudlaExternalEtbl* etbl = export_table();
  cudlaTranslateCsvAttribute attr;
  std::memset(&attr, 0xab, sizeof attr);
  EXPECT_EQ(etbl->etiTranslateStats(run.dev, run.stats->data, freq_mhz, 0, CUDLA_GET_CSV_LENGTH, &attr), cudlaSuccess);
  const uint64_t length = attr.csvStreamLength;
  EXPECT_GT(length, 1u);
  EXPECT_LT(length, 1u << 20);
  std::vector<char> csv(length, '\x7f');
  attr.csvStreamStats = csv.data();
  EXPECT_EQ(etbl->etiTranslateStats(run.dev, run.stats->data, freq_mhz, 0, CUDLA_GET_CSV_STATS, &attr), cudlaSuccess);
  EXPECT_EQ(attr.csvStreamLength, length);
  // The length counts the text and its terminating NUL, which the buffer's last byte holds.
  EXPECT_EQ(csv.back(), '\0');
  const std::string text(csv.data());
  EXPECT_EQ(text.size() + 1, length);
  if (length_out) *length_out = length;
  return text;
}

struct Row {
  std::string name;
  double start_ms, end_ms;
};

// Parses "layer_name,start_ms,end_ms" then one "'name',start,end" line per layer (names hold no quotes here).
std::vector<Row> parse(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "layer_name,start_ms,end_ms");
  std::vector<Row> rows;
  while (std::getline(in, line)) {
    EXPECT_EQ(line.front(), '\'') << line;
    const size_t close = line.find('\'', 1);
    EXPECT_NE(close, std::string::npos) << line;
    EXPECT_EQ(line[close + 1], ',') << line;
    Row r;
    r.name = line.substr(1, close - 1);
    char* end = nullptr;
    r.start_ms = std::strtod(line.c_str() + close + 2, &end);
    EXPECT_EQ(*end, ',') << line;
    r.end_ms = std::strtod(end + 1, &end);
    EXPECT_EQ(*end, '\0') << line;
    rows.push_back(r);
  }
  return rows;
}

TEST(ExportTable, TableAndExport) {
  const cudlaExternalEtbl* etbl = export_table();
  ASSERT_NE(etbl, nullptr);
  EXPECT_EQ(etbl->size, sizeof(cudlaExternalEtbl));
  EXPECT_NE(etbl->etiTranslateStats, nullptr);
  const cudlaExternalEtbl* again = nullptr;
  ASSERT_EQ(cudlaGetExternalExportTable(&again, 0), cudlaSuccess);
  EXPECT_EQ(again, etbl);  // one static table
  EXPECT_EQ(int(CUDLA_GET_CSV_LENGTH), 0);
  EXPECT_EQ(int(CUDLA_GET_CSV_STATS), 1);
}

TEST(ExportTable, TranslatesATasksStatistics) {
  const Model model = make_sample_model();
  StatsRun run(model);
  softdlaStatsHeader h;
  std::memcpy(&h, run.stats->data, sizeof h);
  ASSERT_EQ(h.numLayers, model.ops.size());

  uint64_t length = 0;
  const std::vector<Row> rows = parse(translate(run, SOFTDLA_STATS_CLOCK_MHZ, &length));
  ASSERT_EQ(rows.size(), model.ops.size());  // one row per layer
  for (size_t i = 0; i < rows.size(); ++i) {
    const softdlaStatsRecord r = run.record(i);
    EXPECT_EQ(rows[i].name, model.ops[r.layerIndex].name);
    // At softdla's counter clock the times are the recorded ones (printed with 6 decimals).
    EXPECT_NEAR(rows[i].start_ms, r.startMs, 1e-6) << i;
    EXPECT_NEAR(rows[i].end_ms, r.endMs, 1e-6) << i;
    EXPECT_LE(rows[i].start_ms, rows[i].end_ms) << i;
    if (i) {
      EXPECT_LE(rows[i - 1].end_ms, rows[i].start_ms + 1e-6) << i;
    }
  }
  EXPECT_EQ(rows.front().name, "conv1");
  EXPECT_EQ(rows.back().name, "softmax");

  // Half the clock, twice the time: cycles / frequency.
  const std::vector<Row> slow = parse(translate(run, SOFTDLA_STATS_CLOCK_MHZ / 2));
  ASSERT_EQ(slow.size(), rows.size());
  const std::vector<Row> fast = parse(translate(run, 4 * SOFTDLA_STATS_CLOCK_MHZ));
  for (size_t i = 0; i < rows.size(); ++i) {
    const softdlaStatsRecord r = run.record(i);
    EXPECT_NEAR(slow[i].start_ms, 2 * r.startMs, 1e-6) << i;
    EXPECT_NEAR(slow[i].end_ms, 2 * r.endMs, 1e-6) << i;
    EXPECT_NEAR(fast[i].end_ms, r.endMs / 4, 1e-6) << i;
    EXPECT_EQ(slow[i].name, rows[i].name);
  }
  // An odd frequency such as the samples' 1152 MHz.
  const std::vector<Row> orin = parse(translate(run, 1152));
  EXPECT_NEAR(orin.back().end_ms, run.record(rows.size() - 1).endMs * 1000.0 / 1152.0, 1e-6);

  // A buffer larger than needed is fine; the length stays what the text needs.
  const cudlaExternalEtbl* etbl = export_table();
  std::vector<char> big(length + 100, 'x');
  cudlaTranslateCsvAttribute attr{big.size(), big.data()};
  ASSERT_EQ(etbl->etiTranslateStats(run.dev, run.stats->data, SOFTDLA_STATS_CLOCK_MHZ, 0, CUDLA_GET_CSV_STATS, &attr),
            cudlaSuccess);
  EXPECT_EQ(attr.csvStreamLength, length);
  EXPECT_EQ(std::strlen(big.data()) + 1, length);
  EXPECT_EQ(big[length], 'x');  // nothing written past the text
}

TEST(ExportTable, QuotesLayerNames) {
  Model m;
  m.tensors.push_back({"x", {1, 8, 4, 4}, DataType::kInt8, 0.1f, -1});
  m.tensors.push_back({"y", {1, 8, 4, 4}, DataType::kInt8, 0.1f, -1});
  SdpParams p;
  SdpStep relu;
  relu.kind = SdpKind::kRelu;
  p.steps = {relu};
  p.requant = {{1}, {0}};
  m.ops.push_back({"Conv_1 + Relu_2, it's fused", {0}, {1}, p});
  m.inputs.push_back({0, TensorFormat::kLinear, {}});
  m.outputs.push_back({1, TensorFormat::kLinear, {}});
  StatsRun run(m);
  const std::string text = translate(run, SOFTDLA_STATS_CLOCK_MHZ);
  EXPECT_EQ(text.rfind("layer_name,start_ms,end_ms\n'Conv_1 + Relu_2, it''s fused',", 0), 0u) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
}

TEST(ExportTable, ErrorPaths) {
  EXPECT_EQ(cudlaGetExternalExportTable(nullptr, 0), cudlaErrorInvalidParam);
  const cudlaExternalEtbl* etbl = nullptr;
  EXPECT_EQ(cudlaGetExternalExportTable(&etbl, 1), cudlaErrorInvalidParam);
  EXPECT_EQ(etbl, nullptr);
  etbl = export_table();
  ASSERT_NE(etbl, nullptr);
  const auto translate_stats = etbl->etiTranslateStats;

  const Model model = make_sample_model();
  StatsRun run(model);
  const uint8_t* buf = run.stats->data;
  const uint32_t f = SOFTDLA_STATS_CLOCK_MHZ;
  cudlaTranslateCsvAttribute attr{};
  ASSERT_EQ(translate_stats(run.dev, buf, f, 0, CUDLA_GET_CSV_LENGTH, &attr), cudlaSuccess);
  const uint64_t need = attr.csvStreamLength;

  // Handles, pointers, frequency, index, attribute type.
  EXPECT_EQ(translate_stats(reinterpret_cast<cudlaDevHandle>(0x1234), buf, f, 0, CUDLA_GET_CSV_LENGTH, &attr),
            cudlaErrorInvalidDevice);
  EXPECT_EQ(translate_stats(nullptr, buf, f, 0, CUDLA_GET_CSV_LENGTH, &attr), cudlaErrorInvalidDevice);
  EXPECT_EQ(translate_stats(run.dev, buf, f, 0, CUDLA_GET_CSV_LENGTH, nullptr), cudlaErrorInvalidParam);
  EXPECT_EQ(translate_stats(run.dev, nullptr, f, 0, CUDLA_GET_CSV_LENGTH, &attr), cudlaErrorInvalidParam);
  EXPECT_EQ(translate_stats(run.dev, buf, 0, 0, CUDLA_GET_CSV_LENGTH, &attr), cudlaErrorInvalidParam);
  EXPECT_EQ(translate_stats(run.dev, buf, f, 1, CUDLA_GET_CSV_LENGTH, &attr), cudlaErrorInvalidParam);
  EXPECT_EQ(translate_stats(run.dev, buf, f, 0, cudlaTranslateCsvAttributeType(7), &attr), cudlaErrorInvalidAttribute);
  EXPECT_EQ(attr.csvStreamLength, need);  // untouched by the failures

  // The text call: no buffer, a buffer one byte short (nothing written, the length needed reported).
  std::vector<char> csv(need, 'z');
  attr = {need, nullptr};
  EXPECT_EQ(translate_stats(run.dev, buf, f, 0, CUDLA_GET_CSV_STATS, &attr), cudlaErrorInvalidParam);
  attr = {need - 1, csv.data()};
  EXPECT_EQ(translate_stats(run.dev, buf, f, 0, CUDLA_GET_CSV_STATS, &attr), cudlaErrorInvalidParam);
  EXPECT_EQ(attr.csvStreamLength, need);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), 'z'), std::ptrdiff_t(need));
  attr = {0, csv.data()};
  EXPECT_EQ(translate_stats(run.dev, buf, f, 0, CUDLA_GET_CSV_STATS, &attr), cudlaErrorInvalidParam);

  // Buffers that are not this module's statistics.
  std::vector<uint8_t> zeros(run.st_d.size, 0);
  EXPECT_EQ(translate_stats(run.dev, zeros.data(), f, 0, CUDLA_GET_CSV_LENGTH, &attr), cudlaErrorInvalidParam);
  std::vector<uint8_t> other(run.stats->data, run.stats->data + run.st_d.size);
  softdlaStatsHeader h;
  std::memcpy(&h, other.data(), sizeof h);
  h.numLayers += 1;  // another module's layer count
  std::memcpy(other.data(), &h, sizeof h);
  EXPECT_EQ(translate_stats(run.dev, other.data(), f, 0, CUDLA_GET_CSV_LENGTH, &attr), cudlaErrorInvalidParam);
  std::memcpy(other.data(), run.stats->data, run.st_d.size);
  const uint32_t bad_layer = 1000;
  std::memcpy(other.data() + sizeof h, &bad_layer, sizeof bad_layer);  // first record's layerIndex
  EXPECT_EQ(translate_stats(run.dev, other.data(), f, 0, CUDLA_GET_CSV_LENGTH, &attr), cudlaErrorInvalidParam);

  // No module on the handle: the layer names are gone.
  ASSERT_EQ(cudlaModuleUnload(run.mod, 0), cudlaSuccess);
  EXPECT_EQ(translate_stats(run.dev, buf, f, 0, CUDLA_GET_CSV_LENGTH, &attr), cudlaErrorInvalidModule);
  ASSERT_EQ(cudlaDestroyDevice(run.dev), cudlaSuccess);
  EXPECT_EQ(translate_stats(run.dev, buf, f, 0, CUDLA_GET_CSV_LENGTH, &attr), cudlaErrorInvalidDevice);
  run.dev = nullptr;
}

}  // namespace
}  // namespace softdla::testing
