"""A complete inference with NVIDIA's own cuda.bindings.cudla over softdla's libcudla.so.1 (preloaded
with RTLD_GLOBAL, as NVIDIA's tests inject a backend). Host memory, stream 0. Prints the output bytes
as hex on the last line. Usage: python nvidia_bindings_inference.py LIBCUDLA LOADABLE INPUT_HEX"""
import ctypes
import os
import sys

import numpy as np

ctypes.CDLL(sys.argv[1], mode=os.RTLD_GLOBAL)
from cuda.bindings import cudla  # noqa: E402

loadable = open(sys.argv[2], "rb").read()
input_bytes = bytes.fromhex(sys.argv[3])

assert cudla.get_version() == 13003000
assert cudla.device_get_count() == 2
dev = cudla.create_device(0, cudla.Mode.CUDA_DLA)
try:
    module = cudla.module_load_from_memory(dev, loadable, len(loadable), cudla.ModuleLoadFlags.MODULE_DEFAULT)
    assert cudla.module_get_attributes(module, cudla.ModuleAttributeType.NUM_INPUT_TENSORS) == 1
    assert cudla.module_get_attributes(module, cudla.ModuleAttributeType.NUM_OUTPUT_TENSORS) == 1
    (in_desc,) = cudla.module_get_attributes(module, cudla.ModuleAttributeType.INPUT_TENSOR_DESCRIPTORS)
    (out_desc,) = cudla.module_get_attributes(module, cudla.ModuleAttributeType.OUTPUT_TENSOR_DESCRIPTORS)
    assert in_desc.size_ == len(input_bytes), (in_desc.size_, len(input_bytes))
    # 32-byte aligned host buffers (the DLA's rule) carved from larger numpy arrays.
    def aligned(n):
        raw = np.zeros(n + 64, np.uint8)
        off = (-raw.ctypes.data) % 64
        return raw[off:off + n]
    inp, out = aligned(in_desc.size_), aligned(out_desc.size_)
    inp[:] = np.frombuffer(input_bytes, np.uint8)
    in_dla = cudla.mem_register(dev, inp.ctypes.data, in_desc.size_, 0)
    out_dla = cudla.mem_register(dev, out.ctypes.data, out_desc.size_, 0)
    task = cudla.Task()
    task.module_handle = module
    task.input_tensor = [in_dla]
    task.output_tensor = [out_dla]
    cudla.submit_task(dev, task.ptr, 1, 0, 0)
    assert cudla.get_last_error(dev) == 0
    try:
        cudla.mem_register(dev, inp.ctypes.data, in_desc.size_, 0)
        raise AssertionError("double registration accepted")
    except cudla.CudlaError as e:
        assert e.status == cudla.Status.ErrorMemoryRegistered
    cudla.mem_unregister(dev, in_dla)
    cudla.mem_unregister(dev, out_dla)
    cudla.module_unload(module, 0)
finally:
    cudla.destroy_device(dev)
print(bytes(out).hex())
