"""The few CUDA driver calls the high-level API needs on a GPU machine, through ctypes on libcuda.so.1
(present wherever a GPU is; nothing to build, no CUDA toolkit, no PyTorch or CuPy needed):

- device memory for a module's staging buffers on a GPU machine, where hybrid mode takes CUDA device
  memory (softdla's CUDA backend, as a Jetson's cuDLA), with the copies to and from it;
- waiting for a stream, so Module.run returns with its outputs written;
- DeviceArray: device memory with __cuda_array_interface__, for outputs when no framework array is at hand.

Everything works in the primary context of the current CUDA device (0 unless the process chose another),
which is where the CUDA runtime, and so softdla's CUDA backend, PyTorch and CuPy, also work."""
import ctypes
import threading

import numpy as np

_lock = threading.Lock()
_driver = None      # the loaded libcuda, once tried
_why_not = None     # why it could not be used
_contexts = {}      # device ordinal -> primary context (retained for the life of the process)


class CudaError(RuntimeError):
    pass


def _load():
    global _driver, _why_not
    with _lock:
        if _driver is not None or _why_not is not None:
            return _driver
        try:
            lib = ctypes.CDLL("libcuda.so.1")
            status = lib.cuInit(0)
            if status != 0:
                raise OSError(f"cuInit returned {status}")
        except (OSError, AttributeError) as e:
            _why_not = f"the CUDA driver is not usable ({e})"
            return None
        u64, vp, i32 = ctypes.c_uint64, ctypes.c_void_p, ctypes.c_int
        signatures = {
            "cuCtxGetDevice": [ctypes.POINTER(i32)],
            "cuDevicePrimaryCtxRetain": [ctypes.POINTER(vp), i32],
            "cuCtxSetCurrent": [vp],
            "cuCtxGetCurrent": [ctypes.POINTER(vp)],
            "cuMemAlloc_v2": [ctypes.POINTER(u64), ctypes.c_size_t],
            "cuMemFree_v2": [u64],
            "cuMemcpyHtoDAsync_v2": [u64, vp, ctypes.c_size_t, vp],
            "cuMemcpyDtoH_v2": [vp, u64, ctypes.c_size_t],
            "cuMemsetD8_v2": [u64, ctypes.c_ubyte, ctypes.c_size_t],
            "cuStreamSynchronize": [vp],
            "cuPointerGetAttribute": [vp, i32, u64],
            "cuGetErrorString": [i32, ctypes.POINTER(ctypes.c_char_p)],
        }
        for name, args in signatures.items():
            getattr(lib, name).argtypes = args
            getattr(lib, name).restype = i32
        _driver = lib
        return lib


def available():
    """True where the CUDA driver loads and initializes (a GPU machine)."""
    return _load() is not None


def why_unavailable():
    _load()
    return _why_not


def _check(status, what):
    if status != 0:
        text = ctypes.c_char_p()
        _driver.cuGetErrorString(status, ctypes.byref(text))
        raise CudaError(f"{what} failed: CUDA error {status} ({(text.value or b'?').decode()})")


def _make_current():
    """Makes a context current on this thread: the thread's own if it has one, else the primary
    context of device 0 (what the CUDA runtime would use)."""
    lib = _load()
    if lib is None:
        raise CudaError(_why_not)
    current = ctypes.c_void_p()
    if lib.cuCtxGetCurrent(ctypes.byref(current)) == 0 and current.value:
        return
    with _lock:
        ctx = _contexts.get(0)
        if ctx is None:
            ctx = ctypes.c_void_p()
            _check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0), "cuDevicePrimaryCtxRetain")
            _contexts[0] = ctx
    _check(lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


def current_device():
    _make_current()
    dev = ctypes.c_int()
    _check(_driver.cuCtxGetDevice(ctypes.byref(dev)), "cuCtxGetDevice")
    return dev.value


_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, _CU_MEMORYTYPE_DEVICE = 2, 2


def is_device_pointer(ptr):
    """True for memory CUDA knows as device (or managed) memory; False for host memory or without CUDA."""
    if not available():
        return False
    _make_current()
    kind = ctypes.c_uint(0)
    status = _driver.cuPointerGetAttribute(ctypes.byref(kind), _CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr)
    return status == 0 and kind.value == _CU_MEMORYTYPE_DEVICE


def synchronize(stream):
    """Waits for the work on `stream` (a cudaStream_t / CUstream as int; 0 is the legacy default stream)."""
    _make_current()
    _check(_driver.cuStreamSynchronize(ctypes.c_void_p(stream or None)), "cuStreamSynchronize")


def copy_to_device(dst, src, stream):
    """Copies the bytes of the C-contiguous NumPy array `src` to device address `dst`, ordered on `stream`
    (from pageable memory the call returns once src has been read; the transfer may still be under way,
    so only work on the same stream may rely on it)."""
    _make_current()
    _check(_driver.cuMemcpyHtoDAsync_v2(dst, src.ctypes.data, src.nbytes, ctypes.c_void_p(stream or None)),
           "cuMemcpyHtoDAsync")


def copy_to_host(dst, src):
    """Copies device address `src` into the C-contiguous NumPy array `dst` (synchronous)."""
    _make_current()
    _check(_driver.cuMemcpyDtoH_v2(dst.ctypes.data, src, dst.nbytes), "cuMemcpyDtoH")


class DeviceMemory:
    """cuMemAlloc'd bytes, zero-filled, freed when the object is collected (allocations are 256-byte
    aligned, more than the 32 bytes cudlaMemRegister needs)."""

    def __init__(self, nbytes):
        _make_current()
        ptr = ctypes.c_uint64()
        _check(_driver.cuMemAlloc_v2(ctypes.byref(ptr), max(int(nbytes), 1)), f"cuMemAlloc of {nbytes} bytes")
        self.ptr, self.nbytes = ptr.value, int(nbytes)
        _check(_driver.cuMemsetD8_v2(self.ptr, 0, max(self.nbytes, 1)), "cuMemsetD8")

    def __del__(self):
        ptr, self.ptr = getattr(self, "ptr", 0), 0
        if ptr and _driver is not None:
            try:
                _make_current()
                _driver.cuMemFree_v2(ptr)
            except Exception:  # noqa: BLE001 (interpreter shutdown: the driver frees it with the context)
                pass


class DeviceArray:
    """A C-contiguous array in device memory that any CUDA framework can take without a copy through
    __cuda_array_interface__ (torch.as_tensor(a, device="cuda"), cupy.asarray(a), numba.cuda.as_cuda_array(a)).
    Module.run returns these for GPU runs whose inputs are neither PyTorch tensors nor CuPy arrays."""

    def __init__(self, shape, dtype):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        self._memory = DeviceMemory(self.nbytes)

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self._memory.ptr, False),
                "strides": None, "version": 3, "stream": None}  # written before run() returned: no stream

    def get(self):
        """A NumPy copy (what CuPy's ndarray.get() returns)."""
        out = np.empty(self.shape, self.dtype)
        copy_to_host(out, self._memory.ptr)
        return out

    def __repr__(self):
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype.name}, ptr=0x{self._memory.ptr:x})"
