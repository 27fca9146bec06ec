"""One max pool, FP16 or INT8 (ResNet's stem pool by default: 64 x 112 x 112, 3 x 3, stride 2, padding 1) timed on
the CPU backend: the best of --rounds rounds of --runs back-to-back runs, in ms a run. Compare two builds
by pointing SOFTDLA_BUILD_DIR at each, alternated:

    for b in /tmp/base/build build; do SOFTDLA_THREADS=1 SOFTDLA_BUILD_DIR=$b .venv/bin/python bench/pool_max_f16.py; done

--int8 pools int8 instead; --cold also times runs that each find the input out of the caches (64 MB touched
before each), as a stem pool finds the convolution's output at batch 8 (median of --runs such runs).
"""
import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
sys.path.insert(0, HERE)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--channels", type=int, default=64)
    ap.add_argument("--size", type=int, default=112)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--int8", action="store_true", help="an INT8 pool")
    ap.add_argument("--cold", action="store_true", help="also time runs on an input out of the caches")
    a = ap.parse_args()
    dtype = np.int8 if a.int8 else np.float16
    from sdla_testkit import writer
    from sdla_testkit.engine import Engine
    import cpu_models

    shape, out = (1, a.channels, a.size, a.size), (a.size - 1) // 2 + 1
    g = writer.Graph()
    xi = g.input("x", shape, dtype)
    y = g.tensor("y", (1, a.channels, out, out), dtype)
    g.op("Pool", [xi], y, writer.Graph.params("Pool", kind=0, kernelH=3, kernelW=3, strideH=2, strideW=2, padTop=1,
                                              padLeft=1, padBottom=1, padRight=1))
    g.output(y)
    eng = Engine(g.serialize(), backend="cpu")
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    run, _ = eng.prepare(cpu_models.softdla_inputs(eng, x), 1)
    for _ in range(20):
        run()
    best = float("inf")
    for _ in range(a.rounds):
        t = time.perf_counter()
        for _ in range(a.runs):
            run()
        best = min(best, (time.perf_counter() - t) / a.runs)
    line = f"{os.environ.get('SOFTDLA_BUILD_DIR', 'build')}: {best * 1e3:.4f} ms a run"
    if a.cold:
        junk = np.ones(64 << 20, np.uint8)
        cold = []
        for _ in range(a.runs):
            junk += 1  # evicts the input (and the output) from every cache level
            t = time.perf_counter()
            run()
            cold.append(time.perf_counter() - t)
        line += f", {np.median(cold) * 1e3:.4f} ms from memory (median)"
    print(line)


if __name__ == "__main__":
    main()
