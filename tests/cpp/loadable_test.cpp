// Loadable round trip, descriptor derivation, memory planning, and the corruption test: truncations
// and thousands of random byte flips of a valid loadable each give a clean Error (or a loadable that
// still passes every check and runs), never a crash. Meant to run under ASan/UBSan too.
#include <gtest/gtest.h>

#include <random>

#include "engine.h"
#include "error.h"
#include "io_layout.h"
#include "loadable.h"
#include "memory_plan.h"
#include "model_checks.h"
#include "sample_model.h"

namespace softdla {
namespace {

std::vector<std::vector<uint8_t>> zero_buffers(const std::vector<IoBinding>& list) {
  std::vector<std::vector<uint8_t>> out;
  for (const IoBinding& io : list) out.emplace_back(io.desc.size, uint8_t(0x11));
  return out;
}

void run_once(const Engine& e) {
  auto in = zero_buffers(e.model().inputs), out = zero_buffers(e.model().outputs);
  std::vector<const void*> ip;
  std::vector<void*> op;
  for (auto& b : in) ip.push_back(b.data());
  for (auto& b : out) op.push_back(b.data());
  e.run(ip, op);
}

TEST(Loadable, RoundTripIsIdentical) {
  const std::vector<uint8_t> bytes = write_loadable(testing::make_sample_model());
  const Model a = read_loadable(bytes);
  EXPECT_EQ(a.version.major, 1);
  EXPECT_EQ(a.ops.size(), 15u);
  EXPECT_EQ(write_loadable(a), bytes);  // byte-identical re-serialization
  const Model b = read_loadable(write_loadable(a));
  EXPECT_TRUE(a == b);
}

TEST(Loadable, DescriptorsAreDerived) {
  const Model m = read_loadable(write_loadable(testing::make_sample_model()));
  const TensorDescriptor& in = m.inputs[0].desc;
  EXPECT_EQ(in.name, "images");
  EXPECT_EQ(in.size, 16u * 64u);  // hwc4 int8 on Orin: 16 px * 4 B = 64 B rows, 16 rows
  EXPECT_EQ(in.stride[0], 4u);
  EXPECT_EQ(in.stride[1], 64u);
  EXPECT_EQ(in.data_category, cudla_const::kCategoryImage);
  const TensorDescriptor& out = m.outputs[0].desc;
  EXPECT_EQ(out.size, 32u);  // 1x5x1x1 fp16 in chw16: one 32-byte atom
  EXPECT_EQ(out.data_format, cudla_const::kFormatNCxHWx);
}

TEST(Loadable, XavierLineStride) {
  const TensorDescriptor d = io_descriptor("x", {1, 3, 5, 5}, DataType::kInt8, TensorFormat::kDlaHwc4, Target::kXavier);
  EXPECT_EQ(d.stride[1], 32u);
  EXPECT_EQ(d.size, 160u);
}

TEST(Loadable, RejectsMissingIdentifier) {
  std::vector<uint8_t> bytes = write_loadable(testing::make_sample_model());
  bytes[4] = 'X';
  try {
    read_loadable(bytes);
    FAIL() << "accepted a buffer without the identifier";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("identifier"), std::string::npos);
  }
}

TEST(MemoryPlan, ReusesBuffersAndPassesCheck) {
  Model m = testing::make_sample_model();
  for (auto* list : {&m.inputs, &m.outputs})
    for (IoBinding& io : *list) {
      const Tensor& t = m.tensors[io.tensor];
      io.desc = io_descriptor(t.name, t.shape, t.dtype, io.format, m.target);
    }
  check_graph(m);
  m.memory_plan = plan_memory(m);
  EXPECT_NO_THROW(check_memory_plan(m));
  const std::vector<bool> inter = intermediate_mask(m);
  uint64_t total = 0;
  for (size_t t = 0; t < m.tensors.size(); ++t)
    if (inter[t]) total += element_count(m.tensors[t].shape) * element_size(m.tensors[t].dtype);
  EXPECT_LT(m.memory_plan.arena_size, total);  // something was reused
}

TEST(Engine, DeterministicAcrossRuns) {
  const Engine e(read_loadable(write_loadable(testing::make_sample_model())));
  auto in = zero_buffers(e.model().inputs);
  std::mt19937 rng(7);
  for (auto& b : in)
    for (auto& x : b) x = uint8_t(rng());
  std::vector<std::vector<uint8_t>> first;
  for (int rep = 0; rep < 3; ++rep) {
    auto out = zero_buffers(e.model().outputs);
    std::vector<const void*> ip;
    std::vector<void*> op;
    for (auto& b : in) ip.push_back(b.data());
    for (auto& b : out) op.push_back(b.data());
    e.run(ip, op);
    if (rep == 0) first = out;
    else EXPECT_EQ(out, first);
  }
}

TEST(Corruption, TruncationsAreRejected) {
  const std::vector<uint8_t> bytes = write_loadable(testing::make_sample_model());
  for (size_t len = 0; len < bytes.size(); ++len) {
    const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + long(len));
    EXPECT_THROW(read_loadable(cut), Error) << "length " << len;
  }
}

TEST(Corruption, RandomByteFlipsNeverCrash) {
  const std::vector<uint8_t> bytes = write_loadable(testing::make_sample_model());
  std::mt19937 rng(2026);
  int rejected = 0, loaded = 0;
  constexpr int kCases = 5000;
  for (int i = 0; i < kCases; ++i) {
    std::vector<uint8_t> b = bytes;
    const int flips = 1 + int(rng() % 4);
    for (int f = 0; f < flips; ++f) b[rng() % b.size()] = uint8_t(rng());
    try {
      const Engine e(read_loadable(b));
      run_once(e);  // whatever passes the checks must also execute safely
      ++loaded;
    } catch (const Error& e) {
      EXPECT_GT(std::string(e.what()).size(), 0u);
      ++rejected;
    }
  }
  EXPECT_EQ(rejected + loaded, kCases);
  EXPECT_GT(rejected, kCases / 4);
}

}  // namespace
}  // namespace softdla
