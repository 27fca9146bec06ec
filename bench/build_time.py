"""Builder speed on a ResNet-50-sized model (random weights, 224x224, batch 1): the time of an FP16
build, and of INT8 builds with 100-sample calibration under the default rule choice (`auto`: every rule's
INT8 model run on 16 calibration batches) and with TensorRT's entropy rule alone. Goals: <= 2 s and
<= 60 s on 2 cores.

    .venv/bin/python bench/build_time.py [--samples 100]

The model (about 100 MB) and the calibration data are written to a temporary directory.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))
from sdla_testkit.onnx_models import SOFTDLA, G  # noqa: E402


def resnet50(batch=1):
    g = G(seed=0)
    x = g.input("images", [batch, 3, 224, 224])
    y = g.node("Relu", [g.bn(g.conv(x, 3, 64, k=7, stride=2, pad=3, bias=False), 64)])
    y = g.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = 64
    for width, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
        for b in range(blocks):
            s = stride if b == 0 else 1
            h = g.node("Relu", [g.bn(g.conv(y, c, width, k=1, pad=0, bias=False), width)])
            h = g.node("Relu", [g.bn(g.conv(h, width, width, k=3, stride=s, bias=False), width)])
            h = g.bn(g.conv(h, width, width * 4, k=1, pad=0, bias=False), width * 4)
            skip = y if b > 0 else g.bn(g.conv(y, c, width * 4, k=1, stride=s, pad=0, bias=False), width * 4)
            y = g.node("Relu", [g.node("Add", [h, skip])])
            c = width * 4
    y = g.node("Flatten", [g.node("GlobalAveragePool", [y])])
    return g.model([g.node("Gemm", [y, g.weight(1000, 2048), g.weight(1000)], transB=1)])


def timed(args):
    t = time.perf_counter()
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(r.stderr)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=100)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "resnet50.onnx")
        onnx.save(resnet50(), path)
        print(f"ResNet-50 ONNX: {os.path.getsize(path) / 1e6:.1f} MB, {os.cpu_count()} cores")
        fp16 = min(timed([SOFTDLA, "build", f"--onnx={path}", "--fp16", f"--saveEngine={d}/fp16.loadable"]) for _ in range(3))
        print(f"FP16 build: {fp16:.2f} s (best of 3; goal <= 2 s)")
        os.makedirs(f"{d}/calib")
        np.save(f"{d}/calib/data.npy", np.random.default_rng(0).standard_normal((args.samples, 3, 224, 224)).astype(np.float32))
        for rule in ("auto", "entropy"):
            int8 = timed([SOFTDLA, "build", f"--onnx={path}", "--int8", "--fp16", f"--calib-data={d}/calib",
                          f"--calibrator={rule}", f"--saveEngine={d}/int8.loadable"])
            print(f"INT8 build with {args.samples}-sample calibration, --calibrator={rule}: {int8:.1f} s (goal <= 60 s)")


if __name__ == "__main__":
    main()
