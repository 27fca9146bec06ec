// Checked arithmetic for sizes computed from input (file headers, ONNX dims, API arguments): every
// product, sum and narrowing either gives the exact result or throws softdla::Error naming `what`, so
// a hostile value becomes a clear error instead of a wrapped size, a short allocation and a crash.
//
// Negative operands are rejected too (a size is never negative), so signed dims can be passed as they
// are. The result type is a template parameter: checked_product<int64_t>(dims, ...) checks against
// INT64_MAX for code that keeps counts in int64_t; the default is uint64_t.
#pragma once
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>
#include <utility>

#include "error.h"

namespace softdla {
namespace detail {
template <class T>
void check_not_negative(T v, std::string_view what) {
  if constexpr (std::is_signed_v<T>)
    if (v < 0) fail(what, ": ", int64_t(v), " is negative (a size or count must be >= 0)");
}
}  // namespace detail

// a * b, exactly.
template <std::integral R = uint64_t, std::integral A, std::integral B>
R checked_mul(A a, B b, std::string_view what) {
  detail::check_not_negative(a, what);
  detail::check_not_negative(b, what);
  R r;
  if (__builtin_mul_overflow(a, b, &r))
    fail(what, ": ", a, " x ", b, " overflows (the limit is ", std::numeric_limits<R>::max(), ")");
  return r;
}

// a + b, exactly.
template <std::integral R = uint64_t, std::integral A, std::integral B>
R checked_add(A a, B b, std::string_view what) {
  detail::check_not_negative(a, what);
  detail::check_not_negative(b, what);
  R r;
  if (__builtin_add_overflow(a, b, &r))
    fail(what, ": ", a, " + ", b, " overflows (the limit is ", std::numeric_limits<R>::max(), ")");
  return r;
}

// The product of every entry of `dims` (1 for an empty list: a scalar), exactly.
template <std::integral R = uint64_t, class Range>
R checked_product(const Range& dims, std::string_view what) {
  R n = 1;
  for (const auto d : dims) {
    detail::check_not_negative(d, what);
    if (__builtin_mul_overflow(n, d, &n))
      fail(what, ": the product of the dimensions overflows (the limit is ", std::numeric_limits<R>::max(), ")");
  }
  return n;
}

// v converted to R when it fits exactly, e.g. a uint64_t count to size_t or int64_t.
template <std::integral R, std::integral T>
R checked_cast(T v, std::string_view what) {
  if (!std::in_range<R>(v))
    fail(what, ": ", v, " is out of range (", std::numeric_limits<R>::min(), " to ", std::numeric_limits<R>::max(), ")");
  return R(v);
}

// A floating value (an ONNX attribute or constant) as an integer: NaN, infinities and values out of
// R's range throw (converting them is undefined behaviour); the fraction is truncated, as a C cast.
template <std::integral R>
R checked_int(double v, std::string_view what) {
  // Compare in double against bounds that are exact powers of two, so the test itself is exact.
  constexpr double lo = double(std::numeric_limits<R>::min());
  constexpr double hi_excl = 2.0 * double(std::numeric_limits<R>::max() / 2 + 1);
  const double t = std::trunc(v);
  if (!(t >= lo && t < hi_excl))  // false for NaN too
    fail(what, ": ", v, " is not a finite number in range (", std::numeric_limits<R>::min(), " to ",
         std::numeric_limits<R>::max(), ")");
  return R(t);
}

}  // namespace softdla
