"""The high-level API: open a DLA device, load a loadable, run it on NumPy arrays.

Written only against the cuDLA C API (through softdla.cudla), so it also runs over NVIDIA's
libcudla.so.1 on a Jetson (SOFTDLA_CUDLA_LIBRARY). Buffers are host memory registered with
cudlaMemRegister and tasks run with stream 0 (synchronously).

    with softdla.Device(0) as dev:
        model = dev.load("model.loadable")
        outputs = model.run({"images": batch})   # NCHW float arrays in, float arrays out
"""
import os

import numpy as np

from . import cudla, formats


class TensorInfo:
    """One I/O tensor: name, NCHW shape, storage dtype, memory format, INT8 scale, byte size."""

    def __init__(self, desc, scale):
        self.name = desc.name
        self.shape = (int(desc.n), int(desc.c), int(desc.h), int(desc.w))
        self.dtype, self.format, self.target = formats.from_descriptor(desc)
        self.scale = scale
        self.size = int(desc.size_)
        self.descriptor = desc

    @property
    def format_name(self):
        return {v: k for k, v in formats.FORMAT_NAMES.items()}[self.format]

    def __repr__(self):
        s = f", scale={self.scale:g}" if self.dtype == np.int8 and self.scale is not None else ""
        return f"TensorInfo({self.name!r}, shape={self.shape}, {self.dtype.name}:{self.format_name}{s})"


def _aligned(nbytes):
    raw = np.zeros(nbytes + 64, np.uint8)
    off = (-raw.ctypes.data) % 64
    return raw[off:off + nbytes]


class Module:
    """A loaded loadable with registered I/O buffers. Use Device.load to create one."""

    def __init__(self, device, data):
        self.device = device
        data = bytes(data)
        self.handle = cudla.module_load_from_memory(device.handle, data, len(data), 0)
        self._registered = []
        try:
            self.inputs = self._tensors(False)
            self.outputs = self._tensors(True)
            self._in_bufs = [_aligned(t.size) for t in self.inputs]
            self._out_bufs = [_aligned(t.size) for t in self.outputs]
            self._task = cudla.Task()
            self._task.module_handle = self.handle
            self._task.input_tensor = [self._register(b) for b in self._in_bufs]
            self._task.output_tensor = [self._register(b) for b in self._out_bufs]
        except BaseException:
            self.close()
            raise

    def _tensors(self, outputs):
        kind = (cudla.ModuleAttributeType.OUTPUT_TENSOR_DESCRIPTORS if outputs
                else cudla.ModuleAttributeType.INPUT_TENSOR_DESCRIPTORS)
        infos = []
        for i, desc in enumerate(cudla.module_get_attributes(self.handle, kind)):
            status, scale = cudla._ext.tensor_scale(self.handle, int(outputs), i)
            infos.append(TensorInfo(desc, scale if status == 0 else None))
        return infos

    def _register(self, buf):
        ptr = cudla.mem_register(self.device.handle, buf.ctypes.data, buf.nbytes, 0)
        self._registered.append(ptr)
        return ptr

    def run(self, feeds, raw=False):
        """Runs once. feeds: {name: array} or a sequence in input order; NCHW arrays of the tensor's
        shape. Float arrays are quantized (INT8 inputs) or rounded (FP16); int8 arrays for INT8 inputs
        are taken as codes. Returns {name: float32 array} (INT8 outputs dequantized), or the stored
        values with raw=True."""
        if not isinstance(feeds, dict):
            feeds = dict(zip([t.name for t in self.inputs], feeds))
        missing = [t.name for t in self.inputs if t.name not in feeds]
        if missing:
            raise KeyError(f"no value for input(s) {missing}; inputs are {[t.name for t in self.inputs]}")
        for t, buf in zip(self.inputs, self._in_bufs):
            x = np.asarray(feeds[t.name])
            if int(np.prod(x.shape)) != int(np.prod(t.shape)):
                raise ValueError(f"input '{t.name}' needs shape {t.shape}, got {x.shape}")
            x = x.reshape(t.shape)
            if t.dtype == np.int8:
                if x.dtype != np.int8:
                    if t.scale is None:
                        raise ValueError(f"input '{t.name}' is int8 and this libcudla reports no scale: pass int8 codes")
                    x = formats.quantize(x, t.scale)
            else:
                x = x.astype(t.dtype)
            buf[:] = np.frombuffer(formats.pack(x, t.format, t.target), np.uint8)
        cudla.submit_task(self.device.handle, self._task, 1, 0, 0)
        status = cudla.get_last_error(self.device.handle)
        if status != 0:
            raise cudla.CudlaError(status)
        out = {}
        for t, buf in zip(self.outputs, self._out_bufs):
            y = formats.unpack(buf.tobytes(), t.shape, t.dtype, t.format, t.target)
            if not raw:
                y = formats.dequantize(y, t.scale) if (t.dtype == np.int8 and t.scale is not None) else y.astype(np.float32)
            out[t.name] = y
        return out

    def close(self):
        """Unregisters the buffers and unloads the module (idempotent)."""
        while self._registered:
            cudla.mem_unregister(self.device.handle, self._registered.pop())
        if self.handle:
            cudla.module_unload(self.handle, 0)
            self.handle = 0
            self.device._modules.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Device:
    """A DLA device handle (hybrid mode). Closing it closes its modules first."""

    def __init__(self, index=0, mode=cudla.Mode.CUDA_DLA):
        self.handle = cudla.create_device(index, mode)
        self._modules = set()

    def load(self, loadable):
        """A Module from loadable bytes or a file path. One module per handle, as on the DLA: open
        another Device for another model."""
        if isinstance(loadable, (str, os.PathLike)):
            with open(loadable, "rb") as f:
                loadable = f.read()
        m = Module(self, loadable)
        self._modules.add(m)
        return m

    @property
    def version(self):
        return cudla.device_get_attribute(self.handle, cudla.DevAttributeType.DEVICE_VERSION).device_version

    def close(self):
        for m in list(self._modules):
            m.close()
        if self.handle:
            cudla.destroy_device(self.handle)
            self.handle = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def device_count():
    return cudla.device_get_count()
