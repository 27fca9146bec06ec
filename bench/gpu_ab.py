"""Two settings of softdla's CUDA backend on the same loadables, alternated round by round (A/B) on one GPU.

Each side runs in its own worker process (its build's libcudla.so.1 under NVIDIA's cuda.bindings.cudla, buffers
and stream from PyTorch, as bench/resnet50_gpu.py drives it), so a switch that the backend reads once per process
(SOFTDLA_CUDA_*) takes its value in one worker only. The parent asks the workers in turn (A, B, then B, A, ...)
for `--per-round` timings of each loadable, each the mean of `--per-call` back-to-back tasks between two CUDA
events; only one worker runs at a time. Reports each side's median task time and the ratio B/A (below 1: B faster).

    python bench/resnet50_gpu.py --loadables /tmp/loadables --precisions int8 --batches 1,32,128   # builds them
    python bench/gpu_ab.py /tmp/loadables/*_int8_b*.loadable --env-b SOFTDLA_CUDA_SPLIT_MODEL=measured

`--build-b DIR` compares two builds instead (or as well); `--env-a` / `--env-b NAME=VALUE` are repeatable.
`--launches` also lists, for each loadable, every kernel of a task in launch order with each side's time (the
median over `--per-round` profiled tasks, PyTorch's profiler): where a switch changes the time, launch by launch.
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys

from env_args import parse_env

HERE = os.path.dirname(os.path.abspath(__file__))


def worker(build_dir):
    """Loads each loadable once on a hybrid-mode handle and times tasks on request (one JSON line a request)."""
    sys.path.insert(0, HERE)
    ctypes.CDLL(os.path.join(build_dir, "libcudla.so.1"), mode=os.RTLD_GLOBAL)
    import torch
    from cuda.bindings import cudla
    from resnet50_gpu import SoftdlaRunner, event_times

    stream = torch.cuda.Stream()
    runners = {}
    for line in sys.stdin:
        path, count, per_call = line.split()
        if path not in runners:
            runners[path] = SoftdlaRunner(cudla, torch, open(path, "rb").read(), stream)
            for _ in range(20):
                runners[path]()
            torch.cuda.synchronize()
        run = runners[path]
        if per_call == "launches":
            print(json.dumps(task_launches(torch, run, int(count))), flush=True)
            continue
        times = event_times(torch, run, stream, int(count), int(per_call))
        if cudla.get_last_error(run.dev) != 0:
            raise SystemExit(f"{path}: the task reported an error")
        print(json.dumps(times), flush=True)


def task_launches(torch, run, tasks):
    """[name, microseconds] of each kernel of one task in launch order, the median over `tasks` tasks."""
    from torch.profiler import ProfilerActivity, profile
    from resnet50_gpu import kernel_name, kernels_in_launch_order
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(tasks):
            run()
        torch.cuda.synchronize()
    kernels = kernels_in_launch_order(torch, prof)
    per_task = len(kernels) // tasks
    launches = []
    for i in range(per_task):
        us = statistics.median(kernels[t * per_task + i].time_range.elapsed_us() for t in range(tasks))
        launches.append([kernel_name(kernels[i]), us])
    return launches


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("loadables", nargs="*", help="loadable files (bench/resnet50_gpu.py --loadables DIR builds them)")
    ap.add_argument("--build-a", default=os.path.join(HERE, "..", "build"), help="build directory of A")
    ap.add_argument("--build-b", default=None, help="build directory of B (default: A's)")
    ap.add_argument("--env-a", action="append", default=[], metavar="NAME=VALUE", help="a variable for A alone")
    ap.add_argument("--env-b", action="append", default=[], metavar="NAME=VALUE", help="a variable for B alone")
    ap.add_argument("--rounds", type=int, default=6, help="rounds; each times every loadable on both sides")
    ap.add_argument("--per-round", type=int, default=5, help="timings per side, loadable and round (default 5)")
    ap.add_argument("--per-call", type=int, default=20, help="back-to-back tasks a timing (default 20)")
    ap.add_argument("--launches", action="store_true", help="list each loadable's kernels with both sides' times")
    ap.add_argument("--json", default=None, help="write the results here as well")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker)
    if not args.loadables:
        raise SystemExit("name at least one loadable")
    if min(args.rounds, args.per_round, args.per_call) < 1:
        raise SystemExit("--rounds, --per-round and --per-call must be at least 1")
    for path in args.loadables:
        if not os.path.isfile(path):
            raise SystemExit(f"no loadable at {path}")
    sides = {}
    for side, build, extra in (("A", args.build_a, parse_env(args.env_a, "gpu_ab")),
                               ("B", args.build_b or args.build_a, parse_env(args.env_b, "gpu_ab"))):
        sides[side] = subprocess.Popen([sys.executable, __file__, "--worker", os.path.abspath(build)],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                       env={**os.environ, **extra})
    times = {(side, path): [] for side in sides for path in args.loadables}
    for r in range(args.rounds):
        order = ("A", "B") if r % 2 == 0 else ("B", "A")
        for path in args.loadables:
            for side in order:
                proc = sides[side]
                proc.stdin.write(f"{os.path.abspath(path)} {args.per_round} {args.per_call}\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
                if not line:
                    raise SystemExit(f"worker {side} stopped (its errors are above)")
                times[(side, path)] += json.loads(line)
        print(f"  round {r + 1}/{args.rounds} done", flush=True)
    launches = {}
    if args.launches:
        for path in args.loadables:
            for side in sides:
                sides[side].stdin.write(f"{os.path.abspath(path)} {args.per_round} launches\n")
                sides[side].stdin.flush()
                line = sides[side].stdout.readline()
                if not line:
                    raise SystemExit(f"worker {side} stopped (its errors are above)")
                launches[(side, path)] = json.loads(line)
    for proc in sides.values():
        proc.stdin.close()
        proc.wait()
    print(f"A: {args.build_a} {' '.join(args.env_a)}\nB: {args.build_b or args.build_a} {' '.join(args.env_b)}")
    print(f"{'loadable':40} {'A ms':>9} {'B ms':>9} {'B/A':>7}")
    for path in args.loadables if args.launches else []:
        a, b = launches[("A", path)], launches[("B", path)]
        print(f"{os.path.basename(path)}: {len(a)} / {len(b)} kernels a task, in launch order (us)")
        if len(a) != len(b):
            print("  (the two sides launch different kernels: listed one after the other)")
            for side, ks in (("A", a), ("B", b)):
                for name, us in ks:
                    print(f"  {side} {us:9.1f}  {name[:90]}")
            continue
        for (name_a, ua), (name_b, ub) in zip(a, b):
            same = name_a == name_b
            print(f"  {ua:9.1f} {ub:9.1f} {ub / ua if ua else 0:6.2f}  {name_a[:80]}" + ("" if same else f"  | B: {name_b[:60]}"))
        print(f"  {sum(u for _, u in a):9.1f} {sum(u for _, u in b):9.1f}  (sum)")
    rows = []
    for path in args.loadables:
        a, b = statistics.median(times[("A", path)]), statistics.median(times[("B", path)])
        rows.append(dict(loadable=os.path.basename(path), a_ms=a, b_ms=b, ratio=b / a))
        print(f"{os.path.basename(path):40} {a:9.4f} {b:9.4f} {b / a:7.3f}")
    if args.json:
        json.dump(dict(env_a=args.env_a, env_b=args.env_b, rows=rows), open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
