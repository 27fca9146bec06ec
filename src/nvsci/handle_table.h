// Opaque NvSci handles: numbers from a counter that never repeats, looked up in a table (never
// dereferenced), so a freed, forged or wrong-type handle is reported as a bad parameter, not a crash.
// Each table has its own tag in the top bits, so a handle of one kind is never found in another table.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace softdla::nvsci {

template <typename T>
class HandleTable {
 public:
  explicit HandleTable(uint64_t tag) : tag_(tag << 48) {}

  uintptr_t add(std::shared_ptr<T> value) {
    std::lock_guard<std::mutex> lock(mutex_);
    uintptr_t h = static_cast<uintptr_t>(tag_ | (++next_ << 4));
    map_.emplace(h, std::move(value));
    return h;
  }
  std::shared_ptr<T> find(const void* handle) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = map_.find(reinterpret_cast<uintptr_t>(handle));
    return it == map_.end() ? nullptr : it->second;
  }
  // Removes the handle; returns what it held (null when it was not live).
  std::shared_ptr<T> remove(const void* handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = map_.find(reinterpret_cast<uintptr_t>(handle));
    if (it == map_.end()) return nullptr;
    auto v = std::move(it->second);
    map_.erase(it);
    return v;
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<uintptr_t, std::shared_ptr<T>> map_;
  uint64_t tag_;
  uint64_t next_ = 0;
};

template <typename H>
H to_handle(uintptr_t h) {
  return reinterpret_cast<H>(h);
}

}  // namespace softdla::nvsci
