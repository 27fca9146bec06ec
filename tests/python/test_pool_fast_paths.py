"""The pooling kernels' AVX-512 fast paths (src/engine/cpu/pool.cpp) against NumPy and, bit for bit, against
the plane-by-plane loops (the portable and avx2 paths):

- float global average pooling (the window is the whole plane, one output per plane), sixteen planes a
  vector: fp16 and fp32, plane counts past whole groups of 16, batches, windows from 1x1 to 8x8, and planes
  holding NaN, infinities or values whose sum passes the fp16 range;
- INT8 global average pooling (each plane's exact sum, then the Q16 divisions), exact against NumPy;
- INT8 max pooling of stride 2 along the rows, 32 outputs a step: kernels 1 to 8 wide, padding on either
  side up to the kernel, odd and even widths, rows wider than one vector, windows entirely over the
  padding;
- float max pooling over a line padded with -inf, of stride 2 from its even and odd values (16 outputs a
  step), of other strides from every window position: the same shapes in fp16 and fp32, with NaN, both
  zeros and infinities; fp16 on the halves' order-preserving 16-bit keys (32 a vector)."""
import numpy as np
import pytest

from sdla_testkit import formats as F
from sdla_testkit import reference as R
from sdla_testkit import writer

import test_cpu_isa_paths as paths
from test_depthwise_f16 import _run_all

SHAPES = [(1, 1280, 7, 7), (2, 35, 5, 8), (1, 17, 1, 1), (3, 3, 8, 7), (1, 64, 4, 4)]  # windows up to the DLA's 8x8


def build_average(shape, dtype, x):
    n, c, h, w = shape
    g = writer.Graph()
    xi = g.input("x", shape, dtype)
    y = g.tensor("y", (n, c, 1, 1), dtype)
    params = writer.Graph.params("Pool", kind=1, kernelH=h, kernelW=w, strideH=h, strideW=w, padTop=0, padLeft=0,
                                 padBottom=0, padRight=0, excludePadding=False)
    g.op("Pool", [xi], y, params)
    g.output(y, F.LINEAR)
    return g


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_global_average_within_tolerance_and_same_bits_on_every_path(dtype, tmp_path):
    rng = np.random.default_rng(3)
    cases = []
    for i, shape in enumerate(SHAPES):
        x = (rng.standard_normal(shape) * 3).astype(dtype)
        if i == 1:  # edge values in a few planes: NaN, infinities, -0, sums past 65504
            x[0, 0, 0, 0], x[0, 1, 2, 3], x[1, 2, 4, 7] = np.nan, np.inf, -np.inf
            x[1, 3, 1, 1], x[1, 4] = -np.inf, np.asarray(-0.0, dtype)
            x[0, 5, 0, 0] = x[0, 5, 0, 1] = np.inf
            x[0, 6, 0, 0], x[0, 6, 0, 1] = np.inf, -np.inf  # inf - inf: a NaN no input held
            x[1, 7] = np.asarray(60000, dtype)
            x[0, 8, 0, 0] = -np.asarray(np.nan, dtype)
        cases.append((build_average(shape, dtype, x), x))
    jobs = [(g, x) for g, x in cases]
    portable = _run_all(jobs, tmp_path, "portable", 1)
    runs = {"auto-1": _run_all(jobs, tmp_path, "auto", 1), "auto-2": _run_all(jobs, tmp_path, "auto", 2)}
    if paths._active("avx2")[0] == "avx2":
        runs["avx2"] = _run_all(jobs, tmp_path, "avx2", 1)
    for i, (g, x) in enumerate(jobs):
        n, c = x.shape[:2]
        for name, outs in runs.items():
            assert outs[i] == portable[i], (x.shape, name)
        got = F.unpack(runs["auto-2"][i], [n, c, 1, 1], dtype, F.LINEAR, g.target).astype(np.float64)
        want = R.pool(x, "avg", x.shape[2:], x.shape[2:], (0, 0, 0, 0))
        if dtype == np.float16:
            want = np.clip(want, -65504, 65504)
        finite = np.isfinite(want)
        assert np.array_equal(np.isnan(got), np.isnan(want)), x.shape
        assert np.array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
        assert R.rel_l2(got[finite], want[finite]) < (1e-3 if dtype == np.float16 else 1e-6), x.shape


def test_int8_global_average_exact_and_same_bytes_on_every_path(tmp_path):
    """INT8 global averages (each plane's sum, then the Q16 divisions) against NumPy's integer reference:
    the float cases' shapes and the largest window (8 x 8), with planes of only -128 or only 127."""
    rng = np.random.default_rng(5)
    jobs = []
    for shape in SHAPES + [(2, 40, 8, 8)]:
        x = rng.integers(-128, 128, shape).astype(np.int8)
        x[0, 0], x[0, -1] = -128, 127
        g = writer.Graph()
        xi = g.input("x", shape, np.int8, 0.1)
        y = g.tensor("y", shape[:2] + (1, 1), np.int8, 0.1)
        g.op("Pool", [xi], y, writer.Graph.params("Pool", kind=1, kernelH=shape[2], kernelW=shape[3], strideH=shape[2],
                                                  strideW=shape[3], padTop=0, padLeft=0, padBottom=0, padRight=0,
                                                  excludePadding=False))
        g.output(y, F.LINEAR)
        jobs.append((g, x))
    portable = _run_all(jobs, tmp_path, "portable", 1)
    runs = {"auto-1": _run_all(jobs, tmp_path, "auto", 1), "auto-2": _run_all(jobs, tmp_path, "auto", 2)}
    if paths._active("avx2")[0] == "avx2":
        runs["avx2"] = _run_all(jobs, tmp_path, "avx2", 1)
    for i, (g, x) in enumerate(jobs):
        for name, outs in runs.items():
            assert outs[i] == portable[i], (x.shape, name)
        got = F.unpack(portable[i], list(x.shape[:2]) + [1, 1], np.int8, F.LINEAR, g.target)
        want = R.pool(x, "avg", x.shape[2:], x.shape[2:], (0, 0, 0, 0), False, True)
        np.testing.assert_array_equal(got, want, err_msg=str(x.shape))


# (n, c, h, w, kernel, stride, pads top/left/bottom/right)
MAX_CASES = [
    (1, 64, 112, 112, (3, 3), (2, 2), (1, 1, 1, 1)),  # ResNet's max pool
    (2, 5, 9, 131, (2, 2), (2, 2), (0, 0, 0, 0)),     # rows past two vectors, even kernel
    (1, 3, 7, 8, (3, 8), (1, 2), (2, 7, 0, 7)),       # the widest kernel, windows over the padding only
    (1, 4, 10, 17, (5, 1), (3, 2), (0, 0, 4, 0)),     # one column wide, odd width
    (3, 2, 6, 64, (1, 4), (2, 2), (0, 3, 0, 2)),      # a row of exactly one vector
    (1, 3, 5, 70, (3, 5), (2, 2), (1, 2, 1, 2)),      # 35 outputs a row: taps 2 to 4 of a 32-output step
                                                       # reach into the next step's columns
]


def build_max(case, x):
    n, c, h, w, kernel, stride, pads = case
    g = writer.Graph()
    int8 = x.dtype == np.int8
    xi = g.input("x", x.shape, x.dtype, 0.1) if int8 else g.input("x", x.shape, x.dtype)
    oh = (h + pads[0] + pads[2] - kernel[0]) // stride[0] + 1
    ow = (w + pads[1] + pads[3] - kernel[1]) // stride[1] + 1
    y = g.tensor("y", (n, c, oh, ow), x.dtype, 0.1) if int8 else g.tensor("y", (n, c, oh, ow), x.dtype)
    params = writer.Graph.params("Pool", kind=0, kernelH=kernel[0], kernelW=kernel[1], strideH=stride[0],
                                 strideW=stride[1], padTop=pads[0], padLeft=pads[1], padBottom=pads[2],
                                 padRight=pads[3], excludePadding=False)
    g.op("Pool", [xi], y, params)
    g.output(y, F.LINEAR)
    return g, (n, c, oh, ow)


def _max_pools_on_every_path(inputs, tmp_path):
    """Each MAX_CASES max pool of its input, run on the portable path and on the machine's best path with
    one and two threads; asserts the same bytes everywhere and yields (case, input, output bytes)."""
    built = [(build_max(case, x), x, case) for case, x in zip(MAX_CASES, inputs)]
    jobs = [(g, x) for (g, _), x, _ in built]
    portable = _run_all(jobs, tmp_path, "portable", 1)
    runs = {"auto-1": _run_all(jobs, tmp_path, "auto", 1), "auto-2": _run_all(jobs, tmp_path, "auto", 2)}
    for i, ((g, shape), x, case) in enumerate(built):
        for name, outs in runs.items():
            assert outs[i] == portable[i], (case, name)
        yield case, x, F.unpack(runs["auto-2"][i], list(shape), x.dtype, F.LINEAR, g.target)


def test_int8_max_stride2_exact_and_same_bytes_on_every_path(tmp_path):
    rng = np.random.default_rng(8)
    inputs = []
    for case in MAX_CASES:
        x = rng.integers(-128, 128, case[:4]).astype(np.int8)
        x[0, 0, :2] = -128  # windows of the smallest value only
        inputs.append(x)
    for case, x, got in _max_pools_on_every_path(inputs, tmp_path):
        np.testing.assert_array_equal(got, R.pool(x, "max", case[4], case[5], case[6], False, True), err_msg=str(case))


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_float_max_same_bits_on_every_path(dtype, tmp_path):
    rng = np.random.default_rng(9)
    inputs = []
    for case in MAX_CASES:
        x = (rng.standard_normal(case[:4]) * 4).astype(dtype)
        x[0, 0, 0, :6] = [np.nan, -0.0, 0.0, np.inf, -np.inf, -0.0]
        x[-1, -1, -1, -3:] = [-0.0, np.nan, -np.inf]
        inputs.append(x)
    for case, x, got in _max_pools_on_every_path(inputs, tmp_path):
        got = got.astype(np.float64)
        want = R.pool(x, "max", case[4], case[5], case[6])
        if dtype == np.float16:
            want = np.clip(want, -65504, 65504)  # infinities stored as the largest finite fp16
        assert np.array_equal(np.isnan(got), np.isnan(want)), case
        assert np.array_equal(got[~np.isnan(want)], want[~np.isnan(want)]), case
        # +0 wherever a window's maximum is zero and the window holds a +0 (with or without a -0)
        plus_zero = R.pool(((x == 0) & ~np.signbit(x)).astype(np.float32), "max", case[4], case[5], case[6]) > 0
        assert not np.signbit(got[(got == 0) & plus_zero]).any(), case
