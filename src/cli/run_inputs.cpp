// Inputs and outputs of `softdla run` / `softdla profile` (run_inputs.h).
#include "run_inputs.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <random>

#include "error.h"
#include "file_bytes.h"
#include "io_convert.h"
#include "io_layout.h"
#include "loadable.h"
#include "numerics.h"

namespace softdla::cli {
namespace {

// Converts a user array (any supported dtype) into the tensor's dtype, linear NCHW.
std::vector<uint8_t> to_tensor_dtype(const NpyArray& a, const Tensor& t) {
  const uint64_t count = element_count(t.shape);
  uint64_t n = 1;
  for (uint64_t d : a.shape) n *= d;
  if (n != count)
    fail("input '", t.name, "' needs ", count, " elements (", t.shape[0], "x", t.shape[1], "x", t.shape[2], "x",
         t.shape[3], "), the .npy holds ", n);
  auto value = [&](uint64_t i) { return npy_value(a, i); };
  std::vector<uint8_t> out(count * element_size(t.dtype));
  if (t.dtype == DataType::kInt8 && a.dtype == "i1") return a.data;  // int8 arrays hold quantized codes
  for (uint64_t i = 0; i < count; ++i) {
    const float v = value(i);
    if (t.dtype == DataType::kInt8) out[i] = uint8_t(num::quantize(v / t.scale));
    else if (t.dtype == DataType::kFloat16) { const uint16_t h = num::float_to_half(v); std::memcpy(&out[i * 2], &h, 2); }
    else std::memcpy(&out[i * 4], &v, 4);
  }
  return out;
}

std::vector<float> to_float(const std::vector<uint8_t>& raw, const Tensor& t) {
  const uint64_t count = element_count(t.shape);
  std::vector<float> out(count);
  for (uint64_t i = 0; i < count; ++i) {
    if (t.dtype == DataType::kInt8) out[i] = float(int8_t(raw[i])) * t.scale;
    else if (t.dtype == DataType::kFloat16) { uint16_t h; std::memcpy(&h, &raw[i * 2], 2); out[i] = num::half_to_float(h); }
    else std::memcpy(&out[i], &raw[i * 4], 4);
  }
  return out;
}

std::string dims(const std::vector<uint64_t>& shape) {
  std::string s;
  for (uint64_t d : shape) {
    if (!s.empty()) s += 'x';
    s += std::to_string(d);
  }
  return s.empty() ? "a scalar" : s;
}

// What the loadable takes, for error messages: 'images' (4x1x16x16, int8:dla_hwc4), ...
std::string describe_inputs(const Model& m) {
  std::string s;
  for (const IoBinding& io : m.inputs) {
    const Tensor& t = m.tensors[io.tensor];
    s += (s.empty() ? "'" : ", '") + t.name + "' (" + dims({t.shape.begin(), t.shape.end()}) + ", " +
         to_string(t.dtype) + ":" + to_string(io.format) + ")";
  }
  return s;
}

// The number of batches an input array holds. Its shape read as NCHW (rank < 4 as the builder maps ONNX
// shapes: [K] -> [1,K,1,1], [N,K] -> [N,K,1,1], [N,C,W] -> [N,C,1,W]) must have the tensor's C, H and W
// and a multiple of its N: the same number of values in another shape is a different tensor.
uint64_t batches_in(const NpyArray& a, const Tensor& t, const Model& m) {
  const std::vector<uint64_t>& s = a.shape;
  std::vector<uint64_t> nchw;
  if (s.size() == 4) nchw = s;
  else if (s.size() == 3) nchw = {s[0], s[1], 1, s[2]};
  else if (s.size() == 2) nchw = {s[0], s[1], 1, 1};
  else if (s.size() == 1) nchw = {1, s[0], 1, 1};
  const uint64_t n = t.shape[0];
  if (nchw.empty() || nchw[1] != t.shape[1] || nchw[2] != t.shape[2] || nchw[3] != t.shape[3] || nchw[0] == 0 ||
      nchw[0] % n)
    fail("input '", t.name, "' takes NCHW arrays of ", dims({t.shape.begin(), t.shape.end()}), " (or (k*", n, ")x",
         t.shape[1], "x", t.shape[2], "x", t.shape[3], " for k batches); the .npy is ", dims(s),
         ". This loadable's inputs: ", describe_inputs(m));
  return nchw[0] / n;
}

// Values of a real-valued array that an INT8 input cannot hold (past -128 or 127 steps once rounded, or
// NaN) are saturated when packed: say so once, with the range, rather than run on other numbers.
void warn_int8_saturation(const NpyArray& a, const Tensor& t) {
  if (t.dtype != DataType::kInt8 || a.dtype == "i1") return;  // int8 arrays hold codes
  uint64_t n = 1, out = 0;
  for (uint64_t d : a.shape) n *= d;
  for (uint64_t i = 0; i < n; ++i) {
    const float q = std::round(npy_value(a, i) / t.scale);
    out += !(q >= -128.f && q <= 127.f);
  }
  if (out)
    std::cerr << "softdla: warning: input '" << t.name << "': " << out << " of " << n
              << " values lie outside its INT8 range [" << -128.f * t.scale << ", " << 127.f * t.scale
              << "] (scale " << t.scale << ") and are saturated (NaN reads as 0)\n";
}

// The same for an FP16 input given wider values: past +-65504 (infinities included) they are stored as
// +-65504, the largest half.
void warn_fp16_saturation(const NpyArray& a, const Tensor& t) {
  if (t.dtype != DataType::kFloat16 || a.dtype == "f2") return;
  uint64_t n = 1, out = 0;
  for (uint64_t d : a.shape) n *= d;
  for (uint64_t i = 0; i < n; ++i) out += std::fabs(npy_value(a, i)) > 65504.f;
  if (out)
    std::cerr << "softdla: warning: input '" << t.name << "': " << out << " of " << n
              << " values lie outside the FP16 range [-65504, 65504] and are saturated to it (NaN stays NaN)\n";
}

// An input file: a .npy (by its magic bytes), else trtexec's raw binary (--loadInputs): the tensor's bytes
// in its bound I/O format (the descriptor's size, padding included), or its NCHW values in the stored
// type; whole multiples of either hold several batches. Raw int8 bytes are codes, as an int8 .npy's are.
NpyArray read_input_file(const std::string& path, const Tensor& t, const IoBinding& io, const Model& m) {
  const std::vector<uint8_t> bytes = read_file_bytes(path, "input file", kMaxModelFileBytes);
  if (bytes.size() >= 6 && std::memcmp(bytes.data(), "\x93NUMPY", 6) == 0) return parse_npy(bytes, "'" + path + "'");
  const IoLayout layout = io_layout(t.shape, t.dtype, io.format, m.target);
  const uint64_t dense = element_count(t.shape) * element_size(t.dtype);
  const std::string dtype = t.dtype == DataType::kInt8 ? "i1" : t.dtype == DataType::kFloat16 ? "f2" : "f4";
  NpyArray a{dtype, {}, {}};
  if (!bytes.empty() && bytes.size() % layout.size == 0) {  // the I/O format's bytes, batch after batch
    const uint64_t k = bytes.size() / layout.size;
    a.data.resize(k * dense);
    for (uint64_t b = 0; b < k; ++b)
      unpack_to_linear(bytes.data() + b * layout.size, layout, t.shape, a.data.data() + b * dense);
    a.shape = {k * t.shape[0], t.shape[1], t.shape[2], t.shape[3]};
    // The size fits NCHW values too, and they would read differently: say which reading was taken, since
    // a file of values gives no error, only other numbers.
    if (bytes.size() % dense == 0 && a.data != bytes)
      std::cerr << "softdla: warning: input file '" << path << "' (" << bytes.size() << " bytes) fits both the I/O format of '" << t.name
                << "', " << to_string(t.dtype) << ":" << to_string(io.format) << " (" << k << " batch"
                << (k == 1 ? "" : "es") << "), and its NCHW values (" << bytes.size() / dense << " batch"
                << (bytes.size() / dense == 1 ? "" : "es") << "); it is read in the I/O format, as trtexec's "
                << "--loadInputs does. For NCHW values give a .npy\n";
  } else if (!bytes.empty() && bytes.size() % dense == 0) {  // dense NCHW values of the stored type
    a.data = bytes;
    a.shape = {bytes.size() / dense * t.shape[0], t.shape[1], t.shape[2], t.shape[3]};
  } else {
    fail("input file '", path, "' for '", t.name, "' holds ", bytes.size(), " bytes; a raw input holds the tensor in its "
         "I/O format, ", to_string(t.dtype), ":", to_string(io.format), " (", layout.size, " bytes a batch), or its NCHW "
         "values as ", to_string(t.dtype), " (", dense, " bytes a batch); or give a .npy");
  }
  return a;
}

}  // namespace

RunInputs load_inputs(const Model& m, const std::map<std::string, std::string>& files) {
  // A misspelt --input name must not leave the real input to random values.
  for (const auto& [name, file] : files) {
    bool found = false;
    for (const IoBinding& io : m.inputs) found = found || m.tensors[io.tensor].name == name;
    if (!found)
      fail("--input names '", name, "', which is not an input of this loadable; its inputs are ", describe_inputs(m));
  }
  // Inputs: each .npy may hold several batches' worth of samples; they run one batch after another.
  RunInputs r;
  std::string batches_from;  // the input that set `batches`, for the message when another disagrees
  std::mt19937 rng(0);
  for (const IoBinding& io : m.inputs) {
    const Tensor& t = m.tensors[io.tensor];
    NpyArray a;
    if (auto it = files.find(t.name); it != files.end()) {
      a = read_input_file(it->second, t, io, m);
    } else {
      std::cerr << "input '" << t.name << "': no --input given, using uniform random values in [-1, 1) (seed 0)\n";
      a = NpyArray{"f4", {t.shape.begin(), t.shape.end()}, std::vector<uint8_t>(element_count(t.shape) * 4)};
      std::uniform_real_distribution<float> dist(-1.f, 1.f);
      for (uint64_t i = 0; i < element_count(t.shape); ++i) { const float v = dist(rng); std::memcpy(&a.data[i * 4], &v, 4); }
    }
    // An input of one batch is reused for every batch; inputs of several batches must agree on how many.
    const uint64_t k = batches_in(a, t, m);
    if (files.count(t.name)) warn_int8_saturation(a, t), warn_fp16_saturation(a, t);
    if (k > 1 && r.batches > 1 && k != r.batches)
      fail("input '", t.name, "' holds ", k, " batches and input '", batches_from, "' ", r.batches,
           "; give every input one batch (reused for each) or the same number of batches");
    if (k > 1) r.batches = k, batches_from = t.name;
    r.arrays.push_back(std::move(a));
  }
  return r;
}

void pack_input(const Model& m, const RunInputs& in, size_t i, size_t b, uint8_t* dst) {
  const IoBinding& io = m.inputs[i];
  const Tensor& t = m.tensors[io.tensor];
  const NpyArray& a = in.arrays[i];
  const uint64_t per = element_count(t.shape);
  uint64_t total = 1;
  for (uint64_t d : a.shape) total *= d;
  const uint64_t offset = (b * per) % total;  // inputs with one batch are reused for every batch
  // The batch's slice in the array's own type (an int8 array holds codes, not values).
  const size_t elem = a.data.size() / total;
  NpyArray slice{a.dtype, {per},
                 std::vector<uint8_t>(a.data.begin() + long(offset * elem), a.data.begin() + long((offset + per) * elem))};
  const std::vector<uint8_t> linear = to_tensor_dtype(slice, t);
  pack_from_linear(linear.data(), t.shape, io_layout(t.shape, t.dtype, io.format, m.target), dst);
}

std::vector<float> unpack_output(const Model& m, size_t i, const uint8_t* src) {
  const IoBinding& io = m.outputs[i];
  const Tensor& t = m.tensors[io.tensor];
  std::vector<uint8_t> linear(element_count(t.shape) * element_size(t.dtype));
  unpack_to_linear(src, io_layout(t.shape, t.dtype, io.format, m.target), t.shape, linear.data());
  return to_float(linear, t);
}

BatchRuns run_batches(DlaSession& s, const Model& m, const RunInputs& in, int repeat, bool keep_outputs) {
  BatchRuns r;
  r.outputs.resize(keep_outputs ? m.outputs.size() : 0);
  for (size_t b = 0; b < in.batches; ++b) {
    for (size_t i = 0; i < m.inputs.size(); ++i) pack_input(m, in, i, b, s.input(i));
    for (int k = 0; k < (b == 0 ? std::max(1, repeat) : 1); ++k) r.runs.push_back(s.run(b));
    for (size_t i = 0; i < r.outputs.size(); ++i) {
      const std::vector<float> v = unpack_output(m, i, s.output(i));
      r.outputs[i].insert(r.outputs[i].end(), v.begin(), v.end());
    }
  }
  return r;
}

std::vector<size_t> read_labels(const std::string& path, size_t samples, size_t classes, size_t batches) {
  const NpyArray a = read_npy(path);
  uint64_t count = 1;
  for (uint64_t d : a.shape) count *= d;
  if (count != samples)
    fail("--labels '", path, "' holds ", count, " label(s); the run has ", samples, " sample(s) (", batches,
         " batch(es) of ", samples / batches, "): give one label per sample");
  std::vector<size_t> labels(count);
  for (size_t i = 0; i < count; ++i) {
    const float v = npy_value(a, i);
    if (!(v >= 0 && v < float(classes) && v == std::floor(v)))
      fail("--labels '", path, "': label ", i, " is ", v, ", not a class of output 0 (whole numbers 0 to ",
           classes - 1, ")");
    labels[i] = size_t(v);
  }
  return labels;
}

}  // namespace softdla::cli
