// No exception crosses the C ABI: every exported function runs its body through guarded().
#pragma once
#include <cstring>
#include <exception>
#include <new>

#include "error.h"
#include "status.h"

namespace softdla::rt {

// The integer a C caller passed for an enum parameter. Callers may pass any int; in C++ merely loading
// an out-of-range value as the enum type is undefined, so read its bytes instead.
template <class E>
int enum_value(const E& e) noexcept {
  static_assert(sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

template <class Body>
cudlaStatus guarded(const char* function, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail_status(cudlaErrorOutOfResources, function, "out of host memory");
  } catch (const std::exception& e) {
    return fail_status(cudlaErrorUnknown, function, "internal error: ", e.what());
  } catch (...) {
    return fail_status(cudlaErrorUnknown, function, "internal error");
  }
}

}  // namespace softdla::rt
