"""A batch of N against N single-image runs of the same model, in one process and interleaved: whether
running a batch image by image (each image's activations staying in cache) would pay on this CPU.

Loadables as `bench/cpu_models.py --workdir DIR` leaves them (DIR/<model>_<res>px/b1 and b<N>, each with
softdla_<prec>.loadable and input.npy). Prints the p10 and median of both and their ratio (below 1: the
batch is faster than N single images).

    .venv/bin/python bench/batch_vs_images.py /tmp/cm/resnet50_224px --precision int8 --batch 8
"""
import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
import cpu_models  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir", help="DIR/<model>_<res>px with b1 and b<batch> inside")
    ap.add_argument("--precision", default="int8", choices=["int8", "fp16"])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    runners = {}
    for b in (1, args.batch):
        d = os.path.join(args.model_dir, f"b{b}")
        path = os.path.join(d, f"softdla_{args.precision}.loadable")
        if not os.path.exists(path):
            sys.exit(f"batch_vs_images: {path} not found; make it with bench/cpu_models.py --workdir")
        x = np.load(os.path.join(d, "input.npy")).astype(np.float32)
        runners[b] = cpu_models.softdla_runner(path, x)[0]
        runners[b](), runners[b]()  # warm-up
    singles, batches = [], []
    for _ in range(args.rounds):
        t = time.perf_counter()
        for _ in range(args.batch):
            runners[1]()
        singles.append((time.perf_counter() - t) * 1e3)
        t = time.perf_counter()
        runners[args.batch]()
        batches.append((time.perf_counter() - t) * 1e3)
    singles.sort(), batches.sort()
    p10, med = max(0, len(singles) // 10), len(singles) // 2
    print(f"{os.path.basename(os.path.normpath(args.model_dir))} {args.precision}: {args.batch} x batch 1 p10 "
          f"{singles[p10]:.1f} ms, median {singles[med]:.1f} | batch {args.batch} p10 {batches[p10]:.1f}, median "
          f"{batches[med]:.1f} | batch / singles median {batches[med] / singles[med]:.2f}")


if __name__ == "__main__":
    main()
