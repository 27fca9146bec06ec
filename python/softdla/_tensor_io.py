"""What Module.run does with each input and output before and after the task: checks, conversions, and
which memory the DLA reads and writes. The rule is to copy only what the format forces:

- A NumPy input already in the tensor's stored form (its dtype, C-contiguous, 32-byte aligned) whose
  format is `linear` is read by the task where it lies. Anything else is converted and packed once,
  into a buffer of the module's (the pack is the only copy; a dtype conversion adds one).
- A NumPy `out=` array in the stored form of a `linear` output is written by the task directly. Without
  out=, a `linear` output of the type returned (float32, or the stored type with raw=True) is returned
  as the buffer the task wrote; other outputs are unpacked (and converted) once.
- GPU arrays (CUDA array interface or DLPack) are never copied or converted: they must already be in
  the stored form (see gpu_form_error).

Errors name the tensor, its stored type, format and shape."""
import numpy as np

from . import formats
from ._gpu_arrays import GpuArray

ALIGNMENT = 32  # cudlaMemRegister's requirement


def aligned_empty(nbytes, dtype=np.uint8, shape=None):
    """Uninitialized host memory of nbytes, 64-byte aligned, as an array of dtype (and shape)."""
    raw = np.empty(nbytes + 64, np.uint8)
    off = (-raw.ctypes.data) % 64
    a = raw[off:off + nbytes].view(dtype)
    return a if shape is None else a.reshape(shape)


def is_aligned(ptr):
    return ptr % ALIGNMENT == 0


def dla_shape(shape):
    """The DLA's NCHW view of an array of this shape, as the builder maps rank < 4 tensors
    ([K] -> [1,K,1,1], [N,K] -> [N,K,1,1], [N,C,W] -> [N,C,1,W]); None for rank > 4."""
    shape = tuple(int(d) for d in shape)
    return {0: (1, 1, 1, 1), 1: (1, *shape, 1, 1), 2: (*shape, 1, 1), 3: shape[:2] + (1,) + shape[2:],
            4: shape}.get(len(shape))


def _host_array(value):
    if isinstance(value, np.ndarray):
        # A subclass (np.matrix stays 2-D whatever the reshape) is read as the plain array it holds.
        return value if type(value) is np.ndarray else value.view(np.ndarray)
    device = getattr(value, "__dlpack_device__", None)
    if callable(device) and not hasattr(value, "__array__") and not hasattr(value, "__array_interface__"):
        return np.from_dlpack(value)  # a CPU DLPack producer: a view, not a copy
    return np.asarray(value)


def input_array(t, value):
    """value as an array of t's NCHW shape and stored type: checked for shape, dtype and (INT8)
    finiteness. A view of value when it already has the stored type (no copy)."""
    def expect():  # only when there is an error to name the tensor in
        return f"input {t.describe()}"
    try:
        x = _host_array(value)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{expect()}: cannot make an array of {type(value).__name__} ({e})") from None
    kind = x.dtype.kind
    if kind == "b" or kind not in "iuf":
        raise TypeError(f"{expect()} takes real numbers (float or integer arrays; int8 codes for int8 inputs), "
                        f"not {x.dtype}" + (": cast 0/1 masks to float explicitly" if kind == "b" else ""))
    if dla_shape(x.shape) != t.shape:
        raise ValueError(f"{expect()} needs shape {t.shape}, got {x.shape}")
    x = x.reshape(t.shape)
    if t.dtype == np.int8:
        if x.dtype == np.int8:  # codes
            return x
        if t.scale is None:
            raise ValueError(f"{expect()} is int8 and this libcudla reports no scale: pass int8 codes")
        if kind == "f":
            bad = ~np.isfinite(x)
            if bad.any():
                first = tuple(int(i) for i in np.argwhere(bad)[0])
                raise ValueError(f"{expect()} is quantized to int8 and takes finite values only; "
                                 f"{int(bad.sum())} value(s) are NaN or infinite (first {x[first]} at {first})")
        # Finite values beyond the int8 range saturate (as the DLA's quantize does); clipping first in
        # float64 keeps huge values (1e300) from overflowing float32 on the way.
        limit = 256.0 * float(t.scale)
        return formats.quantize(np.clip(x.astype(np.float64), -limit, limit), t.scale)
    # Wider floats, and integers (70000 has no float16; int64 and uint64 reach past float32 too): a value the
    # stored type cannot hold is an error, never an infinity that turns the outputs into NaN.
    if kind in "iu" or (kind == "f" and np.dtype(x.dtype).itemsize > t.dtype.itemsize):
        with np.errstate(over="ignore", invalid="ignore"):
            y = x.astype(t.dtype)
        overflow = np.isinf(y) & (np.isfinite(x) if kind == "f" else True)
        if overflow.any():
            first = tuple(int(i) for i in np.argwhere(overflow)[0])
            raise ValueError(f"{expect()}: {int(overflow.sum())} finite value(s) overflow {t.dtype.name} "
                             f"(first {x[first]} at {first}; largest {float(np.finfo(t.dtype).max):g})")
        return y
    return x.astype(t.dtype, copy=False)  # narrower floats: exact


def reads_in_place(t, x):
    """Whether the task can read input array x (from input_array) where it lies."""
    return t.format == formats.LINEAR and x.flags.c_contiguous and is_aligned(x.ctypes.data)


def packed_input(t, x):
    """x packed into a new aligned buffer of t's format: the one copy for inputs that need one."""
    buf = aligned_empty(t.size)
    formats.pack(x, t.format, t.target, out=buf)
    return buf


def gpu_form(t):
    """(shape, dtype) a GPU array for tensor t must have: the NCHW tensor in its stored type for `linear`
    tensors, else the bytes of its DLA format (TensorInfo.size of them, see softdla.formats.layout)."""
    if t.format == formats.LINEAR:
        return t.shape, t.dtype
    return (t.size,), np.dtype(np.uint8)


def gpu_form_error(t, g, role):
    """Why GPU array g cannot be tensor t's memory, or None."""
    what = f"{role} {t.describe()}"
    shape, dtype = gpu_form(t)
    if t.format == formats.LINEAR:
        if g.dtype != dtype or dla_shape(g.shape) != shape:
            return (f"{what}: a GPU array is used in place, so it must be {dtype.name} of shape {shape}, not "
                    f"{g.dtype.name} {g.shape} (convert it on the GPU, or pass a NumPy array to have it converted)")
    elif g.nbytes != t.size:
        return (f"{what}: a GPU array is used in place, so it must hold the {t.size} bytes of the {t.format_name} "
                f"layout (softdla.formats.layout), not {g.nbytes} bytes ({g.dtype.name} {g.shape})")
    if not g.c_contiguous:
        return f"{what}: the GPU array must be C-contiguous"
    if not is_aligned(g.ptr):
        return f"{what}: the GPU array's address 0x{g.ptr:x} is not {ALIGNMENT}-byte aligned (cudlaMemRegister needs it)"
    if role == "output" and g.readonly:
        return f"{what}: the GPU array is read-only"
    return None


def result_dtype(t, raw):
    """What run() returns for output t on the host: float32 values, or the stored type with raw=True."""
    return t.dtype if raw else np.dtype(np.float32)


def check_host_out(t, out, raw):
    """out= array for output t: a writable C-contiguous NumPy array of the output's shape and returned type."""
    want = result_dtype(t, raw)
    what = f"out= for output {t.describe()}"
    if not isinstance(out, np.ndarray):
        raise TypeError(f"{what} must be a NumPy array or a GPU array, not {type(out).__name__}")
    if dla_shape(out.shape) != t.shape or out.dtype != want:
        raise ValueError(f"{what} must be {want.name} of shape {t.shape}{' (raw=True)' if raw else ''}, "
                         f"not {out.dtype.name} {out.shape}")
    if not out.flags.writeable or not out.flags.c_contiguous:
        raise ValueError(f"{what} must be writable and C-contiguous")


def writes_in_place(t, out, raw):
    """Whether the task can write host array out (checked by check_host_out) directly."""
    return t.format == formats.LINEAR and result_dtype(t, raw) == t.dtype and is_aligned(out.ctypes.data)


def output_buffer(t, raw):
    """A new aligned buffer for output t: shaped as the result when the task's bytes are the result."""
    if t.format == formats.LINEAR and result_dtype(t, raw) == t.dtype:
        return aligned_empty(t.size, t.dtype, t.shape)
    return aligned_empty(t.size)


def host_result(t, buf, raw, out=None):
    """Output t from the bytes the task wrote into host buffer buf: buf itself when it already is the
    result, else unpacked and converted once, into out when given."""
    want = result_dtype(t, raw)
    if out is None and buf.shape == t.shape and buf.dtype == want:
        return buf
    view = formats._unpacked_view(buf, t.shape, t.dtype, t.format, t.target)
    target = np.empty(t.shape, want) if out is None else out.reshape(t.shape)
    if not raw and t.dtype == np.int8 and t.scale is not None:
        np.multiply(view, np.float32(t.scale), out=target, dtype=np.float32)  # formats.dequantize, in place
    else:
        np.copyto(target, view, casting="unsafe")
    return target if out is None else out


def memory_of(a):
    """(address, bytes) of a NumPy or GPU array."""
    if isinstance(a, GpuArray):
        return a.ptr, a.nbytes
    return a.ctypes.data, a.nbytes
