#include "runtime_state.h"

#include <cstdlib>

#include "log.h"
#include "status.h"

namespace softdla::rt {
namespace {
// Handle and address ranges: recognisable in a debugger, never valid host pointers here.
constexpr uintptr_t kDeviceHandleBase = 0x5d1a00000000ull;
constexpr uintptr_t kModuleHandleBase = 0x5d1b00000000ull;
constexpr uint64_t kDlaAddressBase = 0xd1a000000000ull;
}  // namespace

uint64_t core_count() {
  static const uint64_t count = [] {
    const char* env = std::getenv("SOFTDLA_NUM_DEVICES");
    if (!env) return uint64_t(2);
    char* end = nullptr;
    const unsigned long v = std::strtoul(env, &end, 10);
    if (end == env || *end || v > 64) {
      log(LogLevel::kWarn, "SOFTDLA_NUM_DEVICES='", env, "' is not a number in 0..64; using 2");
      return uint64_t(2);
    }
    return uint64_t(v);
  }();
  return count;
}

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;  // never destroyed: handles may be used from static destructors
    reg->cores.resize(core_count());
    return reg;
  }();
  return *r;
}

cudlaDevHandle new_device_handle(Registry& r) {
  return reinterpret_cast<cudlaDevHandle>(kDeviceHandleBase + 16 * ++r.next_device);
}

cudlaModule new_module_handle(Registry& r) {
  return reinterpret_cast<cudlaModule>(kModuleHandleBase + 16 * ++r.next_module);
}

std::shared_ptr<DeviceState> find_device(cudlaDevHandle h) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const auto it = r.devices.find(reinterpret_cast<uintptr_t>(h));
  return it == r.devices.end() ? nullptr : it->second;
}

std::shared_ptr<ModuleState> find_module(cudlaModule h) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const auto it = r.modules.find(reinterpret_cast<uintptr_t>(h));
  return it == r.modules.end() ? nullptr : it->second;
}

cudlaStatus missing_module(cudlaModule h, const char* fn) {
  Registry& r = registry();
  bool orphaned = false;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    orphaned = r.orphaned_modules.count(reinterpret_cast<uintptr_t>(h)) != 0;
  }
  if (orphaned)
    return fail_status(cudlaErrorInvalidDevice, fn,
                       "the device handle this module was loaded on was destroyed (which unloaded it)");
  return fail_status(cudlaErrorInvalidModule, fn, "not a loaded module handle");
}

uint64_t allocate_dla_range(size_t size) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  // Leave a gap after each range so an overrun never lands in the next registration. Checked: a range
  // that would run past the top of the address space is refused rather than wrapped onto live ones.
  const uint64_t window = ~uint64_t(0) - kDlaAddressBase;  // addresses kDlaAddressBase .. 2^64 - 1
  uint64_t span = 0;
  if (__builtin_add_overflow(uint64_t(size), uint64_t(4096 + 255), &span)) return 0;
  span = span / 256 * 256;
  if (span > window - r.next_dla_address) return 0;
  const uint64_t addr = kDlaAddressBase + r.next_dla_address;
  r.next_dla_address += span;
  return addr;
}

TensorDescriptor statistics_descriptor(const Model& m) {
  TensorDescriptor d;
  d.name = "layerwise_statistics";
  d.size = 32 + 24 * uint64_t(m.ops.size());
  d.n = d.c = d.h = 1;
  d.w = d.size;
  d.data_format = CUDLA_DATA_FORMAT_NCHW;
  d.data_type = CUDLA_DATA_TYPE_UINT8;
  d.data_category = CUDLA_DATA_CATEGORY_FEATURE;
  d.pixel_format = CUDLA_PIXEL_FORMAT_FEATURE;
  d.pixel_mapping = CUDLA_PIXEL_MAPPING_PITCH_LINEAR;
  d.stride = {1, uint32_t(d.size), uint32_t(d.size), uint32_t(d.size), 0, 0, 0, 0};
  return d;
}


}  // namespace softdla::rt
