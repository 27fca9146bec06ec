// softdla._builder_ext: the builder library (ONNX -> loadable) and the loadable reader for Python.
// Errors become softdla's BuildError (a ValueError) with the builder's message.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "builder.h"
#include "error.h"
#include "json_writer.h"
#include "layer_info.h"
#include "loadable.h"
#include "model_checks.h"

namespace nb = nanobind;
using namespace softdla;

namespace {

std::vector<uint8_t> to_bytes(nb::bytes b) {
  const auto* p = static_cast<const uint8_t*>(b.data());
  return {p, p + b.size()};
}

Target target_of(const std::string& t) {
  if (t == "orin") return Target::kOrin;
  if (t == "xavier") return Target::kXavier;
  throw Error("target must be 'orin' or 'xavier', not '" + t + "'");
}

}  // namespace

NB_MODULE(_builder_ext, m) {
  nb::exception<Error>(m, "BuildError", PyExc_ValueError);

  m.def("build", [](nb::bytes onnx, const std::map<std::string, std::string>& opts,
                    const std::map<std::string, std::string>& layer_precisions,
                    const std::map<std::string, std::vector<int64_t>>& shapes, nb::object progress) {
    builder::BuildOptions o;
    auto get = [&](const char* k, const std::string& d = "") { auto it = opts.find(k); return it == opts.end() ? d : it->second; };
    o.fp16 = get("fp16") == "1", o.int8 = get("int8") == "1", o.fp32_reference = get("fp32_reference") == "1";
    o.target = target_of(get("target", "orin"));
    o.input_formats = get("input_formats"), o.output_formats = get("output_formats");
    o.calib_cache = get("calib_cache"), o.calib_data = get("calib_data"), o.write_calib_cache = get("write_calib_cache");
    o.calibrator = get("calibrator", "auto");
    o.expose_intermediates = get("expose_intermediates") == "1";  // softdla.compare's probe variant
    const std::string pc = get("precision_constraints", "none");
    if (pc != "none" && pc != "prefer" && pc != "obey")
      fail("precision_constraints must be 'none', 'prefer' or 'obey', not '", pc, "'");
    o.constraints = pc == "obey" ? builder::PrecisionConstraints::kObey
                    : pc == "prefer" ? builder::PrecisionConstraints::kPrefer : builder::PrecisionConstraints::kNone;
    o.layer_precisions = layer_precisions;
    o.shapes = shapes;
    o.flags_text = "python softdla.build";
    if (!progress.is_none())
      o.progress = [progress](const std::string& stage, size_t done, size_t total) {
        nb::gil_scoped_acquire gil;
        progress(stage, done, total);
      };
    const std::vector<uint8_t> bytes = to_bytes(onnx);
    builder::BuildResult r;
    {
      nb::gil_scoped_release release;
      r = builder::build(bytes, o);
    }
    std::vector<std::tuple<std::string, std::string, std::string, std::string>> layers;
    for (const auto& l : r.layers) layers.emplace_back(l.name, l.kind, l.precision, l.output);
    return std::make_tuple(nb::bytes(reinterpret_cast<const char*>(r.loadable.data()), r.loadable.size()), layers, r.scales,
                           r.warnings);
  }, nb::arg("onnx"), nb::arg("options"), nb::arg("layer_precisions"), nb::arg("shapes"), nb::arg("progress").none());

  m.def("check", [](nb::bytes onnx, const std::string& target, const std::map<std::string, std::vector<int64_t>>& shapes) {
    const std::vector<uint8_t> bytes = to_bytes(onnx);
    std::vector<builder::CheckRow> rows;
    {
      nb::gil_scoped_release release;
      rows = builder::check(bytes, target_of(target), shapes);
    }
    std::vector<std::tuple<std::string, std::string, bool, std::string>> out;
    for (const auto& r : rows) out.emplace_back(r.node, r.op, r.supported, r.reason);
    return out;
  });

  m.def("inspect", [](nb::bytes loadable) {
    const Model model = read_loadable(to_bytes(loadable));
    nb::dict d;
    d["format_version"] = std::to_string(model.version.major) + "." + std::to_string(model.version.minor) + "." +
                          std::to_string(model.version.patch);
    d["target"] = to_string(model.target);
    d["builder"] = model.build_info.builder;
    d["precisions"] = model.build_info.precisions;
    d["flags"] = model.build_info.flags;
    d["source_model_sha256"] = model.build_info.source_model_sha256;
    auto io = [&](const std::vector<IoBinding>& list) {
      nb::list l;
      for (const IoBinding& b : list) {
        const Tensor& t = model.tensors[b.tensor];
        nb::dict e;
        e["name"] = t.name;
        e["shape"] = nb::make_tuple(t.shape[0], t.shape[1], t.shape[2], t.shape[3]);
        e["dtype"] = to_string(t.dtype);
        e["format"] = to_string(b.format);
        e["scale"] = json_float_value(t.scale);  // the float32 scale, as `inspect --json` reads back
        e["size"] = b.desc.size;
        e["strides"] = nb::make_tuple(b.desc.stride[0], b.desc.stride[1], b.desc.stride[2], b.desc.stride[3]);
        l.append(e);
      }
      return l;
    };
    d["inputs"] = io(model.inputs);
    d["outputs"] = io(model.outputs);
    nb::list layers;
    for (const Op& op : model.ops)
      layers.append(nb::make_tuple(op.name, op_kind_name(op.params), to_string(model.tensors[op.outputs[0]].dtype)));
    d["layers"] = layers;
    d["arena_bytes"] = model.memory_plan.arena_size;
    nb::list memory_plan;  // describe_memory_plan() (layer_info.h): the report's memory view
    for (const MemoryPlanEntry& p : describe_memory_plan(model)) {
      nb::dict e;
      e["tensor"] = p.tensor;
      e["offset"] = p.offset;
      e["bytes"] = p.bytes;
      e["first_op"] = p.first_op;
      e["last_op"] = p.last_op;
      memory_plan.append(e);
    }
    d["memory_plan"] = memory_plan;
    // The per-layer description (layer_info.h; docs/PROFILING.md): the same values as the JSON of
    // `softdla inspect --json` (floats as the double their JSON text reads back as).
    auto tensors = [](const std::vector<LayerTensorInfo>& list) {
      nb::list l;
      for (const LayerTensorInfo& t : list) {
        nb::dict e;
        e["name"] = t.name;
        nb::list shape;  // a list, as json.loads gives it
        for (uint32_t dim : t.shape) shape.append(dim);
        e["shape"] = shape;
        e["dtype"] = t.dtype;
        e["scale"] = json_float_value(t.scale);
        l.append(e);
      }
      return l;
    };
    nb::list layer_info;
    for (const LayerInfo& li : describe_layers(model)) {
      nb::dict e;
      e["index"] = li.index;
      e["name"] = li.name;
      e["op"] = li.op;
      e["precision"] = li.precision;
      e["inputs"] = tensors(li.inputs);
      e["outputs"] = tensors(li.outputs);
      nb::dict params;
      for (const LayerParam& p : li.params) {
        const char* k = p.key.c_str();
        switch (p.type) {
          case LayerParam::Type::kInt: params[k] = p.i; break;
          case LayerParam::Type::kInts: {
            nb::list v;
            for (int64_t x : p.ints) v.append(x);
            params[k] = v;
            break;
          }
          case LayerParam::Type::kFloat: params[k] = p.f; break;
          case LayerParam::Type::kString: params[k] = p.s; break;
          case LayerParam::Type::kBool: params[k] = p.b; break;
        }
      }
      e["params"] = params;
      nb::list fused;
      for (const std::string& f : li.fused) fused.append(f);
      e["fused"] = fused;
      e["weight_bytes"] = li.weight_bytes;
      e["macs"] = li.macs;
      e["input_bytes"] = li.input_bytes;
      e["output_bytes"] = li.output_bytes;
      layer_info.append(e);
    }
    d["layer_info"] = layer_info;
    return d;
  });
}
