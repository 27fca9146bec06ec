"""softdla.formats: NumPy pack/unpack between NCHW arrays and every DLA I/O format (docs/FORMATS.md),
written independently of the C++ engine, which the tests check against it."""
import numpy as np

LINEAR, DLA_LINEAR, DLA_HWC4, CHW16, CHW32 = range(5)
FORMAT_NAMES = {"linear": LINEAR, "dla_linear": DLA_LINEAR, "dla_hwc4": DLA_HWC4, "chw16": CHW16, "chw32": CHW32}
ELEM = {np.dtype(np.float32): 4, np.dtype(np.float16): 2, np.dtype(np.int8): 1}
CUDLA_TYPE = {np.dtype(np.float32): 1, np.dtype(np.float16): 2, np.dtype(np.int8): 4}


def _round_up(x, m):
    return -(-x // m) * m


def _checked(shape, dtype, fmt, target):
    """(shape, dtype, format constant) after the checks the engine makes (src/loadable/io_layout.cpp):
    an unknown format, target or type, or a combination the DLA has no layout for, is a ValueError, never
    another format's layout."""
    fmt = FORMAT_NAMES.get(fmt, fmt) if isinstance(fmt, str) else fmt
    if isinstance(fmt, bool) or fmt not in range(5):
        raise ValueError(f"format {fmt!r} is not one of {', '.join(FORMAT_NAMES)} (or softdla.formats' constants)")
    if target not in ("orin", "xavier"):
        raise ValueError(f"target {target!r} is not 'orin' or 'xavier'")
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"{dtype!r} is not a NumPy dtype") from None
    if dtype not in ELEM:
        raise ValueError(f"dtype {dtype} is not a DLA I/O type (float32, float16, int8)")
    name = list(FORMAT_NAMES)[fmt]
    if dtype == np.float32 and fmt not in (LINEAR, DLA_LINEAR):  # padded rows: a descriptor's strides may say so
        raise ValueError(f"float32 I/O is laid out linear (it is not a DLA precision), not {name}")
    if (fmt == CHW16 and dtype != np.float16) or (fmt == CHW32 and dtype != np.int8):
        raise ValueError(f"{name} holds {'float16' if fmt == CHW16 else 'int8'} only, not {dtype}")
    if len(shape) != 4 or any(int(d) < 1 for d in shape):
        raise ValueError(f"shape {tuple(shape)} is not N, C, H, W of positive sizes")
    if fmt == DLA_HWC4 and shape[1] not in (1, 3, 4):
        raise ValueError(f"dla_hwc4 holds 1, 3 or 4 channels, not {shape[1]}")
    return tuple(int(d) for d in shape), dtype, fmt


def layout(shape, dtype, fmt, target="orin"):
    """(size, stride0, line, surface, batch, channels_per_group) in bytes."""
    (n, c, h, w), dtype, fmt = _checked(shape, dtype, fmt, target)
    e = ELEM[dtype]
    hwc4_align = 32 if target == "xavier" else 64  # dla_linear rows are 64 B aligned on every DLA
    if fmt == LINEAR:
        cpg, s0, line = 1, e, w * e
        surf = line * h
        batch = surf * c
    elif fmt == DLA_LINEAR:
        cpg, s0, line = 1, e, _round_up(w * e, 64)
        surf = line * h
        batch = surf * c
    elif fmt == DLA_HWC4:
        cpg = 1 if c == 1 else 4
        s0 = cpg * e
        line = _round_up(w * s0, hwc4_align)
        surf = line * h
        batch = surf
    else:
        cpg = 16 if fmt == CHW16 else 32
        s0, line = 32, w * 32
        surf = line * h
        batch = surf * (-(-c // cpg))
    return batch * n, s0, line, surf, batch, cpg


def pack(x, fmt, target="orin", out=None):
    """NCHW array -> bytes of the format (padding zero). With out= (a writable C-contiguous uint8 array of
    the format's size) the bytes are written there instead, and out is returned: one copy, no allocation."""
    x = np.asarray(x)
    if x.ndim != 4:
        raise ValueError(f"pack takes an N, C, H, W array, not one of shape {x.shape}")
    n, c, h, w = x.shape
    size, s0, line, surf, batch, cpg = layout(x.shape, x.dtype, fmt, target)
    fmt = _checked(x.shape, x.dtype, fmt, target)[2]
    buf = np.zeros(size, np.uint8) if out is None else out
    if buf.dtype != np.uint8 or buf.shape != (size,) or not buf.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous uint8 array of {size} bytes, not {buf.dtype} {buf.shape}")
    if out is not None:
        buf[:] = 0  # the padding
    e = x.dtype.itemsize
    v = buf.view(x.dtype)
    if fmt in (LINEAR, DLA_LINEAR):
        v.reshape(n, c, h, line // e)[..., :w] = x
    elif fmt == DLA_HWC4:
        v.reshape(n, h, line // e)[:, :, : w * cpg].reshape(n, h, w, cpg)[..., :c] = x.transpose(0, 2, 3, 1)
    else:
        groups = -(-c // cpg)
        blocks = v.reshape(n, groups, h, w, cpg)  # channel k of group g at [:, g, :, :, k]
        for g in range(groups):
            k = min(cpg, c - g * cpg)
            blocks[:, g, :, :, :k] = x[:, g * cpg:g * cpg + k].transpose(0, 2, 3, 1)
    return buf.tobytes() if out is None else out


def _unpacked_view(data, shape, dtype, fmt, target):
    """The NCHW tensor inside a buffer of the format, as a strided view of it (no copy)."""
    (n, c, h, w), dtype, fmt = _checked(shape, dtype, fmt, target)
    size, s0, line, surf, batch, cpg = layout(shape, dtype, fmt, target)
    e = dtype.itemsize
    raw = memoryview(data).cast("B")
    if raw.nbytes < size:
        raise ValueError(f"the buffer holds {raw.nbytes} bytes; {list(FORMAT_NAMES)[fmt]} {dtype} of shape "
                         f"{(n, c, h, w)} on {target} takes {size}")
    a = np.frombuffer(raw[:size], dtype)
    if fmt in (LINEAR, DLA_LINEAR):
        return a.reshape(n, c, h, line // e)[..., :w]
    if fmt == DLA_HWC4:
        v = a.reshape(n, h, line // e)[:, :, : w * cpg].reshape(n, h, w, cpg)[..., :c]
        return v.transpose(0, 3, 1, 2)
    groups = -(-c // cpg)
    return a.reshape(n, groups, h, w, cpg).transpose(0, 1, 4, 2, 3).reshape(n, groups * cpg, h, w)[:, :c]


def unpack(data, shape, dtype, fmt, target="orin", out=None):
    """Bytes of the format (bytes, bytearray, a NumPy buffer) -> a new NCHW array of `dtype`. With out= (an
    array of the NCHW shape) the values are written there, cast to its dtype, and out is returned."""
    view = _unpacked_view(data, shape, dtype, fmt, target)
    if out is None:
        return view.copy()
    if tuple(np.shape(out)) != tuple(view.shape):  # copyto would broadcast one batch into several
        raise ValueError(f"unpack: out has shape {tuple(np.shape(out))}; it must be the NCHW shape {tuple(view.shape)}")
    np.copyto(out, view, casting="unsafe")
    return out


def descriptor_name(name):
    """The name as a descriptor keeps it: its first 80 UTF-8 bytes, cut before a character the limit splits."""
    return name.encode("utf-8")[:80].decode("utf-8", errors="ignore")


def descriptor(name, shape, dtype, fmt, target="orin"):
    """The cudlaModuleTensorDescriptor fields softdla reports (docs/FORMATS.md)."""
    size, s0, line, surf, batch, cpg = layout(shape, dtype, fmt, target)
    shape, dtype, fmt = _checked(shape, dtype, fmt, target)
    if fmt in (LINEAR, DLA_LINEAR):
        data_format, category, pixel = 1, 2, 36
    elif fmt == DLA_HWC4:
        data_format, category = 2, 0
        if dtype == np.int8:
            pixel = 0 if shape[1] == 1 else 12
        else:
            pixel = 5 if shape[1] == 1 else 8
    else:
        data_format, category, pixel = 3, 2, 36
    return dict(name=descriptor_name(name), size=size, n=shape[0], c=shape[1], h=shape[2], w=shape[3],
                data_format=data_format, data_type=CUDLA_TYPE[dtype], data_category=category,
                pixel_format=pixel, pixel_mapping=0, stride=[s0, line, surf, batch, 0, 0, 0, 0])


def quantize(x, scale):
    """float -> int8 codes: round half away from zero, saturate (docs/NUMERICS.md); NaN -> 0."""
    q = np.asarray(x, np.float32) / np.float32(scale)
    q = np.where(np.isnan(q), 0, q).astype(np.float64)
    return np.clip(np.sign(q) * np.floor(np.abs(q) + 0.5), -128, 127).astype(np.int8)


def dequantize(q, scale):
    return np.asarray(q, np.int8).astype(np.float32) * np.float32(scale)


_TYPES = {1: np.dtype(np.float32), 2: np.dtype(np.float16), 4: np.dtype(np.int8)}


def from_descriptor(desc):
    """(dtype, format, target) of a tensor from its cudlaModuleTensorDescriptor fields."""
    dtype = _TYPES.get(int(desc.data_type))
    if dtype is None:
        raise ValueError(f"tensor '{desc.name}': data type {desc.data_type} is not fp32/fp16/int8")
    shape = (int(desc.n), int(desc.c), int(desc.h), int(desc.w))
    if desc.data_format == 2:
        fmt = DLA_HWC4
    elif desc.data_format == 3:
        fmt = CHW16 if dtype == np.float16 else CHW32
    else:
        fmt = LINEAR if int(desc.stride[1]) == shape[3] * dtype.itemsize else DLA_LINEAR
    for target in ("orin", "xavier"):
        size, s0, line, surf, batch, _ = layout(shape, dtype, fmt, target)
        if [s0, line, surf, batch] == [int(v) for v in desc.stride[:4]] and size == int(desc.size_):
            return dtype, fmt, target
    # Rows already aligned are linear, found above; any other strides are a layout this package cannot pack
    # (reading them as linear would feed the task misplaced rows).
    raise ValueError(f"tensor '{desc.name}': strides {list(desc.stride[:4])} and size {int(desc.size_)} match no "
                     f"DLA layout of {shape} {dtype.name} (docs/FORMATS.md)")
