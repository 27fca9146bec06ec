"""Runs a few INT8 ResNet-50 tasks on softdla's CUDA backend and nothing else: the target for a kernel
profiler, e.g.

    ncu -k regex:igemm --launch-count 8 --section SpeedOfLight python bench/resnet50_int8_tasks.py

    python bench/resnet50_int8_tasks.py [--build-dir build] [--batch 32] [--tasks 3]
"""
import argparse
import ctypes
import os
import sys
import tempfile

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from build_time import resnet50  # noqa: E402
from resnet50_gpu import SoftdlaRunner, build  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--tasks", type=int, default=3)
    args = ap.parse_args()
    ctypes.CDLL(os.path.join(args.build_dir, "libcudla.so.1"), mode=os.RTLD_GLOBAL)
    import torch
    from cuda.bindings import cudla

    softdla = os.path.join(args.build_dir, "softdla")
    with tempfile.TemporaryDirectory() as d:
        calib = os.path.join(d, "calib")
        os.makedirs(calib)
        np.save(os.path.join(calib, "data.npy"),
                np.random.default_rng(0).standard_normal((args.batch, 3, 224, 224)).astype(np.float32))
        path = os.path.join(d, "resnet50.onnx")
        onnx.save(resnet50(args.batch), path)
        loadable = build(softdla, path, f"{d}/int8.loadable", "--int8", "--fp16", "--inputIOFormats=int8:chw32",
                         "--outputIOFormats=fp16:chw16", f"--calib-data={calib}", f"--calib={d}/cache")
    stream = torch.cuda.Stream()
    run = SoftdlaRunner(cudla, torch, loadable, stream)
    for _ in range(args.tasks):
        run()
    torch.cuda.synchronize()
    assert cudla.get_last_error(run.dev) == 0
    print(f"ran {args.tasks} INT8 tasks at batch {args.batch}")


if __name__ == "__main__":
    main()
