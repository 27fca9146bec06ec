// softdla run.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <random>
#include <sstream>

#include "commands.h"
#include "engine.h"
#include "error.h"
#include "file_bytes.h"
#include "io_convert.h"
#include "io_layout.h"
#include "loadable.h"
#include "npy.h"
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

// Class labels, one per sample of output 0, each a whole number naming one of its classes.
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

}  // namespace

int run_command(const std::string& path, const std::map<std::string, std::string>& input_files,
                const std::string& out_dir, int repeat, const std::string& labels_path) {
  Engine engine(read_loadable(read_file_bytes(path, "loadable", kMaxModelFileBytes)));
  const Model& m = engine.model();
  // A misspelt --input name must not leave the real input to random values.
  for (const auto& [name, file] : input_files) {
    bool found = false;
    for (const IoBinding& io : m.inputs) found = found || m.tensors[io.tensor].name == name;
    if (!found)
      fail("--input names '", name, "', which is not an input of this loadable; its inputs are ", describe_inputs(m));
  }
  // Inputs: each .npy may hold several batches' worth of samples; they run one batch after another.
  std::vector<NpyArray> arrays;
  size_t batches = 1;
  std::string batches_from;  // the input that set `batches`, for the message when another disagrees
  std::mt19937 rng(0);
  for (const IoBinding& io : m.inputs) {
    const Tensor& t = m.tensors[io.tensor];
    NpyArray a;
    if (auto it = input_files.find(t.name); it != input_files.end()) {
      a = read_npy(it->second);
    } else {
      std::cerr << "input '" << t.name << "': no --input given, using uniform random values in [-1, 1) (seed 0)\n";
      a = NpyArray{"f4", {t.shape.begin(), t.shape.end()}, std::vector<uint8_t>(element_count(t.shape) * 4)};
      std::uniform_real_distribution<float> dist(-1.f, 1.f);
      for (uint64_t i = 0; i < element_count(t.shape); ++i) { const float v = dist(rng); std::memcpy(&a.data[i * 4], &v, 4); }
    }
    // An input of one batch is reused for every batch; inputs of several batches must agree on how many.
    const uint64_t k = batches_in(a, t, m);
    if (k > 1 && batches > 1 && k != batches)
      fail("input '", t.name, "' holds ", k, " batches and input '", batches_from, "' ", batches,
           "; give every input one batch (reused for each) or the same number of batches");
    if (k > 1) batches = k, batches_from = t.name;
    arrays.push_back(std::move(a));
  }
  // Labels are checked before the run, which may be long.
  std::vector<size_t> labels;
  if (!labels_path.empty() && !m.outputs.empty()) {
    const Tensor& t = m.tensors[m.outputs[0].tensor];
    labels = read_labels(labels_path, size_t(t.shape[0]) * batches, size_t(t.shape[1]) * t.shape[2] * t.shape[3], batches);
  }
  std::vector<std::vector<float>> results(m.outputs.size());
  std::vector<double> times;
  for (size_t b = 0; b < batches; ++b) {
    std::vector<std::vector<uint8_t>> in_bufs, out_bufs;
    for (size_t i = 0; i < m.inputs.size(); ++i) {
      const IoBinding& io = m.inputs[i];
      const Tensor& t = m.tensors[io.tensor];
      const uint64_t per = element_count(t.shape);
      uint64_t total = 1;
      for (uint64_t d : arrays[i].shape) total *= d;
      const uint64_t offset = (b * per) % total;  // inputs with one batch are reused for every batch
      // The batch's slice in the array's own type (an int8 array holds codes, not values).
      const size_t elem = arrays[i].data.size() / total;
      NpyArray slice{arrays[i].dtype, {per},
                     std::vector<uint8_t>(arrays[i].data.begin() + long(offset * elem),
                                          arrays[i].data.begin() + long((offset + per) * elem))};
      const std::vector<uint8_t> linear = to_tensor_dtype(slice, t);
      std::vector<uint8_t> packed(io.desc.size);
      pack_from_linear(linear.data(), t.shape, io_layout(t.shape, t.dtype, io.format, m.target), packed.data());
      in_bufs.push_back(std::move(packed));
    }
    for (const IoBinding& io : m.outputs) out_bufs.emplace_back(io.desc.size);
    std::vector<const void*> ins;
    std::vector<void*> outs;
    for (auto& buf : in_bufs) ins.push_back(buf.data());
    for (auto& buf : out_bufs) outs.push_back(buf.data());
    for (int r = 0; r < (b == 0 ? std::max(1, repeat) : 1); ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      engine.run(ins, outs);
      times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    for (size_t i = 0; i < m.outputs.size(); ++i) {
      const IoBinding& io = m.outputs[i];
      const Tensor& t = m.tensors[io.tensor];
      std::vector<uint8_t> linear(element_count(t.shape) * element_size(t.dtype));
      unpack_to_linear(out_bufs[i].data(), io_layout(t.shape, t.dtype, io.format, m.target), t.shape, linear.data());
      const std::vector<float> v = to_float(linear, t);
      results[i].insert(results[i].end(), v.begin(), v.end());
    }
  }
  std::sort(times.begin(), times.end());
  std::cout << "ran " << path << " (" << m.ops.size() << " ops, target " << to_string(m.target) << "): " << batches
            << " batch(es), median " << std::fixed << std::setprecision(3) << times[times.size() / 2] << " ms per batch\n";
  for (size_t i = 0; i < m.outputs.size(); ++i) {
    const Tensor& t = m.tensors[m.outputs[i].tensor];
    const std::vector<float>& v = results[i];
    const size_t images = size_t(t.shape[0]) * batches, per_image = v.size() / images;
    std::cout << "output '" << t.name << "' " << t.shape[0] << "x" << t.shape[1] << "x" << t.shape[2] << "x" << t.shape[3]
              << " " << to_string(t.dtype) << ":" << to_string(m.outputs[i].format) << "\n";
    for (size_t n = 0; n < std::min<size_t>(images, 8); ++n) {
      const float* row = v.data() + n * per_image;
      const size_t best = size_t(std::max_element(row, row + per_image) - row);
      std::cout << "  [" << n << "] argmax " << best << "  values:";
      for (size_t j = 0; j < std::min<size_t>(per_image, 10); ++j) std::cout << " " << std::setprecision(4) << row[j];
      if (per_image > 10) std::cout << " ...";
      std::cout << "\n";
    }
    if (images > 8) std::cout << "  ... (" << images - 8 << " more)\n";
    if (i == 0 && !labels.empty()) {
      size_t correct = 0;
      for (size_t n = 0; n < images; ++n) {
        const float* row = v.data() + n * per_image;
        correct += size_t(std::max_element(row, row + per_image) - row) == labels[n];
      }
      std::cout << "top-1 accuracy: " << std::setprecision(2) << 100.0 * double(correct) / double(images) << "% ("
                << correct << "/" << images << ")\n";
    }
    if (!out_dir.empty()) {
      std::filesystem::create_directories(out_dir);
      NpyArray a{"f4", {images, t.shape[1], t.shape[2], t.shape[3]}, std::vector<uint8_t>(v.size() * 4)};
      std::memcpy(a.data.data(), v.data(), a.data.size());
      std::string file = t.name;
      std::replace_if(file.begin(), file.end(), [](char c) { return !std::isalnum(uint8_t(c)) && c != '_' && c != '-'; }, '_');
      write_npy(out_dir + "/" + file + ".npy", a);
    }
  }
  return 0;
}

}  // namespace softdla::cli
