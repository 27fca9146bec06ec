// softdla run: a loadable through libcudla.so.1 (dla_session.h), its outputs printed, the exports written.
#include <algorithm>
#include <cstring>
#include <filesystem>
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
      std::filesystem::create_directories(o.out_dir);
      NpyArray a{"f4", {images, t.shape[1], t.shape[2], t.shape[3]}, std::vector<uint8_t>(v.size() * 4)};
      std::memcpy(a.data.data(), v.data(), a.data.size());
      std::string file = t.name;
      std::replace_if(file.begin(), file.end(), [](char c) { return !std::isalnum(uint8_t(c)) && c != '_' && c != '-'; }, '_');
      write_npy(o.out_dir + "/" + file + ".npy", a);
    }
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
