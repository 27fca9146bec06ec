// Test helper: the message of the softdla::Error a callable throws ("" when it throws none), so tests
// can assert on what an error says, not only that one happened.
#pragma once
#include <string>

#include "error.h"

namespace softdla::testing {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace softdla::testing
