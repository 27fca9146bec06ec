// Scratch memory for packed operands that kernels read with large strides: 2 MiB-aligned and, where
// Linux has transparent huge pages on request (madvise), backed by huge pages, so that a tile reading
// a hundred channel planes a few KiB apart does not miss the data TLB on every plane.
#pragma once
#include <cstddef>
#include <cstdint>

namespace softdla::cpu {

class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer();
  // At least `bytes` bytes; the contents are not kept when it grows.
  uint8_t* reserve(size_t bytes);

 private:
  uint8_t* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace softdla::cpu
