"""Standalone SDP ops (bias, scale/batch-norm, PReLU, ReLU, clip, element-wise with broadcast, sigmoid,
tanh, requantize) in FP32, FP16 and INT8, and the INT8 activation table."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdla_testkit import reference as R
from sdla_testkit import writer
from sdla_testkit.engine import run_graph

BROADCASTS = {"nchw": lambda s: s, "nc11": lambda s: (s[0], s[1], 1, 1), "n111": lambda s: (s[0], 1, 1, 1),
              "1c11": lambda s: (1, s[1], 1, 1), "1chw": lambda s: (1,) + tuple(s[1:])}
FLOAT_STEPS = ["bias", "scale", "prelu", "relu", "clip", "sigmoid", "tanh", "add", "sub", "mul", "div", "max", "min"]


@st.composite
def float_chain(draw):
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 40)), draw(st.integers(1, 9)), draw(st.integers(1, 9)))
    kinds = draw(st.lists(st.sampled_from(FLOAT_STEPS), min_size=1, max_size=4))
    bcs = [draw(st.sampled_from(sorted(BROADCASTS))) for _ in kinds]
    per_channel = [draw(st.booleans()) for _ in kinds]
    return shape, kinds, bcs, per_channel, draw(st.integers(0, 2 ** 31))


def build_float_chain(shape, kinds, bcs, per_channel, seed, dtype, const_operand=False):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    g = writer.Graph()
    xi = g.input("x", shape, dtype)
    inputs, arrays, steps, ref_steps, operands = [xi], [x], [], [], []
    for kind, bc, pc in zip(kinds, bcs, per_channel):
        vals = rng.standard_normal(shape[1] if pc else 1).astype(np.float32)
        if kind in ("bias", "scale", "prelu"):
            steps.append(writer.sdp_step(kind, fvalues=vals))
            ref_steps.append((kind, {"values": vals}))
        elif kind == "clip":
            steps.append(writer.sdp_step(kind, lo=-0.5, hi=0.75))
            ref_steps.append((kind, {"lo": -0.5, "hi": 0.75}))
        elif kind in ("relu", "sigmoid", "tanh"):
            steps.append(writer.sdp_step(kind))
            ref_steps.append((kind, {}))
        else:
            e = rng.standard_normal(BROADCASTS[bc](shape)).astype(dtype)
            if kind == "div":  # divisors away from 0 (|e| >= 0.5): quotients stay in FP16's range
                e = (np.sign(e) * (0.5 + np.abs(e))).astype(dtype) + (e == 0).astype(dtype)
                t = g.const_tensor(f"e{len(operands)}", e, dtype)
            else:
                t = g.input(f"e{len(operands)}", e.shape, dtype)
                arrays.append(e)
            inputs.append(t)
            steps.append(writer.sdp_step(kind, tensor=t))
            ref_steps.append((kind, {"operand": len(operands)}))
            operands.append(e)
    y = g.tensor("y", shape, dtype)
    g.op("Sdp", inputs, y, writer.sdp(steps))
    g.output(y)
    return g, arrays, R.sdp_float(x, ref_steps, operands)


@settings(max_examples=80, deadline=None)
@given(float_chain())
def test_sdp_fp32(case):
    g, arrays, ref = build_float_chain(*case, np.float32)
    assert R.rel_err(run_graph(g, *arrays), ref) < 1e-5


@settings(max_examples=80, deadline=None)
@given(float_chain(), st.booleans())
def test_sdp_fp16(case, const_operand):
    g, arrays, ref = build_float_chain(*case, np.float16, const_operand)
    got = run_graph(g, *arrays)
    # FP16: every stored value is within half an fp16 ulp (+ fp32 chain error) of the fp64 result.
    assert R.rel_l2(got, ref) < 1e-3
    ref16 = ref.astype(np.float16).astype(np.float64)
    assert np.max(np.abs(got.astype(np.float64) - ref16)) <= np.max(np.abs(ref)) * 2 ** -10 + 1e-6


INT_STEPS = ["bias", "scale", "prelu", "relu", "clip", "add", "sub", "mul", "div", "max", "min"]


@st.composite
def int8_chain(draw):
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 40)), draw(st.integers(1, 9)), draw(st.integers(1, 9)))
    kinds = draw(st.lists(st.sampled_from(INT_STEPS), min_size=0, max_size=5))
    bcs = [draw(st.sampled_from(sorted(BROADCASTS))) for _ in kinds]
    return shape, kinds, bcs, draw(st.integers(0, 2 ** 31)), draw(st.sampled_from([0, 0, 1, 2]))


@settings(max_examples=150, deadline=None)
@given(int8_chain())
def test_sdp_int8_exact(case):
    shape, kinds, bcs, seed, lut = case
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, shape).astype(np.int8)
    g = writer.Graph()
    xi = g.input("x", shape, np.int8, 0.05)
    inputs, arrays, steps, ref_steps, operands = [xi], [x], [], [], []
    c = shape[1]
    for kind, bc in zip(kinds, bcs):
        n = c if rng.integers(2) else 1
        if kind == "bias":
            p = {"values": rng.integers(-(2 ** 31), 2 ** 31 - 1, n)}
        elif kind in ("scale", "prelu"):
            p = {"values": rng.integers(-(2 ** 31) + 1, 2 ** 31 - 1, n), "shift": int(rng.integers(0, 63))}
        elif kind == "clip":
            lo = int(rng.integers(-(2 ** 20), 2 ** 20))
            p = {"lo": lo, "hi": lo + int(rng.integers(0, 2 ** 21))}
        elif kind == "relu":
            p = {}
        else:
            e = rng.integers(-128, 128, BROADCASTS[bc](shape)).astype(np.int8)
            t = g.input(f"e{len(operands)}", e.shape, np.int8, 0.05)
            inputs.append(t)
            arrays.append(e)
            p = {"operand": len(operands), "tm": int(rng.integers(-(2 ** 20), 2 ** 20)), "ts": int(rng.integers(0, 20)),
                 "shift": int(rng.integers(0, 31 if kind == "div" else 40))}  # division: (v << s) within int64
            operands.append(e)
            steps.append(writer.sdp_step(kind, tensor=t, tensor_multiplier=p["tm"], tensor_shift=p["ts"],
                                         shift=p["shift"]))
            ref_steps.append((kind, p))
            continue
        steps.append(writer.sdp_step(kind, ivalues=p.get("values"), shift=p.get("shift", 0), lo_i=p.get("lo", 0),
                                     hi_i=p.get("hi", 0)))
        ref_steps.append((kind, p))
    mult = rng.integers(-(2 ** 31) + 1, 2 ** 31 - 1, c if rng.integers(2) else 1)
    shift = rng.integers(0, 63, mult.size)
    y = g.tensor("y", shape, np.int8, 0.1)
    g.op("Sdp", inputs, y, writer.sdp(steps, multiplier=mult, shift=shift, lut=lut, lut_input_scale=0.03))
    g.output(y)
    table = R.activation_lut("sigmoid" if lut == 1 else "tanh", 0.03, 0.1) if lut else None
    ref = R.sdp_int8(x.astype(np.int64), ref_steps, mult, shift, operands, table)
    np.testing.assert_array_equal(run_graph(g, *arrays), ref)


@pytest.mark.parametrize("kind", ["sigmoid", "tanh"])
@pytest.mark.parametrize("in_scale,out_scale", [(0.05, 1 / 127), (0.001, 0.004), (0.5, 1 / 64), (1e-4, 1.0)])
def test_activation_lut_all_256_codes(kind, in_scale, out_scale):
    """Every int8 code through the table equals the FP16 rule of NUMERICS.md."""
    x = np.arange(-128, 128, dtype=np.int8).reshape(1, 1, 16, 16)
    g = writer.Graph()
    xi = g.input("x", x.shape, np.int8, in_scale)
    y = g.tensor("y", x.shape, np.int8, out_scale)
    g.op("Sdp", [xi], y, writer.sdp([], multiplier=[1], shift=[0], lut=1 if kind == "sigmoid" else 2,
                                    lut_input_scale=in_scale))
    g.output(y)
    ref = R.activation_lut(kind, in_scale, out_scale)
    np.testing.assert_array_equal(run_graph(g, x).ravel(), ref)


def test_requant_rounding_ties_and_saturation():
    """Worked examples of NUMERICS.md: 5 >> 1 = 3, -5 >> 1 = -3, 3 >> 1 = 2, -3 >> 1 = -2, 300 -> 127."""
    vals = np.array([5, -5, 3, -3, 1, -1, 300, -300, 255, -257], np.int64)
    x = np.zeros((1, 1, 1, vals.size), np.int8)
    g = writer.Graph()
    xi = g.input("x", x.shape, np.int8, 1.0)
    y = g.tensor("y", x.shape, np.int8, 1.0)
    # bias per element is not a DLA form, so inject values through an element-wise operand.
    e = g.input("e", x.shape, np.int8, 1.0)
    steps = [writer.sdp_step("add", tensor=e, tensor_multiplier=1, tensor_shift=0)]
    g.op("Sdp", [xi, e], y, writer.sdp(steps, multiplier=[1], shift=[1]))
    g.output(y)
    ev = np.clip(vals, -128, 127).astype(np.int8).reshape(x.shape)
    got = run_graph(g, x, ev).ravel()
    expect = [3, -3, 2, -2, 1, -1, 64, -64, 64, -64]  # inputs saturate to int8 first: 127>>1 = 64 (63.5 away)
    np.testing.assert_array_equal(got, expect)


# The float steps' edge values, bit for bit (the CPU runs them in vector form on AVX-512, scalar
# elsewhere; both must keep these semantics): ReLU maps -0 to +0 and keeps NaN; Clip keeps a value equal
# to a bound as it is (a -0 at a +0 bound stays -0) and keeps NaN; PReLU scales only values below 0.
EDGE = np.array([-0.0, 0.0, np.nan, -1.5, 1.5, 0.75, -0.5, 3.0, -3.0, -np.inf, np.inf] * 3, np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("kind", ["relu", "clip", "prelu", "bias", "scale"])
def test_float_step_edge_values_bit_exact(kind, dtype):
    x = EDGE.astype(dtype).reshape(1, 1, 3, 11)
    g = writer.Graph()
    xi = g.input("x", x.shape, dtype)
    if kind == "clip":
        step, ref = writer.sdp_step("clip", lo=-0.5, hi=0.75), np.where(x < -0.5, -0.5, np.where(x > 0.75, 0.75, x))
        lo0 = writer.sdp_step("clip", lo=0.0, hi=1.0)  # a -0 input at a +0 bound stays -0
    elif kind == "relu":
        step, ref = writer.sdp_step("relu"), np.where(x > 0, x, np.where(np.isnan(x), x, 0.0))
    elif kind == "prelu":
        step, ref = writer.sdp_step("prelu", fvalues=[0.25]), np.where(x < 0, x * np.float32(0.25), x)
    elif kind == "bias":
        step, ref = writer.sdp_step("bias", fvalues=[0.5]), x.astype(np.float32) + np.float32(0.5)
    else:
        step, ref = writer.sdp_step("scale", fvalues=[-2.0]), x.astype(np.float32) * np.float32(-2.0)
    steps = [step, lo0] if kind == "clip" else [step]
    if kind == "clip":
        ref = np.where(ref < 0.0, 0.0, np.where(ref > 1.0, 1.0, ref))
    y = g.tensor("y", x.shape, dtype)
    g.op("Sdp", [xi], y, writer.sdp(steps))
    g.output(y)
    got = np.asarray(run_graph(g, x), dtype).ravel()
    want = np.asarray(ref, np.float32).ravel()
    if dtype == np.float16:  # FP16 results saturate to the largest finite half (NUMERICS.md)
        want = np.where(np.isnan(want), want, np.clip(want, -65504.0, 65504.0))
    want = want.astype(dtype)
    bits = np.uint16 if dtype == np.float16 else np.uint32
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(bits), want[~nan].view(bits))  # -0 and +0 told apart
