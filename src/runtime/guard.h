// No exception crosses the C ABI: every exported function runs its body through guarded().
#pragma once
#include <exception>
#include <new>

#include "error.h"
#include "status.h"

namespace softdla::rt {

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
