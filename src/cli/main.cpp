// The softdla command: `build` and `check` (the builder), `run`, `profile` and `inspect` (loadables),
// `compare`, `report` and `estimate` (Python). The subcommands live in their own files; this one parses the command line and maps errors
// to exit 1.
#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>

#include <unistd.h>

#include "builder.h"
#include "format_version.h"
#include "op_rules.h"
#include "commands.h"
#include "error.h"
#include "file_bytes.h"

namespace {
// Numeric option values with messages that say what is expected (CLI11's own say "Could not convert").
CLI::Validator whole_number(int64_t min, int64_t max) {
  return {[=](std::string& s) { return softdla::cli::check_whole_number(s, min, max); },
          "INT in [" + std::to_string(min) + ", " + std::to_string(max) + "]"};
}
CLI::Validator finite_number(double min, double max) {
  return {[=](std::string& s) { return softdla::cli::check_finite_number(s, min, max); }, "NUMBER in range"};
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"softdla: a software DLA with the cuDLA API"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("softdla ") + softdla::kSoftdlaVersion);
  std::string path, out_dir;
  std::vector<std::string> inputs;
  int repeat = 1;
  CLI::App* run = app.add_subcommand("run", "Run a loadable on a DLA core (libcudla.so.1) and print its outputs");
  // The loadable as a positional argument, or with trtexec's --loadEngine.
  CLI::Option* run_loadable = run->add_option("loadable", path, "loadable file")->check(CLI::ExistingFile);
  run->add_option("--loadEngine", path, "the loadable (as trtexec takes an engine)")->check(CLI::ExistingFile)->excludes(run_loadable);
  run->add_option("-i,--input", inputs, "NAME=FILE.npy (NCHW; several batches run in turn; values are quantized for INT8 inputs, except an "
                 "int8 array for an INT8 input, which holds the quantized codes themselves)");
  run->add_option("-o,--output-dir", out_dir, "write each output as float32 NAME.npy here");
  run->add_option("-r,--repeat", repeat, "run the first batch this many times and report the median time")->check(whole_number(1, 1'000'000));
  std::string labels;
  run->add_option("--labels", labels, "class labels (.npy): print the top-1 accuracy of output 0")->check(CLI::ExistingFile);
  // run and profile go through libcudla.so.1 on one DLA core, on the backend asked for (docs/PROFILING.md).
  std::string backend, export_profile, export_times, export_layer_info, trace;
  int run_core = 0;
  const auto backend_help = "cpu | cuda | auto (default: SOFTDLA_BACKEND, else auto: the GPU where there is one)";
  const auto core_help = "DLA core to run on (the device index given to cudlaCreateDevice; default 0)";
  run->add_option("--backend", backend, backend_help)->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  run->add_option("--useDLACore", run_core, core_help)->check(whole_number(0, 63));
  run->add_option("--exportProfile", export_profile, "write the per-layer times of every run as JSON (trtexec's layout)");
  run->add_option("--exportTimes", export_times, "write each run's start, end and latency as JSON");
  run->add_option("--exportLayerInfo", export_layer_info, "write the loadable's per-layer information as JSON");
  // trtexec's inference flags, so a trtexec command line for a DLA engine works with the program name swapped.
  std::string load_inputs_spec, export_output;
  run->add_option("--loadInputs", load_inputs_spec,
                  "trtexec: name:file[,...], each file the input's bytes in its I/O format (the descriptor's size), "
                  "or its values NCHW in the stored type; a .npy file is read as --input reads it");
  run->add_option("--exportOutput", export_output, "write the outputs as JSON, as trtexec does (name, dimensions, values)");
  run->add_option("--iterations", repeat, "as --repeat")->check(whole_number(1, 1'000'000));
  std::string run_no_effect;
  bool run_no_effect_flag = false;
  run->add_option("--warmUp,--duration,--avgRuns,--percentile,--streams", run_no_effect,
                  "accepted for trtexec compatibility (no effect)")->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  run->add_flag("--noDataTransfers,--useSpinWait,--separateProfileRun,--dumpOutput,--useCudaGraph,--threads",
                run_no_effect_flag, "accepted for trtexec compatibility (no effect: run prints its outputs)");
  CLI::App* profile = app.add_subcommand("profile", "Run a loadable with layer-wise statistics and write its timeline (Chrome trace / Perfetto JSON)");
  profile->add_option("loadable", path, "loadable file")->required()->check(CLI::ExistingFile);
  profile->add_option("-i,--input", inputs, "NAME=FILE.npy (as for run; inputs without one get random values)");
  profile->add_option("-r,--repeat", repeat, "run the first batch this many times")->check(whole_number(1, 1'000'000));
  profile->add_option("--backend", backend, backend_help)->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  profile->add_option("--useDLACore", run_core, core_help)->check(whole_number(0, 63));
  profile->add_option("-o,--output", trace, "the trace file to write (JSON)")->required();
  CLI::App* inspect = app.add_subcommand("inspect", "Print a loadable's I/O descriptors, ops and build metadata");
  inspect->add_option("loadable", path, "loadable file")->required()->check(CLI::ExistingFile);
  bool inspect_json = false;
  inspect->add_flag("--json", inspect_json, "print everything as JSON, per-layer information included (docs/PROFILING.md)");
  // build: trtexec's DLA flags, so a trtexec command line works with the program name swapped.
  std::string onnx_path, save, calib, calib_data, calibrator = "auto", in_fmt, out_fmt, layer_prec, constraints = "none",
                                                       target = "orin", shapes, mem_pool;
  bool fp16 = false, int8 = false, standalone = false, verbose = false, fp32_ref = false, gpu_fallback = false,
       skip_inference = false, expose = false, progress = false;
  int dla_core = 0;
  CLI::App* build = app.add_subcommand("build", "Build an ONNX model into a DLA standalone loadable (trtexec flags)");
  build->add_option("--onnx", onnx_path, "ONNX model")->required()->check(CLI::ExistingFile);
  build->add_option("--saveEngine", save, "output loadable path")->required();
  build->add_flag("--fp16", fp16, "allow FP16 layers");
  build->add_flag("--int8", int8, "allow INT8 layers (scales from --calib, --calib-data or Q/DQ nodes)");
  build->add_flag("--fp32-reference", fp32_ref, "softdla: an FP32 reference loadable (not a DLA precision)");
  build->add_option("--calib", calib, "TensorRT calibration cache: read if it exists, else written after calibrating");
  build->add_option("--calib-data", calib_data, "directory of .npy/.npz calibration inputs")->check(CLI::ExistingDirectory);
  double percentile = 99.99;
  build->add_option("--percentile", percentile, "softdla: the percentile of |x| the percentile rule keeps (default 99.99)")
      ->check(finite_number(50.0, 100.0));
  build->add_option("--calibrator", calibrator, "auto (default: the rule whose INT8 model best matches FP32 on the calibration data) | entropy (TensorRT EntropyCalibrator2) | minmax | percentile | mse")
      ->check(CLI::IsMember({"auto", "entropy", "minmax", "percentile", "mse"}));
  build->add_option("--inputIOFormats", in_fmt, "type:format[,...], e.g. int8:dla_hwc4");
  build->add_option("--outputIOFormats", out_fmt, "type:format[,...], e.g. fp16:chw16");
  build->add_option("--layerPrecisions", layer_prec, "layer:fp16|int8[,...]");
  build->add_option("--precisionConstraints", constraints, "none | prefer | obey")->check(CLI::IsMember({"none", "prefer", "obey"}));
  build->add_flag("--buildDLAStandalone", standalone, "build a DLA standalone loadable (always the case)");
  build->add_option("--useDLACore", dla_core, "DLA core (recorded; a loadable runs on any core)")->check(whole_number(0, 63));
  build->add_option("--target", target, "orin | xavier")->check(CLI::IsMember({"orin", "xavier"}));
  build->add_option("--shapes", shapes, "fix input shapes: name:1x3x224x224[,...]");
  // trtexec's optimization profile: the DLA runs one static shape, so min, opt and max must agree.
  std::string min_shapes, opt_shapes, max_shapes;
  build->add_option("--minShapes", min_shapes, "trtexec's profile: with --optShapes and --maxShapes, one shape a input (the DLA's shapes are static)");
  build->add_option("--optShapes", opt_shapes, "trtexec's profile (see --minShapes)");
  build->add_option("--maxShapes", max_shapes, "trtexec's profile (see --minShapes)");
  build->add_option("--memPoolSize", mem_pool, "accepted for trtexec compatibility (no effect)");
  build->add_flag("--allowGPUFallback", gpu_fallback, "rejected: not allowed for DLA standalone");
  build->add_flag("--skipInference", skip_inference, "accepted for trtexec compatibility");
  // More of trtexec's build flags that DLA scripts pass and that change nothing a loadable computes.
  bool best = false, no_effect_flag = false;
  std::string no_effect_value, sparsity = "disable";
  build->add_flag("--best", best, "trtexec: every precision, which on the DLA is --int8 --fp16");
  build->add_flag("--safe", no_effect_flag, "accepted: a DLA standalone loadable (always the case)");
  build->add_flag("--buildOnly,--noTF32,--separateProfileRun,--useSpinWait,--noDataTransfers", no_effect_flag,
                  "accepted for trtexec compatibility (no effect)");
  build->add_option("--workspace,--timingCacheFile,--profilingVerbosity,--builderOptimizationLevel", no_effect_value,
                    "accepted for trtexec compatibility (no effect)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  build->add_option("--sparsity", sparsity, "disable | enable (accepted; no effect on the numbers); force is refused (it rewrites the weights)")
      ->check(CLI::IsMember({"disable", "enable", "force"}));
  build->add_flag("--verbose", verbose, "print every layer's precision and fusion");
  build->add_flag("--progress", progress, "softdla: progress bars even when stderr is not a terminal (default: on a terminal only)");
  build->add_flag("--exposeIntermediates", expose,
                  "softdla: also bind every layer's output as an output, after the real ones (what `compare` runs)");
  std::string check_path, check_target = "orin", check_shapes;
  CLI::App* checkc = app.add_subcommand("check", "List every node of an ONNX model and whether it runs on the DLA");
  // The model as a positional argument, or with build's --onnx (users type one for the other).
  CLI::Option* check_model = checkc->add_option("model", check_path, "ONNX model")->check(CLI::ExistingFile);
  checkc->add_option("--onnx", check_path, "ONNX model (as softdla build takes it)")->check(CLI::ExistingFile)->excludes(check_model);
  checkc->add_option("--target", check_target, "orin | xavier")->check(CLI::IsMember({"orin", "xavier"}));
  checkc->add_option("--shapes", check_shapes, "fix input shapes: name:1x3x224x224[,...]");
  bool check_json = false;
  checkc->add_flag("--json", check_json, "print the table as JSON (docs/PROFILING.md)");
  CLI::App* ops = app.add_subcommand("ops", "Print the table of ONNX ops the builder accepts, with the inputs and attributes it honours (Markdown)");
  // compare runs the Python implementation (it needs ONNX Runtime): every argument after the
  // subcommand goes to it untouched, --help included.
  CLI::App* compare = app.add_subcommand("compare", "Compare a loadable with ONNX Runtime FP32 layer by layer (Python: softdla.compare)");
  compare->prefix_command();
  compare->set_help_flag();
  CLI::App* report = app.add_subcommand("report", "Write one self-contained HTML report of a model: DLA support, layers, times, errors, memory plan (Python: softdla.report)");
  report->prefix_command();
  report->set_help_flag();
  CLI::App* estimate = app.add_subcommand("estimate", "Predict a loadable's (or ONNX model's) latency on one Orin DLA core, layer by layer (Python: softdla.orin_latency)");
  estimate->prefix_command();
  estimate->set_help_flag();
  // CLI11 answers a mistyped command with "A subcommand is required": name it and list the real ones.
  if (argc > 1 && argv[1][0] != '-') {
    std::string known;
    bool is_command = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      known += (known.empty() ? "" : ", ") + sub->get_name();
      is_command = is_command || sub->get_name() == argv[1];
    }
    if (!is_command) {
      std::cerr << "softdla: unknown command '" << argv[1] << "'; the commands are " << known << " (softdla --help)\n";
      return 2;
    }
  }
  // CLI11 reads "--flag=" (an empty value, as a script with an empty variable writes) as the flag without
  // its value and takes the next argument as the value: "--layerPrecisions= --verbose" became the spec
  // "--verbose". An empty value is refused instead. compare, report and estimate parse their own.
  const bool own_parser = argc > 1 && (std::string(argv[1]) == "compare" || std::string(argv[1]) == "report" ||
                                       std::string(argv[1]) == "estimate");
  for (int i = 2; i < argc && !own_parser; ++i) {
    const std::string a = argv[i];
    if (a == "--") break;
    if (a.size() > 3 && a.rfind("--", 0) == 0 && a.back() == '=' && a.find('=') == a.size() - 1) {
      std::cerr << "softdla: error: " << a << " gives the option an empty value: leave the option out, or give it a value"
                << " (softdla " << argv[1] << " --help)\n";
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version: the text, exit 0
  } catch (const CLI::ParseError& e) {
    // Usage errors as every other error reads, with one exit code (2, as compare and unknown commands),
    // not CLI11's own numbers.
    std::cerr << "softdla: error: " << e.what() << " (softdla " << (argc > 1 ? argv[1] : "") << " --help)\n";
    return 2;
  }
  if (*compare) return softdla::cli::python_command(softdla::cli::kCompare, compare->remaining());
  if (*report) return softdla::cli::python_command(softdla::cli::kReport, report->remaining());
  if (*estimate) return softdla::cli::python_command(softdla::cli::kEstimate, estimate->remaining());
  try {
    if (*inspect) return softdla::cli::inspect_command(path, inspect_json);
    if (*ops) {
      std::cout << softdla::builder::op_rules_markdown();
      return 0;
    }
    if (*checkc) {
      if (check_path.empty()) {
        std::cerr << "softdla: error: check needs the model: softdla check MODEL.onnx (or --onnx=MODEL.onnx) (softdla check --help)\n";
        return 2;
      }
      const auto rows = softdla::builder::check(softdla::read_file_bytes(check_path, "ONNX model", softdla::kMaxModelFileBytes),
                                                check_target == "xavier" ? softdla::Target::kXavier : softdla::Target::kOrin,
                                                softdla::cli::parse_shapes("--shapes", check_shapes));
      if (check_json) return softdla::cli::print_check_json(check_path, check_target, rows);
      size_t w = 4, unsupported = 0, nodes = 0;
      bool graph_fails = false;  // the "(graph)" row: what the build refuses of the graph as a whole
      for (const auto& r : rows) w = std::max(w, r.node.size());
      std::cout << std::left << std::setw(int(w)) << "node" << "  " << std::setw(20) << "op" << "  " << std::setw(11)
                << "DLA" << "  reason / fix\n";
      for (const auto& r : rows) {
        if (r.node == "(graph)") graph_fails = true;
        else ++nodes, unsupported += !r.supported;
        std::cout << std::setw(int(w)) << r.node << "  " << std::setw(20) << r.op << "  " << std::setw(11)
                  << (r.supported ? "yes" : "NO") << "  " << r.reason << "\n";
      }
      std::cout << nodes - unsupported << " of " << nodes << " nodes run on the DLA (" << check_target << ")"
                << (graph_fails ? "; the graph as a whole does not build (the (graph) rows say why)" : "") << "\n";
      return unsupported || graph_fails ? 1 : 0;
    }
    if (*build) {
      if (gpu_fallback) throw softdla::Error("GPU fallback (--allowGPUFallback) not allowed for DLA standalone mode");
      softdla::builder::BuildOptions o;
      o.fp16 = fp16, o.int8 = int8, o.fp32_reference = fp32_ref;
      o.target = target == "xavier" ? softdla::Target::kXavier : softdla::Target::kOrin;
      o.input_formats = in_fmt, o.output_formats = out_fmt;
      o.layer_precisions = softdla::cli::parse_layer_precisions(layer_prec);
      o.constraints = constraints == "obey" ? softdla::builder::PrecisionConstraints::kObey
                      : constraints == "prefer" ? softdla::builder::PrecisionConstraints::kPrefer
                                                : softdla::builder::PrecisionConstraints::kNone;
      o.calibrator = calibrator;
      o.percentile = percentile;
      o.calib_data = calib_data;
      if (!calib.empty()) {
        o.calib_cache = calib;
        if (!std::filesystem::exists(calib)) o.write_calib_cache = calib;
      }
      o.shapes = softdla::cli::static_shapes(shapes, min_shapes, opt_shapes, max_shapes);
      if (best) o.fp16 = o.int8 = true;
      if (sparsity == "force")
        throw softdla::Error("--sparsity=force rewrites the weights to a 2:4 pattern, which changes what the model "
                             "computes; softdla builds the model as it is: prune it (2:4) before export, or leave the flag out");
      o.expose_intermediates = expose;
      for (int i = 1; i < argc; ++i) o.flags_text += std::string(i > 1 ? " " : "") + argv[i];
      // Progress bars redraw one line with '\r': on a terminal only, never into a log file unless asked.
      if (progress || isatty(STDERR_FILENO)) o.progress = softdla::cli::progress_bar;
      if (verbose) o.verbose = [](const std::string& l) { std::cerr << l << "\n"; };
      softdla::cli::check_loadable_destination(save, onnx_path);  // before the build, which may be long
      const auto t0 = std::chrono::steady_clock::now();
      const auto r = softdla::builder::build(softdla::read_file_bytes(onnx_path, "ONNX model", softdla::kMaxModelFileBytes), o);
      softdla::cli::write_loadable_file(save, r.loadable);
      std::map<std::string, int> by_precision;
      for (const auto& l : r.layers) {
        ++by_precision[l.precision];
        if (verbose) std::cerr << "  layer " << l.name << " (" << l.kind << "): " << l.precision << "\n";
      }
      std::cout << "built " << save << " (" << r.loadable.size() << " bytes, " << r.layers.size() << " layers:";
      for (const auto& [p, n] : by_precision) std::cout << " " << n << " " << p;
      std::cout << ") in " << std::fixed << std::setprecision(2)
                << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s\n";
      if (!o.write_calib_cache.empty() && std::filesystem::exists(o.write_calib_cache))
        std::cout << "wrote calibration cache " << o.write_calib_cache << "\n";
      for (const std::string& w : r.warnings) std::cerr << "softdla: warning: " << w << "\n";
      return 0;
    }
    std::map<std::string, std::string> files;
    for (const std::string& spec : inputs) {
      const size_t eq = spec.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
        throw softdla::Error("--input takes NAME=FILE.npy, got '" + spec + "'");
      // A second file for the same input would silently replace the first.
      if (!files.emplace(spec.substr(0, eq), spec.substr(eq + 1)).second)
        throw softdla::Error("--input names '" + spec.substr(0, eq) + "' twice ('" + files[spec.substr(0, eq)] +
                             "' and '" + spec.substr(eq + 1) + "'): give each input once");
    }
    for (const auto& [name, file] : softdla::cli::parse_load_inputs(load_inputs_spec))
      if (!files.emplace(name, file).second)
        throw softdla::Error("input '" + name + "' is given twice (--input and --loadInputs): give each input once");
    if (path.empty()) {  // a usage error, as CLI11's own are reported (exit 2)
      const char* cmd = *profile ? "profile" : "run";
      std::cerr << "softdla: error: give the loadable: softdla " << cmd << " LOADABLE (or --loadEngine=LOADABLE) (softdla "
                << cmd << " --help)\n";
      return 2;
    }
    softdla::cli::RunOptions o;
    o.path = path, o.input_files = files, o.repeat = repeat, o.backend = backend, o.dla_core = uint64_t(run_core);
    o.export_output = export_output;
    o.out_dir = out_dir, o.labels_path = labels;
    o.export_profile = export_profile, o.export_times = export_times, o.export_layer_info = export_layer_info;
    o.trace_path = trace;
    return *profile ? softdla::cli::profile_command(o) : softdla::cli::run_command(o);
  } catch (const std::exception& e) {
    std::cerr << "softdla: error: " << e.what() << "\n";
    return 1;
  }
}
