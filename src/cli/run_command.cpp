// softdla run: a loadable through libcudla.so.1 (dla_session.h), its outputs printed, the exports written.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <iostream>

#include "commands.h"
#include "dla_session.h"
#include "error.h"
#include "file_bytes.h"
#include "layer_info.h"
#include "loadable.h"
#include "npy.h"
#include "profile_export.h"
#include "run_inputs.h"

namespace softdla::cli {
namespace {

// The .npy file of each output under --output-dir: its name with the characters a path or a shell
// treats specially replaced ('/', controls, ':' ...; UTF-8 letters kept), at most 200 bytes, and made
// unique (out:a and out_a both clean up to out_a: the second becomes out_a_2), so no output overwrites
// another's file.
std::vector<std::string> output_files(const Model& m) {
  std::vector<std::string> files;
  for (const IoBinding& io : m.outputs) {
    std::string f = m.tensors[io.tensor].name;
    std::replace_if(f.begin(), f.end(), [](char c) {
      const auto u = uint8_t(c);
      return u < 0x80 && !std::isalnum(u) && c != '_' && c != '-' && c != '.';
    }, '_');
    if (f.empty() || f == "." || f == "..") f = "output";
    if (f.size() > 200) f = f.substr(0, 180) + "_" + std::to_string(std::hash<std::string>{}(f) % 100000000);
    std::string unique = f;
    for (int k = 2; std::count(files.begin(), files.end(), unique + ".npy"); ++k) unique = f + "_" + std::to_string(k);
    files.push_back(unique + ".npy");
  }
  return files;
}

// --output-dir made (or found) before the run, which may be long: a path that cannot be a directory is
// an error now, not after every batch ran.
void prepare_output_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    fail("--output-dir '", dir, "' cannot be made a directory", ec ? " (" + ec.message() + ")" : std::string(""),
         ": give a directory path");
}

}  // namespace

int run_command(const RunOptions& o) {
  const std::vector<uint8_t> bytes = read_file_bytes(o.path, "loadable", kMaxModelFileBytes);
  const Model m = read_loadable(bytes);
  // Layer-wise statistics cost a little on the CPU and take the GPU task out of its CUDA graph: only
  // when the per-layer profile is asked for.
  DlaSession session(bytes, m, {o.backend, o.dla_core, !o.export_profile.empty()});
  const RunInputs in = load_inputs(m, o.input_files);
  const size_t batches = in.batches;
  // Labels are checked before the run, which may be long.
  std::vector<size_t> labels;
  if (!o.labels_path.empty() && !m.outputs.empty()) {
    const Tensor& t = m.tensors[m.outputs[0].tensor];
    labels = read_labels(o.labels_path, size_t(t.shape[0]) * batches, size_t(t.shape[1]) * t.shape[2] * t.shape[3],
                         batches);
  }
  const std::vector<std::string> files = output_files(m);
  if (!o.out_dir.empty()) prepare_output_dir(o.out_dir);
  const BatchRuns r = run_batches(session, m, in, o.repeat, true);
  std::vector<double> times;
  for (const TaskTiming& t : r.runs) times.push_back(t.end_ms - t.start_ms);
  std::cout << "ran " << o.path << " (" << m.ops.size() << " ops, target " << to_string(m.target) << "): " << batches
            << " batch(es), median " << std::fixed << std::setprecision(3) << median(times) << " ms per batch\n";
  const std::vector<std::vector<float>>& results = r.outputs;
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
    if (!o.out_dir.empty()) {
      NpyArray a{"f4", {images, t.shape[1], t.shape[2], t.shape[3]}, std::vector<uint8_t>(v.size() * 4)};
      std::memcpy(a.data.data(), v.data(), a.data.size());
      const std::string path = o.out_dir + "/" + files[i];
      write_npy(path, a);
      std::cout << "wrote output '" << t.name << "' to " << path << "\n";
    }
  }
  if (!o.export_output.empty()) {
    write_text_file(o.export_output, outputs_json(m, results, batches), "--exportOutput");
    std::cout << "wrote the outputs to " << o.export_output << "\n";
  }
  if (!o.export_profile.empty()) {
    write_text_file(o.export_profile, profile_json(m, r.runs), "--exportProfile");
    std::cout << "wrote the per-layer profile of " << r.runs.size() << " run(s) to " << o.export_profile << "\n";
  }
  if (!o.export_times.empty()) {
    write_text_file(o.export_times, times_json(r.runs), "--exportTimes");
    std::cout << "wrote the times of " << r.runs.size() << " run(s) to " << o.export_times << "\n";
  }
  if (!o.export_layer_info.empty()) {
    write_text_file(o.export_layer_info, layer_info_export_json(o.path, m), "--exportLayerInfo");
    std::cout << "wrote the layer information to " << o.export_layer_info << "\n";
  }
  return 0;
}

}  // namespace softdla::cli
