#include "scratch_buffer.h"

#include <cstdlib>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace softdla::cpu {

namespace {
constexpr size_t kHugePage = size_t(2) << 20;
}

ScratchBuffer::~ScratchBuffer() { std::free(data_); }

uint8_t* ScratchBuffer::reserve(size_t bytes) {
  if (bytes <= capacity_) return data_;
  std::free(data_);
  data_ = nullptr, capacity_ = 0;
  // Whole huge pages: the kernel backs an aligned, advised range with them as it is first touched.
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  data_ = static_cast<uint8_t*>(std::aligned_alloc(kHugePage, rounded));
  if (!data_) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  madvise(data_, rounded, MADV_HUGEPAGE);  // advice only: without huge pages it works as before
#endif
  capacity_ = rounded;
  return data_;
}

}  // namespace softdla::cpu
