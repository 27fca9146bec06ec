// The data side of `softdla run` and `softdla profile`: .npy inputs (or random ones) split into batches
// and converted to each input's stored type and memory format, the batches run in turn on a DlaSession,
// outputs converted back to float32 NCHW. Packing uses the loadable's own layouts (io_layout.h,
// io_convert.h), as softdla's Python format helpers do for a cuDLA program.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dla_session.h"
#include "model.h"
#include "npy.h"

namespace softdla::cli {

struct RunInputs {
  std::vector<NpyArray> arrays;  // one per loadable input, in binding order
  size_t batches = 1;            // how many batches the arrays hold (an array of one batch serves all)
};

// Reads the --input files (NAME -> FILE.npy); inputs without a file get uniform random values in [-1, 1)
// (seed 0, said on stderr). Every array is checked against its tensor.
RunInputs load_inputs(const Model& m, const std::map<std::string, std::string>& files);
// Writes batch b of input i, converted and packed, into `dst` (the binding's descriptor size).
void pack_input(const Model& m, const RunInputs& in, size_t i, size_t b, uint8_t* dst);
// Output i, read from its bound format, as float32 NCHW values.
std::vector<float> unpack_output(const Model& m, size_t i, const uint8_t* src);
// Runs every batch in turn, the first one `repeat` times (each run one task); with keep_outputs, the
// outputs of every batch (float32 NCHW, batches one after another, per output).
struct BatchRuns {
  std::vector<TaskTiming> runs;
  std::vector<std::vector<float>> outputs;
};
BatchRuns run_batches(DlaSession& s, const Model& m, const RunInputs& in, int repeat, bool keep_outputs);
// Labels for --labels: one whole number per sample of output 0, each below `classes`.
std::vector<size_t> read_labels(const std::string& path, size_t samples, size_t classes, size_t batches);

}  // namespace softdla::cli
