"""Float global average pooling (the window is the whole plane, one output per plane), which runs sixteen
planes a vector on AVX-512 (src/engine/cpu/pool.cpp): within tolerance of NumPy's float64 mean, and the
same bits as the plane-by-plane loop (the portable and avx2 paths), for fp16 and fp32, plane counts
past whole groups of 16, batches, windows from 1x1 to 8x8, and planes holding NaN, infinities or
values whose sum passes the fp16 range."""
import numpy as np
import pytest

from sdla_testkit import formats as F
from sdla_testkit import reference as R
from sdla_testkit import writer

import test_cpu_isa_paths as paths
from test_depthwise_f16 import _run_all

SHAPES = [(1, 1280, 7, 7), (2, 35, 5, 8), (1, 17, 1, 1), (3, 3, 8, 7), (1, 64, 4, 4)]  # windows up to the DLA's 8x8


def build(shape, dtype, x):
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
def test_within_tolerance_and_same_bits_on_every_path(dtype, tmp_path):
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
        cases.append((build(shape, dtype, x), x))
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
