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

// Names read from a corrupt file may hold any bytes: keep messages printable ASCII (\xNN escapes).
inline std::string escape_unprintable(const std::string& s) {
  static const char* const hex = "0123456789abcdef";
  std::string out;
  for (unsigned char ch : s) {
    if (ch >= 0x20 && ch < 0x7f) {
      out += char(ch);
    } else {
      out += "\\x";
      out += hex[ch >> 4];
      out += hex[ch & 15];
    }
  }
  return out;
}
}  // namespace detail

template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream os;
  ((os << detail::printable(parts)), ...);
  throw Error(detail::escape_unprintable(os.str()));
}

}  // namespace softdla
