#!/usr/bin/env python3
"""Model-zoo accuracy suite (issue 12, item 7): each network of tests/python/sdla_testkit/zoo.py built with
`softdla build` in FP16 and in INT8 with the default flags, run on the CPU engine, and compared with
ONNX Runtime FP32 (the reference) and ONNX Runtime static INT8 on the same samples.

    tools/model_zoo.py                                    # the whole zoo at full resolution
    tools/model_zoo.py --resolution ci --calib 8 --eval 4 # the reduced form the tests run
    tools/model_zoo.py --models resnet18,yolov8n --json zoo.json --markdown

Per model:
  fp16_rel_l2   rel L2 (over all evaluation samples) of `softdla build --fp16` against ORT FP32
  fp16_floor    rel L2 of the FP32 network with every weight and every intermediate tensor (and the input)
                rounded to FP16 (Cast to fp16 and back after every node, in ORT): what FP16 storage alone
                costs; fp16_ratio = fp16_rel_l2 / fp16_floor
  int8_cosine   mean over the evaluation samples of the cosine against ORT FP32, for
                `softdla build --int8 --fp16 --calib-data=DIR` (DIR: the calibration samples, one .npy)
  ort_int8_cosine  the same for onnxruntime.quantization.quantize_static (QDQ, per-channel symmetric INT8
                weights, symmetric INT8 activations as the DLA has them, the same calibration samples), the
                best of the calibrate methods MinMax / Entropy / Percentile (ort_int8_method; all in
                ort_int8_by_method)
  top1_*        fraction of samples whose argmax equals FP32's (classifiers)
  build_s_*     wall time of the softdla builds (INT8 includes calibration)
A build the builder rejects records its message (fp16_error / int8_error) instead of numbers.

Calibration and evaluation samples are different smooth synthetic images (zoo.smooth_images, seeds 1 and 2)
at the model's resolution; the digits model uses its real training images (calibration) and test split.
"""
import argparse
import ctypes
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
from sdla_testkit import zoo  # noqa: E402
from sdla_testkit.engine import Engine  # noqa: E402

BUILD = os.environ.get("SOFTDLA_BUILD_DIR", os.path.join(ROOT, "build"))
SOFTDLA = os.path.join(BUILD, "softdla")
ORT_METHODS = ("MinMax", "Entropy", "Percentile")
CALIB_SEED, EVAL_SEED = 1, 2


class BuildFailed(Exception):
    """softdla build rejected the model; the message is the builder's."""


# --- data ------------------------------------------------------------------------------------------

def samples(name, resolution, n, kind, channels=3):
    """n calibration ('calib') or evaluation ('eval') samples, NCHW float32, batch axis first."""
    if name == "digits":
        return zoo.digits_data("calib" if kind == "calib" else "test", n)
    return zoo.smooth_images(n, resolution, seed={"calib": CALIB_SEED, "eval": EVAL_SEED}[kind], channels=channels)


def model_resolution(name, resolution):
    """'full' / 'ci' / an integer -> the resolution the model is generated at."""
    _, full, ci = zoo.ZOO[name]
    if name == "digits":
        return full
    if resolution == "full":
        return full
    if resolution == "ci":
        return ci
    return int(resolution)


# --- metrics ---------------------------------------------------------------------------------------

def rel_l2(a, b):
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def cosines(a, b):
    """Cosine of each sample (leading axis) of a against b."""
    a = np.asarray(a, np.float64).reshape(len(a), -1)
    b = np.asarray(b, np.float64).reshape(len(b), -1)
    return (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-30)


def top1(a, b):
    a = np.asarray(a).reshape(len(a), -1)
    b = np.asarray(b).reshape(len(b), -1)
    return float((a.argmax(1) == b.argmax(1)).mean())


# --- ONNX Runtime ----------------------------------------------------------------------------------

def _session(model, optimize=True):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    data = model if isinstance(model, (bytes, str)) else model.SerializeToString()
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def run_ort(model, xs, batch=1, optimize=True):
    """Runs the model on samples xs (in chunks of the model's batch); returns one array per output, the
    samples on the leading axis, flattened per sample (outputs concatenated)."""
    sess = _session(model, optimize)
    name = sess.get_inputs()[0].name
    outs = []
    for i in range(0, len(xs), batch):
        res = sess.run(None, {name: xs[i:i + batch]})
        outs.append(np.concatenate([r.reshape(batch, -1) for r in res], axis=1))
    return np.concatenate(outs)


def fp16_storage_model(model):
    """The FP32 network with FP16 storage: float initializers rounded to fp16, Cast(fp16) -> Cast(fp32) on
    the graph input and after every node's float outputs. Run with graph optimizations off."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    for init in g.initializer:
        if init.data_type == TensorProto.FLOAT:
            a = numpy_helper.to_array(init)
            init.CopyFrom(numpy_helper.from_array(a.astype(np.float16).astype(np.float32), init.name))
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type.tensor_type.elem_type for v in
             list(inferred.graph.value_info) + list(inferred.graph.output) + list(inferred.graph.input)}
    nodes = []

    def round_trip(src, dst):
        return [helper.make_node("Cast", [src], [src + "__fp16"], to=TensorProto.FLOAT16),
                helper.make_node("Cast", [src + "__fp16"], [dst], to=TensorProto.FLOAT)]

    inp = g.input[0].name
    nodes += round_trip(inp, inp + "__rounded")
    for n in g.node:
        n.input[:] = [inp + "__rounded" if i == inp else i for i in n.input]
        casts = []
        for k, o in enumerate(n.output):
            if o and types.get(o, TensorProto.FLOAT) == TensorProto.FLOAT:
                n.output[k] = o + "__fp32"
                casts += round_trip(o + "__fp32", o)
        nodes += [n] + casts
    del g.node[:]
    g.node.extend(nodes)
    return m


class _Reader:
    def __init__(self, name, xs, batch):
        self.items = iter([{name: xs[i:i + batch]} for i in range(0, len(xs), batch)])

    def get_next(self):
        return next(self.items, None)

    def rewind(self):
        pass


def ort_int8_model(model_path, calib, out_path, method, batch=1, symmetric_activations=True):
    """onnxruntime.quantization.quantize_static: QDQ, per-channel INT8 weights, INT8 activations."""
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    name = onnx.load(model_path, load_external_data=False).graph.input[0].name
    extra = {"ActivationSymmetric": bool(symmetric_activations), "WeightSymmetric": True}
    quantize_static(model_path, out_path, _Reader(name, calib, batch), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    calibrate_method=getattr(CalibrationMethod, method), extra_options=extra)
    return out_path


# --- softdla -------------------------------------------------------------------------------------

def builder_message(stderr):
    """The builder's error message without progress bars and log noise."""
    lines = []
    for line in stderr.replace("\r", "\n").splitlines():
        line = line.strip()
        if not line or re.search(r"\[[# ]{10,}\]", line):
            continue
        lines.append(line)
    errs = [ln for ln in lines if re.search(r"error|unsupported|not supported|outside|cannot|failed", ln, re.I)]
    return " | ".join(errs or lines[-3:])[:1500]


def softdla_build(onnx_path, out_path, flags, timeout=3600):
    """Runs `softdla build --onnx=... --saveEngine=... flags`; returns seconds; raises BuildFailed."""
    args = [SOFTDLA, "build", f"--onnx={onnx_path}", f"--saveEngine={out_path}", *flags]
    t = time.perf_counter()
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    dt = time.perf_counter() - t
    if r.returncode != 0 or not os.path.exists(out_path):
        raise BuildFailed(builder_message(r.stderr + r.stdout) or f"exit status {r.returncode}")
    return dt


def run_softdla(loadable_path, xs, output_names, batch=1):
    """Runs the loadable on the CPU engine, sample chunk by chunk; outputs in ONNX output order (matched by
    name when the names agree, else by position), flattened and concatenated per sample."""
    with open(loadable_path, "rb") as f:
        eng = Engine(f.read(), backend="cpu")
    names = [i.name.decode() for i in eng.io_info(True)]
    order = [names.index(n) if n in names else k for k, n in enumerate(output_names)]
    outs = []
    for i in range(0, len(xs), batch):
        res = eng.run_float(xs[i:i + batch])
        outs.append(np.concatenate([res[k].reshape(batch, -1) for k in order], axis=1))
    return np.concatenate(outs), names


# --- one model -------------------------------------------------------------------------------------

def evaluate(name, resolution="full", n_calib=32, n_eval=16, workdir=None, ort_methods=ORT_METHODS, batch=1,
             seed=0, log=print):
    """All metrics of one zoo model; returns a dict (see the module docstring)."""
    res = model_resolution(name, resolution)
    workdir = workdir or tempfile.mkdtemp(prefix=f"zoo_{name}_")
    os.makedirs(workdir, exist_ok=True)
    r = {"model": name, "resolution": res, "batch": batch, "n_calib": n_calib, "n_eval": n_eval}
    t = time.perf_counter()
    model = zoo.ZOO[name][0](res, batch, seed)
    r["generate_s"] = time.perf_counter() - t
    onnx_path = os.path.join(workdir, f"{name}.onnx")
    onnx.save(model, onnx_path)
    channels = model.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    out_names = [o.name for o in model.graph.output]
    calib = samples(name, res, n_calib, "calib", channels)
    xs = samples(name, res, n_eval, "eval", channels)
    calib_dir = os.path.join(workdir, "calib")
    os.makedirs(calib_dir, exist_ok=True)
    np.save(os.path.join(calib_dir, "calib.npy"), calib)

    t = time.perf_counter()
    ref = run_ort(model, xs, batch)
    floor = run_ort(fp16_storage_model(model), xs, batch, optimize=False)
    r["ort_s"] = time.perf_counter() - t
    r["fp16_floor"] = rel_l2(floor, ref)
    classifier = len(model.graph.output) == 1 and len(model.graph.output[0].type.tensor_type.shape.dim) == 2
    if name == "digits":
        labels = np.load(os.path.join(zoo.MODELS_DIR, "digits_test_labels.npy"))[:n_eval]
        r["fp32_accuracy"] = float((ref.argmax(1) == labels).mean())

    # softdla FP16
    try:
        path = os.path.join(workdir, f"{name}_fp16.loadable")
        r["build_s_fp16"] = softdla_build(onnx_path, path, ["--fp16"])
        out, names = run_softdla(path, xs, out_names, batch)
        r["fp16_rel_l2"] = rel_l2(out, ref)
        r["fp16_ratio"] = r["fp16_rel_l2"] / max(r["fp16_floor"], 1e-12)
        r["fp16_cosine"] = float(cosines(out, ref).mean())
        if classifier:
            r["top1_fp16"] = top1(out, ref)
        if names != out_names:
            r["fp16_output_names"] = names
    except BuildFailed as e:
        r["fp16_error"] = str(e)
    log(f"  {name}: fp16 done")

    # softdla INT8 (default flags)
    try:
        path = os.path.join(workdir, f"{name}_int8.loadable")
        r["build_s_int8"] = softdla_build(onnx_path, path, ["--int8", "--fp16", f"--calib-data={calib_dir}"])
        out, names = run_softdla(path, xs, out_names, batch)
        c = cosines(out, ref)
        r["int8_cosine"], r["int8_cosine_min"] = float(c.mean()), float(c.min())
        r["int8_rel_l2"] = rel_l2(out, ref)
        if classifier:
            r["top1_int8"] = top1(out, ref)
        if name == "digits":
            r["int8_accuracy"] = float((out.argmax(1) == labels).mean())
        if names != out_names:
            r["int8_output_names"] = names
    except BuildFailed as e:
        r["int8_error"] = str(e)
    log(f"  {name}: int8 done")

    # ONNX Runtime static INT8
    r["ort_int8_by_method"] = {}
    best = None
    for method in ort_methods:
        try:
            t = time.perf_counter()
            q = ort_int8_model(onnx_path, calib, os.path.join(workdir, f"{name}_ort_{method}.onnx"), method, batch)
            out = run_ort(q, xs, batch)
            c = float(cosines(out, ref).mean())
            r["ort_int8_by_method"][method] = {"cosine": c, "seconds": time.perf_counter() - t}
            if classifier:
                r["ort_int8_by_method"][method]["top1"] = top1(out, ref)
            if best is None or c > r["ort_int8_by_method"][best]["cosine"]:
                best = method
        except Exception as e:  # noqa: BLE001 - a quantizer failure is a result too
            r["ort_int8_by_method"][method] = {"error": f"{type(e).__name__}: {e}"[:500]}
    if best:
        r["ort_int8_method"] = best
        r["ort_int8_cosine"] = r["ort_int8_by_method"][best]["cosine"]
        if classifier:
            r["top1_ort_int8"] = r["ort_int8_by_method"][best]["top1"]
    log(f"  {name}: ort int8 done")
    return r


# --- reporting -----------------------------------------------------------------------------------

def _f(v, fmt):
    return "—" if v is None else format(v, fmt)


def markdown(results):
    head = ("| model | input | FP16 rel L2 | FP16 floor | ratio | INT8 cosine (min) | ORT INT8 cosine (method) | "
            "top-1 FP16 / INT8 / ORT INT8 | build s FP16 / INT8 |\n|---|---|---|---|---|---|---|---|---|\n")
    rows = []
    for r in results:
        fp16 = "build fails" if "fp16_error" in r else _f(r.get("fp16_rel_l2"), ".2e")
        ratio = "—" if "fp16_error" in r else _f(r.get("fp16_ratio"), ".2f")
        int8 = "build fails" if "int8_error" in r else f"{r['int8_cosine']:.4f} ({r['int8_cosine_min']:.4f})"
        orti = (f"{r['ort_int8_cosine']:.4f} ({r['ort_int8_method']})" if "ort_int8_cosine" in r else "fails")
        t1 = " / ".join(_f(r.get(k), ".0%") for k in ("top1_fp16", "top1_int8", "top1_ort_int8"))
        if "top1_fp16" not in r and "top1_int8" not in r and "top1_ort_int8" not in r:
            t1 = "—"
        bt = f"{_f(r.get('build_s_fp16'), '.1f')} / {_f(r.get('build_s_int8'), '.1f')}"
        rows.append(f"| {r['model']} | {r['batch']}×{r['resolution']}² | {fp16} | {r['fp16_floor']:.2e} | {ratio} | "
                    f"{int8} | {orti} | {t1} | {bt} |")
    errs = [f"- **{r['model']}** {p}: {r[p + '_error']}" for r in results for p in ("fp16", "int8")
            if p + "_error" in r]
    text = head + "\n".join(rows) + "\n"
    if errs:
        text += "\nBuilder failures:\n\n" + "\n".join(errs) + "\n"
    return text


SECTION = "## Model zoo"


def table_markers(key):
    """The comment lines between which docs/ACCURACY.md holds the generated table of `--resolution key`."""
    return (f"<!-- generated by tools/model_zoo.py --resolution {key} --doc: the lines up to the end marker -->",
            f"<!-- end of tools/model_zoo.py --resolution {key} -->")


def doc_table(results, command):
    """The generated part of a results table in docs/ACCURACY.md: how it was made, and the table."""
    return f"Produced by `{command}`{_revision()} on {time.strftime('%Y-%m-%d')} ({cpu_name()}):\n\n{markdown(results)}"


def cpu_name():
    """The CPU model, its core count and the ISA path softdla's CPU kernels take (FP16 sums follow it)."""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        model = ""
    try:
        from sdla_testkit.engine import lib
        query = lib().softdla_engine_cpu_isa
        query.restype = ctypes.c_char_p
        isa = f", ISA path {query().decode()}"
    except (OSError, AttributeError):
        isa = ""
    return ", ".join(p for p in (model, f"{os.cpu_count()} cores") if p) + isa


def _revision():
    try:
        rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no", "--", "src",
                                "include", "python"], capture_output=True, text=True, timeout=10).stdout.strip()
        return f" at commit {rev}{' (with uncommitted changes in src/)' if dirty else ''}" if rev else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def write_doc(path, block, key):
    """Replaces the generated table of `--resolution key` in path (between its table_markers) with block,
    leaving all other text (the section's prose, notes on earlier runs) as it is; where the markers are
    missing, the table goes in a new subsection at the end of the `## Model zoo` section (or a new section)."""
    begin, end = table_markers(key)
    text = open(path).read() if os.path.exists(path) else "# Accuracy\n"
    generated = f"{begin}\n{block.rstrip()}\n{end}"
    if begin in text and end in text[text.index(begin):]:
        a = text.index(begin)
        b = text.index(end, a) + len(end)
        text = text[:a] + generated + text[b:]
    else:
        lines = text.splitlines(keepends=True)
        start = next((i for i, ln in enumerate(lines) if ln.rstrip() == SECTION), None)
        new = f"### Results, --resolution {key}\n\n{generated}\n"
        if start is None:
            text = text.rstrip("\n") + f"\n\n{SECTION}\n\n" + new
        else:
            stop = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
            head = "".join(lines[:stop]).rstrip("\n")
            tail = "".join(lines[stop:])
            text = head + "\n\n" + new + ("\n" + tail if tail else "")
    with open(path, "w") as f:
        f.write(text)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="all", help="comma-separated zoo names (default: all): " + ", ".join(zoo.ZOO))
    ap.add_argument("--resolution", default="full", help="full (224; YOLO 640), ci (reduced), or a number")
    ap.add_argument("--calib", type=int, default=32, help="calibration samples (default 32)")
    ap.add_argument("--eval", type=int, default=16, help="held-out evaluation samples (default 16)")
    ap.add_argument("--ort-methods", default=",".join(ORT_METHODS), help="ORT calibrate methods to try")
    ap.add_argument("--workdir", default=None, help="where models and loadables are written (default: a temp dir)")
    ap.add_argument("--json", default=None, help="write the results as JSON (updated after every model)")
    ap.add_argument("--markdown", action="store_true", help="print the Markdown table at the end")
    ap.add_argument("--doc", default=None, help="replace this file's generated table of the same --resolution "
                    "(docs/ACCURACY.md, between its marker comments), leaving all other text alone")
    ap.add_argument("--from-json", default=None, help="no runs: report the results saved by an earlier --json")
    ap.add_argument("--command", default=None, help="with --from-json --doc: the command that produced them")
    a = ap.parse_args(argv)
    if a.from_json:
        with open(a.from_json) as f:
            results = json.load(f)
        if a.markdown:
            print(markdown(results))
        if a.doc:
            write_doc(a.doc, doc_table(results, a.command or f"tools/model_zoo.py (results of {a.from_json})"),
                      a.resolution)
        return results
    names = list(zoo.ZOO) if a.models == "all" else a.models.split(",")
    workdir = a.workdir or tempfile.mkdtemp(prefix="softdla_zoo_")
    results = []
    for name in names:
        t = time.perf_counter()
        print(f"{name} ...", flush=True)
        r = evaluate(name, a.resolution, a.calib, a.eval, os.path.join(workdir, name),
                     ort_methods=tuple(m for m in a.ort_methods.split(",") if m),
                     log=lambda s: print(s, flush=True))
        r["total_s"] = time.perf_counter() - t
        results.append(r)
        print(json.dumps(r), flush=True)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(results, f, indent=1)
    if a.markdown:
        print(markdown(results))
    if a.doc:
        cmd = "tools/model_zoo.py " + " ".join(argv if argv is not None else sys.argv[1:])
        write_doc(a.doc, doc_table(results, cmd), a.resolution)
    return results


if __name__ == "__main__":
    main()
