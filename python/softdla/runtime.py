"""The high-level API: open a DLA device, load a loadable, run it on NumPy arrays.

Written only against the cuDLA C API (through softdla.cudla), so it also runs over NVIDIA's
libcudla.so.1 on a Jetson (SOFTDLA_CUDLA_LIBRARY). Buffers are host memory registered with
cudlaMemRegister and tasks run with stream 0 (synchronously).

    with softdla.Device(0) as dev:
        model = dev.load("model.loadable")
        outputs = model.run({"images": batch})   # NCHW float arrays in, float arrays out

Threads: Module.run may be called from any number of threads on one module; inputs are checked and
packed, and outputs unpacked, outside a per-module lock that covers only the registered buffers, the
submission and its status. (A DLA core runs one task at a time, so the lock costs no parallelism.)

Lifetime: close() (or a `with` block) releases handles at once; objects dropped without it are
released when collected (weakref.finalize): registered memory is unregistered and the module
unloaded before its device is destroyed, in any collection order and at interpreter exit.
"""
import os
import threading
import weakref

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


def _dla_shape(shape):
    """The DLA's NCHW view of an array of this shape, as the builder maps rank < 4 tensors
    ([K] -> [1,K,1,1], [N,K] -> [N,K,1,1], [N,C,W] -> [N,C,1,W]); None for rank > 4."""
    shape = tuple(int(d) for d in shape)
    return {0: (1, 1, 1, 1), 1: (1, *shape, 1, 1), 2: (*shape, 1, 1), 3: shape[:2] + (1,) + shape[2:],
            4: shape}.get(len(shape))


def _input_array(t, value):
    """value as an array of t's logical NCHW shape and the type to store: checked for shape, dtype and
    (INT8) finiteness, with errors naming what the input expects."""
    expect = f"input '{t.name}' ({t.dtype.name}:{t.format_name}, shape {t.shape})"
    try:
        x = np.asarray(value)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{expect}: cannot make an array of {type(value).__name__} ({e})") from None
    kind = x.dtype.kind
    if kind == "b" or kind not in "iuf":
        raise TypeError(f"{expect} takes real numbers (float or integer arrays; int8 codes for int8 inputs), "
                        f"not {x.dtype}" + (": cast 0/1 masks to float explicitly" if kind == "b" else ""))
    if _dla_shape(x.shape) != t.shape:
        raise ValueError(f"{expect} needs shape {t.shape}, got {x.shape}")
    x = x.reshape(t.shape)
    if t.dtype == np.int8:
        if x.dtype == np.int8:  # codes
            return x
        if t.scale is None:
            raise ValueError(f"{expect} is int8 and this libcudla reports no scale: pass int8 codes")
        if kind == "f":
            bad = ~np.isfinite(x)
            if bad.any():
                first = tuple(int(i) for i in np.argwhere(bad)[0])
                raise ValueError(f"{expect} is quantized to int8 and takes finite values only; "
                                 f"{int(bad.sum())} value(s) are NaN or infinite (first {x[first]} at {first})")
        # Finite values beyond the int8 range saturate (as the DLA's quantize does); clipping first in
        # float64 keeps huge values (1e300) from overflowing float32 on the way.
        limit = 256.0 * float(t.scale)
        return formats.quantize(np.clip(x.astype(np.float64), -limit, limit), t.scale)
    if kind == "f" and np.dtype(x.dtype).itemsize > t.dtype.itemsize:
        with np.errstate(over="ignore"):
            y = x.astype(t.dtype)
        overflow = np.isinf(y) & np.isfinite(x)
        if overflow.any():
            first = tuple(int(i) for i in np.argwhere(overflow)[0])
            raise ValueError(f"{expect}: {int(overflow.sum())} finite value(s) overflow {t.dtype.name} "
                             f"(first {x[first]} at {first}; largest {float(np.finfo(t.dtype).max):g})")
        return y
    return x.astype(t.dtype)  # integers and narrower floats: exact, or rounded to the nearest


class _DeviceState:
    """What releasing a device needs: its handle and the states of its live modules (closed first)."""

    def __init__(self, handle):
        self.handle = handle
        self.modules = set()
        self.lock = threading.Lock()  # guards modules; never held while a module lock is taken


class _ModuleState:
    """What running and releasing a module needs (no reference to the Module object, so the module's
    finalizer can hold it): handle, registered buffers and their DLA pointers, the task, a lock."""

    def __init__(self, device_state):
        self.device = device_state
        self.handle = 0
        self.registered = []
        self.in_bufs, self.out_bufs, self.task = [], [], None
        self.lock = threading.Lock()  # one run at a time on the registered buffers; close waits for it


def _release_module(state):
    """Unregisters the buffers and unloads the module (idempotent); the first error is raised after
    everything that can be released is."""
    error = None
    with state.lock:
        dev = state.device.handle
        while state.registered:
            ptr = state.registered.pop()
            try:
                if dev:
                    cudla.mem_unregister(dev, ptr)
            except cudla.CudlaError as e:
                error = error or e
        if state.handle:
            handle, state.handle = state.handle, 0
            try:
                cudla.module_unload(handle, 0)
            except cudla.CudlaError as e:
                error = error or e
        state.in_bufs, state.out_bufs, state.task = [], [], None  # after unregistering
    with state.device.lock:
        state.device.modules.discard(state)
    if error is not None:
        raise error


def _release_device(state):
    """Releases the device's modules, then destroys it (idempotent)."""
    with state.lock:
        modules = list(state.modules)
    error = None
    for m in modules:
        try:
            _release_module(m)
        except cudla.CudlaError as e:
            error = error or e
    with state.lock:
        handle, state.handle = state.handle, 0
    if handle:
        cudla.destroy_device(handle)
    if error is not None:
        raise error


class Module:
    """A loaded loadable with registered I/O buffers. Use Device.load to create one.

    run() is thread-safe (a per-module lock around the registered buffers and the submission);
    the handles are released by close(), a `with` block, or when the object is collected."""

    def __init__(self, device, data):
        if not device.handle:
            raise ValueError("this Device is closed")
        self.device = device  # the device outlives its modules
        data = bytes(data)
        st = self._state = _ModuleState(device._state)
        self._finalizer = weakref.finalize(self, _release_module, st)
        try:
            st.handle = cudla.module_load_from_memory(device.handle, data, len(data), 0)
            with device._state.lock:
                device._state.modules.add(st)
            self.inputs = self._tensors(False)
            self.outputs = self._tensors(True)
            st.in_bufs = [_aligned(t.size) for t in self.inputs]
            st.out_bufs = [_aligned(t.size) for t in self.outputs]
            task = cudla.Task()
            task.module_handle = st.handle
            task.input_tensor = [self._register(b) for b in st.in_bufs]
            task.output_tensor = [self._register(b) for b in st.out_bufs]
            st.task = task
        except BaseException:
            self.close()
            raise

    @property
    def handle(self):
        """The cudlaModule handle (int); 0 once closed."""
        return self._state.handle

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
        self._state.registered.append(ptr)
        return ptr

    def _feeds(self, feeds):
        """[value per input, in input order], checking names and count."""
        names = [t.name for t in self.inputs]
        if isinstance(feeds, dict):
            unknown = [k for k in feeds if k not in names]
            missing = [n for n in names if n not in feeds]
            if unknown or missing:
                said = (f"unknown input name(s) {unknown}" if unknown else "") + \
                       ("; " if unknown and missing else "") + (f"no value for input(s) {missing}" if missing else "")
                raise ValueError(f"{said}; the inputs are {names}")
            return [feeds[n] for n in names]
        if isinstance(feeds, (np.ndarray, str, bytes)) or not hasattr(feeds, "__iter__"):
            raise TypeError(f"feeds must be a dict {{name: array}} or a sequence of arrays in input order "
                            f"{names}, not {type(feeds).__name__}")
        values = list(feeds)
        if len(values) != len(names):
            raise ValueError(f"{len(values)} array(s) given; the module has {len(names)} input(s) {names}")
        return values

    def run(self, feeds, raw=False):
        """Runs once. feeds: {name: array} or a sequence in input order, with exactly the module's
        inputs. Each array has the tensor's NCHW shape (or the ONNX shape of rank < 4 that maps to it);
        real dtypes only (bool, complex, object and strings raise TypeError). Float and integer arrays
        are values: quantized with the tensor's scale for INT8 inputs (round half away from zero;
        NaN/inf raise ValueError; finite values beyond the int8 range saturate), converted for FP16/FP32
        inputs (a finite value that overflows the type raises ValueError; NaN/inf pass through).
        int8 arrays for INT8 inputs are taken as codes. Returns {name: float32 array} (INT8 outputs
        dequantized), or the stored values with raw=True. Errors name the input, its dtype, format and
        shape. Thread-safe: calls on one module are serialized around the submission only."""
        packed = []
        for t, value in zip(self.inputs, self._feeds(feeds)):
            x = _input_array(t, value)
            packed.append(np.frombuffer(formats.pack(x, t.format, t.target), np.uint8))
        st = self._state
        with st.lock:
            if not st.handle or not st.device.handle:
                raise ValueError("this Module is closed")
            for buf, data in zip(st.in_bufs, packed):
                buf[:] = data
            cudla.submit_task(st.device.handle, st.task, 1, 0, 0)
            status = cudla.get_last_error(st.device.handle)
            results = [buf.tobytes() for buf in st.out_bufs] if status == 0 else None
        if status != 0:
            raise cudla.CudlaError(status)
        out = {}
        for t, data in zip(self.outputs, results):
            y = formats.unpack(data, t.shape, t.dtype, t.format, t.target)
            if not raw:
                y = formats.dequantize(y, t.scale) if (t.dtype == np.int8 and t.scale is not None) else y.astype(np.float32)
            out[t.name] = y
        return out

    def close(self):
        """Unregisters the buffers and unloads the module (idempotent); waits for a run in progress."""
        if self._finalizer.detach() is not None:
            _release_module(self._state)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Device:
    """A DLA device handle (hybrid mode). Closing it closes its modules first; a Device or Module
    dropped without close() is released when collected."""

    def __init__(self, index=0, mode=cudla.Mode.CUDA_DLA):
        self._state = _DeviceState(cudla.create_device(index, mode))
        self._finalizer = weakref.finalize(self, _release_device, self._state)

    @property
    def handle(self):
        """The cudlaDevHandle (int); 0 once closed."""
        return self._state.handle

    def load(self, loadable):
        """A Module from loadable bytes or a file path. One module per handle, as on the DLA: open
        another Device for another model."""
        if isinstance(loadable, (str, os.PathLike)):
            with open(loadable, "rb") as f:
                loadable = f.read()
        return Module(self, loadable)

    @property
    def version(self):
        return cudla.device_get_attribute(self.handle, cudla.DevAttributeType.DEVICE_VERSION).device_version

    def close(self):
        """Closes the device's modules (unregister, unload), then destroys it (idempotent)."""
        if self._finalizer.detach() is not None:
            _release_device(self._state)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def device_count():
    return cudla.device_get_count()
