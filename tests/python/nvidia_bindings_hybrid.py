"""Hybrid mode on a real CUDA stream with NVIDIA's own cuda.bindings.cudla and cuda.bindings.runtime over
softdla's libcudla.so.1 (preloaded with RTLD_GLOBAL): NVIDIA's nine steps with cudaMalloc'd buffers,
the task enqueued between the caller's own copies on one non-blocking stream, then the documented
refusals (host memory, a capturing stream). Prints the output bytes as hex on the last line.
Usage: python nvidia_bindings_hybrid.py LIBCUDLA LOADABLE INPUT_FILE [--statistics]"""
import ctypes
import os
import sys

import numpy as np

ctypes.CDLL(sys.argv[1], mode=os.RTLD_GLOBAL)
from cuda.bindings import cudla  # noqa: E402
from cuda.bindings import runtime as cudart  # noqa: E402


def ok(result):
    err, *rest = result if isinstance(result, tuple) else (result,)
    assert err == cudart.cudaError_t.cudaSuccess, err
    return rest[0] if len(rest) == 1 else rest


def expect_error(status, fn, *args):
    try:
        fn(*args)
    except cudla.CudlaError as e:
        assert e.status == status, (e.status, status)
        return
    raise AssertionError(f"{fn.__name__} accepted what it must refuse")


loadable = open(sys.argv[2], "rb").read()
input_bytes = open(sys.argv[3], "rb").read()
statistics = "--statistics" in sys.argv

# 1-2. device handle in hybrid mode, 3. module, 4. descriptors
dev = cudla.create_device(0, cudla.Mode.CUDA_DLA)
module = cudla.module_load_from_memory(dev, loadable, len(loadable), cudla.ModuleLoadFlags.MODULE_DEFAULT)
(in_desc,) = cudla.module_get_attributes(module, cudla.ModuleAttributeType.INPUT_TENSOR_DESCRIPTORS)
out_descs = cudla.module_get_attributes(module, cudla.ModuleAttributeType.OUTPUT_TENSOR_DESCRIPTORS)
out_desc = out_descs[0]
assert in_desc.size_ == len(input_bytes)
# 5. a non-blocking stream, 6. CUDA memory
stream = ok(cudart.cudaStreamCreateWithFlags(cudart.cudaStreamNonBlocking))
d_in = ok(cudart.cudaMalloc(in_desc.size_))
d_out = ok(cudart.cudaMalloc(out_desc.size_))
# 7. registration (host memory is refused in hybrid mode with the CUDA backend)
in_dla = cudla.mem_register(dev, int(d_in), in_desc.size_, 0)
out_dla = cudla.mem_register(dev, int(d_out), out_desc.size_, 0)
expect_error(cudla.Status.ErrorMemoryRegistered, cudla.mem_register, dev, int(d_in), in_desc.size_, 0)
host = np.zeros(in_desc.size_ + 64, np.uint8)
host_aligned = host.ctypes.data + (-host.ctypes.data) % 64
if os.environ.get("SOFTDLA_BACKEND", "auto") != "cpu":
    expect_error(cudla.Status.ErrorInvalidAddress, cudla.mem_register, dev, host_aligned, 16, 0)
outputs = [out_dla]
d_stats = None
if statistics:
    (stats_desc,) = cudla.module_get_attributes(module, cudla.ModuleAttributeType.OUTPUT_TASK_STATISTICS_DESCRIPTORS)
    d_stats = ok(cudart.cudaMalloc(stats_desc.size_))
    outputs.append(cudla.mem_register(dev, int(d_stats), stats_desc.size_, cudla.AccessPermissionFlags.TASK_STATISTICS))
# 8. input upload, 9. the task, the download: all on one stream, no synchronization in between
src = np.frombuffer(input_bytes, np.uint8).copy()
ok(cudart.cudaMemsetAsync(d_out, 0x55, out_desc.size_, stream))
ok(cudart.cudaMemcpyAsync(d_in, src.ctypes.data, len(src), cudart.cudaMemcpyKind.cudaMemcpyHostToDevice, stream))
task = cudla.Task()
task.module_handle = module
task.input_tensor = [in_dla]
task.output_tensor = outputs
cudla.submit_task(dev, task.ptr, 1, int(stream), 0)
result = np.zeros(out_desc.size_, np.uint8)
ok(cudart.cudaMemcpyAsync(result.ctypes.data, d_out, out_desc.size_, cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost,
                          stream))
ok(cudart.cudaStreamSynchronize(stream))
assert cudla.get_last_error(dev) == 0
if statistics:
    stats = np.zeros(stats_desc.size_, np.uint8)
    ok(cudart.cudaMemcpy(stats.ctypes.data, d_stats, stats_desc.size_, cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost))
    assert bytes(stats[:8]) == b"SDLASTAT", bytes(stats[:8])
    layers = int(np.frombuffer(stats[12:16], np.uint32)[0])
    task_ms = float(np.frombuffer(stats[24:32], np.float64)[0])
    records = np.frombuffer(stats[32:32 + 24 * layers].tobytes(), np.dtype([("i", "<u4"), ("r", "<u4"), ("s", "<f8"), ("e", "<f8")]))
    assert layers > 0 and task_ms > 0 and list(records["i"]) == list(range(layers))
    assert np.all(records["e"] >= records["s"]) and records["e"].max() <= task_ms + 1e-6
    print(f"statistics: {layers} layers, task {task_ms:.3f} ms", file=sys.stderr)
# A stream being captured into a CUDA graph is refused (NVIDIA documents UnsupportedOperation).
if os.environ.get("SOFTDLA_BACKEND", "auto") != "cpu":
    capture = ok(cudart.cudaStreamCreateWithFlags(cudart.cudaStreamNonBlocking))
    ok(cudart.cudaStreamBeginCapture(capture, cudart.cudaStreamCaptureMode.cudaStreamCaptureModeThreadLocal))
    expect_error(cudla.Status.ErrorUnsupportedOperation, cudla.submit_task, dev, task.ptr, 1, int(capture), 0)
    graph = ok(cudart.cudaStreamEndCapture(capture))
    ok(cudart.cudaGraphDestroy(graph))
    ok(cudart.cudaStreamDestroy(capture))
# Teardown in NVIDIA's order.
for p in [in_dla] + outputs:
    cudla.mem_unregister(dev, p)
cudla.module_unload(module, 0)
cudla.destroy_device(dev)
for p in (d_in, d_out, d_stats):
    if p is not None:
        ok(cudart.cudaFree(p))
ok(cudart.cudaStreamDestroy(stream))
print(bytes(result).hex())
