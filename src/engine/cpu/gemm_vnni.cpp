#include "gemm_vnni.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "amx_tiles.h"
#include "gemm_lanes_s8.h"
#include "int8_requant_x86.h"
#include "x86_simd.h"

namespace softdla::cpu {
namespace {

#ifdef SOFTDLA_X86
// 8 rows x 32 columns (two panels): 16 accumulators, two B loads and one broadcast per quad.
constexpr size_t kRows512 = 8;
// 6 rows x 16 columns (one panel as two 8-lane halves): 12 accumulators of the 16 registers.
constexpr size_t kRows256 = 6;
// 4 rows x 64 columns (four panels) for the fused INT8 GEMM's whole column groups (tile4_wide_avx512).
constexpr size_t kRowsWide = 4, kWideCols = 4 * kPanel;
// How many tiles ahead the fused residual epilogue prefetches its operand and output (the 8 x 32
// tiles, rows innermost).
constexpr size_t kPrefetchTiles = 4;
// Output rows (channels) of a block of the fused GEMM's 4 x 64 tiles: the output (and residual) lines
// it keeps in flight. 32 measured best of 8-64 on Zen 4 (ResNet-50's 1x1 layers with their adds).
constexpr size_t kRowBlock = 32;

// Accumulators are named variables so they stay in registers: as an array GCC copies them through
// other registers and the stack on every iteration.
#define SOFTDLA_ROWS8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

// Row r's sums start from init[r] (minus its offset sum: they leave exact) and go to out + r * ld.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void tile2_avx512(const int32_t* const* a, const uint8_t* b0,
                                                                         const uint8_t* b1, size_t quads,
                                                                         const int32_t* init, int32_t* out, size_t ld) {
#define DECLARE(r) __m512i c##r##0 = _mm512_set1_epi32(init[r]), c##r##1 = c##r##0; const int32_t* a##r = a[r];
  SOFTDLA_ROWS8(DECLARE)
#undef DECLARE
  for (size_t q = 0; q < quads; ++q) {
    const __m512i x0 = _mm512_loadu_si512(b0 + q * 64), x1 = _mm512_loadu_si512(b1 + q * 64);
#define STEP(r)                                          \
  {                                                      \
    const __m512i w = _mm512_set1_epi32(a##r[q]);        \
    c##r##0 = _mm512_dpbusd_epi32(c##r##0, x0, w);       \
    c##r##1 = _mm512_dpbusd_epi32(c##r##1, x1, w);       \
  }
    SOFTDLA_ROWS8(STEP)
#undef STEP
  }
#define STORE(r) _mm512_storeu_si512(out + r * ld, c##r##0), _mm512_storeu_si512(out + r * ld + kPanel, c##r##1);
  SOFTDLA_ROWS8(STORE)
#undef STORE
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) void tile1_avx512(const int32_t* const* a, const uint8_t* b0,
                                                                         size_t quads, const int32_t* init,
                                                                         int32_t* out, size_t ld) {
#define DECLARE(r) __m512i c##r = _mm512_set1_epi32(init[r]); const int32_t* a##r = a[r];
  SOFTDLA_ROWS8(DECLARE)
#undef DECLARE
  for (size_t q = 0; q < quads; ++q) {
    const __m512i x0 = _mm512_loadu_si512(b0 + q * 64);
#define STEP(r) c##r = _mm512_dpbusd_epi32(c##r, x0, _mm512_set1_epi32(a##r[q]));
    SOFTDLA_ROWS8(STEP)
#undef STEP
  }
#define STORE(r) _mm512_storeu_si512(out + r * ld, c##r);
  SOFTDLA_ROWS8(STORE)
#undef STORE
}

#define SOFTDLA_ROWS4(X) X(0) X(1) X(2) X(3)

// 4 rows x 64 columns (four panels): 16 accumulators, four B loads and four broadcasts per quad. Each
// row's results fill a whole cache line of C, so the epilogue writes lines whole.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void tile4_wide_avx512(const int32_t* const* a,
                                                                              const uint8_t* b, size_t panel_bytes,
                                                                              size_t quads, const int32_t* init,
                                                                              int32_t* out, size_t ld) {
#define DECLARE(r)                                                                       \
  __m512i c##r##0 = _mm512_set1_epi32(init[r]), c##r##1 = c##r##0, c##r##2 = c##r##0, \
          c##r##3 = c##r##0;                                                             \
  const int32_t* a##r = a[r];
  SOFTDLA_ROWS4(DECLARE)
#undef DECLARE
  const uint8_t *b0 = b, *b1 = b + panel_bytes, *b2 = b + 2 * panel_bytes, *b3 = b + 3 * panel_bytes;
  for (size_t q = 0; q < quads; ++q) {
    const __m512i x0 = _mm512_loadu_si512(b0 + q * 64), x1 = _mm512_loadu_si512(b1 + q * 64);
    const __m512i x2 = _mm512_loadu_si512(b2 + q * 64), x3 = _mm512_loadu_si512(b3 + q * 64);
#define STEP(r)                                          \
  {                                                      \
    const __m512i w = _mm512_set1_epi32(a##r[q]);        \
    c##r##0 = _mm512_dpbusd_epi32(c##r##0, x0, w);       \
    c##r##1 = _mm512_dpbusd_epi32(c##r##1, x1, w);       \
    c##r##2 = _mm512_dpbusd_epi32(c##r##2, x2, w);       \
    c##r##3 = _mm512_dpbusd_epi32(c##r##3, x3, w);       \
  }
    SOFTDLA_ROWS4(STEP)
#undef STEP
  }
#define STORE(r)                                                                   \
  _mm512_storeu_si512(out + r * ld, c##r##0), _mm512_storeu_si512(out + r * ld + 16, c##r##1), \
      _mm512_storeu_si512(out + r * ld + 32, c##r##2), _mm512_storeu_si512(out + r * ld + 48, c##r##3);
  SOFTDLA_ROWS4(STORE)
#undef STORE
}

#define SOFTDLA_ROWS6(X) X(0) X(1) X(2) X(3) X(4) X(5)

__attribute__((target("avx2,avxvnni"))) void tile_avxvnni(const int32_t* const* a, const uint8_t* b, size_t quads,
                                                           const int32_t* init, int32_t* out, size_t ld) {
#define DECLARE(r) __m256i c##r##0 = _mm256_set1_epi32(init[r]), c##r##1 = c##r##0; const int32_t* a##r = a[r];
  SOFTDLA_ROWS6(DECLARE)
#undef DECLARE
  for (size_t q = 0; q < quads; ++q) {
    const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + q * 64));
    const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + q * 64 + 32));
#define STEP(r)                                          \
  {                                                      \
    const __m256i w = _mm256_set1_epi32(a##r[q]);        \
    c##r##0 = _mm256_dpbusd_avx_epi32(c##r##0, x0, w);   \
    c##r##1 = _mm256_dpbusd_avx_epi32(c##r##1, x1, w);   \
  }
    SOFTDLA_ROWS6(STEP)
#undef STEP
  }
#define STORE(r)                                                                \
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + r * ld), c##r##0),       \
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + r * ld + 8), c##r##1);
  SOFTDLA_ROWS6(STORE)
#undef STORE
}
#endif

// A register tile's rows from row `row` of A: a_rows[r] points at row + r's quads (the zero row past
// m), init[r] is minus its offset sum (0 past m), what the tile's sums start from so they leave exact.
inline void tile_rows(const int32_t* a_quads, const int32_t* offset_sums, size_t kq, size_t row, size_t rows,
                      size_t tile_rows, const int32_t* zero_row, const int32_t** a_rows, int32_t* init) {
  for (size_t r = 0; r < tile_rows; ++r) {
    a_rows[r] = r < rows ? a_quads + (row + r) * kq : zero_row;
    init[r] = r < rows ? -offset_sums[row + r] : 0;
  }
}

// One 8-row register tile of the AVX-512 GEMMs: rows [row, row + rows) of A against the panel pair at
// b0, b1 (b1 unused when width is one panel), columns [col, col + cols) of C.
struct Tile512 {
  const uint8_t *b0, *b1;
  size_t row, rows, col, cols, width;
};

// Visits the AVX-512 GEMMs' tiles, panel pairs outermost: a pair of B panels (2 x k x 16 bytes) stays in
// L1/L2 while every row block of A (all in L2) passes over it; rows outermost would stream the whole
// packed B once per row block.
template <class Fn>
void for_each_tile512(const uint8_t* bp, size_t m, size_t n, size_t kq, const Fn& fn) {
  const size_t panel_bytes = kq * kPanel * 4, np = panels(n);
  for (size_t p = 0; p < np; p += 2) {
    const uint8_t* b0 = bp + p * panel_bytes;
    const size_t cols = std::min(2 * kPanel, n - p * kPanel), width = p + 1 < np ? 2 * kPanel : kPanel;
    for (size_t row = 0; row < m; row += kRows512)
      fn(Tile512{b0, b0 + panel_bytes, row, std::min(kRows512, m - row), p * kPanel, cols, width});
  }
}

// Copies `rows` rows of a tile, `cols` columns each, into C (the offsets already taken back).
template <size_t W>
void copy_tile(const int32_t (*tile)[W], int32_t* c, size_t rows, size_t cols, size_t ldc) {
  for (size_t r = 0; r < rows; ++r) std::copy_n(tile[r], cols, c + r * ldc);
}

#ifdef SOFTDLA_X86
// AMX: C tiles of 16 rows x 16 columns (int32), A tiles of 16 rows x 16 quads (the weights, signed),
// B tiles of 16 quads x 16 columns (one panel's quads: 64 bytes a row, exactly the packed layout);
// tdpbsud multiplies signed A by unsigned B, so the activations' +128 offset is taken back as on VNNI
// (each block's rows, in L1, before the block goes on: starting the C tiles from loaded offsets instead of
// zero measured slower, at 4 more tile loads a block). Tiles 0-3 accumulate a 32 x 32 block, 4-5 hold A,
// 6-7 B (amx_tiles.h). The tile configuration is per thread: every call configures the tiles and releases
// them at the end (TileScope). Each block goes to block(tile, row, col, rows, cols) while it is in L1.
template <class Block>
__attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl"))) void gemm_amx_blocks(
    const int32_t* a_quads, const int32_t* offset_sums, const uint8_t* bp, size_t m, size_t n, size_t kq,
    const Block& block) {
  const TileScope tiles;
  const size_t a_stride = kq * 4, panel_bytes = kq * kPanel * 4, np = panels(n);
  alignas(64) int32_t tile[32][2 * kPanel];
  for (size_t p = 0; p < np; p += 2) {
    const uint8_t* b0 = bp + p * panel_bytes;
    const uint8_t* b1 = b0 + panel_bytes;  // past an odd last panel: the spare panel packed_u8_size adds
    const size_t cols = std::min(2 * kPanel, n - p * kPanel);
    for (size_t row = 0; row < m; row += 32) {
      const auto* a0 = reinterpret_cast<const uint8_t*>(a_quads + row * kq);
      const uint8_t* a1 = a0 + 16 * a_stride;  // past m: the next rows, or the 32 zero rows after A
      zero_block_tiles();
      for (size_t q = 0; q < kq; q += 16) {
        _tile_loadd(4, a0 + q * 4, a_stride);
        _tile_loadd(5, a1 + q * 4, a_stride);
        _tile_loadd(6, b0 + q * 64, 64);
        _tile_loadd(7, b1 + q * 64, 64);
        _tile_dpbsud(0, 4, 6);
        _tile_dpbsud(1, 4, 7);
        _tile_dpbsud(2, 5, 6);
        _tile_dpbsud(3, 5, 7);
      }
      _tile_stored(0, &tile[0][0], sizeof(tile[0]));
      _tile_stored(1, &tile[0][kPanel], sizeof(tile[0]));
      _tile_stored(2, &tile[16][0], sizeof(tile[0]));
      _tile_stored(3, &tile[16][kPanel], sizeof(tile[0]));
      const size_t rows = std::min<size_t>(32, m - row);
      for (size_t r = 0; r < rows; ++r) {
        const __m512i back = _mm512_set1_epi32(offset_sums[row + r]);
        _mm512_store_si512(tile[r], _mm512_sub_epi32(_mm512_load_si512(tile[r]), back));
        _mm512_store_si512(tile[r] + 16, _mm512_sub_epi32(_mm512_load_si512(tile[r] + 16), back));
      }
      block(tile, row, p * kPanel, rows, cols);
    }
  }
}

void gemm_amx(const int32_t* a_quads, const int32_t* offset_sums, const uint8_t* bp, int32_t* c, size_t m, size_t n,
              size_t kq, size_t ldc) {
  gemm_amx_blocks(a_quads, offset_sums, bp, m, n, kq,
                  [&](const int32_t (*tile)[2 * kPanel], size_t row, size_t col, size_t rows, size_t cols) {
                    copy_tile(tile, c + row * ldc + col, rows, cols, ldc);
                  });
}
#endif

#ifdef SOFTDLA_X86
// Rows [0, rows) of a tile of exact int32 sums, `cols` columns each (at most W), requantized with each
// row's window and stored as int8 (whole vectors unmasked, the tail under a mask).
// Inlined into each caller: as a shared function (the 4 x 64 tiles' and the lane tiles' epilogue) the
// 1x1 GEMM ran 8 % slower (ResNet-50's 64 -> 256 layer).
template <size_t W>
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline void emit_tile_plain(
    const int32_t (*tile)[W], const Int8Output& o, size_t row, size_t col, size_t rows, size_t cols) {
  for (size_t r = 0; r < rows; ++r) {
    const Window512 win(o.windows[row + r]);
    int8_t* const out = o.out + (row + r) * o.ld + col;
    win.with_form([&](auto form) __attribute__((target("avx512f,avx512bw,avx512vl"))) {
      size_t j = 0;
      for (; j + 64 <= cols; j += 64) _mm512_storeu_si512(out + j, form.apply64(tile[r] + j));
      for (; j < cols; j += 16) {
        const __m128i v = form.apply(_mm512_load_si512(tile[r] + j));
        if (cols - j >= 16) _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j), v);
        else _mm_mask_storeu_epi8(out + j, __mmask16((1u << (cols - j)) - 1), v);
      }
    });
  }
}

// The same added to the residual operand (o.other at the same elements) with `add`, a form of
// Residual512::with_form: whole lines of 64 results at a time (requant_add_64), the tail 16 at a time.
template <bool kConvSecond, size_t W, class Add>
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline void emit_tile_residual(
    const int32_t (*tile)[W], const Int8Output& o, const Add& add, size_t row, size_t col, size_t rows, size_t cols) {
  for (size_t r = 0; r < rows; ++r) {
    const Window512 win(o.windows[row + r]);
    const size_t at = (row + r) * o.ld + col;
    int8_t* const out = o.out + at;
    const int8_t* const other = o.other + at;
    win.with_form([&](auto form) __attribute__((target("avx512f,avx512bw,avx512vl"))) {
      size_t j = 0;
      for (; j + 64 <= cols; j += 64)
        _mm512_storeu_si512(out + j, requant_add_64<kConvSecond>(form, add, tile[r] + j, other + j));
      for (; j < cols; j += 16) {
        const size_t left = cols - j;
        const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
        const __m128i v = requant_add_16<kConvSecond>(form, add, _mm512_load_si512(tile[r] + j),
                                                      _mm_maskz_loadu_epi8(m, other + j));
        if (left >= 16) _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j), v);
        else _mm_mask_storeu_epi8(out + j, m, v);
      }
    });
  }
}

// The residual operand's lines (for reading, where there is one) and the output's (for writing) of rows
// [row, row + rows) at column col: the next column group of a tile's rows. The output's alone pays too:
// each line written is first read, and a block's rows are more streams than the hardware follows
// (ResNet-50's 64 -> 256 layer without the add at batch 8: 4.4-5.5 -> 3.2-3.3 ms).
inline void prefetch_next_lines(const Int8Output& o, size_t row, size_t rows, size_t col) {
  for (size_t r = row; r < row + rows; ++r) {
    if (o.other) __builtin_prefetch(o.other + r * o.ld + col, 0, 3);
    __builtin_prefetch(o.out + r * o.ld + col, 1, 3);
  }
}

// The residual operand's rows (for reading, where there is one) and the output's (for writing) of the
// tile kPrefetchTiles tiles of `tile_rows` below the one at (row, col), a line each (prefetchw where
// the caller's target has it: every AVX-512 CPU does).
inline void prefetch_ahead(const Int8Output& o, size_t m, size_t row, size_t col, size_t tile_rows) {
  const size_t r0 = row + kPrefetchTiles * tile_rows, r1 = std::min(m, r0 + tile_rows);
  for (size_t r = r0; r < r1; ++r) {
    if (o.other) __builtin_prefetch(o.other + r * o.ld + col, 0, 3);
    __builtin_prefetch(o.out + r * o.ld + col, 1, 3);
  }
}

// A tile's rows requantized into the output, added to the residual operand where the GEMM has one
// (add: o.residual's, built once per GEMM).
template <size_t W>
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline void emit_tile(const int32_t (*tile)[W],
                                                                          const Int8Output& o, const Residual512* add,
                                                                          size_t row, size_t col, size_t rows,
                                                                          size_t cols) {
  if (!add) return emit_tile_plain(tile, o, row, col, rows, cols);
  add->with_form(o.conv_second, [&](const auto& form, auto second)
                                    __attribute__((target("avx512f,avx512bw,avx512vl"))) {
    emit_tile_residual<decltype(second)::value>(tile, o, form, row, col, rows, cols);
  });
}

// gemm_vnni_s8 on AVX-512 (a function of its own: the target attribute makes its intrinsics legal).
// Whole groups of four panels take the 4 x 64 tile: it reads B at four loads to four broadcasts, and
// its rows leave as whole cache lines of the output (the 8 x 32 tile wrote each line in two halves,
// a column block apart); the columns past them take the 8 x 32 tiles. Each tile is requantized while
// it is in L1, never stored as int32.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,prfchw"))) void gemm_s8_avx512(
    const int32_t* a_quads, const int32_t* offset_sums, const uint8_t* bp, size_t m, size_t n, size_t k,
    const Int8Output& out) {
  const size_t kq = k_quads(k), panel_bytes = kq * kPanel * 4, wide = n / kWideCols * kWideCols;
  std::vector<int32_t> zero_row(kq, 0);
  std::optional<Residual512> add;
  if (out.residual) add.emplace(*out.residual);
  // Row blocks of kRowBlock output channels outermost, the 64-column groups inside, the block's 4-row
  // tiles innermost: the output planes (and with a residual add, the operand's, written layers ago: out
  // of L2 at ResNet's sizes) are walked along their rows by a block's rows at a time, where all m
  // rows at once (hundreds of streams, far more than the hardware prefetcher follows) left each tile
  // waiting on its operand's lines (ResNet-50's 64 -> 256 layer at batch 8: 5.7-7.4 -> 4.0-4.3 ms).
  // Each tile fetches its rows' lines of the next column group while it computes. The column group's
  // B (4 panels of k quads) is reused from L1 by the block's tiles.
  for (size_t block = 0; block < m; block += kRowBlock) {
    const size_t block_end = std::min(m, block + kRowBlock);
    for (size_t col = 0; col < wide; col += kWideCols)
      for (size_t row = block; row < block_end; row += kRowsWide) {
        const size_t rows = std::min(kRowsWide, m - row);
        const int32_t* a_rows[kRowsWide];
        int32_t init[kRowsWide];
        tile_rows(a_quads, offset_sums, kq, row, rows, kRowsWide, zero_row.data(), a_rows, init);
        alignas(64) int32_t tile[kRowsWide][kWideCols];
        if (col + kWideCols < wide) prefetch_next_lines(out, row, rows, col + kWideCols);
        tile4_wide_avx512(a_rows, bp + col / kPanel * panel_bytes, panel_bytes, kq, init, &tile[0][0], kWideCols);
        emit_tile(tile, out, add ? &*add : nullptr, row, col, rows, kWideCols);
      }
  }
  if (wide == n) return;
  for_each_tile512(bp + wide / kPanel * panel_bytes, m, n - wide, kq, [&](Tile512 t) {
    t.col += wide;
    const int32_t* a_rows[kRows512];
    int32_t init[kRows512];
    tile_rows(a_quads, offset_sums, kq, t.row, t.rows, kRows512, zero_row.data(), a_rows, init);
    alignas(64) int32_t tile[kRows512][2 * kPanel];
    prefetch_ahead(out, m, t.row, t.col, kRows512);
    if (t.width == 2 * kPanel) tile2_avx512(a_rows, t.b0, t.b1, kq, init, &tile[0][0], 2 * kPanel);
    else tile1_avx512(a_rows, t.b0, kq, init, &tile[0][0], 2 * kPanel);
    emit_tile(tile, out, add ? &*add : nullptr, t.row, t.col, t.rows, t.cols);
  });
}

// The lane-tile GEMMs' driver: blocks of 48 output channels outermost (their weights read once), the
// columns in groups of kLaneGroup inside; tile(w, rows, j, width, init, sums) computes the tile of
// `width` columns from column j into the group's sums, which then leave through the tile epilogue.
constexpr size_t kLaneGroup = 4 * kPanel;
template <class Tile>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"), always_inline)) inline void lane_blocks(
    const int32_t* lanes, const int32_t* offset_sums, size_t m, size_t n, size_t kq, const Int8Output& out,
    const Tile& tile) {
  constexpr size_t B = lanes_s8::kBlockRows;
  std::optional<Residual512> add;
  if (out.residual) add.emplace(*out.residual);
  alignas(64) int32_t sums[B][kLaneGroup];
  const PanelStreamScope stream_scope;
  for (size_t row = 0; row < m; row += B) {
    const size_t rows = std::min(B, m - row);
    alignas(64) int32_t init[B] = {};
    for (size_t r = 0; r < rows; ++r) init[r] = -offset_sums[row + r];
    const int32_t* w = lanes + row * kq;  // row is a block's first row: its block starts at row * kq
    for (size_t col = 0; col < n; col += kLaneGroup) {
      const size_t cols = std::min(kLaneGroup, n - col);
      // The next block's weights fetched into L2 while this one's tiles run, a share each column group
      // (panel_stream.h); a call of one block leaves its caller's stream.
      if (m > B)
        stream_panel_part(row + B < m ? lanes + (row + B) * kq : nullptr, B * kq * sizeof(int32_t), col / kLaneGroup,
                          (n + kLaneGroup - 1) / kLaneGroup);
      for (size_t c = 0; c < cols; c += lanes_s8::kTileCols)
        tile(w, rows, col + c, std::min(lanes_s8::kTileCols, cols - c), init, &sums[0][c]);
      emit_tile(sums, out, add ? &*add : nullptr, row, col, rows, cols);
    }
  }
}

// gemm_vnni_s8 on lane tiles (gemm_lanes_s8.h), the activations from the packed panels.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void gemm_lanes_s8_avx512(
    const int32_t* lanes, const int32_t* offset_sums, const uint8_t* bp, size_t m, size_t n, size_t k,
    const Int8Output& out) {
  const size_t kq = k_quads(k), panel_words = kq * kPanel;
  lane_blocks(lanes, offset_sums, m, n, kq, out,
              [&](const int32_t* w, size_t rows, size_t j, size_t width, const int32_t* init, int32_t* sums) {
                // A tile stays inside its 16-column panel (groups start on a panel, tiles are 8 wide).
                const int32_t* b = reinterpret_cast<const int32_t*>(bp) + j / kPanel * panel_words + j % kPanel;
                lane_tile_for<lanes_s8::Tiles>(rows, width)(w, b, kq, init, sums, kLaneGroup);
              });
}

// gemm_lanes_s8_gather on AVX-512 VNNI: each tile's columns gathered.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void gemm_lanes_gather_avx512(
    const int32_t* lanes, const int32_t* offset_sums, const uint8_t* base, const size_t* col_off,
    const size_t* k_off, size_t m, size_t n, size_t kq, const Int8Output& out) {
  lane_blocks(lanes, offset_sums, m, n, kq, out,
              [&](const int32_t* w, size_t rows, size_t j, size_t width, const int32_t* init, int32_t* sums) {
                const uint8_t* cols[lanes_s8::kTileCols];
                for (size_t p = 0; p < width; ++p) cols[p] = base + col_off[j + p];
                lane_tile_for<lanes_s8::GatherTiles>(rows, width)(w, cols, k_off, kq, init, sums, kLaneGroup);
              });
}

// gemm_vnni_s8 on AMX tiles: each 32 x 32 block requantized (and added to the residual) as it leaves
// the tiles, never stored as int32.
void gemm_amx_s8(const int32_t* a_quads, const int32_t* offset_sums, const uint8_t* bp, size_t m, size_t n,
                 size_t kq, const Int8Output& out) {
  std::optional<Residual512> add;
  if (out.residual) add.emplace(*out.residual);
  gemm_amx_blocks(a_quads, offset_sums, bp, m, n, kq,
                  [&](const int32_t (*tile)[2 * kPanel], size_t row, size_t col, size_t rows, size_t cols)
                      __attribute__((target("avx512f,avx512bw,avx512vl"))) {
                        emit_tile(tile, out, add ? &*add : nullptr, row, col, rows, cols);
                      });
}
#endif

}  // namespace

VnniWeights pack_a_vnni(const int8_t* a, size_t m, size_t k, bool lanes) {
  VnniWeights w;
  const size_t kq = k_quads(k);
  w.k = k;
  w.quads.assign((m + 32) * kq, 0);
  w.offset_sums.assign(m, 0);
  for (size_t i = 0; i < m; ++i) {
    int32_t sum = 0;
    for (size_t p = 0; p < k; ++p) sum += a[i * k + p];
    w.offset_sums[i] = 128 * sum;
    auto* bytes = reinterpret_cast<int8_t*>(w.quads.data() + i * kq);
    std::memcpy(bytes, a + i * k, k);
  }
  if (lanes) {
    constexpr size_t B = lanes_s8::kBlockRows;
    w.lanes.assign((m + B - 1) / B * B * kq, 0);
    for (size_t i = 0; i < m; ++i)
      for (size_t q = 0; q < kq; ++q) w.lanes[(i / B * kq + q) * B + i % B] = w.quads[i * kq + q];
  }
  return w;
}

void gemm_vnni(Isa isa, const int32_t* a_quads, const int32_t* offset_sums, const uint8_t* bp, int32_t* c, size_t m,
               size_t n, size_t k, size_t ldc) {
#ifdef SOFTDLA_X86
  const size_t kq = k_quads(k), panel_bytes = kq * kPanel * 4, np = panels(n);
  thread_local std::vector<int32_t> zero_row;
  zero_row.assign(kq, 0);
  if (isa == Isa::kAmx && gemm_on_amx(k)) return gemm_amx(a_quads, offset_sums, bp, c, m, n, kq, ldc);
  if (isa == Isa::kAmx) isa = Isa::kAvx512Vnni;
  // Panels outermost (for_each_tile512; the AVX-VNNI loop below likewise). Full tiles are stored
  // straight into C; a tile cut by C's last rows or columns goes through `tile`.
  if (isa == Isa::kAvx512Vnni) {
    for_each_tile512(bp, m, n, kq, [&](const Tile512& t) {
      const int32_t* a_rows[kRows512];
      int32_t init[kRows512];
      tile_rows(a_quads, offset_sums, kq, t.row, t.rows, kRows512, zero_row.data(), a_rows, init);
      alignas(64) int32_t tile[kRows512][2 * kPanel];
      const bool direct = t.rows == kRows512 && t.cols == t.width;
      int32_t* out = direct ? c + t.row * ldc + t.col : &tile[0][0];
      const size_t ld = direct ? ldc : 2 * kPanel;
      if (t.width == 2 * kPanel) tile2_avx512(a_rows, t.b0, t.b1, kq, init, out, ld);
      else tile1_avx512(a_rows, t.b0, kq, init, out, ld);
      if (!direct) copy_tile(tile, c + t.row * ldc + t.col, t.rows, t.cols, ldc);
    });
    return;
  }
  for (size_t p = 0; p < np; ++p) {
    const size_t cols = std::min(kPanel, n - p * kPanel);
    for (size_t row = 0; row < m; row += kRows256) {
      const size_t rows = std::min(kRows256, m - row);
      const int32_t* a_rows[kRows256];
      int32_t init[kRows256];
      tile_rows(a_quads, offset_sums, kq, row, rows, kRows256, zero_row.data(), a_rows, init);
      alignas(32) int32_t tile[kRows256][kPanel];
      const bool direct = rows == kRows256 && cols == kPanel;
      int32_t* out = direct ? c + row * ldc + p * kPanel : &tile[0][0];
      tile_avxvnni(a_rows, bp + p * panel_bytes, kq, init, out, direct ? ldc : kPanel);
      if (!direct) copy_tile(tile, c + row * ldc + p * kPanel, rows, cols, ldc);
    }
  }
#else
  (void)isa, (void)a_quads, (void)offset_sums, (void)bp, (void)c, (void)m, (void)n, (void)k, (void)ldc;
#endif
}

bool gemm_vnni_s8_applies(Isa isa) {
#ifdef SOFTDLA_X86
  return has_avx512(isa);
#else
  (void)isa;
  return false;
#endif
}

void gemm_vnni_s8(const int32_t* a_quads, const int32_t* offset_sums, const uint8_t* bp, size_t m, size_t n, size_t k,
                  const Int8Output& out, const int32_t* lanes) {
#ifdef SOFTDLA_X86
  if (gemm_on_amx(k)) return gemm_amx_s8(a_quads, offset_sums, bp, m, n, k_quads(k), out);
  if (lanes && lanes_s8::pays(m, n, k)) return gemm_lanes_s8_avx512(lanes, offset_sums, bp, m, n, k, out);
  gemm_s8_avx512(a_quads, offset_sums, bp, m, n, k, out);
#else
  (void)a_quads, (void)offset_sums, (void)bp, (void)m, (void)n, (void)k, (void)out, (void)lanes;
#endif
}

void gemm_lanes_s8_gather(const int32_t* lanes, const int32_t* offset_sums, const uint8_t* base, const size_t* col_off,
                          const size_t* k_off, size_t m, size_t n, size_t kq, const Int8Output& out) {
#ifdef SOFTDLA_X86
  gemm_lanes_gather_avx512(lanes, offset_sums, base, col_off, k_off, m, n, kq, out);
#else
  (void)lanes, (void)offset_sums, (void)base, (void)col_off, (void)k_off, (void)m, (void)n, (void)kq, (void)out;
#endif
}

}  // namespace softdla::cpu
