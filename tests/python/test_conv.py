"""Convolution against NumPy: FP32 (1e-5 relative), FP16 (1e-3 relative L2), INT8 (exact) over the
DLA parameter range: kernel 1-32, stride 1-8, dilation, groups/depthwise, asymmetric padding, odd C."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sdla_testkit import formats as F
from sdla_testkit import reference as R
from sdla_testkit import writer
from sdla_testkit.engine import run_graph


@st.composite
def conv_cases(draw, big_kernels=False):
    groups = draw(st.sampled_from([1, 1, 1, 2, 3, 4]))
    depthwise = draw(st.booleans()) and groups == 1
    cg = 1 if depthwise else draw(st.integers(1, 9))
    kg = 1 if depthwise else draw(st.integers(1, 7))
    if depthwise:
        groups = draw(st.integers(1, 37))
    r = draw(st.integers(1, 32 if big_kernels else 5))
    s = draw(st.integers(1, 32 if big_kernels else 5))
    dh = draw(st.integers(1, 3 if r > 1 else 32))
    dw = draw(st.integers(1, 3 if s > 1 else 32))
    sh, sw = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    pads = [draw(st.integers(0, min(r - 1, 31))), draw(st.integers(0, min(s - 1, 31))),
            draw(st.integers(0, min(r - 1, 31))), draw(st.integers(0, min(s - 1, 31)))]
    eff_r, eff_s = (r - 1) * dh + 1, (s - 1) * dw + 1
    h = max(1, eff_r - pads[0] - pads[2]) + draw(st.integers(0, 9))
    w = max(1, eff_s - pads[1] - pads[3]) + draw(st.integers(0, 9))
    n = draw(st.integers(1, 2))
    return dict(n=n, c=cg * groups, k=kg * groups, h=h, w=w, r=r, s=s, stride=(sh, sw), dil=(dh, dw),
                pads=tuple(pads), groups=groups, seed=draw(st.integers(0, 2 ** 31)))


def out_hw(c):
    oh = (c["h"] + c["pads"][0] + c["pads"][2] - ((c["r"] - 1) * c["dil"][0] + 1)) // c["stride"][0] + 1
    ow = (c["w"] + c["pads"][1] + c["pads"][3] - ((c["s"] - 1) * c["dil"][1] + 1)) // c["stride"][1] + 1
    return oh, ow


def build_float(c, dtype, x_fmt=F.LINEAR, y_fmt=F.LINEAR):
    rng = np.random.default_rng(c["seed"])
    x = rng.standard_normal((c["n"], c["c"], c["h"], c["w"])).astype(dtype)
    wt = rng.standard_normal((c["k"], c["c"] // c["groups"], c["r"], c["s"])).astype(dtype)
    bias = rng.standard_normal(c["k"]).astype(np.float32)
    g = writer.Graph()
    xi = g.input("x", x.shape, dtype, fmt=x_fmt)
    oh, ow = out_hw(c)
    y = g.tensor("y", (c["n"], c["k"], oh, ow), dtype)
    post = writer.sdp([writer.sdp_step("bias", fvalues=bias)])
    g.op("Conv", [xi], y, g.conv_params(g.constant(wt, dtype), c["stride"], c["pads"], c["dil"], c["groups"], post))
    g.output(y, y_fmt)
    ref = R.sdp_float(R.conv_acc(x, wt, c["stride"], c["pads"], c["dil"], c["groups"]), [("bias", {"values": bias})])
    return g, x, ref


SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def fp32_error_ok(c, got, ref):
    """FP32 within 1e-5 of the output's magnitude, or of a thousandth of its terms' magnitude
    (conv(|x|, |w|)) where the sum cancels: an fp32 sum of K terms carries rounding error of order
    sqrt(K) ulps of the terms, not of the result (one 31x20 kernel over 8 channels summing to ~1 is 1.1e-5
    off on every fp32 path)."""
    rng = np.random.default_rng(c["seed"])
    x = np.abs(rng.standard_normal((c["n"], c["c"], c["h"], c["w"])))
    wt = np.abs(rng.standard_normal((c["k"], c["c"] // c["groups"], c["r"], c["s"])))
    terms = np.max(R.conv_acc(x, wt, c["stride"], c["pads"], c["dil"], c["groups"]))
    scale = max(float(np.max(np.abs(ref))), 1e-3 * float(terms))
    return float(np.max(np.abs(np.asarray(got, np.float64) - ref))) / scale < 1e-5


@settings(max_examples=60, **SETTINGS)
@given(conv_cases())
def test_conv_fp32(c):
    g, x, ref = build_float(c, np.float32)
    assert fp32_error_ok(c, run_graph(g, x), ref)


@settings(max_examples=60, **SETTINGS)
@given(conv_cases())
def test_conv_fp16(c):
    g, x, ref = build_float(c, np.float16)
    assert R.rel_l2(run_graph(g, x), ref) < 1e-3


# A batch over several image groups of the FP32/FP16 implicit GEMM (about 512 KiB of fp32 planes a
# group: 16 channels at 60 x 60 is about 240 KiB an image), 3x3, 1x1 and 3x3 of stride 2.
@pytest.mark.parametrize("r,stride,dtype", [(3, 1, np.float16), (1, 1, np.float16), (3, 2, np.float16),
                                            (3, 1, np.float32)])
def test_conv_float_batch_in_image_groups(r, stride, dtype):
    c = dict(n=3, c=16, k=24, h=60, w=60, r=r, s=r, stride=(stride, stride), dil=(1, 1), pads=(r // 2,) * 4,
             groups=1, seed=3)
    assert_float_conv(c, dtype)


# Fully connected layers (a 1x1 convolution over a 1x1 input: gemv_f32.h on x86): output channels past
# whole 128-channel blocks, batches of one to five images (groups of three share each weight load).
@pytest.mark.parametrize("n,c_in,k,dtype", [(1, 2048, 1000, np.float16), (2, 77, 203, np.float16),
                                            (5, 64, 129, np.float16), (4, 300, 10, np.float32)])
def test_fully_connected_float(n, c_in, k, dtype):
    c = dict(n=n, c=c_in, k=k, h=1, w=1, r=1, s=1, stride=(1, 1), dil=(1, 1), pads=(0, 0, 0, 0), groups=1, seed=k)
    assert_float_conv(c, dtype)


# INT8 fully connected layers (gemv_s8_vnni.h on AVX-512 VNNI, the GEMM elsewhere): exact, over input
# channels past whole quads, output channels past whole 128-channel blocks, batches of one to five, the
# window epilogue and the step-by-step one (a PReLU chain).
@pytest.mark.parametrize("n,c_in,k,post", [(1, 2048, 1000, "bias"), (2, 77, 203, "bias_relu"), (5, 64, 129, "prelu"),
                                           (4, 1, 10, "bias_relu"), (3, 1283, 130, "bias")])
def test_fully_connected_int8(n, c_in, k, post):
    c = dict(n=n, c=c_in, k=k, h=1, w=1, r=1, s=1, stride=(1, 1), dil=(1, 1), pads=(0, 0, 0, 0), groups=1, seed=k)
    rng = np.random.default_rng(c["seed"])
    spec = [("bias", {"values": rng.integers(-(2 ** 20), 2 ** 20, k)})]
    if post == "bias_relu":
        spec.append(("relu", {}))
    if post == "prelu":
        spec.append(("prelu", {"values": rng.integers(0, 2 ** 12, k), "shift": 12}))
    g, x, ref = build_int8(c, rng, spec)
    np.testing.assert_array_equal(run_graph(g, x), ref)


@pytest.mark.parametrize("n,c_in,k", [(1, 77, 203), (4, 1283, 130)])
def test_fully_connected_int8_low_bits(n, c_in, k):
    """Small sums passed through unscaled: every unit of the accumulator shows in the output (the offset-by-128
    correction, padding quads and images sharing a weight load all checked to the last bit)."""
    rng = np.random.default_rng(k)
    x = rng.integers(-2, 3, (n, c_in, 1, 1)).astype(np.int8)
    wt = np.zeros((k, c_in, 1, 1), np.int8)
    wt[:, :30] = rng.integers(-2, 3, (k, min(30, c_in), 1, 1))  # |sum| <= 120: within int8
    g = writer.Graph()
    xi = g.input("x", x.shape, np.int8, 0.05)
    y = g.tensor("y", (n, k, 1, 1), np.int8, 0.1)
    post = writer.sdp([], multiplier=np.full(k, 2 ** 30), shift=np.full(k, 30))
    g.op("Conv", [xi], y, g.conv_params(g.constant(wt, np.int8), (1, 1), (0, 0, 0, 0), (1, 1), 1, post))
    g.output(y, F.LINEAR)
    acc = R.conv_acc(x, wt, (1, 1), (0, 0, 0, 0), (1, 1), 1, exact=True)
    np.testing.assert_array_equal(run_graph(g, x), R.sdp_int8(acc, [], np.full(k, 2 ** 30), np.full(k, 30)))


def assert_float_conv(c, dtype):
    """Case c in dtype against NumPy: FP16 within 1e-3 relative L2, FP32 as fp32_error_ok."""
    g, x, ref = build_float(c, dtype)
    got = run_graph(g, x)
    if dtype == np.float16:
        assert R.rel_l2(got, ref) < 1e-3
    else:
        assert fp32_error_ok(c, got, ref)


@settings(max_examples=15, **SETTINGS)
@given(conv_cases(big_kernels=True))
def test_conv_fp32_large_kernels(c):
    g, x, ref = build_float(c, np.float32)
    assert fp32_error_ok(c, run_graph(g, x), ref)


def build_int8(c, rng, steps_spec=(), x_fmt=F.LINEAR, y_fmt=F.LINEAR, lut=0):
    x = rng.integers(-128, 128, (c["n"], c["c"], c["h"], c["w"])).astype(np.int8)
    wt = rng.integers(-128, 128, (c["k"], c["c"] // c["groups"], c["r"], c["s"])).astype(np.int8)
    kdim = c["c"] // c["groups"] * c["r"] * c["s"]
    # Output converter: scale accumulators of magnitude ~ 128*128*sqrt(kdim) down to int8 range.
    mult = rng.integers(1, 2 ** 15, c["k"])
    shift = np.full(c["k"], int(np.ceil(np.log2(128 * 128 * np.sqrt(kdim) * 2 ** 15 / 127))) + 1)
    g = writer.Graph()
    xi = g.input("x", x.shape, np.int8, 0.05, fmt=x_fmt)
    oh, ow = out_hw(c)
    y = g.tensor("y", (c["n"], c["k"], oh, ow), np.int8, 0.1)
    steps, ref_steps = [], []
    for kind, p in steps_spec:
        steps.append(writer.sdp_step(kind, ivalues=p.get("values"), shift=p.get("shift", 0), lo_i=p.get("lo", 0),
                                     hi_i=p.get("hi", 0)))
        ref_steps.append((kind, p))
    post = writer.sdp(steps, multiplier=mult, shift=shift, lut=lut, lut_input_scale=0.04)
    g.op("Conv", [xi], y, g.conv_params(g.constant(wt, np.int8), c["stride"], c["pads"], c["dil"], c["groups"], post))
    g.output(y, y_fmt)
    acc = R.sat32(R.conv_acc(x, wt, c["stride"], c["pads"], c["dil"], c["groups"], exact=True))
    table = None
    if lut:
        table = R.activation_lut("sigmoid" if lut == 1 else "tanh", 0.04, 0.1)
    ref = R.sdp_int8(acc, ref_steps, mult, shift, lut=table)
    return g, x, ref


@settings(max_examples=80, **SETTINGS)
@given(conv_cases(), st.sampled_from(["none", "bias", "bias_relu", "bn_clip", "prelu", "sigmoid", "tanh"]))
def test_conv_int8_exact(c, post):
    rng = np.random.default_rng(c["seed"])
    k = c["k"]
    spec, lut = [], 0
    if post in ("bias", "bias_relu", "prelu"):
        spec.append(("bias", {"values": rng.integers(-(2 ** 20), 2 ** 20, k)}))
    if post == "bias_relu":
        spec.append(("relu", {}))
    if post == "bn_clip":
        spec.append(("scale", {"values": rng.integers(-(2 ** 15), 2 ** 15, k), "shift": 14}))
        spec.append(("bias", {"values": rng.integers(-1000, 1000, k)}))
        spec.append(("clip", {"lo": 0, "hi": int(rng.integers(1, 2 ** 20))}))
    if post == "prelu":
        spec.append(("prelu", {"values": rng.integers(0, 2 ** 12, k), "shift": 12}))
    if post in ("sigmoid", "tanh"):
        lut = 1 if post == "sigmoid" else 2
    g, x, ref = build_int8(c, rng, spec, lut=lut)
    np.testing.assert_array_equal(run_graph(g, x), ref)


# Rows wide enough for the implicit GEMM's vector packing (16-pixel runs of 1, 2, 3 or 4 channels,
# stride 1 and 2, padding on either side, dilation) and the 1x1 stride-2 case that packs one phase.
@pytest.mark.parametrize("c_in,r,stride,pads,dil", [
    (8, 3, (1, 1), (1, 1, 1, 1), (1, 1)), (6, 3, (2, 2), (1, 0, 1, 2), (1, 1)), (5, 1, (2, 2), (0, 0, 0, 0), (1, 1)),
    (4, 7, (2, 2), (3, 3, 3, 3), (1, 1)), (7, 3, (1, 2), (2, 2, 2, 2), (2, 2)), (3, 5, (2, 1), (0, 4, 0, 1), (1, 1))])
def test_conv_int8_wide_rows(c_in, r, stride, pads, dil):
    c = dict(n=2, c=c_in, k=19, h=11, w=75, r=r, s=r, stride=stride, dil=dil, pads=pads, groups=1, seed=c_in * r)
    rng = np.random.default_rng(c["seed"])
    g, x, ref = build_int8(c, rng, [("bias", {"values": rng.integers(-(2 ** 16), 2 ** 16, 19)}), ("relu", {})])
    np.testing.assert_array_equal(run_graph(g, x), ref)


# 32 channels and more: the AMX-INT8 implicit GEMM on the amx path (conv_implicit.h; 16-quad tiles, so
# channels past whole 64-channel blocks, output channels past whole 32-row blocks and grids past whole
# 32-pixel blocks are padding), strided and dilated; vpdpbusd or int16 pairs on the other paths.
@pytest.mark.parametrize("c_in,k,r,stride,pads,dil", [
    (32, 32, 3, (1, 1), (1, 1, 1, 1), (1, 1)), (45, 50, 3, (2, 2), (1, 0, 1, 2), (1, 1)),
    (64, 17, 1, (2, 2), (0, 0, 0, 0), (1, 1)), (100, 70, 5, (1, 2), (2, 2, 2, 2), (2, 1)),
    (130, 33, 3, (1, 1), (2, 2, 2, 2), (2, 2))])
def test_conv_int8_many_channels(c_in, k, r, stride, pads, dil):
    c = dict(n=2, c=c_in, k=k, h=10, w=37, r=r, s=r, stride=stride, dil=dil, pads=pads, groups=1, seed=c_in + k)
    rng = np.random.default_rng(c["seed"])
    g, x, ref = build_int8(c, rng, [("bias", {"values": rng.integers(-(2 ** 16), 2 ** 16, k)}), ("relu", {})])
    np.testing.assert_array_equal(run_graph(g, x), ref)


# Output channel counts that the AVX-512 VNNI implicit GEMM shares out in lane blocks of different sizes
# (at most 48 channels a block, sizes made even: 64 as 32 + 32, 100 as 48 + 32 + 20, 161 as 48 + 48 + 48 + 17),
# with and without ReLU (signed results round their ties away from zero), on the machine's threads.
@pytest.mark.parametrize("k", [16, 64, 100, 161])
@pytest.mark.parametrize("relu", [False, True], ids=["bias", "bias_relu"])
def test_conv_int8_output_channels_in_uneven_blocks(k, relu):
    c = dict(n=2, c=24, k=k, h=13, w=21, r=3, s=3, stride=(1, 1), dil=(1, 1), pads=(1, 1, 1, 1), groups=1, seed=k)
    rng = np.random.default_rng(c["seed"])
    spec = [("bias", {"values": rng.integers(-(2 ** 16), 2 ** 16, k)})] + ([("relu", {})] if relu else [])
    g, x, ref = build_int8(c, rng, spec)
    np.testing.assert_array_equal(run_graph(g, x), ref)


# A batch whose packed input outgrows one group of images (conv_implicit.cpp packs and runs images in
# groups of about 512 KiB of packed input): 64 channels at 60 x 60 is about 240 KiB an image, so three
# images run as a group of two then one (the fused residual add's case: test_conv_residual_fusion.py).
# The small grids' lane tiles likewise: 256 channels at 14 x 14 pack to about 80 KiB an image, so nine
# images run as a group of six, then three.
@pytest.mark.parametrize("stride,cin,hw,n", [((1, 1), 64, 60, 3), ((2, 2), 64, 60, 3), ((1, 1), 256, 14, 9),
                                             ((2, 2), 256, 14, 9)])
def test_conv_int8_batch_in_image_groups(stride, cin, hw, n):
    c = dict(n=n, c=cin, k=40, h=hw, w=hw, r=3, s=3, stride=stride, dil=(1, 1), pads=(1, 1, 1, 1), groups=1, seed=7)
    rng = np.random.default_rng(c["seed"])
    g, x, ref = build_int8(c, rng, [("bias", {"values": rng.integers(-(2 ** 16), 2 ** 16, 40)}), ("relu", {})])
    np.testing.assert_array_equal(run_graph(g, x), ref)


# INT8 1x1 convolutions of stride 2 gather every second input column of every second row (copy_strided:
# on AVX-512 32 values a step under masks, no byte read past a row's last picked value): output rows of
# 1 to 41 values, under one step, exactly one, and past it, each against NumPy.
@pytest.mark.parametrize("h,w", [(3, 1), (7, 13), (6, 63), (9, 81), (4, 64)])
def test_conv_int8_1x1_stride2_rows_of_any_length(h, w):
    c = dict(n=2, c=20, k=24, h=h, w=w, r=1, s=1, stride=(2, 2), dil=(1, 1), pads=(0, 0, 0, 0), groups=1,
             seed=h * 100 + w)
    rng = np.random.default_rng(c["seed"])
    g, x, ref = build_int8(c, rng, [("bias", {"values": rng.integers(-(2 ** 14), 2 ** 14, 24)})])
    np.testing.assert_array_equal(run_graph(g, x), ref)


# Depthwise planes wide enough for the 64-output blocks and the widening's vector steps (stride 1 and 2).
@pytest.mark.parametrize("w,stride,pads", [(150, (1, 1), (1, 1, 1, 1)), (150, (2, 2), (1, 1, 1, 1)),
                                           (131, (2, 2), (0, 2, 1, 0)), (97, (1, 2), (1, 0, 1, 2))])
def test_depthwise_int8_wide_rows(w, stride, pads):
    c = dict(n=1, c=5, k=5, h=7, w=w, r=3, s=3, stride=stride, dil=(1, 1), pads=pads, groups=5, seed=w)
    rng = np.random.default_rng(c["seed"])
    g, x, ref = build_int8(c, rng, [("bias", {"values": rng.integers(-(2 ** 12), 2 ** 12, 5)})])
    np.testing.assert_array_equal(run_graph(g, x), ref)


# The VNNI depthwise kernel's geometries (src/engine/cpu/depthwise_s8_vnni.cpp): its specialised 3x3,
# 5x5 and 7x7 loops, the generic loop (1xS, Rx1, 4x4, 9 taps a row), widths below, at and past one
# 16-output block, and the fit limit (16 outputs' taps within 64 bytes: stride 4 with a 4-wide kernel
# fits, stride 4 with 5 taps or dilation 8 with 9 taps does not and takes the fp32 kernel), with a
# channel multiplier of 2 (each input plane used twice), asymmetric padding and the extreme weights.
@pytest.mark.parametrize("r,s,stride,pads,dil,w", [
    (3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 16), (3, 3, (2, 2), (0, 1, 1, 0), (1, 1), 33),
    (5, 5, (1, 1), (2, 2, 2, 2), (1, 1), 17), (7, 7, (2, 2), (3, 3, 3, 3), (1, 1), 40),
    (1, 9, (1, 1), (0, 4, 0, 4), (1, 1), 15), (6, 1, (1, 3), (2, 0, 3, 0), (1, 1), 50),
    (4, 4, (4, 4), (3, 3, 0, 0), (1, 1), 70), (3, 5, (4, 4), (1, 2, 1, 2), (1, 1), 70),
    (3, 3, (1, 1), (2, 2, 2, 2), (2, 2), 31), (2, 9, (1, 1), (1, 8, 1, 8), (1, 8), 90),
    # Planes of 8 outputs a row or fewer (MobileNetV2's 7x7 stages, stride 1 and 2), down to one output a
    # row, with padding, a 5x5 kernel, dilation and a tall stride.
    (3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 7), (3, 3, (2, 2), (1, 1, 1, 1), (1, 1), 14),
    (3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 5), (3, 3, (1, 1), (0, 0, 0, 0), (1, 1), 6),
    (5, 5, (1, 1), (2, 2, 2, 2), (1, 1), 3), (1, 1, (1, 1), (0, 0, 0, 0), (1, 1), 1),
    (3, 3, (1, 1), (2, 2, 2, 2), (2, 2), 8), (3, 2, (4, 1), (1, 0, 1, 1), (1, 1), 4),
    # The register-window kernels (rows kept in registers, blocks right to left): several blocks a row
    # with a partial last one, stride 2 from a plane without top padding, a 5x5 at stride 2.
    (3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 50), (3, 3, (2, 2), (0, 0, 1, 1), (1, 1), 29),
    (5, 5, (2, 2), (2, 2, 2, 2), (1, 1), 37), (7, 7, (1, 1), (3, 3, 3, 3), (1, 1), 23)])
def test_depthwise_int8_vnni_geometries(r, s, stride, pads, dil, w):
    c = dict(n=2, c=3, k=6, h=9, w=w, r=r, s=s, stride=stride, dil=dil, pads=pads, groups=3, seed=r * 31 + s + w)
    rng = np.random.default_rng(c["seed"])
    g, x, ref = build_int8(c, rng, [("bias", {"values": rng.integers(-(2 ** 12), 2 ** 12, 6)}), ("relu", {})])
    np.testing.assert_array_equal(run_graph(g, x), ref)


# A window as large as the plane (a global average pool lowered to a depthwise convolution: one output
# per channel, the dot-product path), and planes that differ only in size one after another (each
# thread's padded plane is rebuilt for a new geometry and only its input columns rewritten for the same).
# Also MobileNetV2's 1,280 channels (runs of outputs over more than one chunk of 64, and across images)
# and a channel multiplier of 2.
@pytest.mark.parametrize("h,w,c_in,k", [(7, 7, 20, 20), (5, 11, 20, 20), (2, 31, 20, 20), (9, 3, 20, 20),
                                        (7, 7, 1280, 1280), (3, 4, 50, 100), (1, 1, 70, 70)])
def test_depthwise_int8_whole_plane_window(h, w, c_in, k):
    c = dict(n=2, c=c_in, k=k, h=h, w=w, r=h, s=w, stride=(1, 1), dil=(1, 1), pads=(0, 0, 0, 0), groups=c_in,
             seed=h * w)
    rng = np.random.default_rng(c["seed"])
    g, x, ref = build_int8(c, rng, [("bias", {"values": rng.integers(-(2 ** 12), 2 ** 12, k)})])
    np.testing.assert_array_equal(run_graph(g, x), ref)


@pytest.mark.parametrize("w", [16, 17, 16, 40, 40])
def test_depthwise_int8_geometry_changes_between_graphs(w):
    c = dict(n=1, c=24, k=24, h=10, w=w, r=3, s=3, stride=(1, 1), dil=(1, 1), pads=(1, 1, 1, 1), groups=24, seed=w)
    rng = np.random.default_rng(c["seed"])
    g, x, ref = build_int8(c, rng, [("bias", {"values": rng.integers(-(2 ** 12), 2 ** 12, 24)}), ("relu", {})])
    np.testing.assert_array_equal(run_graph(g, x), ref)


# 32 channels (two 16-channel runs): the CUDA backend's channels-last INT8 depthwise kernel on NCHW
# graph inputs and outputs, with every stride, padding and dilation it takes and both of its epilogues
# (the requantization windows for bias/ReLU, the general chain for BN/Clip and the LUT).
@pytest.mark.parametrize("r,stride,pads,dil,post", [
    (3, (1, 1), (1, 1, 1, 1), (1, 1), "bias_relu"), (3, (2, 2), (0, 1, 0, 1), (1, 1), "bias"),
    (5, (1, 2), (2, 0, 1, 2), (2, 1), "bn_clip"), (7, (2, 1), (3, 3, 3, 3), (1, 2), "sigmoid"),
    (1, (2, 2), (0, 0, 0, 0), (1, 1), "none"), (4, (3, 3), (2, 1, 0, 3), (3, 3), "bias_relu")])
def test_depthwise_int8_runs_of_16(r, stride, pads, dil, post):
    c = dict(n=2, c=32, k=32, h=13, w=21, r=r, s=r, stride=stride, dil=dil, pads=pads, groups=32, seed=r * 7)
    rng = np.random.default_rng(c["seed"])
    spec = []
    if post in ("bias", "bias_relu"):
        spec.append(("bias", {"values": rng.integers(-(2 ** 12), 2 ** 12, 32)}))
    if post == "bias_relu":
        spec.append(("relu", {}))
    if post == "bn_clip":
        spec.append(("scale", {"values": rng.integers(-(2 ** 15), 2 ** 15, 32), "shift": 14}))
        spec.append(("clip", {"lo": 0, "hi": 3000}))
    g, x, ref = build_int8(c, rng, spec, lut=1 if post == "sigmoid" else 0)
    np.testing.assert_array_equal(run_graph(g, x), ref)


# Few outputs with many taps (a global average pool lowered to a depthwise convolution, and small strided
# maps): the CUDA backend's warp-per-output depthwise kernel; the CPU's few-outputs sums.
@pytest.mark.parametrize("c,hw,r,stride,pads,post", [
    (64, 7, 7, (1, 1), (0, 0, 0, 0), "bias_relu"), (32, 6, 5, (2, 2), (2, 2, 2, 2), "bias"),
    (48, 9, 4, (3, 3), (1, 2, 3, 0), "bn_clip")])
def test_depthwise_int8_few_outputs_many_taps(c, hw, r, stride, pads, post):
    cfg = dict(n=2, c=c, k=c, h=hw, w=hw, r=r, s=r, stride=stride, dil=(1, 1), pads=pads, groups=c, seed=c + r)
    rng = np.random.default_rng(cfg["seed"])
    spec = [("bias", {"values": rng.integers(-(2 ** 12), 2 ** 12, c)})] if post != "bn_clip" else \
        [("scale", {"values": rng.integers(-(2 ** 15), 2 ** 15, c), "shift": 14}), ("clip", {"lo": 0, "hi": 3000})]
    if post == "bias_relu":
        spec.append(("relu", {}))
    g, x, ref = build_int8(cfg, rng, spec)
    np.testing.assert_array_equal(run_graph(g, x), ref)


@pytest.mark.parametrize("x_fmt,y_fmt", [(F.CHW32, F.CHW32), (F.DLA_LINEAR, F.DLA_LINEAR), (F.DLA_HWC4, F.CHW32)])
def test_conv_int8_io_formats(x_fmt, y_fmt):
    c = dict(n=2, c=3, k=33, h=9, w=13, r=3, s=3, stride=(2, 1), dil=(1, 1), pads=(1, 1, 1, 1), groups=1, seed=5)
    g, x, ref = build_int8(c, np.random.default_rng(1), [("relu", {})], x_fmt, y_fmt)
    np.testing.assert_array_equal(run_graph(g, x), ref)


# FP16 convolutions of the AMX-BF16 kernel's shapes (conv_amx_f16.h, 16 channels or more, where its rule or
# SOFTDLA_AMX_F16=all, which test_cpu_isa_paths.py sets, gives them to it; on other
# paths and below 16 channels the FMA kernels): channel counts past and below whole 16-channel blocks,
# output channels past whole 32-row blocks, grids past whole 32-pixel blocks, dilation, asymmetric
# padding, 1x1 to 7x1 kernels; and strides 2 to 4, which read the stride phases of the input.
@pytest.mark.parametrize("c_in,k,r,s,pads,dil,hw,stride", [
    (16, 32, 3, 3, (1, 1, 1, 1), (1, 1), (8, 14), (1, 1)), (37, 45, 3, 3, (1, 0, 2, 1), (1, 1), (9, 23), (1, 1)),
    (5, 70, 5, 5, (2, 2, 2, 2), (1, 1), (12, 12), (1, 1)), (33, 17, 7, 1, (3, 0, 3, 0), (1, 1), (15, 6), (1, 1)),
    (64, 40, 3, 3, (2, 2, 2, 2), (2, 2), (11, 37), (1, 1)),
    # 1x1: the blocked input layout, whole (small grids) and per pixel block (over 1 MiB packed); 64
    # channels into 256 or more over 512 outputs or more take the tiles under the default rule too
    (40, 50, 1, 1, (0, 0, 0, 0), (1, 1), (9, 23), (1, 1)), (64, 20, 1, 1, (0, 0, 0, 0), (1, 1), (40, 57), (1, 1)),
    (64, 260, 1, 1, (0, 0, 0, 0), (1, 1), (33, 35), (1, 1)),
    # strided: every phase (3x3, 7x7), one phase (1x1 stride 2), mixed strides, dilation with stride
    (32, 33, 3, 3, (1, 1, 1, 1), (1, 1), (17, 29), (2, 2)), (20, 16, 1, 1, (0, 0, 0, 0), (1, 1), (14, 15), (2, 2)),
    (48, 35, 7, 7, (3, 3, 3, 3), (1, 1), (20, 21), (2, 2)), (17, 40, 3, 3, (0, 1, 2, 1), (1, 1), (9, 31), (1, 2)),
    (16, 18, 5, 5, (2, 4, 2, 4), (2, 2), (19, 23), (3, 3)), (24, 24, 3, 3, (1, 2, 1, 2), (1, 1), (13, 34), (2, 4)),
    # planes over 1 MiB packed (beyond L2 with the weights): four phases, one phase, and a dilated kernel
    # whose extra rows span several pixel blocks
    (64, 40, 3, 3, (1, 1, 1, 1), (1, 1), (80, 80), (2, 2)), (128, 36, 3, 3, (1, 1, 1, 1), (1, 1), (30, 45), (1, 1)),
    (48, 33, 5, 5, (2, 1, 2, 3), (2, 2), (100, 110), (2, 2))])
def test_conv_fp16_amx_shapes(c_in, k, r, s, pads, dil, hw, stride):
    c = dict(n=2, c=c_in, k=k, h=hw[0], w=hw[1], r=r, s=s, stride=stride, dil=dil, pads=pads, groups=1,
             seed=c_in + k)
    g, x, ref = build_float(c, np.float16)
    assert R.rel_l2(run_graph(g, x), ref) < 1e-3


@pytest.mark.parametrize("stride", [(1, 1), (2, 2), (3, 3)])
def test_conv_fp16_infinities_and_nan(stride):
    """An infinite input reaches every output whose window holds it as +-inf (stored as +-65504, never
    infinity), a NaN as NaN; the other outputs keep their values (the AMX-BF16 kernel splits values
    into two bf16 parts: an infinity must not leave a NaN in the second, and a NaN whose payload is only
    in its lowest mantissa bits must not read as an infinity once truncated)."""
    c = dict(n=1, c=20, k=33, h=6, w=19, r=3, s=3, stride=stride, dil=(1, 1), pads=(1, 1, 1, 1), groups=1, seed=4)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 20, 6, 19)).astype(np.float16)
    wt = np.abs(rng.standard_normal((33, 20, 3, 3))).astype(np.float16) + np.float16(0.25)  # all positive
    x[0, 3, 3, 3] = np.inf
    x.view(np.uint16)[0, 17, 3, 15] = 0x7C01  # a NaN with only the lowest payload bit
    g = writer.Graph()
    xi = g.input("x", x.shape, np.float16)
    oh, ow = out_hw(c)
    y = g.tensor("y", (1, 33, oh, ow), np.float16)
    g.op("Conv", [xi], y, g.conv_params(g.constant(wt, np.float16), c["stride"], c["pads"], c["dil"], 1,
                                        writer.sdp([])))
    g.output(y, F.LINEAR)
    got = np.asarray(run_graph(g, x), np.float64)
    with np.errstate(invalid="ignore"):
        ref = R.conv_acc(x.astype(np.float64), wt.astype(np.float64), c["stride"], c["pads"], c["dil"], 1)
    nan, inf = np.isnan(ref), np.isinf(ref)
    assert inf.any() and nan.any()
    assert np.array_equal(np.isnan(got), nan)
    assert (got[inf] == 65504.0).all()
    finite = ~(nan | inf)
    assert R.rel_l2(got[finite], ref[finite]) < 1e-3


@pytest.mark.parametrize("x_fmt,y_fmt", [(F.CHW16, F.CHW16), (F.DLA_HWC4, F.DLA_LINEAR), (F.DLA_LINEAR, F.CHW16)])
def test_conv_fp16_io_formats(x_fmt, y_fmt):
    c = dict(n=1, c=4, k=17, h=7, w=33, r=3, s=1, stride=(1, 2), dil=(2, 1), pads=(2, 0, 2, 0), groups=1, seed=3)
    g, x, ref = build_float(c, np.float16, x_fmt, y_fmt)
    assert R.rel_l2(run_graph(g, x), ref) < 1e-3


# Convolutions without ReLU whose products land on negative rounding ties (shift 1-3, small values):
# those channels must keep the sign-aware rounding, while the others (wide shifts, no tie in the window)
# take the short one, in one layer; 1x1 (the fused GEMM) and 3x3 (the implicit GEMM), stride 1 and 2.
@pytest.mark.parametrize("r,stride", [(1, 1), (1, 2), (3, 1), (3, 2)])
def test_conv_int8_negative_rounding_ties(r, stride):
    rng = np.random.default_rng(17 + r + stride)
    n, c_in, k, hw = 1, 24, 40, 14
    x = rng.integers(-4, 5, (n, c_in, hw, hw)).astype(np.int8)
    wt = rng.integers(-3, 4, (k, c_in, r, r)).astype(np.int8)
    bias = rng.integers(-50, 51, k)
    tied = np.arange(k) % 2 == 0
    mult = np.where(tied, 1, rng.integers(2 ** 30, 2 ** 31, k))
    shift = np.where(tied, rng.integers(1, 4, k), 40)
    pad = r // 2
    g = writer.Graph()
    xi = g.input("x", x.shape, np.int8, 0.05)
    oh = (hw + 2 * pad - r) // stride + 1
    y = g.tensor("y", (n, k, oh, oh), np.int8, 0.1)
    post = writer.sdp([writer.sdp_step("bias", ivalues=bias)], multiplier=mult, shift=shift)
    g.op("Conv", [xi], y, g.conv_params(g.constant(wt, np.int8), (stride, stride), (pad,) * 4, (1, 1), 1, post))
    g.output(y)
    acc = R.sat32(R.conv_acc(x, wt, (stride, stride), (pad,) * 4, (1, 1), 1, exact=True))
    ref = R.sdp_int8(acc, [("bias", {"values": bias})], mult, shift)
    out = run_graph(g, x)
    assert (ref[:, tied] < 0).any() and (np.abs(ref[:, tied]) < 127).any()
    np.testing.assert_array_equal(out, ref)


def test_conv_int8_accumulator_saturates():
    """256 channels x 32x32 window of (-128)*(-128) sums to 2^32: the accumulator must saturate to
    2^31 - 1 before the output converter (64 after >> 25, where an unsaturated sum would give 127)."""
    x = np.full((1, 256, 32, 32), -128, np.int8)
    wt = np.full((2, 256, 32, 32), -128, np.int8)
    wt[1] = 127  # negative sum -2^32 + 2^24: saturates to -2^31
    g = writer.Graph()
    xi = g.input("x", x.shape, np.int8, 1.0)
    y = g.tensor("y", (1, 2, 1, 1), np.int8, 1.0)
    post = writer.sdp([], multiplier=[1], shift=[25])
    g.op("Conv", [xi], y, g.conv_params(g.constant(wt, np.int8), post=post))
    g.output(y)
    out = run_graph(g, x)
    assert out[0, 0, 0, 0] == 64 and out[0, 1, 0, 0] == -64
    ref = R.sdp_int8(R.sat32(R.conv_acc(x, wt, exact=True)), [], [1], [25])
    np.testing.assert_array_equal(out, ref)


def test_depthwise_fp16_infinite_weight_skips_padding():
    """An infinite weight multiplies only real inputs: outputs whose window puts that tap on the padding
    stay finite (as on the CUDA backend), the others are +-inf stored as +-65504, none is NaN."""
    rng = np.random.default_rng(9)
    x = (np.abs(rng.standard_normal((1, 4, 6, 9))) + 0.5).astype(np.float16)
    wt = (np.abs(rng.standard_normal((4, 1, 3, 3))) + 0.25).astype(np.float16)
    wt[:, 0, 0, 0] = np.inf  # the top-left tap: on the padding for the first output row and column
    g = writer.Graph()
    xi = g.input("x", x.shape, np.float16)
    y = g.tensor("y", x.shape, np.float16)
    g.op("Conv", [xi], y, g.conv_params(g.constant(wt, np.float16), (1, 1), (1, 1, 1, 1), (1, 1), 4, writer.sdp([])))
    g.output(y, F.LINEAR)
    got = np.asarray(run_graph(g, x), np.float64)
    assert not np.isnan(got).any()
    assert (got[:, :, 1:, 1:] == 65504.0).all()
    edge = np.concatenate([got[:, :, 0, :].ravel(), got[:, :, :, 0].ravel()])
    assert np.isfinite(edge).all() and (edge < 65504.0).all()
