"""Deconvolution, pooling, LRN, resize, concat, slice, shuffle, softmax, abs, reduce-max and precision
conversion against NumPy, in every precision each op supports on the DLA."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdla_testkit import formats as F
from sdla_testkit import reference as R
from sdla_testkit import writer
from sdla_testkit.engine import default_backend, run_graph

FLOATS = [np.float32, np.float16]
PREC = ["fp32", "fp16", "int8"]


def random_input(rng, shape, prec):
    if prec == "int8":
        return rng.integers(-128, 128, shape).astype(np.int8)
    return rng.standard_normal(shape).astype(np.float32 if prec == "fp32" else np.float16)


def check(got, ref, prec):
    if prec == "int8":
        np.testing.assert_array_equal(got, ref)
    elif prec == "fp32":
        assert R.rel_err(got, ref) < 1e-5
    else:
        assert R.rel_l2(got, ref) < 1e-3


def dtype_of(prec):
    return {"fp32": np.float32, "fp16": np.float16, "int8": np.int8}[prec]


def single_op(kind, x, out_shape, params, prec, scale=0.1, out_scale=None, out_fmt=F.LINEAR):
    g = writer.Graph()
    xi = g.input("x", x.shape, x.dtype, scale)
    y = g.tensor("y", out_shape, dtype_of(prec), scale if out_scale is None else out_scale)
    g.op(kind, [xi], y, params)
    g.output(y, out_fmt)
    return run_graph(g, x)


# ------------------------------------------------------------------ deconvolution
@settings(max_examples=40, deadline=None)
@given(st.sampled_from(PREC), st.integers(1, 6), st.integers(1, 9), st.integers(1, 6), st.integers(1, 6),
       st.integers(1, 5), st.integers(1, 5), st.integers(1, 4), st.integers(1, 4), st.integers(0, 2 ** 31))
def test_deconv(prec, c, k, h, w, r, s, sh, sw, seed):
    rng = np.random.default_rng(seed)
    x = random_input(rng, (1, c, h, w), prec)
    wt = random_input(rng, (c, k, r, s), prec)
    oshape = (1, k, (h - 1) * sh + r, (w - 1) * sw + s)
    g = writer.Graph()
    xi = g.input("x", x.shape, x.dtype, 0.1)
    y = g.tensor("y", oshape, x.dtype, 0.2)
    if prec == "int8":
        post = writer.sdp([writer.sdp_step("relu")], multiplier=[3], shift=[10])
    else:
        post = writer.sdp([writer.sdp_step("relu")])
    g.op("Deconv", [xi], y, g.params("Deconv", weights=g.constant(wt, x.dtype), strideH=sh, strideW=sw, post=post))
    g.output(y)
    acc = R.deconv_acc(x, wt, (sh, sw), exact=prec == "int8")
    ref = R.sdp_int8(R.sat32(acc), [("relu", {})], [3], [10]) if prec == "int8" else np.maximum(acc, 0)
    check(run_graph(g, x), ref, prec)


def test_deconv_upsampling_stride_equals_kernel():
    """Point-pillar style upsampling: stride == kernel (DLA-SW FAQ)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 8, 5, 7)).astype(np.float32)
    wt = rng.standard_normal((8, 4, 2, 2)).astype(np.float32)
    g = writer.Graph()
    xi = g.input("x", x.shape, np.float32)
    y = g.tensor("y", (1, 4, 10, 14), np.float32)
    g.op("Deconv", [xi], y, g.params("Deconv", weights=g.constant(wt, np.float32), strideH=2, strideW=2,
                                     post=writer.sdp()))
    g.output(y)
    assert R.rel_err(run_graph(g, x), R.deconv_acc(x, wt, (2, 2))) < 1e-5


# ------------------------------------------------------------------ pooling
@st.composite
def pool_case(draw):
    kh, kw = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    pads = (draw(st.integers(0, min(7, kh - 1))), draw(st.integers(0, min(7, kw - 1))),
            draw(st.integers(0, min(7, kh - 1))), draw(st.integers(0, min(7, kw - 1))))
    sh, sw = draw(st.integers(1, 16)), draw(st.integers(1, 16))
    h = max(1, kh - pads[0] - pads[2]) + draw(st.integers(0, 12))
    w = max(1, kw - pads[1] - pads[3]) + draw(st.integers(0, 12))
    return dict(shape=(draw(st.integers(1, 2)), draw(st.integers(1, 35)), h, w), kernel=(kh, kw),
                stride=(sh, sw), pads=pads, seed=draw(st.integers(0, 2 ** 31)))


def pool_out(c):
    h, w = c["shape"][2:]
    return ((h + c["pads"][0] + c["pads"][2] - c["kernel"][0]) // c["stride"][0] + 1,
            (w + c["pads"][1] + c["pads"][3] - c["kernel"][1]) // c["stride"][1] + 1)


def pool_valid(c):
    oh, ow = pool_out(c)
    return (oh - 1) * c["stride"][0] < c["shape"][2] + c["pads"][0] and \
        (ow - 1) * c["stride"][1] < c["shape"][3] + c["pads"][1]


@settings(max_examples=120, deadline=None)
@given(pool_case(), st.sampled_from(PREC), st.sampled_from(["max", "avg"]), st.booleans())
def test_pool(c, prec, kind, exclude):
    if not pool_valid(c):
        return
    rng = np.random.default_rng(c["seed"])
    x = random_input(rng, c["shape"], prec)
    oh, ow = pool_out(c)
    params = writer.Graph.params("Pool", kind=0 if kind == "max" else 1, kernelH=c["kernel"][0],
                                 kernelW=c["kernel"][1], strideH=c["stride"][0], strideW=c["stride"][1],
                                 padTop=c["pads"][0], padLeft=c["pads"][1], padBottom=c["pads"][2],
                                 padRight=c["pads"][3], excludePadding=exclude)
    got = single_op("Pool", x, c["shape"][:2] + (oh, ow), params, prec)
    ref = R.pool(x, kind, c["kernel"], c["stride"], c["pads"], exclude, prec == "int8")
    check(got, ref, prec)


def test_avg_pool_q16_is_not_exact_division():
    """3x3 average of nine 1s is 1, but of a sum 4 is rnd(rnd(4*0x5555/2^16)*0x5555/2^16) = 0 (4/9 = 0.44)."""
    x = np.zeros((1, 1, 3, 3), np.int8)
    x[0, 0, 0, :] = [2, 1, 1]
    params = writer.Graph.params("Pool", kind=1, kernelH=3, kernelW=3, strideH=1, strideW=1)
    assert single_op("Pool", x, (1, 1, 1, 1), params, "int8").item() == 0
    x[0, 0] = 127  # sum 1143 -> 1143 * 21845 / 65536 = 381.0 -> 381 * 21845 / 65536 = 127.0
    assert single_op("Pool", x, (1, 1, 1, 1), params, "int8").item() == 127
    x[0, 0] = -5  # -45 / 9: -45*21845/65536 = -14.99 -> -15 -> -15*21845/65536 = -4.99 -> -5
    assert single_op("Pool", x, (1, 1, 1, 1), params, "int8").item() == -5


def test_xavier_rejects_exclusive_padding():
    x = np.zeros((1, 1, 4, 4), np.float16)
    g = writer.Graph(target="xavier")
    xi = g.input("x", x.shape, np.float16)
    y = g.tensor("y", (1, 1, 4, 4), np.float16)
    g.op("Pool", [xi], y, g.params("Pool", kind=1, kernelH=3, kernelW=3, strideH=1, strideW=1, padTop=1,
                                   padLeft=1, padBottom=1, padRight=1, excludePadding=True))
    g.output(y)
    with pytest.raises(Exception, match="Xavier"):
        run_graph(g, x)


# ------------------------------------------------------------------ LRN
@settings(max_examples=30, deadline=None)
@given(st.sampled_from(FLOATS), st.sampled_from([3, 5, 7, 9]), st.integers(1, 20), st.integers(0, 2 ** 31))
def test_lrn(dtype, size, c, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, c, 5, 6)).astype(dtype)
    alpha, beta, bias = 1e-2, 0.75, 2.0
    got = single_op("Lrn", x, x.shape, writer.Graph.params("Lrn", size=size, alpha=alpha, beta=beta, bias=bias),
                    "fp32" if dtype == np.float32 else "fp16")
    check(got, R.lrn(x, size, alpha, beta, bias), "fp32" if dtype == np.float32 else "fp16")


def test_lrn_rejects_int8():
    x = np.zeros((1, 4, 2, 2), np.int8)
    with pytest.raises(Exception, match="FP16"):
        single_op("Lrn", x, x.shape, writer.Graph.params("Lrn", size=3, alpha=1.0, beta=0.5, bias=1.0), "int8")


# ------------------------------------------------------------------ resize
@settings(max_examples=80, deadline=None)
@given(st.sampled_from(PREC), st.sampled_from(["nearest", "bilinear"]), st.integers(0, 2), st.integers(1, 5),
       st.integers(1, 7), st.integers(1, 7), st.integers(1, 4), st.integers(1, 4), st.integers(0, 2 ** 31))
def test_resize(prec, mode, rule, c, h, w, sh, sw, seed):
    rng = np.random.default_rng(seed)
    x = random_input(rng, (1, c, h, w), prec)
    params = writer.Graph.params("Resize", mode=0 if mode == "nearest" else 1, scaleH=sh, scaleW=sw, nearest=rule)
    got = single_op("Resize", x, (1, c, h * sh, w * sw), params, prec)
    check(got, R.resize(x, mode, (sh, sw), rule, prec == "int8"), prec)


def test_resize_nearest_large_factor():
    x = np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3)
    params = writer.Graph.params("Resize", mode=0, scaleH=32, scaleW=17)
    got = single_op("Resize", x, (1, 1, 64, 51), params, "fp32")
    np.testing.assert_array_equal(got, np.repeat(np.repeat(x, 32, 2), 17, 3))


# ------------------------------------------------------------------ concat, slice, shuffle
@settings(max_examples=40, deadline=None)
@given(st.sampled_from(PREC), st.lists(st.integers(1, 40), min_size=2, max_size=5), st.integers(1, 5),
       st.integers(1, 5), st.integers(0, 2 ** 31))
def test_concat(prec, channels, h, w, seed):
    rng = np.random.default_rng(seed)
    xs = [random_input(rng, (2, c, h, w), prec) for c in channels]
    g = writer.Graph()
    ins = [g.input(f"x{i}", x.shape, x.dtype, 0.1) for i, x in enumerate(xs)]
    y = g.tensor("y", (2, sum(channels), h, w), xs[0].dtype, 0.1)
    g.op("Concat", ins, y)
    g.output(y, F.CHW32 if prec == "int8" else (F.CHW16 if prec == "fp16" else F.LINEAR))
    np.testing.assert_array_equal(run_graph(g, *xs), np.concatenate(xs, axis=1))


def test_concat_int8_needs_shared_scale():
    g = writer.Graph()
    a = g.input("a", (1, 2, 2, 2), np.int8, 0.1)
    b = g.input("b", (1, 2, 2, 2), np.int8, 0.2)
    y = g.tensor("y", (1, 4, 2, 2), np.int8, 0.1)
    g.op("Concat", [a, b], y)
    g.output(y)
    with pytest.raises(Exception, match="share one scale"):
        run_graph(g, np.zeros((1, 2, 2, 2), np.int8), np.zeros((1, 2, 2, 2), np.int8))


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(PREC), st.data())
def test_slice(prec, data):
    shape = (2, data.draw(st.integers(1, 20)), data.draw(st.integers(1, 9)), data.draw(st.integers(1, 9)))
    start = [0] + [data.draw(st.integers(0, shape[i] - 1)) for i in (1, 2, 3)]
    size = [shape[0]] + [data.draw(st.integers(1, shape[i] - start[i])) for i in (1, 2, 3)]
    x = random_input(np.random.default_rng(0), shape, prec)
    got = single_op("Slice", x, tuple(size), writer.Graph.params("Slice", start=start), prec)
    np.testing.assert_array_equal(got, x[:, start[1]:start[1] + size[1], start[2]:start[2] + size[2],
                                         start[3]:start[3] + size[3]])


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(PREC), st.permutations([1, 2, 3]), st.integers(1, 6), st.integers(1, 6), st.integers(1, 6),
       st.booleans())
def test_shuffle(prec, perm, c, h, w, reshape):
    x = random_input(np.random.default_rng(1), (2, c, h, w), prec)
    perm = [0] + list(perm)
    t = x.transpose(perm)
    out_shape = (2, 1, 1, c * h * w) if reshape else t.shape
    got = single_op("Shuffle", x, out_shape, writer.Graph.params("Shuffle", perm=perm), prec)
    np.testing.assert_array_equal(got, t.reshape(out_shape))


# ------------------------------------------------------------------ softmax, abs, reduce max, convert
@settings(max_examples=30, deadline=None)
@given(st.sampled_from(FLOATS), st.integers(1, 3), st.integers(1, 30), st.integers(1, 5), st.integers(1, 5))
def test_softmax(dtype, axis, c, h, w):
    x = (np.random.default_rng(c * h * w).standard_normal((2, c, h, w)) * 3).astype(dtype)
    prec = "fp32" if dtype == np.float32 else "fp16"
    check(single_op("Softmax", x, x.shape, writer.Graph.params("Softmax", axis=axis), prec), R.softmax(x, axis), prec)


def test_softmax_not_on_xavier():
    g = writer.Graph(target="xavier")
    xi = g.input("x", (1, 4, 1, 1), np.float16)
    y = g.tensor("y", (1, 4, 1, 1), np.float16)
    g.op("Softmax", [xi], y, g.params("Softmax", axis=1))
    g.output(y)
    with pytest.raises(Exception, match="Orin"):
        run_graph(g, np.zeros((1, 4, 1, 1), np.float16))


@pytest.mark.parametrize("prec", PREC)
def test_abs(prec):
    x = random_input(np.random.default_rng(2), (1, 5, 7, 9), prec)
    if prec == "int8":
        x.flat[0] = -128
        ref = np.minimum(np.abs(x.astype(np.int64)), 127).astype(np.int8)
    else:
        ref = np.abs(x)
    np.testing.assert_array_equal(single_op("Unary", x, x.shape, writer.Graph.params("Unary", kind=0), prec), ref)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(PREC), st.sets(st.sampled_from([1, 2, 3]), min_size=1))
def test_reduce_max(prec, axes):
    x = random_input(np.random.default_rng(3), (2, 6, 5, 4), prec)
    ref = x.max(axis=tuple(sorted(axes)), keepdims=True)
    got = single_op("ReduceMax", x, ref.shape, writer.Graph.params("ReduceMax", axes=sorted(axes)), prec)
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("src,dst", [("int8", "fp16"), ("int8", "fp32"), ("fp16", "int8"), ("fp32", "int8"),
                                     ("fp32", "fp16"), ("fp16", "fp32"), ("int8", "int8")])
def test_convert(src, dst):
    rng = np.random.default_rng(4)
    x = random_input(rng, (1, 3, 4, 5), src)
    if src != "int8":
        x = (x * 5).astype(x.dtype)
        x.flat[:4] = [0.25, -0.25, 0.75, -0.75]  # ties at scale 0.5: away from zero -> 1, -1, 2, -2
    in_scale, out_scale = 0.1, (0.5 if src != "int8" else 0.07)
    got = single_op("Convert", x, x.shape, None, dst, scale=in_scale, out_scale=out_scale)
    real = x.astype(np.float32) * np.float32(in_scale) if src == "int8" else x.astype(np.float32)
    if dst == "int8":
        ref = R.quantize(real, out_scale)
        if src != "int8":
            np.testing.assert_array_equal(got.flat[:4], [1, -1, 2, -2])
    else:
        ref = real.astype(dtype_of(dst))
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("prec", ["fp32", "fp16"])
def test_max_pool_nan_reaches_exactly_the_windows_that_hold_it(prec):
    """A NaN input makes every output whose window covers it NaN (inside the row and over the padding),
    and no other; the rest equal NumPy's maximum."""
    dtype = np.float32 if prec == "fp32" else np.float16
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 9, 40)).astype(dtype)
    x[0, 0, 4, 0] = np.nan   # under the left padding
    x[0, 1, 2, 21] = np.nan  # in the middle of a row
    params = writer.Graph.params("Pool", kind=0, kernelH=3, kernelW=3, strideH=2, strideW=2, padTop=1, padLeft=1,
                                 padBottom=1, padRight=1)
    got = np.asarray(single_op("Pool", x, (1, 2, 5, 20), params, prec), np.float32)
    padded = np.pad(x.astype(np.float32), ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    win = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))[:, :, ::2, ::2]
    has_nan = np.isnan(win).any(axis=(-1, -2))
    ref = np.where(has_nan, np.nan, np.nanmax(np.where(np.isnan(win), -np.inf, win), axis=(-1, -2)))
    assert has_nan.sum() == 3  # one window over the first, two over the second
    np.testing.assert_array_equal(np.isnan(got), has_nan)
    np.testing.assert_array_equal(got[~has_nan], ref[~has_nan].astype(dtype).astype(np.float32))


@pytest.mark.parametrize("prec", ["fp32", "fp16"])
def test_max_pool_of_signed_zeros_is_plus_zero(prec):
    """A window whose maximum is zero and holds both zeros gives +0 in either order (NUMERICS.md), and
    +-inf inputs in FP16 saturate to +-65504."""
    dtype = np.float32 if prec == "fp32" else np.float16
    x = np.full((1, 1, 2, 36), -5.0, dtype)
    x[0, 0, 0, 0::4], x[0, 0, 1, 1::4] = -0.0, 0.0   # -0 first in row-major order
    x[0, 0, 0, 2::4], x[0, 0, 1, 3::4] = 0.0, -0.0   # +0 first
    params = writer.Graph.params("Pool", kind=0, kernelH=2, kernelW=2, strideH=2, strideW=2)
    got = np.asarray(single_op("Pool", x, (1, 1, 1, 18), params, prec), dtype).ravel()
    assert np.all(got == 0), got
    if default_backend() == "cpu":  # the CUDA backend may give either zero (NUMERICS.md)
        assert not np.any(np.signbit(got)), got
    if dtype == np.float16:
        y = np.full((1, 1, 2, 2), -7.0, dtype)
        y[0, 0, 0, 0] = np.inf
        top = np.asarray(single_op("Pool", y, (1, 1, 1, 1), params, prec), dtype).item()
        y[0, 0, 0, 0], y[:, :, 1:, :] = -np.inf, -np.inf
        y[0, 0, 0, 1] = -np.inf
        bottom = np.asarray(single_op("Pool", y, (1, 1, 1, 1), params, prec), dtype).item()
        assert (top, bottom) == (65504.0, -65504.0)
