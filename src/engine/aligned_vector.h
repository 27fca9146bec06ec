// std::vector storage on 64-byte (cache-line) boundaries. glibc's malloc hands out 16-byte aligned
// blocks (large ones at 16 bytes past a page), so a kernel's 64-byte vector loads from a std::vector's
// data each touched two cache lines: the engine's arena and the kernels' packed operands and weights
// live in these (ResNet-50 INT8 at batch 8, one thread on Zen 5: 2 % from the arena alone).
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace softdla {

inline constexpr size_t kCacheLine = 64;

template <class T>
struct CacheAlignedAllocator {
  using value_type = T;
  CacheAlignedAllocator() = default;
  template <class U>
  CacheAlignedAllocator(const CacheAlignedAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kCacheLine))); }
  void deallocate(T* p, size_t) noexcept { ::operator delete(p, std::align_val_t(kCacheLine)); }
  template <class U>
  bool operator==(const CacheAlignedAllocator<U>&) const noexcept { return true; }
};

template <class T>
using AlignedVector = std::vector<T, CacheAlignedAllocator<T>>;

}  // namespace softdla
