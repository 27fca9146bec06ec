"""softdla._cudla_ext.StagedTensor, Module.run's C++ conversions for NumPy data, against the NumPy path it
replaces (softdla._tensor_io.input_array + formats.pack, and _tensor_io.host_result): the same bytes in the
staging buffer and the same output values for every format, stored type and edge value, and a refusal
(False) for everything the NumPy path must handle or report itself."""
import types

import numpy as np
import pytest

from softdla import cudla, formats
from softdla import _tensor_io as io

ext = cudla._ext

# (stored dtype, format, channels) combinations that are DLA formats.
CASES = [
    (np.int8, formats.LINEAR, 5), (np.int8, formats.DLA_LINEAR, 5), (np.int8, formats.DLA_HWC4, 3),
    (np.int8, formats.DLA_HWC4, 1), (np.int8, formats.CHW32, 37),
    (np.float16, formats.LINEAR, 3), (np.float16, formats.DLA_LINEAR, 6), (np.float16, formats.DLA_HWC4, 4),
    (np.float16, formats.CHW16, 19),
    (np.float32, formats.DLA_LINEAR, 2),
]


def tensor(dtype, fmt, c, scale=0.0371, shape=None, target="orin"):
    shape = shape or (2, c, 3, 7)
    dtype = np.dtype(dtype)
    size = formats.layout(shape, dtype, fmt, target)[0]
    t = types.SimpleNamespace(name="t", shape=shape, dtype=dtype, format=fmt, target=target,
                              scale=scale if dtype == np.int8 else None, size=size)
    t.describe = lambda: "'t'"
    return t


def staged(t):
    buf = io.aligned_empty(t.size)
    buf[:] = 0xAB  # the converter must write every byte, padding included
    size, s0, line, surf, batch, cpg = formats.layout(t.shape, t.dtype, t.format, t.target)
    s = ext.StagedTensor(*t.shape, formats.CUDLA_TYPE[t.dtype], s0, line, surf, batch, cpg, size,
                         float(t.scale or 0.0), buf.ctypes.data, t.format == formats.LINEAR)
    return s, buf


def values(t, rng):
    """float32 values with the edges of each conversion: halves of the int8 step, saturation, huge values,
    signed zeros, fp16 ties and subnormals."""
    x = rng.standard_normal(t.shape).astype(np.float32) * 3
    flat = x.reshape(-1)
    edges = [0.0, -0.0, 0.5, -0.5, 1.5, -2.5, 127.5, -128.5, 130.0, -1e30, 1e30, 3.4e38, -3.4e38,
             6e-8, -3e-8, 1.0009765625, 65504.0, -65504.0, 65519.0]
    if t.dtype == np.int8:
        edges = [e * t.scale if abs(e) < 1e3 else e for e in edges]
    n = min(len(edges), flat.size)
    flat[:n] = np.array(edges[:n], np.float32)
    return x


@pytest.mark.parametrize("dtype,fmt,c", CASES)
@pytest.mark.parametrize("target", ["orin", "xavier"])
def test_put_packs_what_numpy_packs(dtype, fmt, c, target):
    t = tensor(dtype, fmt, c, target=target)
    s, buf = staged(t)
    x = values(t, np.random.default_rng(c))
    if t.dtype == np.float16:  # the NumPy path raises for the overflows; drop them here
        x = np.clip(x, -65504, 65504)
    assert s.put(x)
    want = formats.pack(io.input_array(t, x), t.format, t.target)
    assert bytes(buf) == want


@pytest.mark.parametrize("dtype,fmt,c", CASES)
@pytest.mark.parametrize("raw", [False, True])
def test_take_unpacks_what_numpy_unpacks(dtype, fmt, c, raw):
    t = tensor(dtype, fmt, c)
    s, buf = staged(t)
    rng = np.random.default_rng(7)
    buf[:] = rng.integers(0, 256, t.size, dtype=np.uint8)
    if t.dtype == np.float16:  # finite halves only: NaN payloads are compared apart
        buf.view(np.float16)[~np.isfinite(buf.view(np.float16))] = 1.5
    out = np.empty(t.shape, t.dtype if raw else np.float32)
    assert s.take(out, raw)
    want = io.host_result(t, buf, raw)
    assert out.dtype == want.dtype and out.tobytes() == np.ascontiguousarray(want).tobytes()


def test_stored_type_arrays_are_copied_as_they_are():
    t = tensor(np.int8, formats.CHW32, 33)
    s, buf = staged(t)
    codes = np.random.default_rng(1).integers(-128, 128, t.shape, dtype=np.int8)
    assert s.put(codes)
    assert bytes(buf) == formats.pack(codes, t.format, t.target)
    t16 = tensor(np.float16, formats.DLA_HWC4, 4)
    s16, buf16 = staged(t16)
    h = np.random.default_rng(2).standard_normal(t16.shape).astype(np.float16)
    assert s16.put(h)
    assert bytes(buf16) == formats.pack(h, t16.format, t16.target)


def test_lower_rank_arrays_map_as_the_builder_maps_them():
    t = tensor(np.float16, formats.DLA_LINEAR, 10, shape=(2, 10, 1, 1))
    s, buf = staged(t)
    x = np.arange(20, dtype=np.float32).reshape(2, 10) / 7
    assert s.put(x)
    assert bytes(buf) == formats.pack(x.reshape(t.shape).astype(np.float16), t.format, t.target)
    assert not s.put(x.reshape(4, 5))
    out = np.empty((2, 10), np.float32)
    assert s.take(out, False)
    np.testing.assert_array_equal(out, x.astype(np.float16).astype(np.float32))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_values_are_left_to_the_numpy_path(bad):
    for dtype in (np.int8, np.float16):
        t = tensor(dtype, formats.DLA_LINEAR, 2)
        s, _ = staged(t)
        x = np.zeros(t.shape, np.float32)
        x[1, 1, 2, 3] = bad
        assert not s.put(x)


def test_fp16_overflow_is_left_to_the_numpy_path():
    t = tensor(np.float16, formats.DLA_LINEAR, 2)
    s, _ = staged(t)
    x = np.zeros(t.shape, np.float32)
    x[0, 0, 0, 0] = 65520.0  # rounds to infinity in fp16: run() raises for it
    assert not s.put(x)
    x[0, 0, 0, 0] = 65519.0  # rounds to 65504
    assert s.put(x)


def test_other_arrays_are_declined():
    t = tensor(np.int8, formats.DLA_LINEAR, 3)
    s, _ = staged(t)
    x = np.ones(t.shape, np.float32)
    assert not s.put(x.astype(np.float64))           # other dtypes: NumPy converts them
    assert not s.put(x.astype(np.int32))
    assert not s.put(np.ones((2, 3, 7, 3), np.float32).transpose(0, 1, 3, 2))  # not C-contiguous
    assert not s.put(np.ones((2, 3, 3, 8), np.float32))  # wrong shape
    assert not s.put(x.astype(np.float16))           # fp16 values for an int8 tensor
    assert not s.take(np.empty(t.shape, np.float64), False)
    assert not s.take(np.empty(t.shape, np.float32), True)  # raw wants int8
    ro = np.empty(t.shape, np.float32)
    ro.flags.writeable = False
    assert not s.take(ro, False)


def test_int8_without_scale_takes_codes_only():
    t = tensor(np.int8, formats.DLA_LINEAR, 3, scale=0.0)
    s, buf = staged(t)
    assert not s.put(np.ones(t.shape, np.float32))
    codes = np.full(t.shape, -7, np.int8)
    assert s.put(codes)
    out = np.empty(t.shape, np.float32)
    assert s.take(out, False)
    assert (out == -7).all()


def test_aligned_linear_input_of_the_stored_type_is_read_in_place():
    # run() hands such an array to the task without any copy; the converter leaves it to that path.
    t = tensor(np.float16, formats.LINEAR, 2)
    s, _ = staged(t)
    a = io.aligned_empty(int(np.prod(t.shape)) * 2, np.float16, t.shape)
    a[...] = 1.5
    assert not s.put(a)
    assert s.put(a.astype(np.float32))


def test_dla_linear_input_of_the_stored_type_is_packed_here():
    # Rows already 64 bytes wide: the same bytes as `linear`, but only a `linear` tensor is read in place.
    t = tensor(np.int8, formats.DLA_LINEAR, 2, shape=(1, 2, 3, 64))
    s, buf = staged(t)
    codes = io.aligned_empty(2 * 3 * 64, np.int8, t.shape)
    codes[...] = 5
    assert s.put(codes)
    assert bytes(buf) == formats.pack(codes, t.format, t.target)


def test_scales_the_converter_cannot_follow_disable_it():
    """A reported int8 scale of 0 (or NaN) is multiplied as it is by the NumPy path: no converters then."""
    from softdla import runtime
    good = tensor(np.float16, formats.LINEAR, 2)
    for scale in (0.0, float("nan"), -1.0):
        bad = tensor(np.int8, formats.DLA_LINEAR, 2, scale=scale)
        assert runtime._staged_tensors([good], [io.aligned_empty(good.size)], [bad], [io.aligned_empty(bad.size)]) == \
            ([], [])
    ok = tensor(np.int8, formats.DLA_LINEAR, 2)
    ins, outs = runtime._staged_tensors([good], [io.aligned_empty(good.size)], [ok], [io.aligned_empty(ok.size)])
    assert len(ins) == 1 and len(outs) == 1


def test_layout_that_overruns_the_buffer_is_refused():
    with pytest.raises(ValueError):
        ext.StagedTensor(1, 4, 4, 4, 4, 1, 64, 256, 1024, 1, 512, 0.1, io.aligned_empty(512).ctypes.data, False)
    with pytest.raises(ValueError):
        ext.StagedTensor(1, 1, 1, 1, 3, 1, 64, 64, 64, 1, 64, 0.1, io.aligned_empty(64).ctypes.data, False)


@pytest.mark.skipif(__import__("softdla")._cuda.available(),
                    reason="the load-time host buffers exist where the library takes host memory")
def test_module_run_converts_in_cpp_and_matches_the_numpy_path(monkeypatch):
    """Module.run of float32 data on a CPU machine takes the C++ converters (input_array is not called) and
    returns what the NumPy path returns for the same values given as float64; what must be reported still
    is, by the NumPy path."""
    import os

    import softdla
    from sdla_testkit.engine import ROOT
    models = os.path.join(ROOT, "examples", "models")
    lb = softdla.build(os.path.join(models, "digits.onnx"), int8=True, fp16=True,
                       calib_data=os.path.join(models, "digits_calib"), progress=False)
    images = np.load(os.path.join(models, "digits_test_images.npy")).astype(np.float32)[:8]
    calls = []
    real = io.input_array
    monkeypatch.setattr(io, "input_array", lambda t, v: calls.append(v.dtype) or real(t, v))
    with softdla.Device(0) as dev:
        m = dev.load(lb)
        for im in images:
            fast = m.run([im[None]])["probabilities"]
            assert not calls
            slow = m.run([im[None].astype(np.float64)])["probabilities"]
            assert calls.pop() == np.float64
            np.testing.assert_array_equal(fast, slow)
            raw_fast = m.run([im[None]], raw=True)["probabilities"]
            assert raw_fast.dtype == np.float16
            np.testing.assert_array_equal(raw_fast.astype(np.float32), fast)
        bad = images[:1].copy()
        bad[0, 0, 2, 5] = np.nan
        with pytest.raises(ValueError, match="NaN or infinite"):
            m.run([bad])
