// The softdla command's subcommands, one file each; main.cpp parses the command line.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace softdla::cli {

// softdla run: executes a loadable on the CPU engine over .npy inputs (several batches in turn).
int run_command(const std::string& path, const std::map<std::string, std::string>& input_files,
                const std::string& out_dir, int repeat, const std::string& labels_path);
// softdla inspect: I/O descriptors, layers with precision and fused steps, build metadata.
int inspect_command(const std::string& path);
// softdla compare: runs `python3 -m softdla.compare ARGS...` (the comparison needs ONNX Runtime) with
// the softdla package importable, and returns its exit status.
int compare_command(const std::vector<std::string>& args);

// trtexec-style option values.
// `flag` names the option in errors.
std::map<std::string, std::vector<int64_t>> parse_shapes(const std::string& flag, const std::string& spec);  // name:1x3x224x224,...
std::map<std::string, std::string> parse_layer_precisions(const std::string& spec);       // layer:fp16,...
// Validators of numeric option values: an empty string, or why `text` is not a number in [min, max]
// (NaN and infinities are not numbers here).
std::string check_whole_number(const std::string& text, int64_t min, int64_t max);
std::string check_finite_number(const std::string& text, double min, double max);
void progress_bar(const std::string& stage, size_t done, size_t total);

}  // namespace softdla::cli
