// No exception crosses the C ABI: every exported function runs its body through guarded().
#pragma once
#include <cstring>
#include <exception>
#include <new>
#include <string>

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

// Hands `text` to a C caller by the size-query protocol of softdla's text exports: out NULL stores the size
// needed (with the NUL) in *size and succeeds; a buffer smaller than that is cudlaErrorInvalidParam, *size
// set to the size needed; else the text and its NUL are copied and *size is their size.
inline cudlaStatus copy_text_out(const char* function, const std::string& text, char* out, size_t* size) {
  const size_t need = text.size() + 1;
  const size_t had = *size;
  *size = need;
  if (!out) return cudlaSuccess;
  if (had < need) return fail_status(cudlaErrorInvalidParam, function, "the buffer holds ", had, " bytes; the text needs ", need);
  std::memcpy(out, text.c_str(), need);
  return cudlaSuccess;
}

}  // namespace softdla::rt
