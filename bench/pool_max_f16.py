"""One FP16 max pool (ResNet's stem pool by default: 64 x 112 x 112, 3 x 3, stride 2, padding 1) timed on
the CPU backend: the best of --rounds rounds of --runs back-to-back runs, in ms a run. Compare two builds
by pointing SOFTDLA_BUILD_DIR at each, alternated:

    for b in /tmp/base/build build; do SOFTDLA_THREADS=1 SOFTDLA_BUILD_DIR=$b .venv/bin/python bench/pool_max_f16.py; done
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
    a = ap.parse_args()
    from sdla_testkit import writer
    from sdla_testkit.engine import Engine
    import cpu_models

    shape, out = (1, a.channels, a.size, a.size), (a.size - 1) // 2 + 1
    g = writer.Graph()
    xi = g.input("x", shape, np.float16)
    y = g.tensor("y", (1, a.channels, out, out), np.float16)
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
    print(f"{os.environ.get('SOFTDLA_BUILD_DIR', 'build')}: {best * 1e3:.4f} ms a run")


if __name__ == "__main__":
    main()
