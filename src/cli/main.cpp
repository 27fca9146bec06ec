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
#include <sstream>
#include <fstream>

#include "builder.h"
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
  auto value = [&](uint64_t i) { return npy_value(a, i); };
  std::vector<uint8_t> out(count * element_size(t.dtype));
  if (t.dtype == DataType::kInt8 && a.dtype == "i1") return a.data;  // int8 arrays hold quantized codes
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
                const std::string& out_dir, int repeat, const std::string& labels_path) {
  Engine engine(read_loadable_file(path));
  const Model& m = engine.model();
  // Inputs: each .npy may hold several batches' worth of samples; they run one batch after another.
  std::vector<NpyArray> arrays;
  size_t batches = 1;
  std::mt19937 rng(0);
  for (const IoBinding& io : m.inputs) {
    const Tensor& t = m.tensors[io.tensor];
    NpyArray a;
    if (auto it = input_files.find(t.name); it != input_files.end()) {
      a = read_npy(it->second);
    } else {
      std::cerr << "input '" << t.name << "': no --input given, using uniform random values in [-1, 1) (seed 0)\n";
      a = NpyArray{"f4", {element_count(t.shape)}, std::vector<uint8_t>(element_count(t.shape) * 4)};
      std::uniform_real_distribution<float> dist(-1.f, 1.f);
      for (uint64_t i = 0; i < element_count(t.shape); ++i) { const float v = dist(rng); std::memcpy(&a.data[i * 4], &v, 4); }
    }
    uint64_t n = 1;
    for (uint64_t d : a.shape) n *= d;
    const uint64_t per = element_count(t.shape);
    if (n == 0 || n % per)
      fail("input '", t.name, "' needs a multiple of ", per, " values (", t.shape[0], "x", t.shape[1], "x", t.shape[2], "x",
           t.shape[3], " per batch); the .npy holds ", n);
    batches = std::max<size_t>(batches, n / per);
    arrays.push_back(std::move(a));
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
    if (i == 0 && !labels_path.empty()) {
      const NpyArray labels = read_npy(labels_path);
      size_t correct = 0, count = 0;
      uint64_t nl = 1;
      for (uint64_t d : labels.shape) nl *= d;
      for (size_t n = 0; n < images && n < nl; ++n, ++count) {
        const float* row = v.data() + n * per_image;
        correct += size_t(std::max_element(row, row + per_image) - row) == size_t(npy_value(labels, n));
      }
      std::cout << "top-1 accuracy: " << std::setprecision(2) << 100.0 * double(correct) / double(std::max<size_t>(count, 1))
                << "% (" << correct << "/" << count << ")\n";
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

int inspect_command(const std::string& path) {
  const Model m = read_loadable_file(path);
  std::cout << "loadable " << path << "\n  format " << m.version.major << "." << m.version.minor << "." << m.version.patch
            << ", target " << to_string(m.target) << ", built by '" << m.build_info.builder << "'\n";
  if (!m.build_info.precisions.empty()) std::cout << "  precisions: " << m.build_info.precisions << "\n";
  if (!m.build_info.source_model_sha256.empty())
    std::cout << "  source model sha256: " << m.build_info.source_model_sha256 << "\n";
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
    std::string fused;
    const SdpParams* post = nullptr;
    if (const auto* c = std::get_if<ConvParams>(&op.params)) post = &c->post;
    if (const auto* d = std::get_if<DeconvParams>(&op.params)) post = &d->post;
    if (const auto* sdp = std::get_if<SdpParams>(&op.params)) post = sdp;
    if (post) {
      for (const SdpStep& st : post->steps) fused += std::string(fused.empty() ? " [" : "+") + to_string(st.kind);
      if (post->lut != ActivationLut::kNone) fused += std::string(fused.empty() ? " [" : "+") + (post->lut == ActivationLut::kSigmoid ? "sigmoid-lut" : "tanh-lut");
      if (!fused.empty()) fused += "]";
    }
    std::cout << "    " << std::left << std::setw(10) << op_kind_name(op.params) << " " << std::setw(6)
              << to_string(out.dtype) << " " << op.name << fused << " -> " << out.name << "\n";
  }
  return 0;
}

std::map<std::string, std::vector<int64_t>> parse_shapes(const std::string& spec) {
  // trtexec: name:1x3x224x224[,name2:...]
  std::map<std::string, std::vector<int64_t>> out;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t colon = item.rfind(':');
    if (colon == std::string::npos) throw Error("--shapes takes name:1x3x224x224, got '" + item + "'");
    std::vector<int64_t> dims;
    std::stringstream ds(item.substr(colon + 1));
    std::string d;
    while (std::getline(ds, d, 'x')) dims.push_back(std::stoll(d));
    std::string name = item.substr(0, colon);
    if (name.size() >= 2 && (name.front() == '\'' || name.front() == '"')) name = name.substr(1, name.size() - 2);
    out[name] = dims;
  }
  return out;
}

std::map<std::string, std::string> parse_layer_precisions(const std::string& spec) {
  std::map<std::string, std::string> out;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t colon = item.rfind(':');
    if (colon == std::string::npos) throw Error("--layerPrecisions takes layer:precision, got '" + item + "'");
    std::string name = item.substr(0, colon);
    if (name.size() >= 2 && (name.front() == '\'' || name.front() == '"')) name = name.substr(1, name.size() - 2);
    out[name] = item.substr(colon + 1);
  }
  return out;
}

void progress_bar(const std::string& stage, size_t done, size_t total) {
  static std::string last;
  const int width = 30, filled = total ? int(width * done / total) : width;
  std::cerr << "\r" << std::left << std::setw(28) << stage << " [" << std::string(size_t(filled), '#')
            << std::string(size_t(width - filled), ' ') << "] " << done << "/" << total << std::flush;
  if (done == total) std::cerr << "\n";
  last = stage;
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
  run->add_option("-i,--input", inputs, "NAME=FILE.npy (NCHW; several batches run in turn; values are quantized for INT8 inputs)");
  run->add_option("-o,--output-dir", out_dir, "write each output as float32 NAME.npy here");
  run->add_option("-r,--repeat", repeat, "run the first batch this many times and report the median time")->check(CLI::PositiveNumber);
  std::string labels;
  run->add_option("--labels", labels, "class labels (.npy): print the top-1 accuracy of output 0")->check(CLI::ExistingFile);
  CLI::App* inspect = app.add_subcommand("inspect", "Print a loadable's I/O descriptors, ops and build metadata");
  inspect->add_option("loadable", path, "loadable file")->required()->check(CLI::ExistingFile);
  // build: trtexec's DLA flags, so a trtexec command line works with the program name swapped.
  std::string onnx_path, save, calib, calib_data, calibrator = "entropy", in_fmt, out_fmt, layer_prec, constraints = "none",
                                                       target = "orin", shapes, mem_pool;
  bool fp16 = false, int8 = false, standalone = false, verbose = false, fp32_ref = false, gpu_fallback = false,
       skip_inference = false;
  int dla_core = 0;
  CLI::App* build = app.add_subcommand("build", "Build an ONNX model into a DLA standalone loadable (trtexec flags)");
  build->add_option("--onnx", onnx_path, "ONNX model")->required()->check(CLI::ExistingFile);
  build->add_option("--saveEngine", save, "output loadable path")->required();
  build->add_flag("--fp16", fp16, "allow FP16 layers");
  build->add_flag("--int8", int8, "allow INT8 layers (scales from --calib, --calib-data or Q/DQ nodes)");
  build->add_flag("--fp32-reference", fp32_ref, "softdla: an FP32 reference loadable (not a DLA precision)");
  build->add_option("--calib", calib, "TensorRT calibration cache: read if it exists, else written after calibrating");
  build->add_option("--calib-data", calib_data, "directory of .npy/.npz calibration inputs")->check(CLI::ExistingDirectory);
  build->add_option("--calibrator", calibrator, "entropy (TensorRT EntropyCalibrator2) | minmax | percentile")
      ->check(CLI::IsMember({"entropy", "minmax", "percentile"}));
  build->add_option("--inputIOFormats", in_fmt, "type:format[,...], e.g. int8:dla_hwc4");
  build->add_option("--outputIOFormats", out_fmt, "type:format[,...], e.g. fp16:chw16");
  build->add_option("--layerPrecisions", layer_prec, "layer:fp16|int8[,...]");
  build->add_option("--precisionConstraints", constraints, "none | prefer | obey")->check(CLI::IsMember({"none", "prefer", "obey"}));
  build->add_flag("--buildDLAStandalone", standalone, "build a DLA standalone loadable (always the case)");
  build->add_option("--useDLACore", dla_core, "DLA core (recorded; a loadable runs on any core)");
  build->add_option("--target", target, "orin | xavier")->check(CLI::IsMember({"orin", "xavier"}));
  build->add_option("--shapes", shapes, "fix input shapes: name:1x3x224x224[,...]");
  build->add_option("--memPoolSize", mem_pool, "accepted for trtexec compatibility (no effect)");
  build->add_flag("--allowGPUFallback", gpu_fallback, "rejected: not allowed for DLA standalone");
  build->add_flag("--skipInference", skip_inference, "accepted for trtexec compatibility");
  build->add_flag("--verbose", verbose, "print every layer's precision and fusion");
  std::string check_path, check_target = "orin", check_shapes;
  CLI::App* checkc = app.add_subcommand("check", "List every node of an ONNX model and whether it runs on the DLA");
  checkc->add_option("model", check_path, "ONNX model")->required()->check(CLI::ExistingFile);
  checkc->add_option("--target", check_target, "orin | xavier")->check(CLI::IsMember({"orin", "xavier"}));
  checkc->add_option("--shapes", check_shapes, "fix input shapes: name:1x3x224x224[,...]");
  CLI11_PARSE(app, argc, argv);
  try {
    if (*inspect) return softdla::inspect_command(path);
    if (*checkc) {
      const auto rows = softdla::builder::check(softdla::builder::read_file_bytes(check_path),
                                                check_target == "xavier" ? softdla::Target::kXavier : softdla::Target::kOrin,
                                                softdla::parse_shapes(check_shapes));
      size_t w = 4, unsupported = 0;
      for (const auto& r : rows) w = std::max(w, r.node.size());
      std::cout << std::left << std::setw(int(w)) << "node" << "  " << std::setw(20) << "op" << "  " << std::setw(11)
                << "DLA" << "  reason / fix\n";
      for (const auto& r : rows) {
        unsupported += !r.supported;
        std::cout << std::setw(int(w)) << r.node << "  " << std::setw(20) << r.op << "  " << std::setw(11)
                  << (r.supported ? "yes" : "NO") << "  " << r.reason << "\n";
      }
      std::cout << rows.size() - unsupported << " of " << rows.size() << " nodes run on the DLA ("
                << check_target << ")\n";
      return unsupported ? 1 : 0;
    }
    if (*build) {
      if (gpu_fallback) throw softdla::Error("GPU fallback (--allowGPUFallback) not allowed for DLA standalone mode");
      softdla::builder::BuildOptions o;
      o.fp16 = fp16, o.int8 = int8, o.fp32_reference = fp32_ref;
      o.target = target == "xavier" ? softdla::Target::kXavier : softdla::Target::kOrin;
      o.input_formats = in_fmt, o.output_formats = out_fmt;
      o.layer_precisions = softdla::parse_layer_precisions(layer_prec);
      o.constraints = constraints == "obey" ? softdla::builder::PrecisionConstraints::kObey
                      : constraints == "prefer" ? softdla::builder::PrecisionConstraints::kPrefer
                                                : softdla::builder::PrecisionConstraints::kNone;
      o.calibrator = calibrator;
      o.calib_data = calib_data;
      if (!calib.empty()) {
        o.calib_cache = calib;
        if (!std::filesystem::exists(calib)) o.write_calib_cache = calib;
      }
      o.shapes = softdla::parse_shapes(shapes);
      for (int i = 1; i < argc; ++i) o.flags_text += std::string(i > 1 ? " " : "") + argv[i];
      o.progress = softdla::progress_bar;
      if (verbose) o.verbose = [](const std::string& l) { std::cerr << l << "\n"; };
      const auto t0 = std::chrono::steady_clock::now();
      const auto r = softdla::builder::build(softdla::builder::read_file_bytes(onnx_path), o);
      std::ofstream f(save, std::ios::binary);
      if (!f) throw softdla::Error("cannot write '" + save + "'");
      f.write(reinterpret_cast<const char*>(r.loadable.data()), std::streamsize(r.loadable.size()));
      std::map<std::string, int> by_precision;
      for (const auto& l : r.layers) {
        ++by_precision[l.precision];
        if (verbose) std::cerr << "  layer " << l.name << " (" << l.kind << "): " << l.precision << "\n";
      }
      std::cout << "built " << save << " (" << r.loadable.size() << " bytes, " << r.layers.size() << " layers:";
      for (const auto& [p, n] : by_precision) std::cout << " " << n << " " << p;
      std::cout << ") in " << std::fixed << std::setprecision(2)
                << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
      if (!o.write_calib_cache.empty()) std::cout << "wrote calibration cache " << o.write_calib_cache << "\n";
      return 0;
    }
    std::map<std::string, std::string> files;
    for (const std::string& spec : inputs) {
      const size_t eq = spec.find('=');
      if (eq == std::string::npos) throw softdla::Error("--input takes NAME=FILE.npy, got '" + spec + "'");
      files[spec.substr(0, eq)] = spec.substr(eq + 1);
    }
    return softdla::run_command(path, files, out_dir, repeat, labels);
  } catch (const std::exception& e) {
    std::cerr << "softdla: error: " << e.what() << "\n";
    return 1;
  }
}
