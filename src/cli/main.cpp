// The softdla command. `run` executes a loadable on the CPU engine; `inspect` prints what it holds.
// (`build` and `check` come with the builder.)
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <random>

#include "engine.h"
#include "error.h"
#include "io_convert.h"
#include "io_layout.h"
#include "loadable.h"
#include "npy.h"
#include "numerics.h"

namespace softdla {
namespace {

// Converts a user array (any supported dtype) into the tensor's dtype, linear NCHW.
std::vector<uint8_t> to_tensor_dtype(const NpyArray& a, const Tensor& t) {
  const uint64_t count = element_count(t.shape);
  const size_t elem_in = a.data.size() / std::max<uint64_t>(1, count);
  uint64_t n = 1;
  for (uint64_t d : a.shape) n *= d;
  if (n != count)
    fail("input '", t.name, "' needs ", count, " elements (", t.shape[0], "x", t.shape[1], "x", t.shape[2], "x",
         t.shape[3], "), the .npy holds ", n);
  auto value = [&](uint64_t i) -> float {
    if (a.dtype == "f4") { float v; std::memcpy(&v, &a.data[i * 4], 4); return v; }
    if (a.dtype == "f2") { uint16_t h; std::memcpy(&h, &a.data[i * 2], 2); return num::half_to_float(h); }
    if (a.dtype == "i1") return float(int8_t(a.data[i]));
    return float(a.data[i]);
  };
  std::vector<uint8_t> out(count * element_size(t.dtype));
  if (t.dtype == DataType::kInt8 && a.dtype == "i1") return a.data;  // already quantized
  (void)elem_in;
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

int run_command(const std::string& path, const std::map<std::string, std::string>& input_files,
                const std::string& out_dir, int repeat) {
  Engine engine(read_loadable_file(path));
  const Model& m = engine.model();
  std::vector<std::vector<uint8_t>> in_bufs, out_bufs;
  std::mt19937 rng(0);
  for (const IoBinding& io : m.inputs) {
    const Tensor& t = m.tensors[io.tensor];
    std::vector<uint8_t> linear;
    if (auto it = input_files.find(t.name); it != input_files.end()) {
      linear = to_tensor_dtype(read_npy(it->second), t);
    } else {
      std::cerr << "input '" << t.name << "': no --input given, using uniform random values in [-1, 1) (seed 0)\n";
      NpyArray a{"f4", {element_count(t.shape)}, {}};
      a.data.resize(element_count(t.shape) * 4);
      std::uniform_real_distribution<float> dist(-1.f, 1.f);
      for (uint64_t i = 0; i < element_count(t.shape); ++i) { const float v = dist(rng); std::memcpy(&a.data[i * 4], &v, 4); }
      linear = to_tensor_dtype(a, t);
    }
    std::vector<uint8_t> packed(io.desc.size);
    pack_from_linear(linear.data(), t.shape, io_layout(t.shape, t.dtype, io.format, m.target), packed.data());
    in_bufs.push_back(std::move(packed));
  }
  for (const IoBinding& io : m.outputs) out_bufs.emplace_back(io.desc.size);
  std::vector<const void*> ins;
  std::vector<void*> outs;
  for (auto& b : in_bufs) ins.push_back(b.data());
  for (auto& b : out_bufs) outs.push_back(b.data());
  std::vector<double> times;
  for (int r = 0; r < std::max(1, repeat); ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    engine.run(ins, outs);
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  std::cout << "ran " << path << " (" << m.ops.size() << " ops, target " << to_string(m.target) << ") "
            << times.size() << "x, median " << std::fixed << std::setprecision(3) << times[times.size() / 2] << " ms\n";
  for (size_t i = 0; i < m.outputs.size(); ++i) {
    const IoBinding& io = m.outputs[i];
    const Tensor& t = m.tensors[io.tensor];
    std::vector<uint8_t> linear(element_count(t.shape) * element_size(t.dtype));
    unpack_to_linear(out_bufs[i].data(), io_layout(t.shape, t.dtype, io.format, m.target), t.shape, linear.data());
    const std::vector<float> v = to_float(linear, t);
    std::cout << "output '" << t.name << "' " << t.shape[0] << "x" << t.shape[1] << "x" << t.shape[2] << "x" << t.shape[3]
              << " " << to_string(t.dtype) << ":" << to_string(io.format) << "\n";
    const size_t per_image = v.size() / t.shape[0];
    for (uint32_t n = 0; n < t.shape[0]; ++n) {
      const float* row = v.data() + n * per_image;
      const size_t best = size_t(std::max_element(row, row + per_image) - row);
      std::cout << "  [" << n << "] argmax " << best << "  values:";
      for (size_t j = 0; j < std::min<size_t>(per_image, 10); ++j) std::cout << " " << std::setprecision(4) << row[j];
      if (per_image > 10) std::cout << " ...";
      std::cout << "\n";
    }
    if (!out_dir.empty()) {
      std::filesystem::create_directories(out_dir);
      NpyArray a{"f4", {t.shape[0], t.shape[1], t.shape[2], t.shape[3]}, {}};
      a.data.resize(v.size() * 4);
      std::memcpy(a.data.data(), v.data(), a.data.size());
      std::string file = t.name;
      std::replace_if(file.begin(), file.end(), [](char c) { return !std::isalnum(uint8_t(c)) && c != '_' && c != '-'; }, '_');
      write_npy(out_dir + "/" + file + ".npy", a);
    }
  }
  return 0;
}

int inspect_command(const std::string& path) {
  const Model m = read_loadable_file(path);
  std::cout << "loadable " << path << "\n  format " << m.version.major << "." << m.version.minor << "." << m.version.patch
            << ", target " << to_string(m.target) << ", built by '" << m.build_info.builder << "'\n";
  if (!m.build_info.precisions.empty()) std::cout << "  precisions: " << m.build_info.precisions << "\n";
  if (!m.build_info.flags.empty()) std::cout << "  flags: " << m.build_info.flags << "\n";
  auto print_io = [&](const char* kind, const std::vector<IoBinding>& list) {
    for (const IoBinding& io : list) {
      const TensorDescriptor& d = io.desc;
      const Tensor& t = m.tensors[io.tensor];
      std::cout << "  " << kind << " '" << d.name << "' " << d.n << "x" << d.c << "x" << d.h << "x" << d.w << " "
                << to_string(t.dtype) << ":" << to_string(io.format) << " size " << d.size << " B, strides "
                << d.stride[0] << "/" << d.stride[1] << "/" << d.stride[2] << "/" << d.stride[3];
      if (t.dtype == DataType::kInt8) std::cout << ", scale " << t.scale;
      std::cout << "\n";
    }
  };
  print_io("input ", m.inputs);
  print_io("output", m.outputs);
  std::cout << "  " << m.ops.size() << " ops, intermediate arena " << m.memory_plan.arena_size << " B\n";
  for (const Op& op : m.ops) {
    const Tensor& out = m.tensors[op.outputs[0]];
    std::cout << "    " << std::left << std::setw(10) << op_kind_name(op.params) << " " << std::setw(6)
              << to_string(out.dtype) << " " << op.name << " -> " << out.name << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace softdla

int main(int argc, char** argv) {
  CLI::App app{"softdla: a software DLA with the cuDLA API"};
  app.require_subcommand(1);
  std::string path, out_dir;
  std::vector<std::string> inputs;
  int repeat = 1;
  CLI::App* run = app.add_subcommand("run", "Run a loadable on the CPU engine and print its outputs");
  run->add_option("loadable", path, "loadable file")->required()->check(CLI::ExistingFile);
  run->add_option("-i,--input", inputs, "NAME=FILE.npy (NCHW; float arrays are quantized for INT8 inputs)");
  run->add_option("-o,--output-dir", out_dir, "write each output as float32 NAME.npy here");
  run->add_option("-r,--repeat", repeat, "run this many times and report the median time")->check(CLI::PositiveNumber);
  CLI::App* inspect = app.add_subcommand("inspect", "Print a loadable's I/O descriptors, ops and build metadata");
  inspect->add_option("loadable", path, "loadable file")->required()->check(CLI::ExistingFile);
  CLI11_PARSE(app, argc, argv);
  try {
    if (*inspect) return softdla::inspect_command(path);
    std::map<std::string, std::string> files;
    for (const std::string& spec : inputs) {
      const size_t eq = spec.find('=');
      if (eq == std::string::npos) throw softdla::Error("--input takes NAME=FILE.npy, got '" + spec + "'");
      files[spec.substr(0, eq)] = spec.substr(eq + 1);
    }
    return softdla::run_command(path, files, out_dir, repeat);
  } catch (const std::exception& e) {
    std::cerr << "softdla: error: " << e.what() << "\n";
    return 1;
  }
}
