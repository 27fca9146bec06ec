// cudlaMemRegister with sizes no buffer can have (issue 17): SIZE_MAX or 2^64 - 8703 for a 64-byte
// buffer were accepted, the DLA address computation wrapped, and the next registration got the DLA
// address of a live one and silently replaced it. Such sizes are cudlaErrorInvalidAddress (the status
// NVIDIA documents for an invalid size), and live registrations never share DLA addresses.
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <vector>

#include "cudla_fixture.h"

namespace softdla::testing {
namespace {

uint64_t addr(const uint64_t* p) { return reinterpret_cast<uint64_t>(p); }

TEST(CudlaMemory, SizesNoBufferCanHaveAreInvalidAddress) {
  cudlaDevHandle dev = nullptr;
  ASSERT_EQ(cudlaCreateDevice(0, &dev, CUDLA_CUDA_DLA), cudlaSuccess);
  AlignedBuffer buf(64);
  const uint64_t wrap_to_zero = ~uint64_t(0) - reinterpret_cast<uintptr_t>(buf.data) + 1;  // ptr + size == 2^64
  for (const uint64_t size : {uint64_t(SIZE_MAX), ~uint64_t(0) - 8702, wrap_to_zero, (uint64_t(1) << 57) + 1}) {
    uint64_t* dla = reinterpret_cast<uint64_t*>(0x1);
    EXPECT_EQ(cudlaMemRegister(dev, buf.ptr(), size_t(size), &dla, 0), cudlaErrorInvalidAddress) << size;
    EXPECT_EQ(dla, reinterpret_cast<uint64_t*>(0x1)) << "nothing is written on failure";
  }
  // The handle is still usable, and the buffer can be registered with its real size.
  uint64_t* dla = nullptr;
  EXPECT_EQ(cudlaMemRegister(dev, buf.ptr(), buf.size, &dla, 0), cudlaSuccess);
  EXPECT_EQ(cudlaMemUnregister(dev, dla), cudlaSuccess);
  EXPECT_EQ(cudlaDestroyDevice(dev), cudlaSuccess);
}

TEST(CudlaMemory, RejectedHugeSizeDoesNotAliasTheNextRegistration) {
  // The reproducer: a huge registration between two real ones made the second share the first's address.
  cudlaDevHandle dev = nullptr;
  ASSERT_EQ(cudlaCreateDevice(0, &dev, CUDLA_CUDA_DLA), cudlaSuccess);
  AlignedBuffer a(64), b(64), c(64);
  uint64_t *a_dla = nullptr, *b_dla = nullptr, *c_dla = nullptr;
  ASSERT_EQ(cudlaMemRegister(dev, a.ptr(), 64, &a_dla, 0), cudlaSuccess);
  EXPECT_NE(cudlaMemRegister(dev, b.ptr(), size_t(~uint64_t(0) - 8702), &b_dla, 0), cudlaSuccess);
  ASSERT_EQ(cudlaMemRegister(dev, c.ptr(), 64, &c_dla, 0), cudlaSuccess);
  EXPECT_NE(a_dla, c_dla);
  EXPECT_EQ(cudlaMemUnregister(dev, a_dla), cudlaSuccess);
  EXPECT_EQ(cudlaMemUnregister(dev, c_dla), cudlaSuccess);
  EXPECT_EQ(cudlaDestroyDevice(dev), cudlaSuccess);
}

TEST(CudlaMemory, LiveRegistrationsNeverOverlap) {
  // Large but possible sizes next to small ones, on two handles: every DLA range is disjoint from every
  // other live one (DLA address -> end), so a task address resolves to exactly one buffer.
  std::vector<cudlaDevHandle> devs(2, nullptr);
  for (auto& d : devs) ASSERT_EQ(cudlaCreateDevice(0, &d, CUDLA_CUDA_DLA), cudlaSuccess);
  std::vector<std::unique_ptr<AlignedBuffer>> bufs;
  std::map<uint64_t, uint64_t> ranges;
  for (int i = 0; i < 64; ++i) {
    bufs.push_back(std::make_unique<AlignedBuffer>(64));
    const size_t size = i % 4 == 0 ? size_t(1) << (40 + i % 16) : size_t(64 + i);  // up to 2^55 bytes
    uint64_t* dla = nullptr;
    ASSERT_EQ(cudlaMemRegister(devs[size_t(i) % 2], bufs.back()->ptr(), size, &dla, 0), cudlaSuccess) << i;
    ASSERT_EQ(addr(dla) % 256, 0u);
    const auto [it, fresh] = ranges.emplace(addr(dla), addr(dla) + size);
    ASSERT_TRUE(fresh) << "address handed out twice";
    if (it != ranges.begin()) {
      EXPECT_LE(std::prev(it)->second, it->first);
    }
    if (std::next(it) != ranges.end()) {
      EXPECT_LE(it->second, std::next(it)->first);
    }
  }
  for (auto& d : devs) EXPECT_EQ(cudlaDestroyDevice(d), cudlaSuccess);
}

TEST(CudlaMemory, TasksUseTheRegisteredSizeOnly) {
  // A registration of the real size still runs tasks; one byte short is refused at submit.
  Ready r;
  AlignedBuffer small(128);
  uint64_t* small_dla = nullptr;
  ASSERT_EQ(cudlaMemRegister(r.dev, small.ptr(), 127, &small_dla, 0), cudlaSuccess);
  cudlaTask t = r.prepared();
  EXPECT_EQ(cudlaSubmitTask(r.dev, &t, 1, nullptr, 0), cudlaSuccess);
  const uint64_t* short_in[] = {small_dla};
  t.inputTensor = short_in;
  EXPECT_EQ(cudlaSubmitTask(r.dev, &t, 1, nullptr, 0), cudlaErrorInvalidAddress);
}

}  // namespace
}  // namespace softdla::testing
