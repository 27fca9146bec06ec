// One exception type for "the input is wrong": a corrupt loadable, a shape that breaks a DLA rule, a
// bad argument. Caught at every C boundary and turned into a status plus a log line.
#pragma once
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

namespace softdla {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws Error with the concatenation of its arguments (streamed; small ints print as numbers).
namespace detail {
// uint8_t/int8_t print as numbers, not characters.
template <class T>
const auto& printable(const T& v) { return v; }
inline int printable(const uint8_t& v) { return v; }
inline int printable(const int8_t& v) { return v; }
}  // namespace detail

template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream os;
  ((os << detail::printable(parts)), ...);
  throw Error(os.str());
}

}  // namespace softdla
