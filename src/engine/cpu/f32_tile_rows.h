// The 12-row fp32 register tiles' addressing (gemm.cpp, conv_implicit_f32.cpp): the A rows are reached
// from two bases (rows 0-5 and 6-11) and three strides, not through twelve pointers: with twelve, GCC
// runs out of general registers and reloads the loop bound from the stack.
#pragma once
#include <cstddef>

namespace softdla::cpu {

#define SOFTDLA_F32_ROWS12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

// Byte offset of row r % 6 from its base: 0, l1, 2 l1, l3, 4 l1, l5 (each one address operand).
template <size_t r>
__attribute__((always_inline)) inline size_t row_offset(size_t l1, size_t l3, size_t l5) {
  constexpr size_t q = r % 6;
  if constexpr (q == 0) return 0;
  else if constexpr (q == 1) return l1;
  else if constexpr (q == 2) return 2 * l1;
  else if constexpr (q == 3) return l3;
  else if constexpr (q == 4) return 4 * l1;
  else return l5;
}

}  // namespace softdla::cpu
