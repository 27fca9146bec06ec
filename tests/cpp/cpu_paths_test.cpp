// The CPU backend's FP16/FP32 kernels on every SOFTDLA_CPU_ISA path this CPU runs (cpu_isa.h):
// - the bulk fp16 <-> fp32 conversions (half_convert.h) against the scalar rules of numerics.h, bit for
//   bit: every half code, and floats around every rounding boundary, the saturation threshold,
//   subnormals, infinities and NaNs of both signs;
// - gemm_f32 (gemm.h): the AVX-512 and AVX2+FMA kernels give the same bits for every shape (short row
//   blocks, odd panel counts, partial panels, row slices), and the portable one agrees within rounding;
// - the INT8 residual add (int8_requant.h) with its rescales in the 32-bit form where they have one and
//   in the 64-bit form where not: every (x, e) pair against numerics' step-by-step direct form.
// - the INT8 window requantization: every accumulator of many windows and past their ends.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "aligned_vector.h"
#include "cpu_isa.h"
#include "gemm.h"
#include "half_convert.h"
#include "int8_requant.h"
#include "numerics.h"

using namespace softdla;

namespace {

std::vector<cpu::Isa> runnable_paths() {
  std::vector<cpu::Isa> out;
  for (cpu::Isa isa : {cpu::Isa::kPortable, cpu::Isa::kAvx2, cpu::Isa::kAvxVnni, cpu::Isa::kAvx512Vnni}) {
    const bool runs = isa == cpu::Isa::kAvxVnni ? cpu::detected_isa() == isa : isa <= cpu::detected_isa();
    if (runs) out.push_back(isa);
  }
  return out;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

TEST(HalfConvert, EveryHalfCodeToFloat) {
  // Odd lengths and offsets so the vector loops and their scalar tails both see every code.
  std::vector<uint16_t> in(0x10000 + 13);
  for (size_t i = 0; i < in.size(); ++i) in[i] = uint16_t(i);
  for (cpu::Isa isa : runnable_paths()) {
    for (size_t offset : {size_t(0), size_t(5)}) {
      const size_t n = in.size() - offset;
      std::vector<float> out(n);
      cpu::halves_to_floats(isa, in.data() + offset, out.data(), n);
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = in[offset + i];
        const float want = num::half_to_float(h);
        if (std::isnan(want)) {
          // Signalling NaN codes may come back quieted; sign and NaN-ness are kept.
          ASSERT_TRUE(std::isnan(out[i])) << cpu::isa_name(isa) << " " << h;
          ASSERT_EQ(bits(out[i]) >> 31, bits(want) >> 31) << cpu::isa_name(isa) << " " << h;
        } else {
          ASSERT_EQ(bits(out[i]), bits(want)) << cpu::isa_name(isa) << " " << h;
        }
      }
    }
  }
}

TEST(HalfConvert, FloatsToHalvesMatchScalarRule) {
  std::vector<float> in;
  // Around every half value: the value itself, the midpoints to its neighbours and one float ulp
  // either side of them (ties to even, subnormal ties, rounding up into the next binade).
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    for (uint32_t sign : {0u, 0x8000u}) {
      const float v = num::half_to_float(uint16_t(h | sign));
      const float next = num::half_to_float(uint16_t((h + 1) | sign));
      const float mid = h + 1 < 0x7c00 ? (v + next) / 2 : v;
      for (float x : {v, mid, std::nextafter(mid, 0.f), std::nextafter(mid, 2 * mid)}) in.push_back(x);
    }
  }
  for (float x : {65504.f, 65519.f, 65519.99f, 65520.f, 1e9f, std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min(),
                  std::ldexp(1.f, -25), std::ldexp(1.5f, -25), std::ldexp(1.f, -26), 0.f}) {
    in.push_back(x);
    in.push_back(-x);
  }
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7fffffffu, 0x7fa00000u}) {
    in.push_back(from_bits(nan));
    in.push_back(from_bits(nan | 0x80000000u));
  }
  uint32_t state = 12345;  // plus random bit patterns
  for (int i = 0; i < 200000; ++i) {
    state = state * 1664525u + 1013904223u;
    in.push_back(from_bits(state));
  }
  for (cpu::Isa isa : runnable_paths()) {
    for (size_t offset : {size_t(0), size_t(3)}) {
      const size_t n = in.size() - offset;
      std::vector<uint16_t> out(n);
      cpu::floats_to_halves(isa, in.data() + offset, out.data(), n);
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(out[i], num::float_to_half(in[offset + i]))
            << cpu::isa_name(isa) << " " << std::hex << bits(in[offset + i]);
    }
  }
}

TEST(GemmF32, FmaPathsGiveTheSameBits) {
  const auto paths = runnable_paths();
  uint32_t state = 99;
  auto uniform = [&] {
    state = state * 1664525u + 1013904223u;
    return float(int32_t(state >> 8) - (1 << 23)) / float(1 << 23);
  };
  // m: short blocks of every kernel height (1-11, 13, 20), several 12-row blocks, and 300 x 3000 for
  // more than one row slice; n: partial panels, odd and even panel counts.
  const size_t ms[] = {1, 3, 4, 5, 8, 9, 11, 12, 13, 20, 24, 37, 64, 300};
  const size_t ns[] = {1, 7, 16, 17, 31, 32, 33, 49, 64, 100};
  const size_t ks[] = {1, 2, 27, 64, 577, 3000};
  for (size_t m : ms)
    for (size_t n : ns)
      for (size_t k : ks) {
        if (m * n * k > size_t(40) << 20) continue;
        // b row-major with a panel of slack: gemm_f32_rows reads its rows up to a whole panel.
        std::vector<float> a(m * k), b(k * n + cpu::kPanel), bp(cpu::packed_f32_size(k, n), 0.f);
        for (float& x : a) x = uniform();
        for (float& x : b) x = uniform();
        cpu::pack_b_f32(b.data(), k, n, n, bp.data());
        const size_t ldc = n + 3;  // the columns past n must stay untouched
        std::vector<double> exact(m * n, 0.0);
        for (size_t i = 0; i < m; ++i)
          for (size_t p = 0; p < k; ++p)
            for (size_t j = 0; j < n; ++j) exact[i * n + j] += double(a[i * k + p]) * double(b[p * n + j]);
        std::vector<float> fma_result;
        for (cpu::Isa isa : paths) {
          std::vector<float> c(m * ldc, 1234.5f);
          cpu::gemm_f32(isa, a.data(), bp.data(), c.data(), m, n, k, ldc);
          for (size_t i = 0; i < m; ++i)
            for (size_t j = 0; j < ldc; ++j) {
              if (j >= n) {
                ASSERT_EQ(c[i * ldc + j], 1234.5f) << cpu::isa_name(isa);
                continue;
              }
              ASSERT_NEAR(c[i * ldc + j], exact[i * n + j], 1e-5 * double(k))
                  << cpu::isa_name(isa) << " m " << m << " n " << n << " k " << k;
            }
          // B read row-major (the widened rows of a 1x1 convolution) gives the same bits.
          std::vector<float> rows(m * ldc, 1234.5f);
          cpu::gemm_f32_rows(isa, a.data(), b.data(), n, rows.data(), m, n, k, ldc);
          ASSERT_EQ(std::memcmp(rows.data(), c.data(), c.size() * sizeof(float)), 0)
              << "rows " << cpu::isa_name(isa) << " m " << m << " n " << n << " k " << k;
          if (isa == cpu::Isa::kPortable) continue;
          if (fma_result.empty()) fma_result = c;
          else
            ASSERT_EQ(std::memcmp(c.data(), fma_result.data(), c.size() * sizeof(float)), 0)
                << cpu::isa_name(isa) << " m " << m << " n " << n << " k " << k;
        }
      }
}

// Rescales with and without a 32-bit form (builder-like Scale 2^16 without a shift, normalized
// multipliers with 8 to 37 bits of shift, power-of-two ratios whose ties must round alike, and large
// ratios that leave no room for one), through residual_add and requantize_residual on every path.
TEST(Int8Requant, ResidualAddMatchesTheDirectFormOnEveryPath) {
  uint64_t state = 0x243f6a8885a308d3ull;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(state >> 32);
  };
  std::vector<int8_t> xs, es;
  for (int x = -128; x < 128; ++x)
    for (int e = -128; e < 128; ++e) xs.push_back(int8_t(x)), es.push_back(int8_t(e));
  int narrow = 0, wide = 0, shared = 0;
  for (int c = 0; c < 60; ++c) {
    bool has_scale = c % 4 != 3;
    int32_t sm = c % 2 ? 65536 : int32_t((1u << 30) + next() % (1u << 30));
    unsigned ss = c % 2 ? 0 : 8 + next() % 30;
    int32_t tm = int32_t((1u << 30) + next() % (1u << 30));
    unsigned ts = 8 + next() % 30;
    if (c % 5 == 0) tm = 1 << 30, ts = 31;   // a ratio of one half: exact ties
    if (c % 7 == 0) tm = int32_t(3u << 29), ts = 8;  // a ratio of 2^22: no 32-bit form
    const int32_t lo = c % 3 == 0 ? INT32_MIN : (c % 3 == 1 ? 0 : -int32_t(next() % 100000));
    const int32_t hi = c % 3 == 2 ? int32_t(next() % 3000000) : INT32_MAX;
    const int32_t m = int32_t((1u << 30) + next() % (1u << 30));
    unsigned s = 20 + next() % 30;
    if (c >= 40) {  // both operands on one scale, as softdla's builder makes every Add: x * 2^16 + e * 2^16
      has_scale = true, sm = 65536, ss = 0, tm = 1 << 30, ts = 14;
      s = 40 + next() % 8;
    }
    const auto w = num::make_residual_window(has_scale, sm, ss, tm, ts, lo, hi, m, s);
    if (!w) continue;
    const cpu::ResidualForm form = cpu::residual_form(*w);
    (form.e.ok ? narrow : wide)++;
    shared += form.sum.ok;
    std::vector<int8_t> want(xs.size());
    for (size_t i = 0; i < xs.size(); ++i)
      want[i] = num::residual_direct(xs[i], es[i], has_scale, sm, ss, tm, ts, lo, hi, m, s);
    for (cpu::Isa isa : runnable_paths()) {
      std::vector<int8_t> got(xs.size());
      cpu::residual_add(isa, xs.data(), es.data(), form, got.data(), got.size());
      ASSERT_EQ(got, want) << "case " << c << " path " << cpu::isa_name(isa);
    }
  }
  EXPECT_GT(narrow, 0);  // every form was exercised
  EXPECT_GT(wide, 0);
  EXPECT_GE(shared, 15) << shared;  // found for (nearly) every shared-scale add
}

// A convolution's requantization in its window form (requant_window.h, the 64-bit products of
// int8_requant_x86.h): every accumulator of the window and past both ends, on every path, against
// numerics' direct form. Normalized multipliers with 36 to 41 bits of shift (windows of 2^13 to 2^19
// accumulators), biases of both signs, no clamp, ReLU and ReLU6-like clamps.
TEST(Int8Requant, WindowRequantizationMatchesTheDirectFormOnEveryPath) {
  uint64_t state = 0x13198a2e03707344ull;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(state >> 32);
  };
  int windows = 0;
  for (int c = 0; c < 64; ++c) {
    // Every fourth case a shift below 32 (a small multiplier): the form that shifts both product words,
    // beside the usual one that keeps their high words.
    const bool low_shift = c % 4 == 3;
    const int32_t m = low_shift ? int32_t(1 + next() % (1u << 14)) : int32_t((1u << 30) + next() % (1u << 30));
    const unsigned s = low_shift ? 16 + next() % 10 : 36 + next() % 6;
    const int32_t b = int32_t(next() % 400000) - 200000;
    const int32_t lo = c % 3 == 0 ? INT32_MIN : 0;
    const int32_t hi = c % 3 == 2 ? int32_t(next() % 4000000) : INT32_MAX;
    const auto w = num::make_requant_window(b, lo, hi, m, s);
    if (!w) continue;
    ++windows;
    std::vector<int32_t> acc;
    for (int64_t a = int64_t(w->lo) - 300; a <= int64_t(w->hi) + 300; ++a)
      acc.push_back(int32_t(std::clamp<int64_t>(a, INT32_MIN, INT32_MAX)));
    std::vector<int8_t> want(acc.size());
    for (size_t i = 0; i < acc.size(); ++i) want[i] = num::requant_direct(acc[i], b, lo, hi, m, s);
    for (cpu::Isa isa : runnable_paths()) {
      std::vector<int8_t> got(acc.size());
      cpu::requantize_window(isa, acc.data(), *w, got.data(), got.size());
      ASSERT_EQ(got, want) << "case " << c << " path " << cpu::isa_name(isa);
    }
  }
  EXPECT_GE(windows, 52);
}

// The engine's arena and the kernels' packed operands start on cache lines whatever their size and
// element type (malloc alone gave 16-byte alignment): every size from empty to past the mmap threshold,
// after growth and copies, and nothing lost on the way.
TEST(AlignedVector, StorageStartsOnACacheLine) {
  auto on_line = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % kCacheLine == 0; };
  for (size_t n : {1u, 3u, 17u, 64u, 1000u, 70000u, 300000u}) {
    AlignedVector<uint8_t> bytes(n, 7);
    AlignedVector<int32_t> words(n, -5);
    EXPECT_TRUE(on_line(bytes.data())) << n;
    EXPECT_TRUE(on_line(words.data())) << n;
    words.resize(3 * n + 1, 9);  // regrown: a new block, the old values moved
    EXPECT_TRUE(on_line(words.data())) << n;
    EXPECT_EQ(words[n - 1], -5);
    EXPECT_EQ(words[3 * n], 9);
    const AlignedVector<int32_t> copy = words;
    EXPECT_TRUE(on_line(copy.data())) << n;
    EXPECT_EQ(copy, words);
  }
}
