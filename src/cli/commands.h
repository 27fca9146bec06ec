// The softdla command's subcommands, one file each; main.cpp parses the command line.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace softdla::builder {
struct CheckRow;
}

namespace softdla::cli {

// What `softdla run` and `softdla profile` take.
struct RunOptions {
  std::string path;                                // the loadable
  std::map<std::string, std::string> input_files;  // input name -> .npy (others get random values)
  int repeat = 1;                                  // runs of the first batch
  std::string backend;                             // cpu | cuda | auto; empty: SOFTDLA_BACKEND, else auto
  uint64_t dla_core = 0;                           // --useDLACore: the device index of cudlaCreateDevice
  // run only
  std::string out_dir, labels_path;
  std::string export_profile, export_times, export_layer_info;  // trtexec-style exports (docs/PROFILING.md)
  std::string export_output;                                    // trtexec's --exportOutput JSON
  // profile only
  std::string trace_path;
};
// softdla run: executes a loadable through libcudla.so.1 (a DLA core in hybrid mode, as a cuDLA program
// does) over .npy inputs (several batches in turn), prints its outputs, writes the exports asked for.
int run_command(const RunOptions& o);
// softdla profile: runs as `run` does with layer-wise statistics on and writes the timeline of the tasks
// and their layers as Chrome-trace / Perfetto JSON.
int profile_command(const RunOptions& o);
// softdla inspect: I/O descriptors, layers with precision and fused steps, build metadata; with json, the
// dict of softdla.inspect() as JSON, "layer_info" included (docs/PROFILING.md).
int inspect_command(const std::string& path, bool json = false);
// softdla check --json: the rows of builder::check() as {"model", "target", "nodes", "supported",
// "unsupported"}; returns the exit status (1 when a node does not run on the DLA), as the table does.
int print_check_json(const std::string& model_path, const std::string& target,
                     const std::vector<builder::CheckRow>& rows);
// The subcommands written in Python (compare, report, estimate): python_command runs the module's
// main(ARGS...) with the softdla package importable, in place of this process, and returns only when
// Python cannot be started.
struct PythonCommand {
  const char* name;    // as typed after `softdla`
  const char* module;  // the module whose main(argv) runs it
  const char* needs;   // the packages it imports besides softdla, for the message when one is missing
};
inline constexpr PythonCommand kCompare{"compare", "softdla.compare", "numpy, onnx and onnxruntime"};
inline constexpr PythonCommand kReport{"report", "softdla.report", "numpy and onnx (onnxruntime for --run-compare)"};
inline constexpr PythonCommand kEstimate{"estimate", "softdla.orin_latency", "numpy (and onnx for an ONNX model)"};
int python_command(const PythonCommand& command, const std::vector<std::string>& args);

// softdla build's output (loadable_file.cpp): the destination checked before the build (not the ONNX
// model itself, a file in an existing directory), and the loadable written with every write checked.
void check_loadable_destination(const std::string& save, const std::string& onnx_path);
void write_loadable_file(const std::string& save, const std::vector<uint8_t>& bytes);

// trtexec-style option values.
// `flag` names the option in errors.
std::map<std::string, std::vector<int64_t>> parse_shapes(const std::string& flag, const std::string& spec);  // name:1x3x224x224,...
std::map<std::string, std::string> parse_layer_precisions(const std::string& spec);       // layer:fp16,...
// trtexec's --loadInputs: name:file[,...], a name with ':' in it quoted ('input:0':x.bin).
std::map<std::string, std::string> parse_load_inputs(const std::string& spec);
// The static input shapes of --shapes and of trtexec's --minShapes/--optShapes/--maxShapes, which must all
// give an input one shape (the DLA has no dynamic shapes).
std::map<std::string, std::vector<int64_t>> static_shapes(const std::string& shapes, const std::string& min,
                                                          const std::string& opt, const std::string& max);
// Validators of numeric option values: an empty string, or why `text` is not a number in [min, max]
// (NaN and infinities are not numbers here).
std::string check_whole_number(const std::string& text, int64_t min, int64_t max);
std::string check_finite_number(const std::string& text, double min, double max);
void progress_bar(const std::string& stage, size_t done, size_t total);

}  // namespace softdla::cli
