"""softdla report: one self-contained HTML file about an ONNX model and its DLA loadable (docs/PROFILING.md,
"HTML report"): the graph with every node coloured by DLA support, the engine layers with their precision,
scales, measured time, predicted Orin time and error against ONNX Runtime, and charts of time, error and
the memory plan.

    python -m softdla.report model.onnx --loadable model.loadable --compare cmp.json -o report.html
    softdla.report.write_report("model.onnx", loadable="model.loadable", out="report.html")

The page needs no network and no script to show everything (the SVG is drawn here); its small script only
highlights and sorts. report_data gathers and checks the inputs, report_html lays out the page."""
import argparse
import hashlib
import os
import subprocess
import sys
import tempfile

from .report_data import ReportError, compare_rows, load_json, map_layers, onnx_nodes, profile_times, row_of_layer

__all__ = ["write_report", "collect", "ReportError", "main"]

_HERE = os.path.dirname(os.path.abspath(__file__))
MEASURE_TIMEOUT_S = 600


def _read_model(model):
    """(onnx.ModelProto, its bytes, the name the page shows)."""
    try:
        import onnx
    except ImportError as e:
        raise ReportError(f"the report reads the ONNX graph with the onnx package: pip install onnx (into "
                          f"{sys.executable}) [{e}]") from None
    if isinstance(model, onnx.ModelProto):
        return model, model.SerializeToString(), model.graph.name or "model"
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.isfile(path):
            raise ReportError(f"ONNX model '{path}' does not exist")
        with open(path, "rb") as f:
            data, name = f.read(), os.path.basename(path)
    else:
        data, name = bytes(model), "model"
    try:
        return onnx.load_model_from_string(data), data, name
    except Exception as e:  # noqa: BLE001 - protobuf raises several types
        raise ReportError(f"'{name}' is not a valid ONNX model ({e})") from None


def _read_loadable(loadable):
    if isinstance(loadable, (str, os.PathLike)):
        if not os.path.isfile(loadable):
            raise ReportError(f"loadable '{os.fspath(loadable)}' does not exist")
        with open(loadable, "rb") as f:
            return f.read()
    return bytes(loadable)


def find_cli():
    """The softdla command: the one in an installed wheel, else this source tree's build
    (SOFTDLA_BUILD_DIR, default build/); None when neither exists."""
    for exe in (os.path.join(_HERE, "softdla-cli"),
                os.path.join(os.environ.get("SOFTDLA_BUILD_DIR", os.path.join(_HERE, "..", "..", "build")), "softdla")):
        if os.path.isfile(exe) and os.access(exe, os.X_OK):
            return os.path.abspath(exe)
    return None


def measure(loadable_bytes, repeat=10):
    """Runs `softdla run LOADABLE --exportProfile --repeat N` and returns (the profile list, None), or
    (None, why not) when the command is missing, fails or does not know the flag."""
    cli = find_cli()
    if cli is None:
        return None, "not measured: the softdla command was not found (build it, or pass --profile FILE)"
    with tempfile.TemporaryDirectory(prefix="softdla-report-") as work:
        path, prof = os.path.join(work, "model.loadable"), os.path.join(work, "profile.json")
        with open(path, "wb") as f:
            f.write(loadable_bytes)
        try:
            r = subprocess.run([cli, "run", path, f"--exportProfile={prof}", f"--repeat={int(repeat)}"],
                               capture_output=True, text=True, timeout=MEASURE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as e:
            return None, f"not measured: softdla run did not finish ({e})"
        if r.returncode != 0 or not os.path.isfile(prof):
            lines = [s for s in (r.stderr or "").splitlines() if s.strip()]
            return None, f"not measured: softdla run failed ({lines[-1] if lines else f'exit status {r.returncode}'})"
        return load_json(prof, "the profile softdla run wrote"), None


def _orin(layer_info):
    """(the estimate, None) or (None, why not)."""
    try:
        from . import orin_latency
    except ImportError:
        return None, "not available: this softdla has no Orin latency model (softdla.orin_latency)"
    try:
        return orin_latency.estimate(layer_info), None
    except (ValueError, KeyError, TypeError) as e:
        return None, f"not available: the Orin latency model cannot estimate this loadable ({e})"


def collect(model, *, loadable=None, compare=None, profile=None, target="orin", shapes=None, measure_run=True,
            repeat=10, run_compare=False, calib_data=None):
    """Everything the page shows, as a dict (see write_report for the arguments). Raises ReportError."""
    from .builder import check, inspect
    proto, onnx_bytes, model_name = _read_model(model)
    nodes = onnx_nodes(proto, check(onnx_bytes, target=target, shapes=shapes))
    warnings = []
    compare_source = "Relative L2 error of each tensor the DLA computes (bars: the error; red: where it jumps)."
    compare_note, rows_cmp, output_cosine, compare_data = None, [], None, None
    if compare is not None and run_compare:
        raise ReportError("give either a comparison (--compare FILE) or --run-compare, not both")
    if compare is not None:
        compare_data = load_json(compare, "comparison")
    elif run_compare:
        from .compare import CompareError
        from .compare import compare as run
        from .builder import BuildError
        try:
            result = run(onnx_bytes, loadable=_read_loadable(loadable) if loadable is not None else None,
                         calib_data=calib_data)
            compare_data = result.to_dict()
            if loadable is None:
                loadable = result.loadable  # the loadable compare built, with its default options
        except (CompareError, BuildError, ImportError, OSError) as e:
            compare_note = f"not compared: {e}"
    loadable_bytes = _read_loadable(loadable) if loadable is not None else None
    info = layer_info = None
    if loadable_bytes is not None:
        from .builder import BuildError
        try:
            info = inspect(loadable_bytes)
        except BuildError as e:
            raise ReportError(f"the loadable cannot be read: {e}") from None
        layer_info = info["layer_info"]
        if info.get("source_model_sha256") and info["source_model_sha256"] != hashlib.sha256(onnx_bytes).hexdigest():
            warnings.append(f"The loadable was built from another ONNX file than {model_name} (its sha256 differs): "
                            "nodes and layers are matched by name.")
    elif profile is not None:
        raise ReportError("a profile needs the loadable it times (--loadable FILE)")
    map_layers(nodes, layer_info)
    layers = [dict(li) for li in layer_info or []]
    names = {li["name"] for li in layers}
    if compare_data is not None:
        rows_cmp, output_cosine = compare_rows(compare_data, names if layer_info is not None else None,
                                               source=f"comparison '{compare}'" if compare is not None else "the comparison")
        for li in layers:
            li["compare"] = row_of_layer(rows_cmp, li)
    measured_note, measured_source, measured_total = None, "", None
    if layer_info is not None:
        count = None
        if profile is not None:
            prof = load_json(profile, "profile")
            source = f"profile '{os.fspath(profile)}'" if isinstance(profile, (str, os.PathLike)) else "the profile"
            measured_source = f"From {source}."
        elif measure_run:
            prof, measured_note = measure(loadable_bytes, repeat)
            source = "the profile softdla run wrote"
            measured_source = f"Measured on this machine: softdla run --repeat {int(repeat)}, median per layer."
        else:
            prof, measured_note = None, "not measured (no profile given and measuring was turned off)"
        if prof is not None:
            times, count = profile_times(prof, names, source)
            for li in layers:
                li["measured"] = times.get(li["name"])
            measured_total = sum(t["ms"] for t in times.values())
            if count is not None:
                measured_source += f" {count} run(s)."
    orin_note, orin_total, orin_source = None, None, ""
    if layer_info is not None:
        est, orin_note = _orin(layer_info)
        if est is not None:
            for li, row in zip(layers, est["layers"]):
                li["orin"] = row
            orin_total = est["total_ms"]
            orin_source = (f"Estimated by softdla.orin_latency for one Orin DLA core: {orin_total:.3f} ms per run, " +
                           (f"{est['fps']:.1f} images/s" if est["fps"] is not None else "no DLA time") +
                           " (an estimate, not a measurement; docs/PROFILING.md).")
    memory_plan, memory_note = None, None
    if info is not None:
        memory_plan = info.get("memory_plan")
        if memory_plan is None:
            memory_note = "not available: this softdla's inspect() has no memory plan"
    by_tensor = {r["tensor"]: r for r in rows_cmp}
    layer_names = [li["name"] for li in layers]
    for n in nodes:
        n["layer"] = " ".join(str(i) for i in n["layers"]) or None
        n["title"] = _node_title(n, layer_names, by_tensor)
    precisions = info["precisions"] if info else ""
    return {
        "model_name": model_name, "nodes": nodes, "layers": layers,
        "graph_inputs": [v.name for v in proto.graph.input if v.name not in {i.name for i in proto.graph.initializer}],
        "graph_outputs": [v.name for v in proto.graph.output],
        "supported": sum(n["supported"] for n in nodes), "unsupported": sum(not n["supported"] for n in nodes),
        "warnings": warnings, "compare_rows": rows_cmp, "compare_note": compare_note if not rows_cmp else None,
        "compare_source": compare_source, "output_cosine": output_cosine,
        "measured_note": measured_note, "measured_source": measured_source, "measured_total_ms": measured_total,
        "orin_note": orin_note, "orin_source": orin_source, "orin_total_ms": orin_total,
        "memory_plan": memory_plan, "memory_note": memory_note,
        "arena_bytes": info["arena_bytes"] if info else None,
        "subtitle": f"target {target}" + (f", loadable {info['target']} {precisions}" if info else ", no loadable"),
        "footer": f"written by softdla {_version()} (softdla report)",
    }


def _node_title(n, layer_names, by_tensor):
    """A node's tooltip: what it is, whether it runs on the DLA and why, what it became, its error."""
    lines = [f"{n['op']} {n['name']}",
             ("runs on the DLA" if n["supported"] else "does not run on the DLA") + (f": {n['reason']}" if n["reason"] else "")]
    became = ", ".join(layer_names[i] for i in n["layers"])
    if n["status"] == "dla":
        lines.append(f"engine layer: {became}")
    elif n["status"] == "fused":
        lines.append(f"fused into engine layer: {became}")
    elif layer_names and n["supported"]:
        lines.append("no engine layer of its own")
    for v in n["outputs"]:
        r = by_tensor.get(v)
        if r:
            lines.append(f"{v}: cosine {r['cosine']:.6f}, rel L2 {r['rel_l2']:.3e}")
    return "\n".join(lines)


def _version():
    from ._version import __version__
    return __version__


def write_report(model, *, loadable=None, compare=None, profile=None, out="report.html", target="orin", shapes=None,
                 measure_run=True, repeat=10, run_compare=False, calib_data=None):
    """Writes the HTML report of `model` (ONNX path, bytes or ModelProto) to `out` and returns its path.

    loadable: the DLA loadable built from it (path or bytes); without one the page shows the graph only.
    compare: a softdla compare result (its --json file, the dict, or a CompareResult); run_compare=True
      runs softdla.compare with its defaults instead (calib_data: its calibration data, for INT8).
    profile: a per-layer profile (softdla run --exportProfile's file, or its list); without one and with
      measure_run, the loadable is run here (`softdla run --repeat N`) and "not measured" is shown if
      that cannot be done.
    target, shapes: as softdla.check. Raises ReportError when the inputs do not fit together."""
    d = collect(model, loadable=loadable, compare=compare, profile=profile, target=target, shapes=shapes,
                measure_run=measure_run, repeat=repeat, run_compare=run_compare, calib_data=calib_data)
    from .report_html import page
    text = page(d)
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    return os.fspath(out)


def _parser():
    p = argparse.ArgumentParser(prog="softdla report", allow_abbrev=False,
                                description="Write one self-contained HTML file about an ONNX model and its DLA "
                                            "loadable: the graph coloured by DLA support, the layers, time, predicted "
                                            "Orin time, error and the memory plan.")
    p.add_argument("model", help="ONNX model")
    p.add_argument("--loadable", help="the loadable built from the model (adds layers, times and the memory plan)")
    p.add_argument("--compare", metavar="FILE", help="softdla compare --json output: error per layer")
    p.add_argument("--run-compare", action="store_true", help="run softdla compare (its defaults) for the error view")
    p.add_argument("--calib-data", help="calibration data for --run-compare (INT8 loadables)")
    p.add_argument("--profile", metavar="FILE", help="softdla run --exportProfile output (default: run the loadable)")
    p.add_argument("--no-measure", action="store_true", help="do not run the loadable when no --profile is given")
    p.add_argument("--repeat", type=int, default=10, help="runs to time when measuring (default 10)")
    p.add_argument("--target", choices=["orin", "xavier"], default="orin", help="DLA rules to check the nodes against")
    p.add_argument("--shapes", default="", help="name:1x3x224x224[,...] for dynamic inputs")
    p.add_argument("-o", "--output", default="report.html", help="the HTML file to write (default report.html)")
    return p


def _shapes(spec, parser):
    out = {}
    for item in filter(None, spec.split(",")):
        name, sep, dims = item.rpartition(":")
        try:
            out[name] = [int(x) for x in dims.split("x")]
        except ValueError:
            name = None
        if not sep or not name:
            parser.error(f"--shapes takes name:1x3x224x224[,...], got '{item}'")
    return out


def main(argv=None):
    parser = _parser()
    a = parser.parse_args(argv)
    if a.repeat < 1:
        parser.error("--repeat must be at least 1")
    if a.compare and a.run_compare:
        parser.error("give --compare FILE or --run-compare, not both")
    from .builder import BuildError
    try:
        path = write_report(a.model, loadable=a.loadable, compare=a.compare, profile=a.profile, out=a.output,
                            target=a.target, shapes=_shapes(a.shapes, parser), measure_run=not a.no_measure,
                            repeat=a.repeat, run_compare=a.run_compare, calib_data=a.calib_data)
    except (ReportError, BuildError, OSError) as e:
        sys.stderr.write(f"softdla report: error: {e}\n")
        return 1
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
