// softdla._cudla_ext.StagedTensor: Module.run's conversions for NumPy data on a CPU machine, in C++.
//
// Module.run on host memory converts each float32 input to the tensor's stored type (int8 quantized with
// its scale, or fp16), packs it into the DLA format's buffer made at load, and after the task unpacks and
// dequantizes each output. In NumPy that is a dozen array operations per tensor, each a microsecond or
// more on a small model: three times the engine's own time on the bundled digits net. Here it is one pass
// per tensor. The rules are those of softdla/_tensor_io.py and formats.py, value for value; whatever this
// file does not handle (another dtype, a non-contiguous array, a NaN or an overflow to report) it declines,
// and run() takes the NumPy path, which also writes the error messages.
#include "host_staging.h"

#include <nanobind/nanobind.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>

#include "numerics.h"

namespace nb = nanobind;
namespace num = softdla::num;

namespace {

// Above this many elements a conversion releases the GIL (below, releasing costs more than it frees).
constexpr uint64_t kReleaseGilElements = 1 << 16;
constexpr uintptr_t kRegisterAlignment = 32;  // cudlaMemRegister's (_tensor_io.ALIGNMENT)

enum StoredType : int { kFloat32 = 1, kFloat16 = 2, kInt8 = 4 };  // cudla.h CUDLA_DATA_TYPE_*

// Where element (n, c, h, w) lives in a DLA format's buffer: formats.layout's strides.
struct Layout {
  uint32_t n = 0, c = 0, h = 0, w = 0;
  int type = kFloat32;
  uint32_t elem = 4, channels_per_group = 1;
  uint64_t group_bytes = 0, line = 0, surface = 0, batch = 0, size = 0;
  uint64_t offset(uint32_t in, uint32_t ic, uint32_t ih, uint32_t iw) const {
    return in * batch + (ic / channels_per_group) * surface + ih * line + iw * group_bytes +
           uint64_t(ic % channels_per_group) * elem;
  }
  bool planar() const { return channels_per_group == 1 && group_bytes == elem; }
};

// A C-contiguous buffer export of a Python object (a NumPy array), released on scope exit.
struct BufferView {
  Py_buffer view{};
  bool ok = false;
  BufferView(PyObject* obj, int flags) {
    ok = PyObject_GetBuffer(obj, &view, flags) == 0;
    if (!ok) PyErr_Clear();
  }
  ~BufferView() {
    if (ok) PyBuffer_Release(&view);
  }
  // The buffer's element type as one struct-module code ('f', 'e', 'b', ...), 0 for anything else.
  char code() const {
    const char* f = view.format ? view.format : "B";
    if (*f == '<' || *f == '=' || *f == '@') ++f;
    return f[0] && !f[1] ? f[0] : 0;
  }
};

// Whether an array of this shape is the tensor's NCHW shape as _tensor_io.dla_shape maps rank < 4
// ([K] -> [1,K,1,1], [N,K] -> [N,K,1,1], [N,C,W] -> [N,C,1,W]).
bool maps_to(const Py_buffer& v, const Layout& l) {
  const Py_ssize_t* s = v.shape;
  uint64_t d[4];
  switch (v.ndim) {
    case 0: d[0] = d[1] = d[2] = d[3] = 1; break;
    case 1: d[0] = 1, d[1] = s[0], d[2] = d[3] = 1; break;
    case 2: d[0] = s[0], d[1] = s[1], d[2] = d[3] = 1; break;
    case 3: d[0] = s[0], d[1] = s[1], d[2] = 1, d[3] = s[2]; break;
    case 4: d[0] = s[0], d[1] = s[1], d[2] = s[2], d[3] = s[3]; break;
    default: return false;
  }
  return d[0] == l.n && d[1] == l.c && d[2] == l.h && d[3] == l.w;
}

// float32 -> int8 code as _tensor_io.input_array and formats.quantize do it: clip to +-256 * scale in
// float64 (then back to float32), divide by the scale in float32, round half away from zero in float64,
// saturate. False for NaN and infinities (input_array raises for them).
bool quantize(float x, double limit, float scale, int8_t& q) {
  if (!std::isfinite(x)) return false;
  const double xd = x;
  const float clipped = xd > limit ? float(limit) : (xd < -limit ? float(-limit) : x);
  const double v = double(clipped / scale);
  const double r = std::floor(std::fabs(v) + 0.5);
  q = num::sat8(int64_t(v < 0 ? -r : r));
  return true;
}

// float32 -> fp16 as NumPy's astype does (round to nearest even) for the values this path takes: finite
// ones that stay finite (input_array raises for an overflow; NaN and infinities go the NumPy way).
bool to_half(float x, uint16_t& h) {
  if (!std::isfinite(x) || std::fabs(x) >= 65520.f) return false;
  h = num::float_to_half(x);
  return true;
}

// Converts one element of the source (struct code `src`) to the stored type at `dst`.
bool convert(const uint8_t* src, char code, const Layout& l, double limit, float scale, uint8_t* dst) {
  if (code == 'f') {
    float x;
    std::memcpy(&x, src, 4);
    if (l.type == kInt8) return quantize(x, limit, scale, *reinterpret_cast<int8_t*>(dst));
    if (l.type == kFloat16) {
      uint16_t h;
      if (!to_half(x, h)) return false;
      std::memcpy(dst, &h, 2);
      return true;
    }
    std::memcpy(dst, &x, 4);
    return true;
  }
  // The stored type itself: int8 codes, fp16 bits.
  std::memcpy(dst, src, l.elem);
  return true;
}

class StagedTensor {
 public:
  // shape, stored type and the format's strides (formats.layout); scale: the int8 tensor's scale (0
  // when it has none); buffer: the address of the module's staging buffer of `size` bytes; linear: the
  // tensor's format is `linear` (whose aligned stored-type inputs run() reads in place).
  StagedTensor(uint32_t n, uint32_t c, uint32_t h, uint32_t w, int type, uint64_t group_bytes, uint64_t line,
               uint64_t surface, uint64_t batch, uint32_t channels_per_group, uint64_t size, float scale,
               uintptr_t buffer, bool linear)
      : buffer_(reinterpret_cast<uint8_t*>(buffer)), scale_(scale), limit_(256.0 * double(scale)), linear_(linear) {
    if (type != kFloat32 && type != kFloat16 && type != kInt8) throw nb::value_error("unknown stored type");
    l_ = Layout{n, c, h, w, type, uint32_t(type == kInt8 ? 1 : type == kFloat16 ? 2 : 4), channels_per_group,
                group_bytes, line, surface, batch, size};
    if (!channels_per_group || !buffer_ || l_.offset(n ? n - 1 : 0, c ? c - 1 : 0, h ? h - 1 : 0, w ? w - 1 : 0) +
                                               l_.elem > size)
      throw nb::value_error("the layout does not fit the buffer");
  }

  // Converts and packs array x into the staging buffer (padding zeroed). False, having written nothing
  // that matters, when x is not a C-contiguous array this path handles: float32 values, or the stored
  // type itself (int8 codes, fp16), of the tensor's shape; or when a value must be reported.
  bool put(nb::handle x) {
    BufferView b(x.ptr(), PyBUF_C_CONTIGUOUS | PyBUF_FORMAT);
    if (!b.ok || !maps_to(b.view, l_)) return false;
    const char code = b.code();
    const char stored = l_.type == kInt8 ? 'b' : l_.type == kFloat16 ? 'e' : 'f';
    if (code != 'f' && code != stored) return false;
    if (l_.type == kInt8 && code == 'f' && !(scale_ > 0)) return false;  // no scale: int8 codes only
    // A `linear` input already in its stored type and aligned is read where it lies (no copy at all).
    if (code == stored && linear_ && reinterpret_cast<uintptr_t>(b.view.buf) % kRegisterAlignment == 0) return false;
    const uint32_t src_elem = code == 'f' ? 4 : l_.elem;
    const auto* src = static_cast<const uint8_t*>(b.view.buf);
    std::optional<nb::gil_scoped_release> release;  // other Python threads run during a big copy
    if (elements() > kReleaseGilElements) release.emplace();
    std::memset(buffer_, 0, l_.size);
    const float scale = scale_;
    uint64_t i = 0;
    for (uint32_t n = 0; n < l_.n; ++n)
      for (uint32_t c = 0; c < l_.c; ++c)
        for (uint32_t h = 0; h < l_.h; ++h) {
          uint8_t* row = buffer_ + l_.offset(n, c, h, 0);
          for (uint32_t w = 0; w < l_.w; ++w, ++i)
            if (!convert(src + i * src_elem, code, l_, limit_, scale, row + w * l_.group_bytes)) return false;
        }
    return true;
  }

  // Unpacks the task's output into `out`, a C-contiguous float32 array of the tensor's shape (int8
  // dequantized with the scale, code * scale in float32; fp16 widened), or with raw=True an array of
  // the stored type. False when out is not such an array.
  bool take(nb::handle out, bool raw) {
    BufferView b(out.ptr(), PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE);
    if (!b.ok || !maps_to(b.view, l_)) return false;
    const char stored = l_.type == kInt8 ? 'b' : l_.type == kFloat16 ? 'e' : 'f';
    if (b.code() != (raw ? stored : 'f')) return false;
    auto* dst = static_cast<uint8_t*>(b.view.buf);
    std::optional<nb::gil_scoped_release> release;
    if (elements() > kReleaseGilElements) release.emplace();
    uint64_t i = 0;
    for (uint32_t n = 0; n < l_.n; ++n)
      for (uint32_t c = 0; c < l_.c; ++c)
        for (uint32_t h = 0; h < l_.h; ++h) {
          const uint8_t* row = buffer_ + l_.offset(n, c, h, 0);
          if (raw && l_.planar()) {
            std::memcpy(dst + i * l_.elem, row, size_t(l_.w) * l_.elem);
            i += l_.w;
            continue;
          }
          for (uint32_t w = 0; w < l_.w; ++w, ++i) {
            const uint8_t* e = row + w * l_.group_bytes;
            if (raw) {
              std::memcpy(dst + i * l_.elem, e, l_.elem);
              continue;
            }
            float v;
            if (l_.type == kInt8) {
              // Without a scale (another libcudla) the codes are returned as numbers, as in _tensor_io.
              v = float(*reinterpret_cast<const int8_t*>(e));
              if (scale_ > 0) v *= scale_;
            } else if (l_.type == kFloat16) {
              uint16_t hb;
              std::memcpy(&hb, e, 2);
              v = num::half_to_float(hb);
            } else {
              std::memcpy(&v, e, 4);
            }
            std::memcpy(dst + i * 4, &v, 4);
          }
        }
    return true;
  }

 private:
  uint64_t elements() const { return uint64_t(l_.n) * l_.c * l_.h * l_.w; }
  Layout l_;
  uint8_t* buffer_;
  float scale_;
  double limit_;
  bool linear_;
};

}  // namespace

void bind_host_staging(nb::module_& m) {
  nb::class_<StagedTensor>(m, "StagedTensor",
                           "One input or output of a Module's host task: converts and packs (put) or unpacks "
                           "and converts (take) between NumPy arrays and the module's staging buffer.")
      .def(nb::init<uint32_t, uint32_t, uint32_t, uint32_t, int, uint64_t, uint64_t, uint64_t, uint64_t, uint32_t,
                    uint64_t, float, uintptr_t, bool>())
      .def("put", &StagedTensor::put, "Converts and packs a float32 (or stored-type) array; False: not handled.")
      .def("take", &StagedTensor::take, "Unpacks into a C-contiguous float32 (raw: stored-type) array; False: not handled.");
}
