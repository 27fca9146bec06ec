#!/usr/bin/env python3
"""Whole models on the CPU: softdla's CPU engine (INT8 and FP16 loadables) against ONNX Runtime's CPU provider
(FP32, static INT8 QDQ and QOperator) in the same run (issue 15, item 5).

    .venv/bin/python bench/cpu_models.py                                  # everything (takes a while)
    .venv/bin/python bench/cpu_models.py --models resnet18 --batch 1 --resolution 64 --repeat 3   # quick
    .venv/bin/python bench/cpu_models.py --models mobilenet_v2 --threads 2 --layers --json out.json

Models: ResNet-18, ResNet-50 and MobileNetV2 of tests/python/sdla_testkit/zoo.py (torchvision's graphs as
torch.onnx.export writes them, random weights with realistic activations) at --resolution (default 224),
and the bundled trained digits CNN (examples/models/digits.onnx, 8x8, resolution ignored).

softdla: `softdla build --int8 --fp16 --calib-data=DIR --calib=CACHE` (the builder's default calibrator unless
--calibrator; the cache written by the first batch size is read by the others, so every batch runs the same
scales) and `softdla build --fp16`, default I/O formats (`dla_linear` in the first / last layer's precision; the
input is converted once, outside the timing), run on the CPU engine through libsoftdla_engine_c.so
(sdla_testkit.engine.Engine) with the I/O buffers prepared once: the timed call is the engine run only.

ONNX Runtime, its strongest CPU configuration: graph optimisations ORT_ENABLE_ALL, intra-op threads = the
thread setting, inter-op threads 1, I/O binding with preallocated outputs (neither side allocates per run).
  FP32      the ONNX model as generated.
  QDQ       onnxruntime.quantization.quantize_static(QuantFormat.QDQ), per-channel weights, MinMax on the same
            calibration images as softdla (after quant_pre_process); both U8 activations / S8 weights and
            S8S8 are built and the faster one is kept.
  QOperator the same with QuantFormat.QOperator (QLinearConv, ...), U8S8.
  Thread spinning (more than one thread): each variant is tried with `session.intra_op.allow_spinning` 0 and
  with 1 (plus `session.force_spinning_stop` 1, so idle workers stop spinning when a run returns instead of
  taking the cores from the softdla run that follows) and the faster is kept (--ort-spinning forces one).
  These choices are made in a short trial (warm-up, then the median of up to 5 runs each) before the
  measurement. ORT best = the fastest of FP32, QDQ and QOperator.

Measurement: each (model, batch, threads) runs in its own process (the engine reads SOFTDLA_THREADS once, when
its thread pool starts), with SOFTDLA_THREADS and ORT's intra-op threads set to the thread setting. After two
warm-up runs of everything, each of --repeat rounds runs softdla INT8, ORT QDQ, softdla FP16, ORT FP32 and ORT
QOperator once, interleaved so machine noise hits both sides alike; medians in ms. Ratios: ORT best / softdla
INT8 and ORT FP32 / softdla FP16 (below 1: softdla slower). --block N runs each engine N times back to back in
a round (every run timed): the steady state of a user who runs one engine, caches and threads warm from its own
previous run rather than the other engine's (both sides gain; ORT more, measured on MobileNetV2).

--layers: the INT8 loadable again through softdla's cuDLA runtime (softdla.cudla) with a layer-wise statistics
buffer (docs/RUNTIME.md, "Layer-wise statistics"); the top 15 ops by median time with their op type, precision
and share of the task time.

The header names the CPU, its ISA flags and the ISA path softdla's CPU kernels take (`softdla_isa_path`).
Prints Markdown to stdout (progress to stderr); --json FILE writes every number.
"""
import argparse
import ctypes
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
sys.path.insert(0, os.path.join(ROOT, "python"))
BUILD = os.environ.get("SOFTDLA_BUILD_DIR", os.path.join(ROOT, "build"))
SOFTDLA = os.path.join(BUILD, "softdla")

MODELS = {"resnet18": "ResNet-18", "resnet50": "ResNet-50", "mobilenet_v2": "MobileNetV2", "digits": "digits"}
ISA_FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx_vnni", "avx512_fp16", "avx512_bf16", "amx_tile",
             "amx_int8", "amx_bf16")
CALIB_SEED, INPUT_SEED = 1, 2
TOP_LAYERS = 15


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# --- the machine ---------------------------------------------------------------------------------

def cpu_model():
    """The CPU's model name as lscpu prints it, with family/model/stepping (a VM often shows only a generic
    name: "Intel(R) Xeon(R) Processor")."""
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if ":" in line:
                    k, v = (s.strip() for s in line.split(":", 1))
                    info.setdefault(k, v)
    except OSError:
        return platform.processor() or platform.machine()
    name = info.get("model name", platform.processor() or platform.machine())
    fms = [f"{k} {info[k]}" for k in ("cpu family", "model", "stepping") if k in info]
    return f"{name} ({', '.join(fms)})" if fms else name


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def engine_library():
    return os.path.join(BUILD, "libsoftdla_engine_c.so")


def softdla_isa_path():
    """HOOK: the ISA path softdla's CPU kernels take, as (path, how it was determined).

    The engine is getting a run-time ISA switch (src/engine/cpu/cpu_isa.h: environment variable SOFTDLA_CPU_ISA =
    auto | avx512vnni | avxvnni | avx2 | portable; auto and an unsupported request take the best path the CPU
    has). When the engine library exports a function naming the path in use (one of ISA_QUERY_SYMBOLS,
    `const char* f(void)`), its answer is used. Otherwise, for a build whose engine library mentions
    SOFTDLA_CPU_ISA, the path is inferred from /proc/cpuinfo the way the switch documents it; a build without
    the switch has one path, GCC function multiversioning (target_clones "avx2", "default":
    src/engine/cpu/multiversion.h), i.e. AVX2 where the CPU has it."""
    lib_path = engine_library()
    try:
        lib = ctypes.CDLL(lib_path)
        for sym in ISA_QUERY_SYMBOLS:
            fn = getattr(lib, sym, None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                fn.argtypes = []
                value = fn()
                if value:
                    return value.decode(), f"{sym}() of {os.path.basename(lib_path)}"
    except OSError:
        pass
    try:
        with open(lib_path, "rb") as f:
            has_switch = b"SOFTDLA_CPU_ISA" in f.read()
    except OSError:
        has_switch = False
    flags = cpu_flags()
    forced = os.environ.get("SOFTDLA_CPU_ISA", "").strip().lower()
    if has_switch:
        runnable = [isa for isa, need in ISA_PATHS if need is None or need in flags]
        if forced and forced != "auto":
            if forced in runnable:
                return forced, f"SOFTDLA_CPU_ISA={forced}; inferred, the engine exports no ISA query"
            return runnable[0], (f"SOFTDLA_CPU_ISA={forced} is not runnable here, so the best path the CPU has; "
                                 "inferred, the engine exports no ISA query")
        return runnable[0], "the best path the CPU has; inferred from /proc/cpuinfo, the engine exports no ISA query"
    path = "avx2" if "avx2" in flags else "baseline x86-64" if platform.machine() == "x86_64" else "generic"
    note = "no ISA switch in this build: GCC target_clones avx2/default"
    if forced:
        note += f" (SOFTDLA_CPU_ISA={forced} is ignored)"
    return path, note


# Names the engine's ISA query may get; the first one the library exports wins (see softdla_isa_path).
ISA_QUERY_SYMBOLS = ("softdla_engine_cpu_isa", "softdla_cpu_isa", "softdla_engine_isa")
# SOFTDLA_CPU_ISA's paths, best first, with the /proc/cpuinfo flag each needs.
ISA_PATHS = (("avx512vnni", "avx512_vnni"), ("avxvnni", "avx_vnni"), ("avx2", "avx2"), ("portable", None))


def machine_header():
    flags = cpu_flags()
    isa, how = softdla_isa_path()
    import onnxruntime as ort
    return {
        "date": datetime.date.today().isoformat(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "isa_flags": {f: f in flags for f in ISA_FLAGS},
        "softdla_isa": isa,
        "softdla_isa_source": how,
        "onnxruntime": ort.__version__,
        "revision": _revision(),
    }


def _revision():
    try:
        rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no", "--", "src",
                                "include"], capture_output=True, text=True, timeout=10).stdout.strip()
        return rev + (" (uncommitted changes in src/ or include/)" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return ""


# --- preparing a configuration (parent process) ----------------------------------------------------

class BuildFailed(Exception):
    pass


def with_batch(model, batch):
    """The same model at another batch: the batch dimension of the graph inputs/outputs changed (the zoo's
    ResNets and MobileNetV2 carry the batch nowhere else), intermediate shape annotations dropped."""
    import onnx
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for v in list(m.graph.input) + list(m.graph.output):
        if v.type.tensor_type.shape.dim:
            v.type.tensor_type.shape.dim[0].dim_value = batch
    del m.graph.value_info[:]
    return m


def generate(name, resolution, batch, cache):
    """The zoo model at (resolution, batch); generated once per resolution (BN estimation is the slow part)."""
    from sdla_testkit import zoo
    if name == "digits":
        return zoo.digits(8, batch)
    key = (name, resolution)
    if key not in cache:
        t = time.perf_counter()
        cache[key] = zoo.ZOO[name][0](resolution, 1, 0)
        log(f"  generated {name} at {resolution} px in {time.perf_counter() - t:.1f} s")
    model = cache[key]
    if batch == 1:
        return model
    if any(n.op_type == "Reshape" for n in model.graph.node):
        return zoo.ZOO[name][0](resolution, batch, 0)
    return with_batch(model, batch)


def calibration_images(name, resolution, n, channels):
    from sdla_testkit import zoo
    if name == "digits":
        return zoo.digits_data("calib", 200)  # its 200 training images, as scripts/demo.sh calibrates
    return zoo.smooth_images(n, resolution, seed=CALIB_SEED, channels=channels)


def input_images(name, resolution, batch, channels):
    from sdla_testkit import zoo
    if name == "digits":
        return zoo.digits_data("test", batch)
    return zoo.smooth_images(batch, resolution, seed=INPUT_SEED, channels=channels)


def softdla_build(onnx_path, out_path, flags):
    args = [SOFTDLA, "build", f"--onnx={onnx_path}", f"--saveEngine={out_path}", *flags]
    t = time.perf_counter()
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(out_path):
        lines = [ln.strip() for ln in (r.stderr + r.stdout).replace("\r", "\n").splitlines() if ln.strip()]
        raise BuildFailed(" | ".join(lines[-3:])[:800] or f"exit status {r.returncode}")
    return time.perf_counter() - t


class _Reader:
    def __init__(self, name, xs, batch):
        self.items = [{name: xs[i:i + batch]} for i in range(0, len(xs) - batch + 1, batch)]
        self.pos = 0

    def get_next(self):
        if self.pos >= len(self.items):
            return None
        self.pos += 1
        return self.items[self.pos - 1]

    def rewind(self):
        self.pos = 0


def ort_quantize(src_path, out_path, calib, batch, fmt, activation):
    """onnxruntime.quantization.quantize_static: per-channel S8 weights, `activation` ('u8'/'s8') activations,
    MinMax calibration on calib (cut into batches of the model's batch)."""
    import onnx
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    name = onnx.load(src_path, load_external_data=False).graph.input[0].name
    quantize_static(src_path, out_path, _Reader(name, calib, batch),
                    quant_format={"qdq": QuantFormat.QDQ, "qoperator": QuantFormat.QOperator}[fmt],
                    per_channel=True, activation_type={"u8": QuantType.QUInt8, "s8": QuantType.QInt8}[activation],
                    weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax)


def ort_preprocess(src_path, out_path):
    """ORT's recommended step before quantize_static (ONNX shape inference, ORT's basic graph optimisation;
    the symbolic shape inference is skipped: every shape here is static); the model itself when it fails."""
    try:
        from onnxruntime.quantization.shape_inference import quant_pre_process
        quant_pre_process(src_path, out_path, skip_symbolic_shape=True)
        return out_path
    except Exception as e:  # noqa: BLE001 - optional step
        log(f"  quant_pre_process failed ({type(e).__name__}: {e}); quantizing the model as generated")
        return src_path


def prepare(name, resolution, batch, args, workdir, cache):
    """Writes the ONNX model, the input, the softdla loadables and the ORT models of one (model, batch);
    returns the spec a measuring process reads."""
    import onnx
    res = 8 if name == "digits" else resolution
    mdir = os.path.join(workdir, f"{name}_{res}px")
    bdir = os.path.join(mdir, f"b{batch}")
    os.makedirs(bdir, exist_ok=True)
    spec = {"model": name, "resolution": res, "batch": batch, "errors": {}, "build_s": {}}
    reuse = args.reuse

    def have(path):
        return reuse and os.path.exists(path)

    onnx_path = os.path.join(bdir, "model.onnx")
    model = None
    if not have(onnx_path):
        model = generate(name, resolution, batch, cache)
        onnx.save(model, onnx_path)
    model = model or onnx.load(onnx_path)
    channels = model.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    spec["onnx"] = onnx_path

    calib_dir = os.path.join(mdir, "calib")
    os.makedirs(calib_dir, exist_ok=True)
    calib_path = os.path.join(calib_dir, "calib.npy")
    n_calib = max(args.calib, batch)
    if not have(calib_path):
        np.save(calib_path, calibration_images(name, res, n_calib, channels))
    calib = np.load(calib_path)
    input_path = os.path.join(bdir, "input.npy")
    if not have(input_path):
        np.save(input_path, input_images(name, res, batch, channels))
    spec["input"] = input_path

    # softdla loadables
    cache_path = os.path.join(mdir, "softdla.cache")
    int8_flags = ["--int8", "--fp16", f"--calib-data={calib_dir}", f"--calib={cache_path}"]
    if args.calibrator:
        int8_flags.append(f"--calibrator={args.calibrator}")
    for key, flags in (("softdla_int8", int8_flags), ("softdla_fp16", ["--fp16"])):
        path = os.path.join(bdir, f"{key}.loadable")
        try:
            if not have(path):
                spec["build_s"][key] = softdla_build(onnx_path, path, flags)
                log(f"  {key}: built in {spec['build_s'][key]:.1f} s")
            spec[key] = path
        except BuildFailed as e:
            spec["errors"][key] = str(e)
            log(f"  {key}: build failed: {e}")

    # ONNX Runtime models
    spec["ort_fp32"] = onnx_path
    pre = os.path.join(bdir, "ort_preprocessed.onnx")
    src = pre if have(pre) else ort_preprocess(onnx_path, pre)
    ort_calib = calib[: (len(calib) // batch) * batch]
    for key, fmt, act in (("ort_qdq_u8s8", "qdq", "u8"), ("ort_qdq_s8s8", "qdq", "s8"),
                          ("ort_qoperator_u8s8", "qoperator", "u8")):
        path = os.path.join(bdir, f"{key}.onnx")
        try:
            if not have(path):
                t = time.perf_counter()
                ort_quantize(src, path, ort_calib, batch, fmt, act)
                spec["build_s"][key] = time.perf_counter() - t
            spec[key] = path
        except Exception as e:  # noqa: BLE001 - a quantizer failure is a result too
            spec["errors"][key] = f"{type(e).__name__}: {e}"[:800]
            log(f"  {key}: quantization failed: {spec['errors'][key]}")
    return spec


# --- measuring (child process, SOFTDLA_THREADS set) ------------------------------------------------

def softdla_inputs(eng, x):
    """The input bytes in the loadable's bound format (quantized with the input's scale for INT8)."""
    from sdla_testkit import formats, reference
    from sdla_testkit.engine import NP_TYPES
    raw = []
    for info in eng.io_info(False):
        a = np.asarray(x, np.float32).reshape(info.n, info.c, info.h, info.w)
        a = reference.quantize(a, info.scale) if info.dtype == 2 else a.astype(NP_TYPES[info.dtype])
        raw.append(formats.pack(a, info.format, "xavier" if info.target else "orin"))
    return raw


def softdla_runner(path, x):
    from sdla_testkit.engine import Engine
    with open(path, "rb") as f:
        blob = f.read()
    eng = Engine(blob, backend="cpu")
    raw = softdla_inputs(eng, x)
    run, _ = eng.prepare(raw, len(eng.io_info(True)))
    return (lambda: (eng, run())), blob, raw  # eng stays alive with the closure


def ort_runner(path, x, threads, spinning):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    if spinning:
        so.add_session_config_entry("session.force_spinning_stop", "1")
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    binding = sess.io_binding()
    binding.bind_ortvalue_input(sess.get_inputs()[0].name, ort.OrtValue.ortvalue_from_numpy(
        np.ascontiguousarray(x, np.float32)))
    types = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(uint8)": np.uint8,
             "tensor(int8)": np.int8, "tensor(int64)": np.int64}
    for o in sess.get_outputs():
        binding.bind_ortvalue_output(o.name, ort.OrtValue.ortvalue_from_shape_and_type(o.shape, types[o.type]))
    return lambda: (sess, binding, sess.run_with_iobinding(binding))


def timed(fn):
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1e3


def trial_ms(fn, n):
    fn()
    fn()
    return float(np.median([timed(fn) for _ in range(n)]))


def choose_ort(spec, x, threads, spinning_mode, n_trial):
    """Builds the ORT candidates and keeps the fastest per variant (fp32, qdq, qoperator) in a short trial."""
    spins = {"off": [False], "on": [True], "auto": [False, True]}[spinning_mode] if threads > 1 else [False]
    groups = {"fp32": ["ort_fp32"], "qdq": ["ort_qdq_u8s8", "ort_qdq_s8s8"], "qoperator": ["ort_qoperator_u8s8"]}
    chosen, trials = {}, {}
    for variant, keys in groups.items():
        best = None
        for key in keys:
            if key not in spec:
                continue
            for spin in spins:
                label = f"{key.removeprefix('ort_')}, spinning {'on' if spin else 'off'}"
                try:
                    fn = ort_runner(spec[key], x, threads, spin)
                    ms = trial_ms(fn, n_trial)
                except Exception as e:  # noqa: BLE001 - a session ORT cannot run is a result too
                    spec["errors"][f"{key}_spin{int(spin)}"] = f"{type(e).__name__}: {e}"[:800]
                    continue
                trials[label] = ms
                if best is None or ms < best[0]:
                    best = (ms, label, fn)
                else:
                    del fn
        if best:
            chosen[variant] = (best[1], best[2])
    return chosen, trials


def layer_statistics(blob, raw_inputs, runs):
    """Per-layer medians of the loadable's layer-wise statistics over `runs` tasks through softdla.cudla."""
    import softdla
    from softdla import cudla
    layers = softdla.inspect(blob)["layers"]
    A = cudla.ModuleAttributeType

    def aligned(nbytes):
        buf = np.zeros(nbytes + 128, np.uint8)
        off = (-buf.ctypes.data) % 64
        return buf[off:off + nbytes]

    dev = cudla.create_device(0, cudla.Mode.CUDA_DLA)
    module, registered = None, []
    try:
        module = cudla.module_load_from_memory(dev, blob, len(blob), cudla.ModuleLoadFlags.MODULE_DEFAULT)
        in_descs = cudla.module_get_attributes(module, A.INPUT_TENSOR_DESCRIPTORS)
        out_descs = cudla.module_get_attributes(module, A.OUTPUT_TENSOR_DESCRIPTORS)
        (stats_desc,) = cudla.module_get_attributes(module, A.OUTPUT_TASK_STATISTICS_DESCRIPTORS)
        bufs, ins, outs = [], [], []
        for d, raw in zip(in_descs, raw_inputs):
            b = aligned(d.size_)
            b[:] = np.frombuffer(raw, np.uint8)
            bufs.append(b)
            ins.append(cudla.mem_register(dev, b.ctypes.data, d.size_, 0))
            registered.append(ins[-1])
        for d in out_descs:
            b = aligned(d.size_)
            bufs.append(b)
            outs.append(cudla.mem_register(dev, b.ctypes.data, d.size_, 0))
            registered.append(outs[-1])
        stats = aligned(stats_desc.size_)
        outs.append(cudla.mem_register(dev, stats.ctypes.data, stats_desc.size_,
                                       cudla.AccessPermissionFlags.TASK_STATISTICS))
        registered.append(outs[-1])
        task = cudla.Task()
        task.module_handle = module
        task.input_tensor = ins
        task.output_tensor = outs
        record = np.dtype([("i", "<u4"), ("r", "<u4"), ("s", "<f8"), ("e", "<f8")])
        per_layer, task_ms = [], []
        for k in range(runs + 1):
            cudla.submit_task(dev, task.ptr, 1, 0, 0)
            status = cudla.get_last_error(dev)
            if status != 0:
                raise cudla.CudlaError(status)
            if k == 0:
                continue  # warm-up
            s = stats.tobytes()
            assert s[:8] == b"SDLASTAT", "no layer-wise statistics written"
            n = int(np.frombuffer(s[12:16], "<u4")[0])
            task_ms.append(float(np.frombuffer(s[24:32], "<f8")[0]))
            rec = np.frombuffer(s[32:32 + 24 * n], record)
            ms = np.zeros(len(layers))
            ms[rec["i"]] = rec["e"] - rec["s"]
            per_layer.append(ms)
    finally:
        for p in registered:
            cudla.mem_unregister(dev, p)
        if module:
            cudla.module_unload(module, 0)
        cudla.destroy_device(dev)
    med = np.median(np.array(per_layer), axis=0)
    total = float(np.median(task_ms))
    rows = [{"index": i, "name": layers[i][0], "type": layers[i][1], "precision": layers[i][2], "ms": float(med[i]),
             "share": float(med[i] / total) if total > 0 else 0.0} for i in range(len(layers))]
    by_type = {}
    for r in rows:
        by_type[r["type"]] = by_type.get(r["type"], 0.0) + r["ms"]
    return {"task_ms": total, "runs": runs, "layers": len(rows),
            "top": sorted(rows, key=lambda r: -r["ms"])[:TOP_LAYERS],
            "by_type": {k: {"ms": v, "share": v / total if total > 0 else 0.0}
                        for k, v in sorted(by_type.items(), key=lambda kv: -kv[1])}}


def measure(spec, threads, repeat, spinning_mode, layers, block=1):
    """Runs in the child process: the interleaved measurement of one (model, batch, threads)."""
    x = np.load(spec["input"]).astype(np.float32)
    r = {k: spec[k] for k in ("model", "resolution", "batch")}
    r.update(threads=threads, repeat=repeat, block=block, errors=dict(spec["errors"]), build_s=spec["build_s"])
    runners = {}
    blobs = {}
    for key in ("softdla_int8", "softdla_fp16"):
        if key in spec:
            try:
                fn, blob, raw = softdla_runner(spec[key], x)
                runners[key] = fn
                blobs[key] = (blob, raw)
            except Exception as e:  # noqa: BLE001
                r["errors"][key] = f"{type(e).__name__}: {e}"[:800]
    n_trial = max(1, min(5, repeat))
    chosen, trials = choose_ort(spec, x, threads, spinning_mode, n_trial)
    r["errors"].update({k: v for k, v in spec["errors"].items() if k not in r["errors"]})
    r["ort_trials_ms"] = trials
    for variant, (label, fn) in chosen.items():
        runners[f"ort_{variant}"] = fn
        r[f"ort_{variant}_config"] = label
    order = [k for k in ("softdla_int8", "ort_qdq", "softdla_fp16", "ort_fp32", "ort_qoperator") if k in runners]
    for k in order:  # warm-up
        runners[k]()
        runners[k]()
    times = {k: [] for k in order}
    for _ in range(repeat):
        for k in order:
            for _ in range(block):
                times[k].append(timed(runners[k]))
    r["times_ms"] = times
    for k in order:
        r[f"{k}_ms"] = float(np.median(times[k]))
    ort = {k: r[f"{k}_ms"] for k in ("ort_fp32", "ort_qdq", "ort_qoperator") if f"{k}_ms" in r}
    if ort:
        best = min(ort, key=ort.get)
        r["ort_best"] = best.removeprefix("ort_")
        r["ort_best_ms"] = ort[best]
    if "ort_best_ms" in r and "softdla_int8_ms" in r:
        r["ratio_int8"] = r["ort_best_ms"] / r["softdla_int8_ms"]
    if "ort_fp32_ms" in r and "softdla_fp16_ms" in r:
        r["ratio_fp16"] = r["ort_fp32_ms"] / r["softdla_fp16_ms"]
    if layers and "softdla_int8" in blobs:
        runners.clear()
        try:
            r["layers_int8"] = layer_statistics(*blobs["softdla_int8"], runs=max(3, min(repeat, 10)))
        except Exception as e:  # noqa: BLE001
            r["errors"]["layers_int8"] = f"{type(e).__name__}: {e}"[:800]
    return r


def child_main(spec_path, out_path):
    with open(spec_path) as f:
        job = json.load(f)
    r = measure(job["spec"], job["threads"], job["repeat"], job["ort_spinning"], job["layers"], job["block"])
    with open(out_path, "w") as f:
        json.dump(r, f)


def run_child(spec, threads, args, workdir):
    tag = f"{spec['model']}_{spec['resolution']}px_b{spec['batch']}_t{threads}"
    spec_path = os.path.join(workdir, f"job_{tag}.json")
    out_path = os.path.join(workdir, f"result_{tag}.json")
    with open(spec_path, "w") as f:
        json.dump({"spec": spec, "threads": threads, "repeat": args.repeat, "ort_spinning": args.ort_spinning,
                   "layers": args.layers, "block": args.block}, f)
    env = dict(os.environ, SOFTDLA_THREADS=str(threads), SOFTDLA_BACKEND="cpu")
    if args.isa:
        env["SOFTDLA_CPU_ISA"] = args.isa
    if os.path.exists(out_path):
        os.remove(out_path)
    t = time.perf_counter()
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", spec_path, "--child-out", out_path],
                       env=env)
    if p.returncode != 0 or not os.path.exists(out_path):
        return {"model": spec["model"], "resolution": spec["resolution"], "batch": spec["batch"], "threads": threads,
                "errors": {"measurement": f"measuring process exited with status {p.returncode}"}}
    with open(out_path) as f:
        r = json.load(f)
    r["measure_s"] = time.perf_counter() - t
    return r


# --- reporting ---------------------------------------------------------------------------------------

def fmt_ms(v):
    if v is None:
        return "—"
    if v >= 100:
        return f"{v:,.0f} ms"
    if v >= 10:
        return f"{v:.1f} ms"
    if v >= 1:
        return f"{v:.2f} ms"
    return f"{v:.3f} ms"


def markdown(header, results):
    flags = ", ".join(f for f, on in header["isa_flags"].items() if on) or "none of " + ", ".join(ISA_FLAGS)
    lines = [f"CPU: {header['cpu']}, {header['cores']} cores; ISA flags: {flags}",
             f"softdla ISA path: **{header['softdla_isa']}** ({header['softdla_isa_source']}); "
             f"onnxruntime {header['onnxruntime']}; softdla {header['revision'] or '?'}; {header['date']}", "",
             "| model | batch | threads | softdla INT8 | softdla FP16 | ORT FP32 | ORT INT8 QDQ / QOperator "
             "| ORT best / softdla INT8 | ORT FP32 / softdla FP16 |",
             "|---|---|---|---|---|---|---|---|---|"]
    notes = []
    for r in results:
        g = r.get
        model = f"{MODELS.get(r['model'], r['model'])} ({r['resolution']} px)"
        errs = g("errors", {})

        def cell(key):
            if f"{key}_ms" in r:
                return fmt_ms(r[f"{key}_ms"])
            return "build fails" if key in errs else "—"

        best = g("ort_best")
        qdq, qop = cell("ort_qdq"), cell("ort_qoperator")
        if best == "qdq":
            qdq = f"**{qdq}**"
        elif best == "qoperator":
            qop = f"**{qop}**"
        fp32 = f"**{cell('ort_fp32')}**" if best == "fp32" else cell("ort_fp32")
        ratio = (lambda k: f"{r[k]:.2f}" if k in r else "—")
        lines.append(f"| {model} | {r['batch']} | {r['threads']} | {cell('softdla_int8')} | {cell('softdla_fp16')} | "
                     f"{fp32} | {qdq} / {qop} | {ratio('ratio_int8')} | {ratio('ratio_fp16')} |")
        cfg = [g(f"ort_{v}_config") for v in ("fp32", "qdq", "qoperator") if g(f"ort_{v}_config")]
        if cfg:
            notes.append(f"- {model}, batch {r['batch']}, threads {r['threads']}: ORT ran " + "; ".join(cfg))
        for k, v in errs.items():
            notes.append(f"- {model}, batch {r['batch']}, threads {r['threads']}: **{k}** failed: {v}")
    lines += ["", f"Median of {results[0].get('repeat', '?') if results else '?'} interleaved runs; ORT best in bold; "
              "ratio below 1: softdla slower.", ""] + notes
    for r in results:
        L = r.get("layers_int8")
        if not L:
            continue
        lines += ["", f"### softdla INT8, {MODELS.get(r['model'], r['model'])} ({r['resolution']} px), batch "
                      f"{r['batch']}, threads {r['threads']}: top {len(L['top'])} of {L['layers']} ops",
                  "", f"Layer-wise statistics, median of {L['runs']} tasks; task {fmt_ms(L['task_ms'])}.", "",
                  "| # | op | type | precision | time | share |", "|---|---|---|---|---|---|"]
        for row in L["top"]:
            name = row["name"].replace("|", "\\|")
            lines.append(f"| {row['index']} | {name} | {row['type']} | {row['precision']} | {fmt_ms(row['ms'])} "
                         f"| {row['share'] * 100:.1f} % |")
        lines += ["", "By op type: " + ", ".join(f"{t} {v['share'] * 100:.1f} %" for t, v in L["by_type"].items())]
    return "\n".join(lines) + "\n"


# --- main --------------------------------------------------------------------------------------------

def parse_list(text, what, convert):
    try:
        return [convert(v) for v in text.split(",") if v]
    except ValueError as e:
        raise SystemExit(f"--{what}: {e}") from None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated, from: " + ", ".join(MODELS))
    ap.add_argument("--batch", default="1,8", help="batch sizes (default 1,8)")
    ap.add_argument("--threads", default="1,all", help="thread settings, numbers or 'all' (default 1,all)")
    ap.add_argument("--repeat", type=int, default=20, help="interleaved rounds per configuration (default 20)")
    ap.add_argument("--block", type=int, default=1, help="back-to-back runs of each engine in a round (default 1)")
    ap.add_argument("--resolution", type=int, default=224, help="input size of the zoo models (default 224)")
    ap.add_argument("--calib", type=int, default=16, help="calibration images, both sides (default 16)")
    ap.add_argument("--calibrator", default=None, help="softdla build --calibrator (default: the builder's)")
    ap.add_argument("--ort-spinning", choices=("auto", "on", "off"), default="auto",
                    help="ORT intra-op spinning with more than one thread: try both and keep the faster (auto)")
    ap.add_argument("--isa", default=None, help="set SOFTDLA_CPU_ISA for the measuring processes")
    ap.add_argument("--layers", action="store_true", help="per-layer breakdown of softdla INT8 (top 15 ops)")
    ap.add_argument("--json", default=None, help="write every number to this file")
    ap.add_argument("--workdir", default=None, help="where models and loadables go (default: a temporary dir)")
    ap.add_argument("--reuse", action="store_true", help="with --workdir: reuse the files an earlier run left")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--child-out", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        return child_main(a.child, a.child_out)
    models = parse_list(a.models, "models", str)
    for m in models:
        if m not in MODELS:
            raise SystemExit(f"--models: unknown model {m!r} (known: {', '.join(MODELS)})")
    batches = parse_list(a.batch, "batch", int)
    threads = sorted(set(parse_list(a.threads, "threads", lambda v: os.cpu_count() if v == "all" else int(v))))
    if a.repeat < 1 or a.block < 1 or any(b < 1 for b in batches) or any(t < 1 for t in threads):
        raise SystemExit("--repeat, --block, --batch and --threads must be positive")
    if not os.path.exists(SOFTDLA):
        raise SystemExit(f"{SOFTDLA} not found: run scripts/setup.sh (or set SOFTDLA_BUILD_DIR)")
    if a.isa:
        os.environ["SOFTDLA_CPU_ISA"] = a.isa
    header = machine_header()
    log(f"CPU {header['cpu']}; softdla ISA path {header['softdla_isa']} ({header['softdla_isa_source']})")
    tmp = None
    if a.workdir:
        workdir = os.path.abspath(a.workdir)
    else:
        workdir = tmp = tempfile.mkdtemp(prefix="softdla_cpu_models_")
    os.makedirs(workdir, exist_ok=True)
    results, cache = [], {}
    try:
        for name in models:
            for b in sorted(batches):
                log(f"{name} batch {b}: preparing")
                spec = prepare(name, a.resolution, b, a, workdir, cache)
                for t in threads:
                    log(f"{name} batch {b}, {t} thread(s): measuring")
                    results.append(run_child(spec, t, a, workdir))
                    if a.json:
                        with open(a.json, "w") as f:
                            json.dump({"machine": header, "args": vars(a), "results": results}, f, indent=1)
            cache.clear()
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print(markdown(header, results), end="")
    return results


if __name__ == "__main__":
    main()
