"""Host overhead of softdla.Module.run against ONNX Runtime's session.run on a tiny model, in one process.

The bundled digits CNN (8x8 input): softdla INT8+FP16 built with the bundled calibration images, run with a
float32 NumPy image (quantized, packed and unpacked by run()); ORT runs the FP32 ONNX with one intra-op
thread. Mean microseconds per call over --runs calls after a warm-up; below 2x ORT is issue 15's goal.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/host_path.py [--runs 2000]
"""
import argparse
import os
import sys
import time

import numpy as np
import onnxruntime as ort

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
import softdla  # noqa: E402


def per_call_us(fn, runs):
    for _ in range(100):
        fn()
    t0 = time.perf_counter()
    for _ in range(runs):
        fn()
    return (time.perf_counter() - t0) / runs * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2000)
    args = ap.parse_args()
    models = os.path.join(ROOT, "examples", "models")
    loadable = softdla.build(os.path.join(models, "digits.onnx"), int8=True, fp16=True,
                             calib_data=os.path.join(models, "digits_calib"), progress=False)
    x = np.load(os.path.join(models, "digits_test_images.npy")).astype(np.float32)[:1]
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(os.path.join(models, "digits.onnx"), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    with softdla.Device() as dev:
        module = dev.load(loadable)
        ours = per_call_us(lambda: module.run([x]), args.runs)
    theirs = per_call_us(lambda: session.run(None, {name: x}), args.runs)
    print(f"softdla Module.run: {ours:.1f} us per call; ORT session.run: {theirs:.1f} us; ratio {ours / theirs:.2f}x")


if __name__ == "__main__":
    main()
