"""GPU arrays as Module.run sees them: any object with __cuda_array_interface__ (PyTorch, CuPy, Numba, JAX,
softdla's DeviceArray) or a DLPack capsule on a CUDA device, reduced to an address, a shape, a dtype and
the stream its producer wrote it on. Nothing is copied: the DLA task reads and writes that memory."""
import ctypes
import sys

import numpy as np

from . import _cuda

_DL_CUDA, _DL_CUDA_MANAGED = 2, 13
_DL_TYPES = {(0, 8): np.int8, (0, 16): np.int16, (0, 32): np.int32, (0, 64): np.int64, (1, 8): np.uint8,
             (2, 16): np.float16, (2, 32): np.float32, (2, 64): np.float64}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                             ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor)))]

_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
_capsule_rename = ctypes.pythonapi.PyCapsule_SetName
_capsule_rename.restype, _capsule_rename.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]


class GpuArray:
    """One GPU array: obj (what the caller passed), ptr, shape, dtype, nbytes, c_contiguous, readonly, and
    stream: the producer's stream to wait for (CUDA array interface v3), or None. release() ends a
    DLPack borrow (a no-op otherwise); call it once the task is done."""

    def __init__(self, obj, ptr, shape, dtype, strides, readonly, stream, release=None):
        self.obj, self.ptr, self.shape, self.dtype = obj, int(ptr), tuple(int(d) for d in shape), np.dtype(dtype)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        self.c_contiguous = strides is None or _is_c_contiguous(self.shape, strides, self.dtype.itemsize)
        self.readonly, self.stream, self._release = bool(readonly), stream, release

    def release(self):
        release, self._release = self._release, None
        if release is not None:
            release()


def _is_c_contiguous(shape, strides, itemsize):
    expect = itemsize
    for d, s in zip(reversed(shape), reversed(strides)):
        if d != 1 and s != expect:
            return False
        expect *= d
    return True


def _from_cuda_array_interface(obj, cai):
    if cai.get("mask") is not None:
        raise TypeError("masked CUDA arrays are not supported")
    ptr, readonly = cai["data"]
    return GpuArray(obj, ptr or 0, cai["shape"], np.dtype(cai["typestr"]), cai.get("strides"), readonly,
                    cai.get("stream"))


def _from_dlpack(obj, stream):
    # DLPack's stream argument for CUDA: 1 is the legacy default stream (0 is not allowed), else a handle.
    capsule = obj.__dlpack__(stream=stream or 1)
    address = _capsule_pointer(capsule, b"dltensor")
    managed = ctypes.cast(address, ctypes.POINTER(_DLManagedTensor))
    t = managed.contents.dl_tensor
    key = (int(t.dtype.code), int(t.dtype.bits))
    if t.dtype.lanes != 1 or key not in _DL_TYPES:
        raise TypeError(f"DLPack dtype code {t.dtype.code}, {t.dtype.bits} bits x {t.dtype.lanes} is not a NumPy type")
    dtype = np.dtype(_DL_TYPES[key])
    shape = [t.shape[i] for i in range(t.ndim)]
    strides = None if not t.strides else [t.strides[i] * dtype.itemsize for i in range(t.ndim)]
    # The consumer owns the capsule's tensor: renaming it tells the producer's destructor so, and the
    # deleter (called once the task is done) lets the producer free it.
    _capsule_rename(capsule, b"used_dltensor")

    def release():
        if managed.contents.deleter:
            managed.contents.deleter(managed)
    # The data stream-ordered before `stream`, as the protocol promises: no producer stream to wait for.
    return GpuArray(obj, (t.data or 0) + t.byte_offset, shape, dtype, strides, False, None, release)


def gpu_array(value, stream=0):
    """A GpuArray for a CUDA array (device or managed memory), None for anything else (NumPy arrays,
    lists, CPU tensors). stream: the stream the task will run on, for DLPack producers to order their work."""
    try:
        cai = value.__cuda_array_interface__
    except Exception:  # noqa: BLE001 (CPU tensors raise their own errors for the attribute)
        cai = None
    if isinstance(cai, dict):
        return _from_cuda_array_interface(value, cai)
    dlpack_device = getattr(value, "__dlpack_device__", None)
    if callable(dlpack_device) and not isinstance(value, np.ndarray):
        device_type, _ = dlpack_device()
        if int(device_type) in (_DL_CUDA, _DL_CUDA_MANAGED):
            return _from_dlpack(value, stream)
    return None


_TORCH_DTYPES = ("float32", "float16", "int8", "uint8")


def empty_like_framework(example, shape, dtype):
    """A new C-contiguous GPU array for an output, from the framework the inputs came from: a PyTorch tensor
    on the same device for PyTorch inputs, a CuPy array for CuPy inputs, else a softdla DeviceArray."""
    dtype = np.dtype(dtype)
    root = type(example).__module__.split(".")[0]
    if root == "torch" and dtype.name in _TORCH_DTYPES:
        torch = sys.modules["torch"]
        return torch.empty(shape, dtype=getattr(torch, dtype.name), device=example.device)
    if root == "cupy":
        cupy = sys.modules["cupy"]
        with example.device:
            return cupy.empty(shape, dtype)
    return _cuda.DeviceArray(shape, dtype)
