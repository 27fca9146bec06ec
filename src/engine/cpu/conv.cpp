// Direct convolution (groups, dilation, padding, stride) as im2col + GEMM, with the SDP stage fused
// on each output row. INT8 accumulates exactly and saturates to int32 (docs/NUMERICS.md §Convolution).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "aligned_vector.h"
#include "channel_lanes.h"
#include "channel_step_rows.h"
#include "conv_amx_f16.h"
#include "conv_implicit.h"
#include "conv_implicit_f32.h"
#include "conv_winograd.h"
#include "cpu_isa.h"
#include "depthwise_f16_blocks.h"
#include "depthwise_f16_planes.h"
#include "depthwise_s8.h"
#include "depthwise_s8_vnni.h"
#include "element.h"
#include "gemm.h"
#include "gemm_lanes_s8.h"
#include "gemm_vnni.h"
#include "gemv_f32.h"
#include "gemv_s8_vnni.h"
#include "half_convert_avx512.h"
#include "half_convert.h"
#include "int8_pack.h"
#include "int8_requant.h"
#include "kernels.h"
#include "multiversion.h"
#include "numerics.h"
#include "prefetch_lines.h"
#include "sdp_chain.h"
#include "sdp_forms.h"
#include "thread_pool.h"
#include "x86_simd.h"

namespace softdla::cpu {
namespace {

constexpr size_t kIm2colBudget = size_t(1) << 22;  // elements of packed im2col scratch per unit
constexpr size_t kVnniPackBudget = size_t(1) << 20;  // bytes of packed VNNI quads per unit (L2-sized)
constexpr size_t kFloatTileBudget = size_t(1) << 18;  // floats of B and sums per float unit (1 MiB)
constexpr size_t kSmallGrid = 64;  // output pixels of a fused INT8 GEMM kept in one column tile
constexpr double kSerialMacs = 1 << 18;             // below this a convolution is not worth splitting

struct ConvGeometry {
  uint32_t C, H, W, K, R, S, OH, OW, groups, Cg, Kg;
  uint32_t sh, sw, dh, dw, pt, pl;
  size_t kdim() const { return size_t(Cg) * R * S; }
};

// Where element (k, j) of a packed right-hand side lives: k_offset(k) + panel * panel_stride +
// lane * lane_stride, with j = panel * kPanel + lane (see gemm.h).
struct PackedLayout {
  size_t panel_stride, lane_stride;
  size_t group;  // consecutive k per lane: 1 (fp32), 2 (int16 pairs)
  size_t k_offset(size_t k) const { return (k / group) * kPanel * group + k % group; }
};

// Walks the receptive fields of output pixels [col0, col0 + cols), tap by tap (k = (c, r, s)), handing
// `out` runs of values: out.start(k), then out.zeros(n) and out.run(p, stride, n) (n values of an input
// row from p, stride apart) in column order. `x` holds channel planes of `rows` input rows starting at
// input row `row0`; rows and columns outside the input are zeros. Work goes by output-row segments: for
// each tap the in-bounds columns of a segment are a strided run of one input row, so the inner loops
// have no division and no bounds test.
template <class T, class Out>
void im2col_walk(const T* x, size_t row0, size_t rows, const ConvGeometry& g, size_t col0, size_t cols, Out& out) {
  for (uint32_t c = 0; c < g.Cg; ++c)
    for (uint32_t r = 0; r < g.R; ++r)
      for (uint32_t s = 0; s < g.S; ++s) {
        out.start((size_t(c) * g.R + r) * g.S + s);
        const T* plane = x + size_t(c) * rows * g.W;
        // Output columns whose input column is inside [0, W): ow in [ow_lo, ow_hi).
        const int64_t shift = int64_t(s) * g.dw - g.pl;  // iw = ow * sw + shift
        const int64_t ow_lo = shift >= 0 ? 0 : (-shift + g.sw - 1) / g.sw;
        const int64_t last = int64_t(g.W) - 1 - shift;  // needs floor division: may be negative
        const int64_t ow_hi = last < 0 ? 0 : std::min<int64_t>(last / g.sw + 1, g.OW);
        size_t j = 0, oh = col0 / g.OW, ow = col0 % g.OW;
        while (j < cols) {
          const size_t len = std::min<size_t>(cols - j, g.OW - ow);
          const int64_t ih = int64_t(oh) * g.sh - g.pt + int64_t(r) * g.dh;
          if (ih < int64_t(row0) || ih >= int64_t(row0 + rows)) {
            out.zeros(len);
          } else {
            const T* src = plane + size_t(ih - int64_t(row0)) * g.W;
            const int64_t a = std::clamp<int64_t>(ow_lo, int64_t(ow), int64_t(ow + len));
            const int64_t e = std::clamp<int64_t>(ow_hi, a, int64_t(ow + len));
            out.zeros(size_t(a - int64_t(ow)));
            // A strided run is read under masks (even_bytes_avx512): its row kStridedRowsAhead output
            // rows below, fetched now.
            if (g.sw > 1 && e > a)
              prefetch_lines(src + (a * g.sw + shift), std::ptrdiff_t(kStridedRowsAhead * g.sh * g.W * sizeof(T)),
                             size_t(e - a) * g.sw * sizeof(T));
            out.run(src + (a * g.sw + shift), g.sw, size_t(e - a));
            out.zeros(size_t(int64_t(ow + len) - e));
          }
          j += len, ow = 0, ++oh;
        }
      }
}

// im2col_walk's values into a packed right-hand side (PackedLayout).
template <class T>
struct PackedOut {
  T* b;
  PackedLayout lay;
  T* dst = nullptr;
  size_t lane = 0;
  void start(size_t k) { dst = b + lay.k_offset(k), lane = 0; }
  void put(T v) {
    dst[lane * lay.lane_stride] = v;
    if (++lane == kPanel) lane = 0, dst += lay.panel_stride;
  }
  // Where lanes are adjacent (fp32 panels), whole runs up to the panel's end are filled or copied at once.
  void advance(size_t n) {
    if ((lane += n) == kPanel) lane = 0, dst += lay.panel_stride;
  }
  void zeros(size_t n) {
    if (lay.lane_stride != 1) {
      for (size_t i = 0; i < n; ++i) put(T(0));
      return;
    }
    for (size_t c; n; n -= c) {
      c = std::min(n, kPanel - lane);
      std::fill_n(dst + lane, c, T(0));
      advance(c);
    }
  }
  void run(const T* p, size_t stride, size_t n) {
    if (lay.lane_stride != 1 || stride != 1) {
      for (size_t i = 0; i < n; ++i, p += stride) put(*p);
      return;
    }
    for (size_t c; n; n -= c, p += c) {
      c = std::min(n, kPanel - lane);
      std::copy_n(p, c, dst + lane);
      advance(c);
    }
  }
};

#ifdef SOFTDLA_X86
// dst[i] = p[2 i] for i < n on AVX-512: 32 values a step, each step's bytes read under a mask that stops
// at its last value, so no byte past p[2 (n - 1)] is read and a row of any length is whole vectors.
// Why: the 16-byte steps below leave rows of 7 to 31 values (ResNet's stride-2 1x1 layers into 28 x 28,
// 14 x 14 and 7 x 7) mostly to the scalar loop, which took 18 % of such a layer on a Zen 5 core.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void even_bytes_avx512(const uint8_t* p, size_t n, uint8_t* dst) {
  for (size_t i = 0; i < n; i += 32) {
    const size_t values = std::min<size_t>(32, n - i);
    const __mmask64 load = (uint64_t(1) << (2 * values - 1)) - 1;
    const __m512i words = _mm512_maskz_loadu_epi8(load, p + 2 * i);  // value j in word j's low byte
    _mm256_mask_storeu_epi8(dst + i, __mmask32((uint64_t(1) << values) - 1), _mm512_cvtepi16_epi8(words));
  }
}
#endif

// dst[i] = p[i * stride] for i < n; int8 of stride 2 on AVX-512 (even_bytes_avx512), else sixteen at a
// time (the even bytes of 32). The vector steps stop one value early so that no load reaches past
// p[(n - 1) * stride].
template <class T>
void copy_strided(const T* p, size_t stride, size_t n, T* dst) {
  size_t i = 0;
#ifdef SOFTDLA_X86
  if constexpr (sizeof(T) == 1) {
    if (stride == 2 && has_avx512(active_isa()))
      return even_bytes_avx512(reinterpret_cast<const uint8_t*>(p), n, reinterpret_cast<uint8_t*>(dst));
    if (stride == 2) {
      const __m128i even = _mm_set1_epi16(0x00ff);
      for (; i + 16 < n; i += 16) {
        const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i));
        const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i + 16));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                         _mm_packus_epi16(_mm_and_si128(lo, even), _mm_and_si128(hi, even)));
      }
    }
  }
#endif
  for (; i < n; ++i) dst[i] = p[i * stride];
}

// im2col_walk's values as a row-major matrix [k][ld]: whole runs copied at once.
template <class T>
struct RowsOut {
  T* b;
  size_t ld;
  T* dst = nullptr;
  void start(size_t k) { dst = b + k * ld; }
  void zeros(size_t n) { std::fill_n(dst, n, T(0)), dst += n; }
  void run(const T* p, size_t stride, size_t n) {
    if (stride == 1) std::copy_n(p, n, dst);
    else copy_strided(p, stride, n, dst);
    dst += n;
  }
};

template <class T>
void im2col_packed(const T* x, size_t row0, size_t rows, const ConvGeometry& g, size_t col0, size_t cols, T* b,
                   const PackedLayout& lay) {
  PackedOut<T> out{b, lay};
  im2col_walk(x, row0, rows, g, col0, cols, out);
}

// One input channel per group (depthwise, or a channel multiplier): a direct sliding window over one
// plane. INT8 sums are exact in int32 (at most 32 x 32 x 2^14 per output).
template <class Acc, class In>
__attribute__((always_inline)) inline void depthwise_accumulate(const ConvGeometry& g, const In* x, const Acc* w,
                                                                Acc* acc) {
  std::fill(acc, acc + size_t(g.OH) * g.OW, Acc(0));
  // Output rows outermost, so a row of sums stays in L1 while every tap adds into it (taps in (r, s)
  // order for each output, as before: float sums are unchanged).
  for (uint32_t oh = 0; oh < g.OH; ++oh) {
    Acc* __restrict out = acc + size_t(oh) * g.OW;
    for (uint32_t r = 0; r < g.R; ++r) {
      const int64_t ih = int64_t(oh) * g.sh - g.pt + int64_t(r) * g.dh;
      if (ih < 0 || ih >= g.H) continue;
      for (uint32_t s = 0; s < g.S; ++s) {
        const Acc wv = w[r * g.S + s];
        const int64_t shift = int64_t(s) * g.dw - g.pl;  // iw = ow * sw + shift
        const int64_t ow_lo = shift >= 0 ? 0 : (-shift + g.sw - 1) / g.sw;
        const int64_t last = int64_t(g.W) - 1 - shift;
        const int64_t ow_hi = last < 0 ? 0 : std::min<int64_t>(last / g.sw + 1, g.OW);
        const In* __restrict row = x + size_t(ih) * g.W + shift;
        if (g.sw == 1)
          for (int64_t ow = ow_lo; ow < ow_hi; ++ow) out[ow] += wv * Acc(row[ow]);
        else
          for (int64_t ow = ow_lo; ow < ow_hi; ++ow) out[ow] += wv * Acc(row[ow * g.sw]);
      }
    }
  }
}

SOFTDLA_MULTIVERSION
void depthwise_s8(const ConvGeometry& g, const int8_t* x, const int32_t* w, int32_t* acc) {
  depthwise_accumulate(g, x, w, acc);
}

#ifdef SOFTDLA_X86
// count fp32 values, [images][channels], through the chain of `lanes` (value i is channel i % channels) and
// stored as fp16 (halves) or fp32 at out.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void store_lanes_avx512(const ChannelLanes& lanes, const float* v,
                                                                           size_t count, size_t channels, bool halves,
                                                                           void* out) {
  for (size_t i0 = 0; i0 < count; i0 += channels)
    for (size_t k = 0; k < channels; k += ChannelLanes::kLanes) {
      const size_t n = std::min(ChannelLanes::kLanes, channels - k);
      const __mmask16 m = n == 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
      __m512 x[1] = {_mm512_maskz_loadu_ps(m, v + i0 + k)};
      apply_channel_lanes(lanes.kinds.data(), lanes.block(k / ChannelLanes::kLanes), lanes.n_steps, x);
      if (halves) store_halves_avx512(x[0], static_cast<uint16_t*>(out) + i0 + k, m);
      else _mm512_mask_storeu_ps(static_cast<float*>(out) + i0 + k, m, x[0]);
    }
}
#endif

class ConvKernel final : public OpKernel {
 public:
  ConvKernel(const Model& m, const Op& op, const ConvParams& p)
      : chain_(m, op, p.post), dtype_(m.tensors[op.outputs[0]].dtype) {
    const Shape& x = m.tensors[op.inputs[0]].shape;
    const Shape& y = m.tensors[op.outputs[0]].shape;
    const Constant& w = m.constants[p.weights];
    g_ = {x[1], x[2], x[3], y[1], w.dims[2], w.dims[3], y[2], y[3], p.groups, x[1] / p.groups,
          y[1] / p.groups, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w, p.pad_top, p.pad_left};
    batch_ = x[0];
    const size_t count = w.data.size() / element_size(w.dtype);
    depthwise_ = g_.Cg == 1;
    pointwise_ = g_.R == 1 && g_.S == 1 && g_.sh == 1 && g_.sw == 1 && g_.pt == 0 && g_.pl == 0 && g_.OH == g_.H &&
                 g_.OW == g_.W;
    whole_plane_ = depthwise_ && dtype_ == DataType::kInt8 && g_.OH == 1 && g_.OW == 1 && g_.R == g_.H &&
                   g_.S == g_.W && g_.pt == 0 && g_.pl == 0 && (g_.R == 1 || g_.dh == 1) &&
                   (g_.S == 1 || g_.dw == 1) && size_t(g_.R) * g_.S < (size_t(1) << 17);
    // A fully connected layer (a 1x1 convolution over a 1x1 input) runs as matrix-vector products.
    const bool fully_connected = p.groups == 1 && g_.R == 1 && g_.S == 1 && g_.H == 1 && g_.W == 1 && g_.OH == 1 &&
                                 g_.OW == 1;
    if (dtype_ == DataType::kInt8) {
      const auto* raw = reinterpret_cast<const int8_t*>(w.data.data());
      vnni_ = !depthwise_ && g_.kdim() <= kVnniMaxK && active_isa() >= Isa::kAvxVnni;
      windows_ = conv_windows(p.post, g_.K);
      // A window whose accumulators never land on a negative rounding tie (a convolution without ReLU, as
      // ResNet's downsamples) rounds in the short form: the same bytes without the sign term's six
      // operations a vector (requant_window.h).
      if (windows_)
        for (num::RequantWindow& w : *windows_) num::fold_rounding_sign(w);
      // The implicit GEMM: vpdpbusd quads with AVX-512, int16 pairs with AVX2 (and AVX-VNNI CPUs, whose
      // 256-bit path is otherwise im2col); exact while K <= kVnniMaxK either way.
      const Isa isa = active_isa();
      // A strided 1x1 convolution without padding (ResNet's downsamples) is a pointwise one over the
      // subsampled input: on AVX-512 VNNI it takes the fused GEMM (about twice the implicit GEMM's rate
      // on such layers, whose packing is most of their work); the rows are gathered from the input.
      const bool strided_pointwise = g_.R == 1 && g_.S == 1 && g_.pt == 0 && g_.pl == 0 && p.pad_bottom == 0 &&
                                     p.pad_right == 0 && isa == Isa::kAvx512Vnni && p.groups == 1;
      // On plain AVX2 (no VNNI of any width) the implicit GEMM's int16 pairs take the 1x1 convolutions
      // too: the alternative is the im2col GEMM with 64-bit sums and the step-by-step chain.
      const bool pairs_pointwise = isa == Isa::kAvx2 && p.groups == 1;
      if (fully_connected && !depthwise_ && GemvS8Vnni::applies(isa, g_.C))
        gemv8_ = std::make_unique<GemvS8Vnni>(raw, g_.K, g_.C);
      else if (!depthwise_ && !strided_pointwise && g_.kdim() <= kVnniMaxK && isa >= Isa::kAvx2 &&
          (pairs_pointwise || ImplicitConvS8::applies(p.groups, g_.sh, g_.sw, g_.R, g_.S)))
        implicit_ = std::make_unique<ImplicitConvS8>(
            ImplicitGeometry{g_.C, g_.H, g_.W, g_.K, g_.R, g_.S, g_.OH, g_.OW, g_.sh, g_.sw, g_.dh, g_.dw, g_.pt, g_.pl},
            raw, !has_avx512(isa));
      else if (depthwise_) {
        w8_raw_.assign(raw, raw + count);
        const DepthwiseGeometry dg{g_.H, g_.W, g_.OH, g_.OW, g_.R, g_.S, g_.sh, g_.sw, g_.dh, g_.dw, g_.pt, g_.pl};
        // The VNNI kernel where it fits and the chain has the window form (a handful of outputs, a
        // global average pool lowered to a depthwise convolution, keeps its plain sums).
        if (windows_ && size_t(g_.OH) * g_.OW > 4 && DepthwiseS8Vnni::applies(isa, dg))
          dw_vnni_ = std::make_unique<DepthwiseS8Vnni>(dg, raw, g_.K);
      }
      else if (vnni_)
        // Deep GEMMs over a grid that 16-column panels fit badly (7 x 7): the weights also with output
        // channels on the lanes (gemm_lanes_s8.h), for the fused GEMM on AVX-512 VNNI.
        wv_ = pack_a_vnni(raw, g_.K, g_.kdim(),
                          g_.groups == 1 && windows_ && has_avx512(isa) && isa != Isa::kAmx &&
                              lanes_s8::pays(g_.K, size_t(g_.OH) * g_.OW, g_.kdim()));
      else w8_ = pack_a_s8(raw, g_.K, g_.kdim());
    } else {
      wf_.resize(count);
      for (size_t i = 0; i < count; ++i) {
        if (dtype_ == DataType::kFloat16) {
          uint16_t h;
          std::memcpy(&h, w.data.data() + 2 * i, 2);
          wf_[i] = num::half_to_float(h);
        } else {
          std::memcpy(&wf_[i], w.data.data() + 4 * i, 4);
        }
      }
      finite_weights_ = std::all_of(wf_.begin(), wf_.end(), [](float v) { return std::isfinite(v); });
      // The chain as channel steps, for the kernels that run it themselves (the depthwise blocks on AVX2
      // and AVX-512, the others on AVX-512).
      std::vector<ChannelStep> steps;
      const bool steps_fit = chain_.channel_steps(g_.K, steps);
      const bool channel_chain = has_avx512(active_isa()) && steps_fit;
      // A fully connected layer: matrix-vector products. Otherwise FP16 on AMX machines: the AMX-BF16
      // implicit GEMM (any stride); on AVX-512: the FMA one (stride 1, or a strided k x k kernel). Each keeps
      // its own copy of the weights.
      const ImplicitGeometryF32 implicit{g_.C, g_.H, g_.W, g_.K, g_.R,  g_.S,  g_.OH, g_.OW,
                                         g_.dh, g_.dw, g_.pt, g_.pl, g_.sh, g_.sw};
      // FP16 3x3 convolutions of stride 1: Winograd F(2x2, 3x3) where the layer is large enough, its
      // transformed weights pay for themselves (WinogradConvF16::pays) and the AMX-BF16 tiles (on AMX
      // machines) would not be faster. The direct kernel chosen below stays, for
      // inputs holding an infinity or NaN.
      const bool dense_f16 = !depthwise_ && dtype_ == DataType::kFloat16 && finite_weights_;
      const bool winograd_fits =
          dense_f16 && WinogradConvF16::applies(g_.R, g_.S, g_.sh, g_.sw, g_.dh, g_.dw, p.groups, g_.OH, g_.OW) &&
          WinogradConvF16::pays(g_.C, g_.K, batch_, active_isa());
      const bool plain_1x1 = g_.R == 1 && g_.S == 1 && g_.sh == 1 && g_.sw == 1 && g_.pt == 0 && g_.pl == 0 &&
                             g_.OH == g_.H && g_.OW == g_.W;
      const bool amx_f16 =
          dense_f16 && AmxConvF16::applies(p.groups, g_.C, g_.K, g_.R * g_.S, plain_1x1, winograd_fits);
      if (winograd_fits && !amx_f16)
        winograd_ = std::make_unique<WinogradConvF16>(
            WinogradGeometry{g_.C, g_.H, g_.W, g_.K, g_.OH, g_.OW, g_.pt, g_.pl}, wf_.data());
      if (fully_connected && GemvF32::applies(active_isa())) {
        gemv_ = std::make_unique<GemvF32>(wf_.data(), g_.K, g_.C, dtype_ == DataType::kFloat16);
        wf_ = {};
        // Its outputs are contiguous over the channels: the chain's channel steps sixteen channels a vector.
        if (channel_chain) gemv_lanes_ = std::make_unique<ChannelLanes>(steps, g_.K);
      } else if (amx_f16) {
        amx_f16_ = std::make_unique<AmxConvF16>(
            ImplicitGeometry{g_.C, g_.H, g_.W, g_.K, g_.R, g_.S, g_.OH, g_.OW, g_.sh, g_.sw, g_.dh, g_.dw, g_.pt, g_.pl},
            wf_.data());
        wf_ = {};
      } else if (!depthwise_ && ImplicitConvF32::applies(p.groups)) {
        // Strided convolutions too (3x3/2: +20-25 %, the 7x7/2 stem: +50 % against im2col; 1x1/2 since
        // its 7 x 7 outputs go on output-channel lane tiles: ResNet-50's last downsample 4.1-4.4 -> 2.2 ms,
        // the others 15-30 % faster).
        implicit_f32_ = std::make_unique<ImplicitConvF32>(implicit, wf_.data());
        wf_ = {};
      }
      // FP16 depthwise (one output channel per input channel) sixteen channels at a time on AVX-512, eight on
      // AVX2, its chain and store fused, where the chain is channel steps.
      // Planes wide enough to fill the vectors go one plane at a time on AVX-512 (depthwise_f16_planes.h:
      // no transposes, one stream in and one out).
      if (depthwise_ && g_.Kg == 1 && dtype_ == DataType::kFloat16 && finite_weights_ && steps_fit) {
        const DepthwiseGeometry dg{g_.H, g_.W, g_.OH, g_.OW, g_.R, g_.S, g_.sh, g_.sw, g_.dh, g_.dw, g_.pt, g_.pl};
        if (DepthwiseF16Planes::applies(active_isa(), dg))
          dw_planes_ = std::make_unique<DepthwiseF16Planes>(dg, g_.K, wf_.data(), steps);
        else if (DepthwiseF16Blocks::applies(active_isa()))
          dw_f16_ = std::make_unique<DepthwiseF16Blocks>(dg, g_.K, wf_.data(), steps);
      }
      // The AVX-512 FP16 kernels store their results themselves where the chain is channel steps.
      if ((implicit_f32_ || winograd_ || amx_f16_) && dtype_ == DataType::kFloat16 && channel_chain)
        half_direct_ = true, half_steps_ = std::move(steps), half_lanes_ = ChannelLanes(half_steps_, g_.K),
        half_rows_ = ChannelStepRows(half_steps_, g_.K);
    }
  }

  // An INT8 convolution takes the residual add after it (an SDP op adding two int8 tensors of the
  // output's shape, in the residual window form): each run of results is added to the other operand
  // as it is written, exactly as the add's own kernel would, and the intermediate is never stored.
  // An FP16 convolution on AVX-512 takes it too where the add's chain is the add then per-channel steps
  // (SdpChain::residual_halves_form): its results are rounded to fp16 as the unfused store would, then
  // added and stored by the add's chain in the same pass.
  bool fuse_next(const Model& m, const Op& next, size_t input) override {
    const auto* p = std::get_if<SdpParams>(&next.params);
    if ((dtype_ != DataType::kInt8 && dtype_ != DataType::kFloat16) || !p || next.inputs.size() != 2) return false;
    const Tensor& out = m.tensors[next.outputs[0]];
    for (uint32_t t : {next.inputs[0], next.inputs[1], next.outputs[0]})
      if (m.tensors[t].shape != out.shape || m.tensors[t].dtype != dtype_) return false;
    residual_swapped_ = input == 1;
    if (dtype_ == DataType::kFloat16) {
      auto chain = std::make_unique<SdpChain>(m, next, *p);
      if (!chain->residual_halves_form(chain_)) return false;
      // The GEMM's own stores take the add too where its steps after the add are channel steps (the form
      // guarantees it); otherwise the runs go through store_float.
      if (half_direct_ && !chain->channel_steps(g_.K, half_after_, true)) half_direct_ = false;
      if (half_direct_)
        half_after_lanes_ = ChannelLanes(half_after_, g_.K), half_after_rows_ = ChannelStepRows(half_after_, g_.K);
      residual_f16_ = std::move(chain);
      return true;
    }
    const auto window = residual_window(next, *p);
    if (window) {
      residual_ = residual_form(*window);
      residual_->conv_in_range = windows_ && std::all_of(windows_->begin(), windows_->end(), num::window_in_int8);
    }
    return window.has_value();
  }

  void run(const OpIo& io, ThreadPool& pool) const override {
    const size_t kdim = g_.kdim(), ohw = size_t(g_.OH) * g_.OW;
    if (dw_planes_ && !residual_f16_) {
      const auto* x = static_cast<const uint16_t*>(io.inputs[0]);
      auto* y = static_cast<uint16_t*>(io.output);
      const size_t threads = pool.size(), units = dw_planes_->units(batch_, threads);
      const size_t bands = units / (size_t(batch_) * g_.K);
      pool.parallel_for(units, [&](size_t b, size_t e) { dw_planes_->run(x, y, threads, b, e); },
                        ThreadPool::min_items(ohw * kdim / bands));
      return;
    }
    if (dw_f16_ && !residual_f16_) {
      const size_t units = dw_f16_->units(batch_, pool.size());
      const auto* x = static_cast<const uint16_t*>(io.inputs[0]);
      auto* y = static_cast<uint16_t*>(io.output);
      pool.parallel_for(units, [&](size_t b, size_t e) { dw_f16_->run(x, y, batch_, pool.size(), b, e); },
                        ThreadPool::min_items(size_t(batch_) * g_.K * ohw * kdim / units));
      return;
    }
    if (whole_plane_ && windows_ && !residual_) return run_whole_plane_s8(io, pool);
    if (depthwise_) {
      const size_t planes = size_t(batch_) * g_.K;
      pool.parallel_for(planes, [&](size_t b, size_t e) {
        if (dw_vnni_) return run_depthwise_vnni(io, b, e);
        // The thread's buffers looked up once for the chunk, not per plane.
        thread_local DepthwiseBuffers buffers;
        DepthwiseScratch& scratch = depthwise_scratch();
        for (size_t p = b; p < e; ++p)
          run_depthwise_plane(io, p, p > b && (p - 1) / g_.Kg == p / g_.Kg, buffers, scratch);
      }, ThreadPool::min_items(ohw * kdim));
      return;
    }
    if (gemv_) return run_gemv(io, pool);
    if (gemv8_) return run_gemv8(io, pool);
    if (winograd_ && run_winograd(io, pool)) return;
    if (implicit_) return run_implicit(io, pool);
    if (implicit_f32_) return run_implicit_f32(io, pool);
    if (amx_f16_) return run_amx_f16(io, pool);
    // Column tiles: whole panels, small enough for the scratch budget, and enough of them to keep
    // every core busy.
    const size_t per_image = size_t(batch_) * g_.groups;
    // The fused VNNI GEMM takes any number of 16-column panels (pairs, and a single one last): one tile
    // per thread in whole panels shares a small image out evenly (MobileNetV2's and ResNet-50's 14x14
    // layers: 112 + 84 columns; 64 + 64 + 64 + 4 in panel pairs left one thread 128 columns, the other 80).
    const bool fused = vnni_ && windows_ && gemm_vnni_s8_applies(active_isa());
    const size_t spread = fused ? pool.size() : 2 * pool.size();
    // A grid of kSmallGrid pixels or fewer (7 x 7) stays whole: its threads share the output channels
    // instead (run_unit's split), where halves of 49 columns in whole panels left one thread 32, the other
    // 17 (ResNet-50's and MobileNetV2's last stage at two threads: 5-11 % faster).
    const size_t want_tiles = fused && size_t(g_.OH) * g_.OW <= kSmallGrid
                                  ? 1
                                  : std::max<size_t>(1, (spread + per_image - 1) / per_image);
    // The VNNI kernel takes panels in pairs, and its packed bytes should stay within L2.
    const size_t gran = vnni_ && !fused ? 2 * kPanel : kPanel, budget = vnni_ ? kVnniPackBudget : kIm2colBudget;
    size_t tile = std::max<size_t>(gran, budget / std::max<size_t>(kdim, 1) / gran * gran);
    // Float tiles: a k block of their B (im2col or the widened rows, kGemmBlockK rows) and their fp32 sums
    // within L2, since the 6-row GEMM passes over a block of B once per row block and the chain then reads
    // the sums again. The tiles an image needs at that size are made even (196 columns: one tile, not
    // 192 + 4).
    if (dtype_ != DataType::kInt8) {
      const size_t depth = std::min(kdim, kGemmBlockK);
      const size_t most = std::max<size_t>(gran, kFloatTileBudget / (depth + g_.Kg) / gran * gran);
      const size_t count = (ohw + most - 1) / most;
      tile = ((ohw + count - 1) / count + gran - 1) / gran * gran;
    }
    tile = std::min(tile, std::max<size_t>(gran, ((ohw + want_tiles - 1) / want_tiles + gran - 1) / gran * gran));
    const size_t tiles = (ohw + tile - 1) / tile;
    const size_t units = per_image * tiles;
    // Waking the workers costs tens of microseconds: tiny convolutions run on the calling thread.
    const double macs = double(batch_) * double(g_.K) * double(ohw) * double(kdim);
    if (macs < kSerialMacs) {
      for (size_t u = 0; u < units; ++u) run_unit(io, u, tile, tiles, nullptr);
      return;
    }
    if (units >= pool.size() || g_.Kg < 8) {
      pool.parallel_for(units, [&](size_t b, size_t e) {
        for (size_t u = b; u < e; ++u) run_unit(io, u, tile, tiles, nullptr);
      });
    } else {
      for (size_t u = 0; u < units; ++u) run_unit(io, u, tile, tiles, &pool);
    }
  }

 private:
  // One (image, group, column tile): packed im2col, GEMM over the group's output channels, SDP.
  // With `split`, the output channels are shared out over the pool.
  void run_unit(const OpIo& io, size_t unit, size_t tile, size_t tiles, ThreadPool* split) const {
    const size_t t = unit % tiles, ng = unit / tiles;
    const uint32_t grp = uint32_t(ng % g_.groups), n = uint32_t(ng / g_.groups);
    const size_t ohw = size_t(g_.OH) * g_.OW, col0 = t * tile, cols = std::min(tile, ohw - col0);
    const size_t kdim = g_.kdim(), in_plane = size_t(g_.H) * g_.W;
    const size_t in_offset = size_t(n) * g_.C * in_plane;
    const size_t out_base = size_t(n) * g_.K;
    const size_t k_first = size_t(grp) * g_.Kg;
    const size_t chan0 = in_offset + size_t(grp) * g_.Cg * in_plane;
    // Input rows this tile reads: converted once into scratch (int8 -> int16, fp16 -> fp32) instead of
    // once per kernel tap.
    const size_t oh0 = col0 / g_.OW, oh1 = (col0 + cols - 1) / g_.OW;
    const int64_t lo = std::max<int64_t>(0, int64_t(oh0) * g_.sh - g_.pt);
    const int64_t hi = std::min<int64_t>(g_.H, int64_t(oh1) * g_.sh - g_.pt + int64_t(g_.R - 1) * g_.dh + 1);
    const size_t row0 = size_t(lo), rows = hi > lo ? size_t(hi - lo) : 0;
    if (dtype_ == DataType::kInt8 && vnni_) {
      run_unit_vnni(io, n, k_first, chan0, out_base, col0, cols, split);
    } else if (dtype_ == DataType::kInt8) {
      thread_local std::vector<int16_t> src, b;
      src.resize(size_t(g_.Cg) * rows * g_.W);
      const int8_t* x = static_cast<const int8_t*>(io.inputs[0]) + chan0;
      for (uint32_t c = 0; c < g_.Cg; ++c)
        std::copy_n(x + c * in_plane + row0 * g_.W, rows * g_.W, src.data() + size_t(c) * rows * g_.W);
      b.assign(packed_s8_size(kdim, cols), 0);
      im2col_packed<int16_t>(src.data(), row0, rows, g_, col0, cols, b.data(), {k_pairs(kdim) * kPanel * 2, 2, 2});
      // A thread_local named inside the lambda would be the worker's own copy: pass the pointer.
      const int16_t* packed = b.data();
      auto rows = [&](size_t r0, size_t r1) {
        thread_local std::vector<int64_t> acc;
        acc.resize((r1 - r0) * cols);
        const size_t kp = k_pairs(kdim);
        gemm_s8(w8_.data() + (k_first + r0) * kp, packed, acc.data(), r1 - r0, cols, kdim, cols);
        for (size_t r = r0; r < r1; ++r) {
          int64_t* v = acc.data() + (r - r0) * cols;
          for (size_t j = 0; j < cols; ++j) v[j] = num::sat32(v[j]);
          const uint32_t k = uint32_t(k_first + r);
          emit_int8(io, (out_base + k) * ohw + col0, cols,
                    [&](int8_t* out) { chain_.run_int8(v, cols, n, k, col0, io.inputs.data(), out); });
        }
      };
      split_rows(rows, g_.Kg, split);
    } else {
      thread_local std::vector<float> src, b;
      // An FP16 1x1 convolution of stride 1 without padding off AVX-512, 64 input channels or more: the
      // widened input rows are B as they are (row-major, a row per input channel), so no im2col copy
      // (MobileNetV2's 576->96 at 14x14: -17 %). Below 64 the copy is cheap against the tiles, which read
      // packed panels faster (16->96 at 112x112: +18 % on the rows).
      const bool rows_as_b =
          dtype_ == DataType::kFloat16 && pointwise_ && kdim >= 64 && !has_avx512(active_isa());
      const PackedLayout lay{kdim * kPanel, 1, 1};
      if (!rows_as_b) {
        // im2col writes every column below `cols`; only the lanes past it in the last panel need zeros.
        b.resize(packed_f32_size(kdim, cols));
        if (cols % kPanel)
          for (size_t k = 0; k < kdim; ++k)
            std::fill_n(b.data() + packed_f32_index(k, cols, kdim), kPanel - cols % kPanel, 0.f);
      }
      if (dtype_ == DataType::kFloat16) {
        // kPanel floats past the rows: the GEMM reads B rows up to a whole panel (values unused).
        src.resize(size_t(g_.Cg) * rows * g_.W + kPanel);
        std::fill_n(src.end() - kPanel, kPanel, 0.f);
        const uint16_t* x = static_cast<const uint16_t*>(io.inputs[0]) + chan0;
        for (uint32_t c = 0; c < g_.Cg; ++c)
          halves_to_floats(x + c * in_plane + row0 * g_.W, src.data() + size_t(c) * rows * g_.W, rows * g_.W);
        if (!rows_as_b) im2col_packed<float>(src.data(), row0, rows, g_, col0, cols, b.data(), lay);
      } else {
        im2col_packed<float>(static_cast<const float*>(io.inputs[0]) + chan0, 0, g_.H, g_, col0, cols, b.data(), lay);
      }
      const float* packed = b.data();
      const float* b_rows = rows_as_b ? src.data() + (col0 - row0 * g_.W) : nullptr;  // column col0, channel 0
      const size_t ldb = rows * g_.W;
      auto rows = [&](size_t r0, size_t r1) {
        thread_local std::vector<float> acc;
        acc.resize((r1 - r0) * cols);
        const float* a = wf_.data() + (k_first + r0) * kdim;
        if (rows_as_b) gemm_f32_rows(active_isa(), a, b_rows, ldb, acc.data(), r1 - r0, cols, kdim, cols);
        else gemm_f32(a, packed, acc.data(), r1 - r0, cols, kdim, cols);
        for (size_t r = r0; r < r1; ++r) {
          float* v = acc.data() + (r - r0) * cols;
          const uint32_t k = uint32_t(k_first + r);
          store_float(io, v, cols, n, k, (out_base + k) * ohw + col0, col0);
        }
      };
      split_rows(rows, g_.Kg, split);
    }
  }

  // INT8 convolutions without im2col (conv_implicit.h: k x k, or strided), image by image; the sums are
  // requantized as run_unit_vnni does.
  void run_implicit(const OpIo& io, ThreadPool& pool) const {
    const size_t ohw = size_t(g_.OH) * g_.OW, in_image = size_t(g_.C) * g_.H * g_.W;
    // With the window form, the AVX-512 blocks store int8 results themselves.
    std::optional<Int8Output> direct;
    if (windows_) {
      direct.emplace();
      direct->windows = windows_->data();
      direct->out = static_cast<int8_t*>(io.output);
      direct->ld = ohw;
      direct->image_stride = size_t(g_.K) * ohw;
      if (residual_) {
        direct->residual = &*residual_;
        direct->other = static_cast<const int8_t*>(io.fused_inputs[residual_swapped_ ? 0 : 1]);
        direct->conv_second = residual_swapped_;
      }
    }
    implicit_->run(static_cast<const int8_t*>(io.inputs[0]), batch_, in_image, pool,
                   [&](uint32_t n, uint32_t k, size_t hw0, const int32_t* sums, size_t count) {
                     emit_sums(io, (size_t(n) * g_.K + k) * ohw + hw0, sums, count, n, k, hw0);
                   },
                   direct ? &*direct : nullptr);
  }

  // The float kernels' epilogue: a run of channel k's sums of image n, from spatial index hw0, through the
  // chain and stored (store_float).
  auto float_runs(const OpIo& io) const {
    return [this, &io](uint32_t n, uint32_t k, size_t hw0, float* v, size_t count) {
      store_float(io, v, count, n, k, (size_t(n) * g_.K + k) * g_.OH * g_.OW + hw0, hw0);
    };
  }

  // FP16 and FP32 convolutions without im2col (conv_implicit_f32.h), the batch in image groups: the
  // blocks store fp16 results themselves (HalfOutput) where the chain is channel steps, otherwise each
  // run of sums takes the SDP chain and is stored as run_unit's float path does.
  void run_implicit_f32(const OpIo& io, ThreadPool& pool) const {
    const size_t in_image = size_t(g_.C) * g_.H * g_.W;
    const std::optional<HalfOutput> direct = half_output(io);
    implicit_f32_->run(io.inputs[0], batch_, in_image, dtype_ == DataType::kFloat16, pool, float_runs(io),
                       direct ? &*direct : nullptr);
  }

  // FP16 3x3 convolutions as Winograd F(2x2, 3x3) (conv_winograd.h), stored as run_implicit_f32 does;
  // false, having written nothing, for an input holding an infinity or NaN.
  bool run_winograd(const OpIo& io, ThreadPool& pool) const {
    const size_t in_image = size_t(g_.C) * g_.H * g_.W;
    const std::optional<HalfOutput> direct = half_output(io);
    return winograd_->run(static_cast<const uint16_t*>(io.inputs[0]), batch_, in_image, pool, float_runs(io),
                          direct ? &*direct : nullptr);
  }

  // Where an FP16 kernel that stores its own results puts them (half_output.h), when the chain is
  // channel steps on AVX-512 (half_direct_).
  std::optional<HalfOutput> half_output(const OpIo& io) const {
    if (!half_direct_) return std::nullopt;
    const size_t ohw = size_t(g_.OH) * g_.OW;
    HalfOutput direct;
    direct.steps = half_steps_.data();
    direct.n_steps = half_steps_.size() / g_.K;
    direct.out = static_cast<uint16_t*>(io.output);
    direct.ld = ohw;
    direct.image_stride = size_t(g_.K) * ohw;
    direct.lanes = &half_lanes_;
    direct.rows = &half_rows_;
    if (residual_f16_) {
      direct.other = static_cast<const uint16_t*>(io.fused_inputs[residual_swapped_ ? 0 : 1]);
      direct.after = half_after_.data();
      direct.n_after = half_after_.size() / g_.K;
      direct.lanes_after = &half_after_lanes_;
      direct.rows_after = &half_after_rows_;
    }
    return direct;
  }

  // A fully connected layer: every image's sums at once (gemv_f32.h), then each output through the chain.
  void run_gemv(const OpIo& io, ThreadPool& pool) const {
    thread_local std::vector<float> sums;
    sums.resize(size_t(batch_) * g_.K);
    gemv_->run(io.inputs[0], dtype_ == DataType::kFloat16, batch_, sums.data(), pool);
    if (gemv_lanes_ && !residual_f16_) return store_channel_lanes(io, sums.data());
    for (uint32_t n = 0; n < batch_; ++n)
      for (uint32_t k = 0; k < g_.K; ++k) {
        const size_t i = size_t(n) * g_.K + k;
        store_float(io, sums.data() + i, 1, n, k, i, 0);
      }
  }

  // A fully connected layer's sums [N][K] through the chain (gemv_lanes_), sixteen channels a vector, and
  // stored in the op's type: per element, run_float then the fp16 store, as store_float gives them.
  void store_channel_lanes(const OpIo& io, const float* sums) const {
#ifdef SOFTDLA_X86
    store_lanes_avx512(*gemv_lanes_, sums, size_t(batch_) * g_.K, g_.K, dtype_ == DataType::kFloat16, io.output);
#else
    (void)io, (void)sums;
#endif
  }

  // An INT8 depthwise convolution whose one window is its whole unpadded plane (a global average pool
  // lowered to one): per channel a dot product of the plane with the weights, the outputs requantized
  // chunk by chunk. The plane-by-plane path built a padded plane and requantized one value per call: 0.040
  // ms for MobileNetV2's 1,280 7x7 planes against ONNX Runtime's 0.012.
  void run_whole_plane_s8(const OpIo& io, ThreadPool& pool) const {
    const size_t taps = size_t(g_.R) * g_.S, in_plane = size_t(g_.H) * g_.W;
    const auto* x = static_cast<const int8_t*>(io.inputs[0]);
    auto* y = static_cast<int8_t*>(io.output);
    pool.parallel_for(size_t(batch_) * g_.K, [&](size_t b, size_t e) {
      int32_t sums[64];
      for (size_t p0 = b; p0 < e; p0 += 64) {
        const size_t count = std::min<size_t>(64, e - p0);
        for (size_t i = 0; i < count; ++i) {
          const size_t n = (p0 + i) / g_.K, k = (p0 + i) % g_.K, c = k / g_.Kg;
          sums[i] = dot_s8(x + (n * g_.C + c) * in_plane, w8_raw_.data() + k * taps, taps);
        }
        // Output p0 + i is image n's channel k: windows run along the channels, from p0's.
        for (size_t i = 0; i < count;) {
          const size_t k = (p0 + i) % g_.K, run = std::min(count - i, g_.K - k);
          requantize_windows(sums + i, windows_->data() + k, y + p0 + i, run);
          i += run;
        }
      }
    }, ThreadPool::min_items(taps));
  }

  // An INT8 fully connected layer: every image's exact sums at once (gemv_s8_vnni.h), then each output
  // requantized (with a fused residual add, added) as the other INT8 paths do.
  void run_gemv8(const OpIo& io, ThreadPool& pool) const {
    thread_local std::vector<int32_t> sums;
    sums.resize(size_t(batch_) * g_.K);
    gemv8_->run(static_cast<const int8_t*>(io.inputs[0]), batch_, sums.data(), pool);
    if (windows_ && !residual_) {  // an image's outputs are its channels in a row, each with its window
      for (uint32_t n = 0; n < batch_; ++n)
        requantize_windows(sums.data() + size_t(n) * g_.K, windows_->data(),
                           static_cast<int8_t*>(io.output) + size_t(n) * g_.K, g_.K);
      return;
    }
    for (uint32_t n = 0; n < batch_; ++n)
      for (uint32_t k = 0; k < g_.K; ++k) {
        const size_t i = size_t(n) * g_.K + k;
        emit_sums(io, i, sums.data() + i, 1, n, k, 0);
      }
  }

  // FP16 convolutions (16 channels or more, any stride) on AMX-BF16 tiles (conv_amx_f16.h), stored as
  // run_implicit_f32 does.
  void run_amx_f16(const OpIo& io, ThreadPool& pool) const {
    const size_t in_image = size_t(g_.C) * g_.H * g_.W;
    const std::optional<HalfOutput> direct = half_output(io);
    amx_f16_->run(static_cast<const uint16_t*>(io.inputs[0]), batch_, in_image, pool, float_runs(io),
                  direct ? &*direct : nullptr);
  }

  // run_unit's INT8 path on vpdpbusd: the input rows offset to unsigned bytes, packed in quads, the
  // GEMM in int32, and the requantization straight from int32 where the chain has the window form.
  void run_unit_vnni(const OpIo& io, uint32_t n, size_t k_first, size_t chan0, size_t out_base, size_t col0,
                     size_t cols, ThreadPool* split) const {
    const size_t kdim = g_.kdim(), in_plane = size_t(g_.H) * g_.W, ohw = size_t(g_.OH) * g_.OW;
    // The receptive fields as rows [k][ld] of int8 (a 1x1 convolution of stride 1 reads its input
    // planes as they are), then interleaved into offset quads.
    const int8_t* x = static_cast<const int8_t*>(io.inputs[0]) + chan0;
    const size_t ld = (cols + 63) / 64 * 64;
    thread_local AlignedVector<int8_t> rows_buf;
    thread_local AlignedVector<uint8_t> b;
    const int8_t* k_rows = x + col0;
    size_t k_ld = in_plane;
    if (!pointwise_) {
      rows_buf.resize(kdim * ld);
      RowsOut<int8_t> out{rows_buf.data(), ld};
      im2col_walk(x, 0, g_.H, g_, col0, cols, out);
      k_rows = rows_buf.data(), k_ld = ld;
    }
    b.resize(packed_u8_size(kdim, cols));
    pack_quads(k_rows, k_ld, kdim, cols, b.data());
    const uint8_t* packed = b.data();
    if (windows_ && gemm_vnni_s8_applies(active_isa())) {
      // Requantized (and added to the residual) in the GEMM's epilogue, straight into the output.
      Int8Output o;
      o.out = static_cast<int8_t*>(io.output) + out_base * ohw + col0;
      o.ld = ohw;
      if (residual_) {
        o.residual = &*residual_;
        o.other = static_cast<const int8_t*>(io.fused_inputs[residual_swapped_ ? 0 : 1]) + out_base * ohw + col0;
        o.conv_second = residual_swapped_;
      }
      auto fused = [&](size_t r0, size_t r1) {
        Int8Output rows = o;
        rows.windows = windows_->data() + k_first + r0;
        rows.out += (k_first + r0) * ohw;
        if (rows.other) rows.other += (k_first + r0) * ohw;
        const size_t kq = k_quads(kdim);
        const bool lanes = !wv_.lanes.empty() && (k_first + r0) % lanes_s8::kBlockRows == 0;
        gemm_vnni_s8(wv_.quads.data() + (k_first + r0) * kq, wv_.offset_sums.data() + k_first + r0, packed, r1 - r0,
                     cols, kdim, rows, lanes ? wv_.lanes.data() + (k_first + r0) * kq : nullptr);
      };
      return split_rows(fused, g_.Kg, split, wv_.lanes.empty() ? 24 : lanes_s8::kBlockRows);
    }
    auto work = [&](size_t r0, size_t r1) {
      thread_local std::vector<int32_t> acc;
      acc.resize((r1 - r0) * cols);
      const size_t kq = k_quads(kdim);
      gemm_vnni(active_isa(), wv_.quads.data() + (k_first + r0) * kq, wv_.offset_sums.data() + k_first + r0, packed,
                acc.data(), r1 - r0, cols, kdim, cols);
      for (size_t r = r0; r < r1; ++r) {
        const uint32_t k = uint32_t(k_first + r);
        emit_sums(io, (out_base + k) * ohw + col0, acc.data() + (r - r0) * cols, cols, n, k, col0);
      }
    };
    split_rows(work, g_.Kg, split);
  }

  // INT8 depthwise planes [b, e) of the batch on the VNNI kernel, through two thread-local sum buffers:
  // a plane's sums are requantized after the next plane's are computed. The kernel stores whole vectors
  // that overlap where rows are shorter than 16 (7x7 and 14x14 planes), and loads of the sums straight
  // after them waited for those stores to reach the cache (store forwarding fails on overlaps).
  void run_depthwise_vnni(const OpIo& io, size_t b, size_t e) const {
    const size_t in_plane = size_t(g_.H) * g_.W, ohw = size_t(g_.OH) * g_.OW;
    const size_t stride = ohw + kDepthwiseVnniOutSlack;
    thread_local std::vector<int32_t> acc;
    acc.resize(2 * stride);
    const auto* x = static_cast<const int8_t*>(io.inputs[0]);
    const auto emit = [&](size_t p) {
      const uint32_t n = uint32_t(p / g_.K), k = uint32_t(p % g_.K);
      emit_sums(io, p * ohw, acc.data() + (p & 1) * stride, ohw, n, k, 0);
    };
    for (size_t p = b; p < e; ++p) {
      const uint32_t n = uint32_t(p / g_.K), k = uint32_t(p % g_.K), c = k / g_.Kg;
      dw_vnni_->run(k, x + (size_t(n) * g_.C + c) * in_plane, acc.data() + (p & 1) * stride);
      if (p > b) emit(p - 1);
    }
    if (e > b) emit(e - 1);
  }

  // A thread's buffers for depthwise planes, reused across them.
  struct DepthwiseBuffers {
    std::vector<int32_t> acc;
    std::vector<int64_t> wide;
    std::vector<int32_t> weights;
    std::vector<float> facc, widened;
  };

  // same_input: the previous plane this thread ran read the same input channel (a channel multiplier).
  void run_depthwise_plane(const OpIo& io, size_t plane, bool same_input, DepthwiseBuffers& buf,
                           DepthwiseScratch& scratch) const {
    const uint32_t n = uint32_t(plane / g_.K), k = uint32_t(plane % g_.K);
    const uint32_t c = k / g_.Kg;  // the group's single input channel
    const size_t in_plane = size_t(g_.H) * g_.W, ohw = size_t(g_.OH) * g_.OW, taps = size_t(g_.R) * g_.S;
    const size_t x_off = (size_t(n) * g_.C + c) * in_plane, y_off = (size_t(n) * g_.K + k) * ohw;
    const DepthwiseGeometry dg{g_.H, g_.W, g_.OH, g_.OW, g_.R, g_.S, g_.sh, g_.sw, g_.dh, g_.dw, g_.pt, g_.pl};
    if (dtype_ == DataType::kInt8) {
      buf.acc.resize(ohw);
      int32_t* acc = buf.acc.data();
      const int8_t* x = static_cast<const int8_t*>(io.inputs[0]) + x_off;
      if (taps < kDepthwiseFloatTaps) {
        depthwise_s8_plane(active_isa(), dg, x, w8_raw_.data() + k * taps, acc, same_input, scratch);
      } else {
        buf.weights.assign(w8_raw_.begin() + long(k * taps), w8_raw_.begin() + long((k + 1) * taps));
        depthwise_s8(g_, x, buf.weights.data(), acc);
      }
      if (windows_) return emit_sums(io, y_off, acc, ohw, n, k, 0);
      emit_int8(io, y_off, ohw, [&](int8_t* out) {
        buf.wide.assign(acc, acc + ohw);
        chain_.run_int8(buf.wide.data(), ohw, n, k, 0, io.inputs.data(), out);
      });
      return;
    }
    buf.facc.resize(ohw);
    float* acc = buf.facc.data();
    if (!finite_weights_) {
      // An infinite weight: the direct loop, which skips padding taps as the CUDA kernels do (the
      // phased planes multiply them as zeros, and 0 * inf would make the border outputs NaN).
      const float* x = static_cast<const float*>(io.inputs[0]) + x_off;
      if (dtype_ == DataType::kFloat16) {
        buf.widened.resize(in_plane);
        halves_to_floats(static_cast<const uint16_t*>(io.inputs[0]) + x_off, buf.widened.data(), in_plane);
        x = buf.widened.data();
      }
      depthwise_accumulate(g_, x, wf_.data() + k * taps, acc);
      return store_float(io, acc, ohw, n, k, y_off, 0);
    }
    if (dtype_ == DataType::kFloat16)
      depthwise_f32_plane(active_isa(), dg, static_cast<const uint16_t*>(io.inputs[0]) + x_off, wf_.data() + k * taps,
                          acc, same_input, scratch);
    else
      depthwise_f32_plane(active_isa(), dg, static_cast<const float*>(io.inputs[0]) + x_off, wf_.data() + k * taps,
                          acc, same_input, scratch);
    store_float(io, acc, ohw, n, k, y_off, 0);
  }

  // The SDP chain on count fp32 sums of channel k, image n (spatial index hw0 on), stored at output
  // element `offset` in the op's type: fused into one pass with the fp16 store where the chain allows.
  void store_float(const OpIo& io, float* v, size_t count, uint32_t n, uint32_t k, size_t offset, size_t hw0) const {
    if (dtype_ == DataType::kFloat16) {
      uint16_t* out = static_cast<uint16_t*>(io.output) + offset;
      if (residual_f16_) {
        const auto* other = static_cast<const uint16_t*>(io.fused_inputs[residual_swapped_ ? 0 : 1]) + offset;
        return residual_f16_->run_residual_halves(chain_, v, other, count, k, out);
      }
      if (chain_.run_float_to_halves(v, count, k, out)) return;
      chain_.run_float(v, count, n, k, hw0, io.inputs.data());
      floats_to_halves(v, out, count);
      return;
    }
    chain_.run_float(v, count, n, k, hw0, io.inputs.data());
    std::memcpy(static_cast<float*>(io.output) + offset, v, count * sizeof(float));
  }

  // The int8 results of `count` int32 sums of channel k, image n (spatial index hw0 on), at output element
  // `offset`: requantized in the window form straight into the output (with a fused residual add, added to
  // the add's other operand in the same pass), or through the SDP chain.
  void emit_sums(const OpIo& io, size_t offset, const int32_t* sums, size_t count, uint32_t n, uint32_t k,
                 size_t hw0) const {
    if (windows_) {
      int8_t* out = static_cast<int8_t*>(io.output) + offset;
      if (!residual_) return requantize_window(active_isa(), sums, (*windows_)[k], out, count);
      const int8_t* other = static_cast<const int8_t*>(io.fused_inputs[residual_swapped_ ? 0 : 1]) + offset;
      return requantize_residual(active_isa(), sums, (*windows_)[k], other, *residual_, residual_swapped_, out, count);
    }
    emit_int8(io, offset, count, [&](int8_t* out) {
      thread_local std::vector<int64_t> wide;
      wide.assign(sums, sums + count);
      chain_.run_int8(wide.data(), count, n, k, hw0, io.inputs.data(), out);
    });
  }

  // Hands `write` the place for the int8 results of output elements [offset, offset + count): the
  // output itself, or with a fused residual add, a scratch run then added to the add's other operand
  // into the output (the add's output, the same elements).
  template <class Write>
  void emit_int8(const OpIo& io, size_t offset, size_t count, Write&& write) const {
    int8_t* out = static_cast<int8_t*>(io.output) + offset;
    if (!residual_) return write(out);
    thread_local std::vector<int8_t> mine;
    mine.resize(count);
    write(mine.data());
    const int8_t* other = static_cast<const int8_t*>(io.fused_inputs[residual_swapped_ ? 0 : 1]) + offset;
    if (residual_swapped_) residual_add(active_isa(), other, mine.data(), *residual_, out, count);
    else residual_add(active_isa(), mine.data(), other, *residual_, out, count);
  }

  template <class Fn>
  // Chunks of `chunk` rows (24 keeps the micro-kernels' 6- and 8-row blocks whole; 48 the lane tiles'
  // blocks).
  static void split_rows(const Fn& fn, size_t rows, ThreadPool* pool, size_t chunk = 24) {
    if (!pool) return fn(0, rows);
    const size_t blocks = (rows + chunk - 1) / chunk;
    pool->parallel_for(blocks, [&](size_t b, size_t e) { fn(b * chunk, std::min(rows, e * chunk)); });
  }

  SdpChain chain_;
  DataType dtype_;
  ConvGeometry g_{};
  uint32_t batch_ = 1;
  bool depthwise_ = false;
  bool whole_plane_ = false;  // INT8 depthwise, one window covering the whole unpadded plane (run_whole_plane_s8)
  std::vector<int32_t> w8_;  // int16 pairs (pack_a_s8)
  bool vnni_ = false;        // INT8 on vpdpbusd (gemm_vnni.h)
  bool pointwise_ = false;   // 1x1, stride 1, no padding: the input planes are the GEMM's rows
  std::unique_ptr<ImplicitConvS8> implicit_;  // k x k (or strided): AMX, AVX-512 VNNI or AVX2 pairs
  std::unique_ptr<ImplicitConvF32> implicit_f32_;  // FP16/FP32 on AVX-512 (any stride)
  std::unique_ptr<AmxConvF16> amx_f16_;            // FP16 (16 channels or more) on AMX-BF16
  std::unique_ptr<GemvF32> gemv_;                  // FP16/FP32 fully connected layers
  std::unique_ptr<ChannelLanes> gemv_lanes_;       // their chain across channels (AVX-512, channel steps)
  std::unique_ptr<GemvS8Vnni> gemv8_;              // INT8 fully connected layers on AVX-512 VNNI
  std::unique_ptr<WinogradConvF16> winograd_;      // FP16 3x3 stride 1, Winograd F(2x2, 3x3)
  bool finite_weights_ = true;                     // float weights: none infinite or NaN
  VnniWeights wv_;
  std::optional<std::vector<num::RequantWindow>> windows_;  // the chain's window form, per output channel
  std::optional<ResidualForm> residual_;  // the fused residual add (fuse_next), in its window form
  std::unique_ptr<SdpChain> residual_f16_;       // FP16: the fused residual add's chain (fuse_next)
  // FP16 on the implicit GEMM with a chain of channel steps: each channel's steps (and the fused
  // residual add's steps after the add), applied by the GEMM's blocks as they store (HalfOutput).
  std::vector<ChannelStep> half_steps_, half_after_;
  ChannelLanes half_lanes_, half_after_lanes_;  // the same, sixteen channels a vector (the FP16 lane tiles)
  ChannelStepRows half_rows_, half_after_rows_;  // the same, step by step (the FP16 pixel-vector tiles)
  bool half_direct_ = false;
  bool residual_swapped_ = false;                // this convolution computes the add's second input
  std::vector<int8_t> w8_raw_;  // depthwise: [K][R][S] as stored
  std::unique_ptr<DepthwiseF16Planes> dw_planes_;  // FP16 depthwise on AVX-512, wide planes one at a time
  std::unique_ptr<DepthwiseF16Blocks> dw_f16_;  // FP16 depthwise on AVX-512 or AVX2, channel blocks
  std::unique_ptr<DepthwiseS8Vnni> dw_vnni_;  // INT8 depthwise on AVX-512 VNNI + VBMI
  std::vector<float> wf_;
};

}  // namespace

std::unique_ptr<OpKernel> make_conv(const Model& m, const Op& op, const ConvParams& p) {
  return std::make_unique<ConvKernel>(m, op, p);
}

}  // namespace softdla::cpu
