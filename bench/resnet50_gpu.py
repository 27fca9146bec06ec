"""ResNet-50 and MobileNetV2 (random weights, 224x224) on the GPU: softdla's CUDA backend (INT8 and FP16
loadables, driven through NVIDIA's own cuda.bindings.cudla over softdla's libcudla.so.1, buffers and
stream from PyTorch) against PyTorch FP16 channels_last with cuDNN (cudnn.benchmark, inference mode),
eager and replayed as a CUDA graph, in one run on one GPU. Prints throughput, latency (medians), the
ratio to both PyTorch runs and TOPS.

    python bench/resnet50_gpu.py [--build-dir build] [--reps 30] [--models resnet50,mobilenet_v2]
                                 [--precisions fp16,int8] [--batches 1,32]
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from build_time import resnet50  # noqa: E402
from sdla_testkit.onnx_models import G  # noqa: E402  (build_time put tests/python on the path)

GMACS_PER_IMAGE = {"resnet50": 4.09, "mobilenet_v2": 0.30}  # at 224x224 (convolutions + FC)
HOPPER_INT8_PEAK_TOPS = 1979.0  # dense, datasheet: H100 SXM and H200 alike


def mobilenet_v2(batch=1):
    """torchvision's mobilenet_v2 layout with random weights: ReLU6 as Clip(0, 6), BatchNorm after every
    convolution, residual adds where the stride is 1 and the width stays."""
    g = G(seed=0)
    lo, hi = g.const(np.float32(0)), g.const(np.float32(6))

    def cbn(x, cin, cout, k, stride, groups=1, act=True):
        y = g.bn(g.conv(x, cin, cout, k=k, stride=stride, pad=k // 2, groups=groups, bias=False), cout)
        return g.node("Clip", [y, lo, hi]) if act else y

    x = cbn(g.input("images", [batch, 3, 224, 224]), 3, 32, 3, 2)
    c = 32
    for t, cout, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                          (6, 320, 1, 1)]:
        for i in range(n):
            stride = s if i == 0 else 1
            y = x if t == 1 else cbn(x, c, c * t, 1, 1)
            y = cbn(cbn(y, c * t, c * t, 3, stride, groups=c * t), c * t, cout, 1, 1, act=False)
            x = g.node("Add", [x, y]) if stride == 1 and c == cout else y
            c = cout
    y = g.node("Flatten", [g.node("GlobalAveragePool", [cbn(x, c, 1280, 1, 1)])])
    return g.model([g.node("Gemm", [y, g.weight(1000, 1280), g.weight(1000)], transB=1)])


ONNX_MODELS = {"resnet50": resnet50, "mobilenet_v2": mobilenet_v2}


def build(softdla, onnx_path, out, *flags):
    if os.path.exists(out):  # --loadables: built by an earlier run
        print(f"  reused {out}", flush=True)
        return open(out, "rb").read()
    t = time.perf_counter()
    r = subprocess.run([softdla, "build", f"--onnx={onnx_path}", f"--saveEngine={out}", *flags],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(r.stderr)
    print(f"  built {os.path.basename(out)} in {time.perf_counter() - t:.1f} s", flush=True)
    return open(out, "rb").read()


class SoftdlaRunner:
    """One loadable on one cuDLA hybrid-mode handle; tasks enqueued on a PyTorch stream."""

    def __init__(self, cudla, torch, loadable, stream):
        self.cudla, self.torch, self.stream = cudla, torch, stream
        self.dev = cudla.create_device(0, cudla.Mode.CUDA_DLA)
        self.mod = cudla.module_load_from_memory(self.dev, loadable, len(loadable), 0)
        ins = cudla.module_get_attributes(self.mod, cudla.ModuleAttributeType.INPUT_TENSOR_DESCRIPTORS)
        outs = cudla.module_get_attributes(self.mod, cudla.ModuleAttributeType.OUTPUT_TENSOR_DESCRIPTORS)
        self.buffers = [torch.randint(-100, 100, (d.size_,), dtype=torch.int8, device="cuda") for d in ins]
        self.buffers += [torch.empty(d.size_, dtype=torch.int8, device="cuda") for d in outs]
        regs = [cudla.mem_register(self.dev, b.data_ptr(), b.numel(), 0) for b in self.buffers]
        self.task = cudla.Task()
        self.task.module_handle = self.mod
        self.task.input_tensor = regs[:len(ins)]
        self.task.output_tensor = regs[len(ins):]

    def __call__(self):
        self.cudla.submit_task(self.dev, self.task.ptr, 1, self.stream.cuda_stream, 0)


def event_times(torch, fn, stream, reps, per_call):
    """Milliseconds a call of `reps` timed repetitions, each `per_call` back-to-back calls between two events."""
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        for _ in range(per_call):
            fn()
        end.record(stream)
        end.synchronize()
        times.append(start.elapsed_time(end) / per_call)
    return times


def time_it(torch, fn, stream, reps, per_call):
    """Median milliseconds of `per_call` back-to-back calls, over `reps` timed repetitions (events)."""
    return statistics.median(event_times(torch, fn, stream, reps, per_call))


def torch_model(torch, torchvision, name):
    ctor = {"resnet50": torchvision.models.resnet50, "mobilenet_v2": torchvision.models.mobilenet_v2}[name]
    return ctor(weights=None).half().cuda().to(memory_format=torch.channels_last).eval()


def graphed(torch, model, x, stream):
    """model(x) captured once into a CUDA graph (after warm-up); returns its replay."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        model(x)
    torch.cuda.synchronize()
    return graph.replay


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--json", default=None)
    ap.add_argument("--models", default="resnet50", help="comma-separated: resnet50, mobilenet_v2")
    ap.add_argument("--precisions", default="fp16,int8", help="softdla loadables: fp16, int8")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--profile", nargs="?", default="", const="fp16,int8",
                    help="print the GPU kernels' time of softdla at the largest batch (these precisions; all without a value)")
    ap.add_argument("--loadables", default=None,
                    help="keep the built loadables (and calibration cache) in this directory and reuse those found "
                         "there: A/B runs of several builds or settings on the same loadables")
    args = ap.parse_args()
    models = args.models.split(",")
    precisions = args.precisions.split(",")
    batches = [int(b) for b in args.batches.split(",")]
    libcudla = os.path.join(args.build_dir, "libcudla.so.1")
    ctypes.CDLL(libcudla, mode=os.RTLD_GLOBAL)
    import torch
    import torchvision
    from cuda.bindings import cudla

    results = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
    print(f"GPU: {results['gpu']}, torch {torch.__version__}", flush=True)
    stream = torch.cuda.Stream()
    loadables = {}
    with tempfile.TemporaryDirectory() as tmp:
        d = args.loadables or tmp
        calib = os.path.join(d, "calib")
        os.makedirs(calib, exist_ok=True)
        np.save(os.path.join(calib, "data.npy"),
                np.random.default_rng(0).standard_normal((16, 3, 224, 224)).astype(np.float32))
        softdla = os.path.join(args.build_dir, "softdla")
        for name in models:
            cache = os.path.join(d, f"{name}.calib")
            for batch in batches:
                path = os.path.join(d, f"{name}_b{batch}.onnx")
                onnx.save(ONNX_MODELS[name](batch), path)
                if "fp16" in precisions:
                    loadables[(name, "fp16", batch)] = build(softdla, path, f"{d}/{name}_fp16_b{batch}.loadable", "--fp16",
                                                             "--inputIOFormats=fp16:chw16", "--outputIOFormats=fp16:chw16")
                if "int8" in precisions:
                    if not os.path.exists(cache):  # calibrated once, at batch 1; the other batches reuse the cache
                        one = os.path.join(d, f"{name}_b1.onnx")
                        onnx.save(ONNX_MODELS[name](1), one)
                        build(softdla, one, f"{d}/{name}_calib.loadable", "--int8", "--fp16", f"--calib-data={calib}",
                              f"--calib={cache}")
                    loadables[(name, "int8", batch)] = build(softdla, path, f"{d}/{name}_int8_b{batch}.loadable",
                                                             "--int8", "--fp16", "--inputIOFormats=int8:chw32",
                                                             "--outputIOFormats=fp16:chw16", f"--calib={cache}")
    torch.backends.cudnn.benchmark = True
    rows = []
    for name in models:
        model = torch_model(torch, torchvision, name)
        for batch in batches:
            x = torch.randn(batch, 3, 224, 224, device="cuda").half().to(memory_format=torch.channels_last)
            with torch.inference_mode(), torch.cuda.stream(stream):
                for _ in range(20):
                    model(x)
                torch.cuda.synchronize()
                fwd = lambda: model(x)  # noqa: E731
                rows.append((name, "pytorch-fp16", batch, time_it(torch, fwd, stream, args.reps, 1),
                             time_it(torch, fwd, stream, max(5, args.reps // 3), 20)))
                replay = graphed(torch, model, x, stream)
                for _ in range(20):
                    replay()
                torch.cuda.synchronize()
                rows.append((name, "pytorch-fp16-graph", batch, time_it(torch, replay, stream, args.reps, 1),
                             time_it(torch, replay, stream, max(5, args.reps // 3), 20)))
            for prec in precisions:
                run = SoftdlaRunner(cudla, torch, loadables[(name, prec, batch)], stream)
                for _ in range(20):
                    run()
                torch.cuda.synchronize()
                lat = time_it(torch, run, stream, args.reps, 1)
                thr = time_it(torch, run, stream, max(5, args.reps // 3), 20)
                assert cudla.get_last_error(run.dev) == 0
                rows.append((name, f"softdla-{prec}", batch, lat, thr))
                if prec in args.profile.split(",") and batch == max(batches):
                    profile_kernels(torch, run, f"{name} softdla-{prec} batch {batch}")
    print(f"\n{'model':13} {'engine':19} {'batch':>5} {'latency ms':>11} {'img/s':>9} {'vs eager':>9} {'vs graph':>9} {'TOPS':>7}")
    eager = {(m, b): t for m, e, b, _, t in rows if e == "pytorch-fp16"}
    graph = {(m, b): t for m, e, b, _, t in rows if e == "pytorch-fp16-graph"}
    table = []
    for name, engine, batch, lat, thr in rows:
        ips = batch / (thr / 1e3)
        tops = 2 * GMACS_PER_IMAGE[name] * 1e9 * ips / 1e12
        table.append(dict(model=name, engine=engine, batch=batch, latency_ms=lat, per_batch_ms=thr, images_per_s=ips,
                          speedup_vs_torch=eager[(name, batch)] / thr, speedup_vs_torch_graph=graph[(name, batch)] / thr,
                          tops=tops))
        r = table[-1]
        print(f"{name:13} {engine:19} {batch:5d} {lat:11.3f} {ips:9.0f} {r['speedup_vs_torch']:8.2f}x "
              f"{r['speedup_vs_torch_graph']:8.2f}x {tops:7.1f}")
    for r in table:
        if r["engine"] == "softdla-int8" and r["batch"] == max(batches):
            print(f"{r['model']} INT8 batch {r['batch']}: {r['tops']:.1f} TOPS = "
                  f"{100 * r['tops'] / HOPPER_INT8_PEAK_TOPS:.1f}% of the {HOPPER_INT8_PEAK_TOPS:.0f} dense INT8 TOPS of an H100 SXM / H200")
    results["rows"] = table
    if args.json:
        json.dump(results, open(args.json, "w"), indent=1)


def profile_kernels(torch, run, title):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            run()
        torch.cuda.synchronize()
    print(f"{title}, 5 tasks:")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=70))
    kernels = kernels_in_launch_order(torch, prof)
    print(f"{title}, the last task's kernels in launch order (us):")
    for e in kernels[-(len(kernels) // 5):]:
        print(f"  {e.time_range.elapsed_us():9.1f}  {kernel_name(e)[:90]}")


def kernels_in_launch_order(torch, prof):
    """The GPU kernels a torch.profiler run recorded, by start time."""
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return sorted(kernels, key=lambda e: e.time_range.start)


def kernel_name(event):
    """A profiled kernel's name without namespaces, return type and parameter list."""
    name = event.name.replace("softdla::gpu::", "").replace("(anonymous namespace)::", "")
    return name.replace("void ", "").split("(")[0]


if __name__ == "__main__":
    main()
