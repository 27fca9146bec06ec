#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/, docs/RELIABILITY.md).

Seeds are small valid inputs that reach deep: the fuzzer mutates them, so every op, I/O format and
precision the seeds cover is a region the fuzzer starts inside instead of having to discover.
  fuzz_onnx         one single-node model per op the builder lowers (ONNX's node cases, the variant with
                    constant operands when there is one), the bundled digits model, four small networks
  fuzz_loadable     those models built by softdla in FP16, FP32-reference and INT8 (digits), with linear
                    and DLA-native I/O formats, plus the bundled bars.loadable
  fuzz_npy          arrays of every dtype the readers accept, .npy versions 1 and 2, an .npz
  fuzz_calib_cache  the digits model's TensorRT cache under each calibrator
Deterministic: rerunning writes the same files. Usage: .venv/bin/python tools/make_fuzz_seeds.py
"""
import io
import os
import shutil
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "python"), os.path.join(ROOT, "tools"), os.path.join(ROOT, "tests", "python")]

import softdla  # noqa: E402

CORPUS = os.path.join(ROOT, "fuzz", "corpus")
MAX_SEED_BYTES = 64 * 1024
MODELS = os.path.join(ROOT, "examples", "models")


def write(target, name, data):
    if len(data) > MAX_SEED_BYTES:
        return False
    with open(os.path.join(CORPUS, target, name), "wb") as f:
        f.write(data)
    return True


def try_build(model, **flags):
    try:
        return softdla.build(model, progress=False, **flags)
    except softdla.BuildError:
        return None


def node_case_models():
    """(name, model) for one buildable case per op the builder lowers."""
    import onnx_node_suite as suite
    ops = sorted({r["op"] for r in softdla_ops()})
    chosen, seen = [], set()
    for case in suite.generate_cases(ops):
        if case.op in seen or "_expanded" in case.name:
            continue
        if try_build(case.model, fp16=True) is not None:
            seen.add(case.op)
            chosen.append((case.name, case.model))
    return chosen


def softdla_ops():
    """The ops of the builder's op table (softdla ops --json is not needed: the table's first column)."""
    import subprocess
    out = subprocess.run([os.path.join(ROOT, "build", "softdla"), "ops"], capture_output=True, text=True, check=True).stdout
    rows = [line.split("|")[1].strip().strip("`") for line in out.splitlines() if line.startswith("| `")]
    return [{"op": op} for op in rows]


def network_models():
    import test_builder_models as nets
    return [(net.__name__, nets.make(net)[0]) for net in nets.NETS]


def onnx_and_loadable_seeds():
    digits = open(os.path.join(MODELS, "digits.onnx"), "rb").read()
    models = [("digits", digits)] + [(n, m.SerializeToString()) for n, m in network_models() + node_case_models()]
    onnx_count = loadable_count = 0
    for name, data in models:
        onnx_count += write("fuzz_onnx", f"{name}.onnx", data)
        for tag, flags in (("fp16", dict(fp16=True)), ("fp32", dict(fp32_reference=True))):
            loadable = try_build(data, **flags)
            if loadable is not None:
                loadable_count += write("fuzz_loadable", f"{name}.{tag}.loadable", loadable)
    calib = os.path.join(MODELS, "digits_calib")
    for tag, formats in (("int8", {}), ("int8_hwc4", dict(input_formats="int8:dla_hwc4", output_formats="int8:chw32")),
                         ("int8_fp16io", dict(input_formats="fp16:chw16", output_formats="fp16:chw16"))):
        loadable = try_build(digits, int8=True, fp16=True, calib_data=calib, **formats)
        if loadable is not None:
            loadable_count += write("fuzz_loadable", f"digits.{tag}.loadable", loadable)
    loadable_count += write("fuzz_loadable", "bars.loadable", open(os.path.join(MODELS, "bars.loadable"), "rb").read())
    return onnx_count, loadable_count


def npy_seeds():
    rng = np.random.default_rng(0)
    count = 0
    for dtype in ("float32", "float64", "float16", "int8", "uint8"):
        a = (rng.standard_normal((2, 3, 4)) * 10).astype(dtype)
        buf = io.BytesIO()
        np.save(buf, a)
        count += write("fuzz_npy", f"{dtype}.npy", buf.getvalue())
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.arange(6, dtype=np.float32).reshape(2, 3), version=(2, 0))
    count += write("fuzz_npy", "version2.npy", buf.getvalue())
    buf = io.BytesIO()
    np.savez(buf, images=np.ones((1, 1, 28, 28), np.float32), labels=np.arange(3, dtype=np.int8))
    count += write("fuzz_npy", "two_arrays.npz", buf.getvalue())
    return count


def calib_cache_seeds():
    count = 0
    digits = os.path.join(MODELS, "digits.onnx")
    with tempfile.TemporaryDirectory() as tmp:
        for rule in ("entropy", "minmax"):
            cache = os.path.join(tmp, f"{rule}.cache")
            softdla.build(digits, int8=True, fp16=True, calib_data=os.path.join(MODELS, "digits_calib"),
                          calibrator=rule, write_calib_cache=cache, progress=False)
            count += write("fuzz_calib_cache", f"digits_{rule}.cache", open(cache, "rb").read())
    return count


def main():
    for target in ("fuzz_onnx", "fuzz_loadable", "fuzz_npy", "fuzz_calib_cache"):
        shutil.rmtree(os.path.join(CORPUS, target), ignore_errors=True)
        os.makedirs(os.path.join(CORPUS, target))
    onnx_count, loadable_count = onnx_and_loadable_seeds()
    print(f"fuzz_onnx: {onnx_count} seeds, fuzz_loadable: {loadable_count} seeds, "
          f"fuzz_npy: {npy_seeds()} seeds, fuzz_calib_cache: {calib_cache_seeds()} seeds")


if __name__ == "__main__":
    main()
