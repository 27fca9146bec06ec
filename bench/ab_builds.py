"""Two builds of the CPU engine on the same loadables, alternated round by round (A/B).

Each build's `libsoftdla_engine_c.so` is loaded in its own worker process (SOFTDLA_BUILD_DIR); the parent asks
the two workers in turn for `--per-round` timed runs of a loadable (A, B, then B, A, ...), so machine noise
(a shared VM's neighbours, its clock) hits both alike. Reports the 10th percentile and the median of every run
per build and their ratios B/A (below 1: B faster). Use it to measure a change against the build before it:

    git worktree add /tmp/base <commit> && cmake -S /tmp/base -B /tmp/base/build -DCMAKE_BUILD_TYPE=Release \\
        -DSOFTDLA_PYTHON=OFF -DSOFTDLA_BUILD_BENCH=OFF && cmake --build /tmp/base/build --target softdla_engine_c
    .venv/bin/python bench/ab_builds.py /tmp/base/build build /tmp/cm/resnet50_224px/b1/softdla_int8.loadable

Loadables as `bench/cpu_models.py --workdir DIR` leaves them (DIR/<model>_<res>px/b<batch>/softdla_<prec>.loadable,
its input in input.npy beside it). SOFTDLA_THREADS (default 2) and SOFTDLA_CPU_ISA pass through to both builds.
`--env-b NAME=VALUE` (repeatable) sets variables for B alone: with the same directory twice it measures a run-time
switch (`bench/ab_builds.py build build X.loadable --env-b SOFTDLA_AMX_F16=0`).
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

from env_args import parse_env

HERE = os.path.dirname(os.path.abspath(__file__))


def worker():
    """Loads each loadable once (through bench/cpu_models.py's runner) and times runs on request."""
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
    import cpu_models
    runners = {}
    for line in sys.stdin:
        path, n = line.split()
        if path not in runners:
            x = np.load(os.path.join(os.path.dirname(path), "input.npy")).astype(np.float32)
            runners[path] = cpu_models.softdla_runner(path, x)[0]
            runners[path]()
            runners[path]()
        times = []
        for _ in range(int(n)):
            t = time.perf_counter()
            runners[path]()
            times.append((time.perf_counter() - t) * 1e3)
        print(" ".join(f"{t:.4f}" for t in times), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build_a", help="build directory A (the reference)")
    ap.add_argument("build_b", help="build directory B")
    ap.add_argument("loadables", nargs="+", help="loadable files, each with input.npy in its directory")
    ap.add_argument("--rounds", type=int, default=10, help="rounds; each runs both builds (default 10)")
    ap.add_argument("--per-round", type=int, default=10, help="timed runs per build and round (default 10)")
    ap.add_argument("--env-b", action="append", default=[], metavar="NAME=VALUE",
                    help="an environment variable for B's worker alone (repeatable)")
    args = ap.parse_args()
    env_b = parse_env(args.env_b, "ab_builds")
    procs = {}
    for side, d in (("A", args.build_a), ("B", args.build_b)):
        lib = os.path.join(d, "libsoftdla_engine_c.so")
        if not os.path.exists(lib):
            sys.exit(f"ab_builds: {lib} not found; build the softdla_engine_c target in {d} first")
        env = dict(os.environ, SOFTDLA_BUILD_DIR=os.path.abspath(d), SOFTDLA_BACKEND="cpu", OPENBLAS_NUM_THREADS="1")
        env.setdefault("SOFTDLA_THREADS", "2")
        if side == "B":
            env.update(env_b)
        procs[side] = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True, env=env)
    print(f"A = {args.build_a}, B = {args.build_b}; {args.rounds} rounds x {args.per_round} runs each, alternated; "
          f"SOFTDLA_THREADS={os.environ.get('SOFTDLA_THREADS', '2')}"
          + (f", SOFTDLA_CPU_ISA={os.environ['SOFTDLA_CPU_ISA']}" if "SOFTDLA_CPU_ISA" in os.environ else "")
          + "".join(f", B with {k}={v}" for k, v in env_b.items()))
    try:
        for path in args.loadables:
            times = {"A": [], "B": []}
            for r in range(args.rounds):
                for side in ("A", "B") if r % 2 == 0 else ("B", "A"):
                    procs[side].stdin.write(f"{os.path.abspath(path)} {args.per_round}\n")
                    procs[side].stdin.flush()
                    reply = procs[side].stdout.readline()
                    if not reply:
                        sys.exit(f"ab_builds: build {side}'s worker stopped on {path}")
                    times[side] += [float(v) for v in reply.split()]
            a = np.percentile(times["A"], [10, 50])
            b = np.percentile(times["B"], [10, 50])
            print(f"{path}: A p10 {a[0]:.3f} ms, median {a[1]:.3f} | B p10 {b[0]:.3f}, median {b[1]:.3f} | "
                  f"B/A p10 {b[0] / a[0]:.3f}, median {b[1] / a[1]:.3f}", flush=True)
    finally:
        for p in procs.values():
            p.stdin.close()
            p.wait()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker()
    else:
        main()
