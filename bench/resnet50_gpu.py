"""ResNet-50 (random weights, 224x224) on the GPU: softdla's CUDA backend (INT8 and FP16 loadables,
driven through NVIDIA's own cuda.bindings.cudla over softdla's libcudla.so.1, buffers and stream
from PyTorch) against PyTorch FP16 channels_last with cuDNN (cudnn.benchmark, inference mode), in one
run on one GPU, batch 1 and batch 32. Prints throughput, latency (medians) and INT8 TOPS.

    python bench/resnet50_gpu.py [--build-dir build] [--reps 30]
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

GMACS_PER_IMAGE = 4.09  # ResNet-50 at 224x224 (convolutions + FC)
H200_INT8_PEAK_TOPS = 1979.0  # dense, datasheet (SXM)


def build(softdla, onnx_path, out, *flags):
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


def time_it(torch, fn, stream, reps, per_call):
    """Median milliseconds of `per_call` back-to-back calls, over `reps` timed repetitions (events)."""
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        for _ in range(per_call):
            fn()
        end.record(stream)
        end.synchronize()
        times.append(start.elapsed_time(end) / per_call)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--json", default=None)
    ap.add_argument("--profile", action="store_true", help="print the GPU kernels' time of softdla INT8 at batch 32")
    args = ap.parse_args()
    libcudla = os.path.join(args.build_dir, "libcudla.so.1")
    ctypes.CDLL(libcudla, mode=os.RTLD_GLOBAL)
    import torch
    import torchvision
    from cuda.bindings import cudla

    results = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
    print(f"GPU: {results['gpu']}, torch {torch.__version__}", flush=True)
    stream = torch.cuda.Stream()
    with tempfile.TemporaryDirectory() as d:
        calib = os.path.join(d, "calib")
        os.makedirs(calib)
        np.save(os.path.join(calib, "data.npy"),
                np.random.default_rng(0).standard_normal((16, 3, 224, 224)).astype(np.float32))
        cache = os.path.join(d, "resnet50.calib")
        softdla = os.path.join(args.build_dir, "softdla")
        loadables = {}
        for batch in (1, 32):
            path = os.path.join(d, f"resnet50_b{batch}.onnx")
            onnx.save(resnet50(batch), path)
            loadables[("fp16", batch)] = build(softdla, path, f"{d}/fp16_b{batch}.loadable", "--fp16",
                                               "--inputIOFormats=fp16:chw16", "--outputIOFormats=fp16:chw16")
            calib_flags = [f"--calib-data={calib}", f"--calib={cache}"] if batch == 1 else [f"--calib={cache}"]
            loadables[("int8", batch)] = build(softdla, path, f"{d}/int8_b{batch}.loadable", "--int8", "--fp16",
                                               "--inputIOFormats=int8:chw32", "--outputIOFormats=fp16:chw16",
                                               *calib_flags)
    model = torchvision.models.resnet50(weights=None).half().cuda().to(memory_format=torch.channels_last).eval()
    torch.backends.cudnn.benchmark = True
    rows = []
    for batch in (1, 32):
        x = torch.randn(batch, 3, 224, 224, device="cuda").half().to(memory_format=torch.channels_last)
        with torch.inference_mode(), torch.cuda.stream(stream):
            for _ in range(20):
                model(x)
            torch.cuda.synchronize()
            fwd = lambda: model(x)  # noqa: E731
            lat = time_it(torch, fwd, stream, args.reps, 1)
            thr = time_it(torch, fwd, stream, max(5, args.reps // 3), 20)
        rows.append(("pytorch-fp16", batch, lat, thr))
        for prec in ("fp16", "int8"):
            run = SoftdlaRunner(cudla, torch, loadables[(prec, batch)], stream)
            for _ in range(20):
                run()
            torch.cuda.synchronize()
            lat = time_it(torch, run, stream, args.reps, 1)
            thr = time_it(torch, run, stream, max(5, args.reps // 3), 20)
            assert cudla.get_last_error(run.dev) == 0
            rows.append((f"softdla-{prec}", batch, lat, thr))
            if args.profile and batch == 32:
                from torch.profiler import ProfilerActivity, profile
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    for _ in range(5):
                        run()
                    torch.cuda.synchronize()
                print(f"softdla-{prec} batch 32, 5 tasks:")
                print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=10, max_name_column_width=70))
                kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
                kernels.sort(key=lambda e: e.time_range.start)
                print(f"softdla-{prec} batch 32, the last task's kernels in launch order (us):")
                for e in kernels[-(len(kernels) // 5):]:
                    name = e.name.replace("softdla::gpu::", "").replace("(anonymous namespace)::", "")
                    name = name.replace("void ", "").split("(")[0]
                    print(f"  {e.time_range.elapsed_us():9.1f}  {name[:90]}")
    print(f"\n{'engine':14} {'batch':>5} {'latency ms':>11} {'img/s':>9} {'vs torch':>9} {'TOPS':>7}")
    base = {b: t for name, b, _, t in rows if name == "pytorch-fp16"}
    table = []
    for name, batch, lat, thr in rows:
        ips = batch / (thr / 1e3)
        tops = 2 * GMACS_PER_IMAGE * 1e9 * ips / 1e12
        speed = base[batch] / thr
        table.append(dict(engine=name, batch=batch, latency_ms=lat, per_batch_ms=thr, images_per_s=ips,
                          speedup_vs_torch=speed, tops=tops))
        print(f"{name:14} {batch:5d} {lat:11.3f} {ips:9.0f} {speed:8.2f}x {tops:7.1f}")
    int8_32 = next(r for r in table if r["engine"] == "softdla-int8" and r["batch"] == 32)
    print(f"INT8 batch 32: {int8_32['tops']:.1f} TOPS = {100 * int8_32['tops'] / H200_INT8_PEAK_TOPS:.1f}% of the "
          f"H200's {H200_INT8_PEAK_TOPS:.0f} dense INT8 TOPS")
    results["rows"] = table
    if args.json:
        json.dump(results, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
