"""No silent wrong results: every input and attribute the builder does not honour is rejected by name;
inferred shapes agree with the model's; `check` and `build` give one verdict; I/O names survive the build;
the operator table in docs/BUILDER.md is the one the code enforces. References: ONNX Runtime."""
import os
import struct
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import softdla
from sdla_testkit.onnx_models import SOFTDLA, G, cosine, ort_run, rel_l2, run_loadable

import test_builder_models
import test_builder_ops

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def build_error(model, **kw):
    with pytest.raises(softdla.BuildError) as e:
        softdla.build(model, fp16=True, progress=False, **kw)
    return str(e.value)


# ------------------------------------------------------------------ inputs/attributes never ignored
def clip_with_graph_bounds():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 4, 4])
    lo = helper.make_tensor_value_info("lo", TensorProto.FLOAT, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node("Clip", ["x", "lo"], ["y"], name="clip")
    return helper.make_model(helper.make_graph([node], "g", [x, lo], [y]), opset_imports=[helper.make_opsetid("", 17)])


def dropout_training():
    g = G()
    x = g.input("x", [1, 4, 4, 4])
    y = g.node("Dropout", [x, g.const(np.float32(0.5)), g.const(np.bool_(True))])
    return g.model([y])


def maxpool_with_indices():
    g = G()
    x = g.input("x", [1, 4, 4, 4])
    y, idx = g.node("MaxPool", [x], n_out=2, kernel_shape=[2, 2], strides=[2, 2])
    m = g.model([y])
    return m


def integer_division():
    g = G()
    x = g.input("x", [1, 4, 4, 4])
    xi = g.node("Cast", [x], to=TensorProto.INT32)
    q = g.node("Div", [xi, g.const(np.int32(3))])
    return g.model([g.node("Cast", [q], to=TensorProto.FLOAT)])


def division_with_broadcast_dividend():
    g = G()
    x = g.input("x", [1, 4, 4, 4])
    return g.model([g.node("Div", [g.node("GlobalAveragePool", [x]), x])])


def pool_same_with_negative_padding():
    """kernel 1, stride 4 over 3 rows: SAME asks for -2 rows of padding (ORT refuses or shifts; ONNX's
    reference refuses; softdla took 0 and disagreed with ORT)."""
    g = G()
    x = g.input("x", [1, 1, 3, 17])
    return g.model([g.node("AveragePool", [x], kernel_shape=[1, 6], strides=[4, 1], auto_pad="SAME_UPPER")])


def input_is_output():
    g = G()
    x = g.input("x", [1, 4, 4, 4])
    return g.model([g.node("Relu", [x]), x])


def unknown_attribute():
    g = G()
    x = g.input("x", [1, 4, 4, 4])
    return g.model([g.node("Relu", [x], frobnicate=1)])


@pytest.mark.parametrize("make, expected", [
    (clip_with_graph_bounds, "input 'min' ('lo') must be a constant"),
    (dropout_training, "'training_mode' must be a constant false"),
    (maxpool_with_indices, "output 1"),
    (integer_division, "computes int32 values at run time"),
    (unknown_attribute, "attribute 'frobnicate' is not supported"),
    (division_with_broadcast_dividend, "dividend broadcasts"),
    (pool_same_with_negative_padding, "asks for negative padding"),
])
def test_unhonoured_inputs_and_attributes_are_rejected_by_name(make, expected):
    msg = build_error(make())
    assert expected in msg and "node '" in msg, msg


def test_conv_transpose_output_shape_is_honoured():
    g = G(seed=2)
    x = g.input("x", [1, 4, 3, 3])
    w = g.weight(4, 2, 3, 3)
    exact = g.node("ConvTranspose", [x, w], strides=[3, 3], output_shape=[9, 9])  # no padding needed
    m = g.model([exact])
    xs = np.random.default_rng(0).standard_normal((1, 4, 3, 3)).astype(np.float32)
    got = run_loadable(softdla.build(m, fp16=True, progress=False), xs)[0]
    ref = ort_run(m, xs)[0]
    assert got.shape == ref.shape and rel_l2(got, ref) < 1e-3
    g = G(seed=2)
    x = g.input("x", [1, 4, 3, 3])
    cropped = g.node("ConvTranspose", [x, g.weight(4, 2, 3, 3)], strides=[3, 3], output_shape=[8, 8])
    assert "padding must be 0" in build_error(g.model([cropped]))


def test_declared_shapes_must_match():
    g = G()
    x = g.input("x", [1, 4, 8, 8])
    y = g.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    m = g.model([y])
    m.graph.value_info.append(helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 4, 3, 3]))
    msg = build_error(m)
    assert "declares [1, 4, 3, 3]" in msg and "[1, 4, 4, 4]" in msg, msg


def test_graph_io_must_be_float():
    x = helper.make_tensor_value_info("x", TensorProto.INT8, [1, 4, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.INT8, None)
    m = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 17)])
    assert "input 'x' is int8" in build_error(m)


# ------------------------------------------------------------------ names
def test_output_names_survive_conversions_and_copies(tmp_path):
    g = G(seed=4)
    x = g.input("images", [1, 3, 8, 8])
    y = g.node("Relu", [g.conv(x, 3, 8)])
    same = g.node("Identity", [x])
    m = g.model([y, same])  # one output converted to fp16, one aliasing the input
    m.graph.output[0].name, m.graph.output[1].name = "output", "passthrough"
    m.graph.node[-2].output[0], m.graph.node[-1].output[0] = "output", "passthrough"
    calib = tmp_path / "calib"
    calib.mkdir()
    np.save(calib / "a.npy", np.random.default_rng(0).standard_normal((8, 3, 8, 8)).astype(np.float32))
    loadable = softdla.build(m, int8=True, fp16=True, calib_data=calib, output_formats="fp16:chw16", progress=False)
    info = softdla.inspect(loadable)
    names = [t["name"] for t in info["outputs"]]
    assert names == ["output", "passthrough"], names
    assert [t["name"] for t in info["inputs"]] == ["images"]


# ------------------------------------------------------------------ check goes on, and agrees with build
def test_check_infers_past_an_unsupported_node():
    g = G()
    x = g.input("x", [1, 4, 8, 8])
    h = g.node("HardSwish", [g.conv(x, 4, 8)])
    y = g.node("Relu", [g.conv(h, 8, 8)])
    rows = softdla.check(g.model([y]))
    by_op = {r["op"]: r for r in rows}
    assert not by_op["HardSwish"]["supported"] and "does not run on the DLA" in by_op["HardSwish"]["reason"]
    later = [r for r in rows if r["op"] in ("Conv", "Relu")]
    assert all(r["supported"] for r in later), later


def constant_first(op):
    """Op(constant, Conv(x)), the constant of the output's full shape."""
    g = G(seed=23)
    x = g.input("x", [1, 4, 5, 5])
    c = g.const((g.rng.standard_normal([1, 4, 5, 5]) + 3).astype(np.float32))
    return g.model([g.node(op, [c, g.conv(x, 4, 4)])])


def _suite_models():
    for case in test_builder_ops.CASES:
        yield case.__name__, test_builder_ops.make(case)[0]
    for net in test_builder_models.NETS:
        yield net.__name__, test_builder_models.make(net)[0]
    for make in (clip_with_graph_bounds, dropout_training, maxpool_with_indices, integer_division, unknown_attribute):
        yield make.__name__, make()
    g = G()
    x = g.input("x", [1, 4, 8, 8])
    yield "hardswish", g.model([g.node("HardSwish", [g.conv(x, 4, 8)])])
    for op in ("Add", "Div"):
        yield f"{op.lower()}_constant_first", constant_first(op)
    yield "digits", onnx.load(os.path.join(ROOT, "examples", "models", "digits.onnx"))


@pytest.mark.parametrize("name, model", list(_suite_models()), ids=lambda v: v if isinstance(v, str) else "")
def test_check_verdict_equals_build_verdict(name, model):
    rows = softdla.check(model)
    check_ok = all(r["supported"] for r in rows)
    try:
        softdla.build(model, fp16=True, progress=False)
        build_ok, why = True, ""
    except softdla.BuildError as e:
        build_ok, why = False, str(e)
    assert check_ok == build_ok, f"check says {check_ok}, build says {build_ok}: {why} / {[r for r in rows if not r['supported']]}"
    for r in rows:
        assert r["supported"] or r["reason"], r


# ------------------------------------------------------------------ the documented table is the enforced one
def test_builder_doc_carries_the_generated_op_table():
    table = subprocess.run([SOFTDLA, "ops"], capture_output=True, text=True, check=True).stdout
    doc = open(os.path.join(ROOT, "docs", "BUILDER.md")).read()
    begin, end = "<!-- op table: begin -->\n", "<!-- op table: end -->"
    assert doc[doc.index(begin) + len(begin):doc.index(end)] == table, "regenerate with: build/softdla ops"


# ------------------------------------------------------------------ clipped ReLU in INT8
@pytest.mark.parametrize("hi", [6.0, 0.5])
def test_clipped_relu_is_one_op_at_its_planned_scale(tmp_path, hi):
    """Conv -> Clip(0, hi) in INT8 writes the Clip's planned scale itself, with no requantize op after it;
    the range is the bound in both cases (hi = 6: outputs reach about 4, over half the bound; hi = 0.5, often
    exceeded, where the clip step clips). Values against ONNX Runtime on new inputs."""
    g = G(seed=7)
    x = g.input("x", [1, 4, 8, 8])
    y = g.node("Clip", [g.conv(x, 4, 8), g.const(np.float32(0.0)), g.const(np.float32(hi))])
    m = g.model(y)
    rng = np.random.default_rng(3)
    calib = tmp_path / "calib"
    calib.mkdir()
    np.save(calib / "a.npy", rng.standard_normal((16, 4, 8, 8)).astype(np.float32))
    loadable = softdla.build(m, int8=True, fp16=True, calib_data=calib, progress=False)
    layers = softdla.inspect(loadable)["layers"]
    assert not any("requantize" in name for name, _, _ in layers), layers
    images = rng.standard_normal((4, 1, 4, 8, 8)).astype(np.float32)
    with softdla.Device() as dev:
        module = dev.load(loadable)
        for image in images:
            got = module.run([image])[module.outputs[0].name]
            want = ort_run(m, image)[0]
            assert got.max() <= hi + 1e-6
            # INT8 input, weight and output steps (the convolution reaches about 4 before the clip).
            assert np.max(np.abs(got - want)) < 0.1, (hi, np.max(np.abs(got - want)))


# ------------------------------------------------------------------ a clip's output range
def clipped_conv(hi):
    """x -> Conv(4 -> 8, 3 x 3) -> Clip(0, hi); on standard normal inputs the convolution reaches about 4."""
    g = G(seed=7)
    x = g.input("x", [1, 4, 8, 8])
    return g.model(g.node("Clip", [g.conv(x, 4, 8), g.const(np.float32(0.0)), g.const(np.float32(hi))]))


def read_cache(path):
    lines = open(path).read().splitlines()
    return lines[0], {name: struct.unpack(">f", bytes.fromhex(h))[0] for name, h in (l.split(": ") for l in lines[1:])}


def calibration_dir(tmp_path, rng):
    calib = tmp_path / "calib"
    calib.mkdir(exist_ok=True)
    data = rng.standard_normal((16, 4, 8, 8)).astype(np.float32)
    np.save(calib / "a.npy", data)
    return calib, data


@pytest.mark.parametrize("hi", [0.5, 6.0, 60.0])
def test_clip_output_takes_its_bound_where_calibration_reaches_half_of_it(tmp_path, hi):
    """softdla's own calibration: a Clip(0, hi) output whose calibration values reach hi (0.5) or half of it
    (6: they reach about 4) takes hi as its range (no saturation, at most a bit of resolution lost); one
    whose values stay further below (60) keeps the range calibrated from the data, here the observed maximum
    (a graph output keeps its full range), instead of a bound that would leave it a few levels. The written
    cache's scale against the maximum ONNX Runtime computes on the same data."""
    m = clipped_conv(hi)
    calib, data = calibration_dir(tmp_path, np.random.default_rng(3))
    cache = tmp_path / "out.cache"
    softdla.build(m, int8=True, fp16=True, calib_data=calib, write_calib_cache=cache, progress=False)
    observed = max(float(np.max(np.abs(ort_run(m, image[None])[0]))) for image in data)
    y = m.graph.output[0].name
    scale = read_cache(cache)[1][y]
    if 2 * observed >= hi:
        assert scale == np.float32(np.float32(hi) / np.float32(127)), (scale, hi)
    else:
        assert observed < hi / 4
        assert scale == pytest.approx(observed / 127, rel=1e-5), (scale, observed)


def test_cache_entry_for_a_clip_output_is_taken_as_given(tmp_path):
    """A calibration cache is taken as TensorRT takes it: a Clip(0, 6) output given a range of 1.5 saturates at
    1.5 (the DLA would), not at the clip's bound. Values against ONNX Runtime, clipped at the cache's range."""
    m = clipped_conv(6.0)
    rng = np.random.default_rng(5)
    calib, _ = calibration_dir(tmp_path, rng)
    cache = tmp_path / "given.cache"
    softdla.build(m, int8=True, fp16=True, calib_data=calib, write_calib_cache=cache, progress=False)
    header, scales = read_cache(cache)
    y = m.graph.output[0].name
    scales[y] = 1.5 / 127
    cache.write_text(header + "\n" + "".join(f"{n}: {struct.pack('>f', s).hex()}\n" for n, s in scales.items()))
    loadable = softdla.build(m, int8=True, fp16=True, calib_cache=cache, progress=False)
    images = rng.standard_normal((4, 1, 4, 8, 8)).astype(np.float32)
    reached = 0
    with softdla.Device() as dev:
        module = dev.load(loadable)
        for image in images:
            got = module.run([image])[module.outputs[0].name]
            want = ort_run(m, image)[0]
            reached += int(np.sum(want > 2.0))
            assert got.max() <= np.float32(1.5) * (1 + 1e-3), got.max()
            assert np.max(np.abs(got - np.minimum(want, 1.5))) < 0.06, np.max(np.abs(got - np.minimum(want, 1.5)))
    assert reached > 0  # outputs the cache's range cuts off, so the test tells the two ranges apart


# ------------------------------------------------------------------ INT8 element-wise chains with large constants
def large_constant_chain(op):
    """x (about +-3) through one SDP layer whose constants dwarf the input's steps (0.024 a code): the
    chain's integer values must stay in int32 for every input code."""
    g = G(seed=11)
    x = g.input("x", [1, 4, 8, 8])
    if op == "bn_dead_channel":  # a channel whose variance is ~0: a gain of ~2,200
        c = 4
        var = np.array([1e-7, 0.5, 1.0, 2.0], np.float32)
        y = g.node("BatchNormalization", [x, g.const(np.ones(c, np.float32)), g.const(np.full(c, 0.5, np.float32)),
                                          g.const(np.zeros(c, np.float32)), g.const(var)], epsilon=1e-7)
    elif op == "conv_add":  # not fused into the convolution in INT8: a layer of its own
        y = g.node("Add", [g.conv(x, 4, 8), g.const(np.float32(2000.0))])
    else:
        name, value = {"mul_632": ("Mul", 632.0), "mul_5000": ("Mul", 5000.0), "add_2000": ("Add", 2000.0),
                       "sub_3000": ("Sub", 3000.0), "div_0.001": ("Div", 0.001)}[op]
        y = g.node(name, [x, g.const(np.float32(value))])
    return g.model([y])


@pytest.mark.parametrize("op", ["mul_632", "mul_5000", "add_2000", "sub_3000", "div_0.001", "bn_dead_channel",
                                "conv_add"])
def test_int8_sdp_chain_with_large_constants_stays_in_int32(tmp_path, op):
    """Every INT8 SDP step saturates to int32, and the builder works 2^16 finer than the input's scale: a
    scale of 632 or a bias of 2000 input steps used to saturate there (relative L2 0.12-0.82 where the
    output's own rounding gives 0.01). The result must be the output's quantization error, against ONNX
    Runtime on the calibration data itself (min-max ranges: nothing clipped)."""
    m = large_constant_chain(op)
    calib, data = calibration_dir(tmp_path, np.random.default_rng(13))
    loadable = softdla.build(m, int8=True, fp16=True, calib_data=calib, calibrator="minmax", progress=False)
    with softdla.Device() as dev:
        module = dev.load(loadable)
        for image in data[:4]:
            got = module.run([image[None]])[module.outputs[0].name]
            want = ort_run(m, image[None])[0]
            assert rel_l2(got, want) < 0.03, (op, rel_l2(got, want))


# ------------------------------------------------------------------ PRelu slopes broadcast as ONNX broadcasts
def prelu(x_shape, slope_shape, after_conv=False):
    g = G(seed=17)
    x = g.input("x", x_shape)
    if after_conv:
        x = g.conv(x, x_shape[1], x_shape[1])
    slope = (g.rng.random(slope_shape) * 0.5 + 0.1).astype(np.float32) * np.where(
        g.rng.random(slope_shape) < 0.5, 1, -1).astype(np.float32)
    return g.model([g.node("PRelu", [x, g.const(slope)])])


@pytest.mark.parametrize("x_shape, slope_shape, after_conv", [
    ([1, 3, 4, 3], [3], False), ([1, 3, 4, 3], [3], True), ([1, 4, 4, 3], [4, 1], False), ([2, 3, 3], [3], False),
    ([1, 3, 4, 5], [1, 1, 5], False)])
def test_prelu_slope_along_h_or_w_is_rejected(x_shape, slope_shape, after_conv):
    """A slope with C values that broadcasts along W (or H) is not one slope a channel, whatever its count:
    it was applied per channel (relative L2 0.67-0.85 against ONNX Runtime), now it is an error naming it."""
    assert "varies along an axis other than the channels" in build_error(prelu(x_shape, slope_shape, after_conv))


@pytest.mark.parametrize("x_shape, slope_shape", [([1, 3, 4, 3], [3, 1, 1]), ([1, 3, 4, 3], [1, 3, 1, 1]),
                                                  ([2, 5], [5]), ([2, 3, 4], [3, 1]), ([1, 3, 4, 3], [1])])
def test_prelu_slope_per_channel_or_one_runs(x_shape, slope_shape):
    m = prelu(x_shape, slope_shape)
    x = np.random.default_rng(2).standard_normal(x_shape).astype(np.float32)
    got = run_loadable(softdla.build(m, fp32_reference=True, progress=False), x)[0]
    assert rel_l2(got, ort_run(m, x)[0]) < 1e-6


# ------------------------------------------------------------------ AveragePool: ceil mode's overhang is never counted
def average_pool(hw, k, s, pads, include):
    g = G()
    x = g.input("x", [1, 3, hw, hw])
    return g.model([g.node("AveragePool", [x], kernel_shape=[k, k], strides=[s, s], pads=pads,
                           count_include_pad=include, ceil_mode=1)])


@pytest.mark.parametrize("hw, k, s, pads, include", [(3, 2, 2, [0, 0, 0, 0], 1), (6, 3, 2, [0, 0, 0, 0], 1),
                                                     (7, 2, 2, [0, 0, 0, 0], 1), (6, 3, 2, [1, 1, 1, 1], 0),
                                                     (5, 3, 3, [0, 1, 0, 1], 0), (6, 4, 3, [0, 0, 0, 0], 0)])
def test_average_pool_ceil_overhang_is_not_counted(hw, k, s, pads, include):
    """ceil_mode's last windows reach past the (padded) input; ONNX divides them by the elements inside,
    also with count_include_pad=1 (a 2 x 2 window over the corner of a 3 x 3 input averages 1 value, not 4:
    relative L2 0.62 before). Values against ONNX Runtime, FP32 reference and FP16 loadables."""
    m = average_pool(hw, k, s, pads, include)
    x = np.random.default_rng(4).standard_normal([1, 3, hw, hw]).astype(np.float32)
    want = ort_run(m, x)[0]
    assert rel_l2(run_loadable(softdla.build(m, fp32_reference=True, progress=False), x)[0], want) < 1e-6
    assert rel_l2(run_loadable(softdla.build(m, fp16=True, progress=False), x)[0], want) < 2e-3


def test_average_pool_ceil_overhang_with_counted_padding_is_rejected():
    """count_include_pad=1 with padding of the model's own and a ceil overhang: ONNX counts the padding but not
    the overhang, which no DLA divisor does; an error that says what to change, not a wrong average. On
    Xavier (whose DLA always divides by the whole window) any overhang is refused."""
    assert "counts the padding but not" in build_error(average_pool(6, 3, 2, [1, 1, 1, 1], 1))
    assert "build for --target=orin" in build_error(average_pool(3, 2, 2, [0, 0, 0, 0], 1), target="xavier")


# ------------------------------------------------------------------ a full-size constant first, the computed input second
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Max", "Min", "Sum"])
def test_full_size_constant_first_operand(tmp_path, op):
    """Op(constant, x) with both of the output's shape: the computed input is the SDP's stream whichever
    comes first (Sub negates after); it was rejected with an internal message while `check` passed it.
    FP32 reference and FP16 against ONNX Runtime, INT8 within its quantization error."""
    m = constant_first(op)
    x = np.random.default_rng(8).standard_normal([1, 4, 5, 5]).astype(np.float32)
    want = ort_run(m, x)[0]
    assert rel_l2(run_loadable(softdla.build(m, fp32_reference=True, progress=False), x)[0], want) < 1e-6
    assert rel_l2(run_loadable(softdla.build(m, fp16=True, progress=False), x)[0], want) < 2e-3
    calib = tmp_path / "calib"
    calib.mkdir()
    np.save(calib / "a.npy", np.concatenate([x, np.random.default_rng(9).standard_normal([7, 4, 5, 5]).astype(np.float32)]))
    got = run_loadable(softdla.build(m, int8=True, fp16=True, calib_data=calib, calibrator="minmax", progress=False), x)[0]
    assert rel_l2(got, want) < 0.03


def test_constant_divided_by_a_tensor_is_rejected_by_name():
    assert "Div of a constant by a computed tensor" in build_error(constant_first("Div"))


# ------------------------------------------------------------------ a Gemm bias is a row vector, not M values of any shape
def gemm_with_bias(c_shape, fused_add):
    g = G(seed=1)
    x = g.input("x", [4, 6])
    w = g.const(g.rng.standard_normal([6, 4]).astype(np.float32))
    c = g.const(g.rng.standard_normal(c_shape).astype(np.float32))
    return g.model([g.node("Add", [g.node("MatMul", [x, w]), c]) if fused_add else g.node("Gemm", [x, w, c])])


@pytest.mark.parametrize("c_shape", [[4], [1, 4], [1], [], [4, 1]])
@pytest.mark.parametrize("fused_add", [False, True], ids=["gemm", "matmul_add"])
def test_gemm_bias_broadcasts_as_onnx_says(c_shape, fused_add):
    """A bias of M values shaped [M, 1] adds one value a row (here N = M = 4), not one a column: Gemm took it
    per column (its value count matched). Gemm now refuses it by name; MatMul + Add leaves it to the
    element-wise add. Everything else against ONNX Runtime."""
    m = gemm_with_bias(c_shape, fused_add)
    if c_shape == [4, 1] and not fused_add:
        assert "must be one value or one per output column" in build_error(m)
        return
    x = np.random.default_rng(6).standard_normal([4, 6]).astype(np.float32)
    got = run_loadable(softdla.build(m, fp32_reference=True, progress=False), x)[0].reshape(4, 4)
    assert rel_l2(got, ort_run(m, x)[0]) < 1e-6


# ------------------------------------------------------------------ calibration: what auto judges is what it applies
def offset_then_zero_sum_conv():
    """t = |x| + 5 (values in [5, 9], far from 0: entropy cuts its range to a fraction of 5 and every t
    saturates), then a 1 x 1 convolution whose filters sum to zero (it sees only t's differences)."""
    g = G(seed=3)
    x = g.input("x", [1, 8, 16, 8])
    t = g.node("Add", [g.node("Abs", [x]), g.const(np.float32(5.0))])
    w = g.rng.standard_normal([8, 8, 1, 1]).astype(np.float32)
    w -= w.mean(axis=1, keepdims=True)
    return g.model([g.node("Conv", [t, g.const(w)], kernel_shape=[1, 1])])


@pytest.mark.parametrize("samples", [16, 20])
def test_auto_calibrator_judges_the_rule_it_applies(tmp_path, samples):
    """`auto` holds out a quarter of the calibration batches and judges each rule fitted on the rest. A tensor
    of 16,384 to 21,845 values has enough for a distribution in the whole set but not in three quarters:
    the folds kept its range (every rule scored the same), and the final fit then applied entropy, which
    nothing had judged (cosine -0.1 against ONNX Runtime here). The decision is now the whole set's."""
    m = offset_then_zero_sum_conv()
    calib = tmp_path / "calib"
    calib.mkdir()
    data = np.random.default_rng(1).standard_normal([samples, 8, 16, 8]).astype(np.float32)
    np.save(calib / "a.npy", data)
    loadable = softdla.build(m, int8=True, fp16=True, calib_data=calib, calibrator="auto", progress=False)
    for image in data[:4]:
        assert cosine(run_loadable(loadable, image[None])[0], ort_run(m, image[None])[0]) > 0.99


@pytest.mark.parametrize("act", ["Sigmoid", "Tanh"])
def test_auto_calibrator_survives_outputs_far_from_zero(tmp_path, act):
    """A sigmoid output in [0.5, 1) (ReLU before it): entropy finds no divergence at any cut below the data
    and gives it a range of 0.5 or less (every output one code: cosine 0.05 against ONNX Runtime), as
    TensorRT's entropy calibrator would; `auto` judges that cut on held-out outputs and takes another rule."""
    g = G(seed=5)
    x = g.input("x", [1, 16, 16, 16])
    w = g.rng.standard_normal([8, 16, 1, 1]).astype(np.float32)
    w -= w.mean(axis=1, keepdims=True)  # filters that sum to zero: the output sees the activation's variation
    m = g.model([g.node("Conv", [g.node(act, [g.node("Relu", [x])]), g.const(w)], kernel_shape=[1, 1])])
    calib = tmp_path / "calib"
    calib.mkdir()
    data = np.random.default_rng(2).standard_normal([32, 16, 16, 16]).astype(np.float32)
    np.save(calib / "a.npy", data)
    loadable = softdla.build(m, int8=True, fp16=True, calib_data=calib, calibrator="auto", progress=False)
    for image in data[:4]:
        assert cosine(run_loadable(loadable, image[None])[0], ort_run(m, image[None])[0]) > 0.99


def test_graph_input_as_graph_output_is_explained():
    assert "graph output 'x' is a graph input itself" in build_error(input_is_output())


def test_hwc4_input_with_too_many_channels_is_named():
    g = G()
    x = g.input("pixels", [1, 32, 4, 4])
    m = g.model([g.node("Relu", [g.conv(x, 32, 8)])])
    assert "input 'pixels': dla_hwc4 holds 1, 3 or 4 channels and this tensor has 32" in build_error(
        m, input_formats="fp16:dla_hwc4")


# ------------------------------------------------------------------ I/O names past cuDLA's 80 descriptor bytes
def _relu_named(input_name, output_name):
    g = G()
    x = g.input(input_name, [1, 4, 4, 4])
    m = g.model([g.node("Relu", [x])])
    m.graph.node[-1].output[0] = m.graph.output[0].name = output_name
    return m


def _descriptor_names(loadable):
    cudla = pytest.importorskip("softdla.cudla")
    h = cudla.create_device(0, cudla.Mode.CUDA_DLA)
    try:
        m = cudla.module_load_from_memory(h, np.frombuffer(loadable, np.uint8), len(loadable), 0)
        try:
            kinds = cudla.ModuleAttributeType
            return [[d.name for d in cudla.module_get_attributes(m, k)]
                    for k in (kinds.INPUT_TENSOR_DESCRIPTORS, kinds.OUTPUT_TENSOR_DESCRIPTORS)]
        finally:
            cudla.module_unload(m, 0)
    finally:
        cudla.destroy_device(h)


def _as_text(name):
    return name.decode() if isinstance(name, bytes) else name


@pytest.mark.parametrize("ascii_head", [78, 79, 80])
def test_long_io_names_are_cut_on_a_character_boundary(ascii_head):
    # 'é' takes two bytes and 'ü' two: the 80-byte limit falls inside one of them, or just after.
    long_in, long_out = "i" * ascii_head + "é" * 4, "o" * ascii_head + "ü" * 4
    loadable = softdla.build(_relu_named(long_in, long_out), fp16=True, progress=False)
    (d_in,), (d_out,) = _descriptor_names(loadable)
    for full, cut in ((long_in, _as_text(d_in)), (long_out, _as_text(d_out))):
        assert full.startswith(cut) and len(cut.encode()) <= 80
        assert len(cut.encode()) >= 79  # at most one byte of a two-byte character is left off
    assert softdla.inspect(loadable)["inputs"][0]["name"] == long_in  # the loadable keeps the whole name


def test_io_names_equal_in_their_first_80_bytes_are_an_error():
    g = G()
    x = g.input("x", [1, 4, 4, 4])
    m = g.model([g.node("Relu", [x]), g.node("Sigmoid", [x])])
    head = "p" * 79 + "é"
    for i, suffix in enumerate(("a", "b")):
        m.graph.node[i].output[0] = m.graph.output[i].name = head + suffix
    assert "share their first 80 bytes" in build_error(m)


# ------------------------------------------------------------------ convolution sweep findings (INT8 chains)
def _int8_against_ort(m, tmp_path, x, out=0):
    calib = tmp_path / "calib"
    calib.mkdir(exist_ok=True)
    np.save(calib / "a.npy", (np.random.default_rng(1).standard_normal((16,) + x.shape[1:]) * x.std()).astype(np.float32))
    loadable = softdla.build(m, int8=True, fp16=True, calib_data=calib, progress=False)
    return run_loadable(loadable, x)[out], ort_run(m, x)[out]


def test_conv_same_padding_that_would_be_negative_is_an_error():
    g = G()
    x = g.input("x", [1, 1, 1, 8])
    m = g.model([g.node("Conv", [x, g.const(np.ones((1, 1, 1, 1), np.float32))], strides=[1, 4], auto_pad="SAME_UPPER")])
    assert "asks for negative padding here (a kernel of 1 with a stride of 4 over 8)" in build_error(m)


def _resize(scales=None, sizes=None, shape=(1, 2, 4, 4), **attrs):
    g = G()
    x = g.input("x", list(shape))
    ins = [x, ""] + ([g.const(np.array(scales, np.float32))] if scales is not None else ["", g.const(np.array(sizes, np.int64))])
    return g.model([g.node("Resize", ins, **attrs)])


@pytest.mark.parametrize("scales,axis", [([1, 1, 2.1, 2.1], "H"), ([1, 1, 2, 3.02], "W"), ([1, 1.1, 2, 2], "C"),
                                         ([1, 1, 1.2, 1], "H")])
@pytest.mark.parametrize("mode", [{"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
                                   "nearest_mode": "floor"}, {"mode": "linear"}], ids=["nearest", "linear"])
def test_resize_scale_that_is_not_a_whole_factor_is_refused(scales, axis, mode):
    """floor(4 x 2.1) = 8 rows looks like a factor of 2, but ONNX samples at i / 2.1 (ONNX Runtime: row 0
    [0 0 0 1 1 2 2 3], the factor-2 resize [0 0 1 1 2 2 3 3]); 1.1 on 2 channels keeps 2 channels but
    samples channel 1 at 1 / 1.1. Each was built as the whole factor."""
    m = _resize(scales, **mode)
    if mode["mode"] == "nearest" or axis != "C":  # a valid model: ONNX Runtime runs it (linear: H and W only)
        ort_run(m, np.zeros((1, 2, 4, 4), np.float32))
    msg = build_error(m)
    assert f"on {axis} is not the whole factor" in msg and "give whole-number scales, or sizes" in msg


@pytest.mark.parametrize("spec", [{"scales": [1, 1, 2, 3]}, {"sizes": [1, 2, 8, 12]}], ids=["scales", "sizes"])
def test_resize_by_whole_factors_still_builds_and_matches(spec):
    m = _resize(**spec, mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 4)).astype(np.float32)
    got = run_loadable(softdla.build(m, fp16=True, progress=False), x)[0]
    want = ort_run(m, x)[0]
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-3, atol=1e-3)


def test_dilated_padding_refusal_says_the_rule_ignores_the_dilation():
    """An ASPP branch (3x3, dilation 6, padding 6) is refused by the DLA's padding < kernel rule; the message
    said "padding 6 must be smaller than the kernel height 3", which reads as wrong for a 13-wide span."""
    g = G()
    x = g.input("x", [1, 4, 16, 16])
    w = g.const(np.ones((4, 4, 3, 3), np.float32))
    msg = build_error(g.model([g.node("Conv", [x, w], dilations=[6, 6], pads=[6, 6, 6, 6])]))
    assert "must be smaller than the kernel height 3" in msg and "ignores the dilation of 6" in msg


@pytest.mark.parametrize("op,attrs", [("HardSwish", {}), ("HardSigmoid", {"alpha": 0.25, "beta": 0.5})])
def test_hard_activations_are_refused_with_a_rewrite_that_runs_and_matches(op, attrs):
    g = G()
    x = g.input("x", [1, 4, 5, 5])
    assert "which runs" in build_error(g.model([g.node(op, [x], **attrs)]))
    g = G()
    x = g.input("x", [1, 4, 5, 5])
    if op == "HardSwish":
        c = g.node("Clip", [g.node("Add", [x, g.const(np.float32(3))]), g.const(np.float32(0)), g.const(np.float32(6))])
        y = g.node("Div", [g.node("Mul", [x, c]), g.const(np.float32(6))])
    else:
        a = g.node("Add", [g.node("Mul", [x, g.const(np.float32(0.25))]), g.const(np.float32(0.5))])
        y = g.node("Clip", [a, g.const(np.float32(0)), g.const(np.float32(1))])
    m = g.model([y])
    xi = (np.random.default_rng(0).standard_normal((1, 4, 5, 5)) * 3).astype(np.float32)
    want = ort_run(m, xi)[0]
    got = run_loadable(softdla.build(m, fp16=True, progress=False), xi)[0].reshape(want.shape)
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)
    ref = xi * np.clip(xi + 3, 0, 6) / 6 if op == "HardSwish" else np.clip(0.25 * xi + 0.5, 0, 1)
    np.testing.assert_allclose(want, ref, rtol=1e-5, atol=1e-6)  # the rewrite is the op


@pytest.mark.parametrize("kernel,stride", [((1, 64), (1, 64)), ((96, 1), (2, 1)), ((1, 128), (1, 3)), ((4, 4), (1, 96))])
def test_long_one_row_deconvolutions_build_and_match(kernel, stride):
    """TensorRT 10.7 lets DLA deconvolutions take 64, 96 or 128 on one axis with 1 on the other (PointPillars'
    upsampling); they were refused as outside 1-32."""
    g = G()
    x = g.input("x", [1, 3, 2, 2])
    w = (np.random.default_rng(0).standard_normal((3, 2) + kernel) * 0.3).astype(np.float32)
    m = g.model([g.node("ConvTranspose", [x, g.const(w)], strides=list(stride))])
    xi = np.random.default_rng(1).standard_normal((1, 3, 2, 2)).astype(np.float32)
    want = ort_run(m, xi)[0]
    got = run_loadable(softdla.build(m, fp16=True, progress=False), xi)[0].reshape(want.shape)
    assert rel_l2(got, want) < 2e-3


@pytest.mark.parametrize("kernel,stride", [((64, 64), (1, 1)), ((2, 64), (1, 1)), ((1, 48), (1, 1)), ((2, 2), (64, 64))])
def test_deconvolution_extents_outside_the_dla_rules_are_refused(kernel, stride):
    g = G()
    x = g.input("x", [1, 3, 2, 2])
    m = g.model([g.node("ConvTranspose", [x, g.const(np.ones((3, 2) + kernel, np.float32))], strides=list(stride))])
    assert "or 64, 96 or 128 on one axis with 1 on the other" in build_error(m)


def test_long_one_row_deconvolutions_are_orin_only():
    g = G()
    x = g.input("x", [1, 3, 2, 2])
    m = g.model([g.node("ConvTranspose", [x, g.const(np.ones((3, 2, 1, 64), np.float32))], strides=[1, 64])])
    assert "outside Xavier's DLA range: 1-32 on each axis" in build_error(m, target="xavier")


def test_linear_upsample_refusal_names_its_coordinates():
    """Upsample has no coordinate_transformation_mode; its refusal said "(got asymmetric)" as if it had."""
    g = G()
    x = g.input("x", [1, 2, 4, 4])
    msg = build_error(g.model([g.node("Upsample", [x, g.const(np.array([1, 1, 2, 2], np.float32))], mode="linear")]))
    assert "Upsample's linear mode samples at asymmetric coordinates" in msg and "write a Resize" in msg


@pytest.mark.parametrize("shape_from", ["constant", "Shape"])
def test_expand_of_a_constant_folds_into_the_add_it_feeds(shape_from):
    """Expand([1,8,1,1] constant, the activation's shape) before an Add was marked folded but never computed:
    the Add was refused with "input was not produced by a supported node"."""
    g = G()
    x = g.input("x", [1, 4, 6, 6])
    c = g.node("Conv", [x, g.const((np.random.default_rng(0).standard_normal((8, 4, 3, 3)) * 0.2).astype(np.float32))],
               pads=[1, 1, 1, 1])
    shape = g.const(np.array([1, 8, 6, 6], np.int64)) if shape_from == "constant" else g.node("Shape", [c])
    bias = (np.arange(8, dtype=np.float32) - 3.5).reshape(1, 8, 1, 1)
    m = g.model([g.node("Add", [c, g.node("Expand", [g.const(bias), shape])])])
    xi = np.random.default_rng(1).standard_normal((1, 4, 6, 6)).astype(np.float32)
    want = ort_run(m, xi)[0]
    got = run_loadable(softdla.build(m, fp16=True, progress=False), xi)[0].reshape(want.shape)
    assert rel_l2(got, want) < 2e-3


def test_reduce_prod_of_a_float_constant_stays_a_float():
    """ReduceProd folded every constant to a truncated int64: 1.5^3 became 3, and the Mul it fed scaled by 3
    instead of 3.375 (rel L2 0.11, no error)."""
    g = G()
    x = g.input("x", [1, 4, 5, 5])
    k = g.node("ReduceProd", [g.const(np.array([1.5, 1.5, 1.5], np.float32))], keepdims=0)
    m = g.model([g.node("Mul", [x, k])])
    xi = np.random.default_rng(0).standard_normal((1, 4, 5, 5)).astype(np.float32)
    want = ort_run(m, xi)[0]
    got = run_loadable(softdla.build(m, fp16=True, progress=False), xi)[0].reshape(want.shape)
    np.testing.assert_allclose(got, 3.375 * xi, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(want, 3.375 * xi, rtol=1e-6)


@pytest.mark.parametrize("outputs,reason", [(["y", "y"], "graph output 'y' is listed more than once"),
                                            (["y", "x"], "graph output 'x' is a graph input itself")])
def test_check_and_build_agree_on_graph_level_io_problems(outputs, reason, tmp_path):
    """An output listed twice, or an input listed as an output: ONNX Runtime runs both, the build refuses
    both, and `check` said every node was supported (exit status 0)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs]
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g", [x], outs)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert reason in build_error(m)
    rows = softdla.check(m)
    assert rows[0]["node"] == "(graph)" and not rows[0]["supported"] and reason in rows[0]["reason"]
    assert [r["supported"] for r in rows[1:]] == [True]
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    cli = subprocess.run([SOFTDLA, "check", str(path)], capture_output=True, text=True)
    assert cli.returncode == 1 and reason in cli.stdout and "1 of 1 nodes run on the DLA" in cli.stdout


def test_check_goes_on_past_outputs_no_dla_tensor_can_hold():
    """An unsupported node whose output has rank 6 (a PixelShuffle written as Reshape-Transpose-Reshape) or
    an empty dimension (Split into 4 of 9 channels: 3, 3, 3, 0) ended `check` with an error naming no node."""
    g = G()
    x = g.input("x", [1, 8, 3, 3])
    c = g.node("Conv", [x, g.const(np.ones((8, 8, 1, 1), np.float32))])
    r = g.node("Reshape", [c, g.const(np.array([1, 2, 2, 2, 3, 3], np.int64))])
    t = g.node("Transpose", [r], perm=[0, 1, 4, 2, 5, 3])
    y = g.node("Reshape", [t, g.const(np.array([1, 2, 6, 6], np.int64))])
    rows = softdla.check(g.model([y]))
    assert [r["supported"] for r in rows] == [True, False, False, False]
    assert "rank 6" in rows[1]["reason"] and "was not produced by a supported node" in rows[2]["reason"]

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 9, 4, 5])
    outs = [helper.make_tensor_value_info(f"s{i}", TensorProto.FLOAT, None) for i in range(4)]
    split = helper.make_node("Split", ["x"], [o.name for o in outs], name="split", axis=1, num_outputs=4)
    m = helper.make_model(helper.make_graph([split], "g", [x], outs), opset_imports=[helper.make_opsetid("", 18)])
    rows = softdla.check(m)
    assert len(rows) == 1 and not rows[0]["supported"] and "is empty (axis 1 has 0 elements" in rows[0]["reason"]


@pytest.mark.parametrize("op,attrs,what,span", [
    ("Conv", {}, "kernel", 5),
    ("Conv", {"strides": [2, 2]}, "kernel", 5),
    ("Conv", {"dilations": [2, 2], "pads": [1, 1, 1, 1]}, "kernel", 9),
    ("MaxPool", {"kernel_shape": [5, 5]}, "window", 5),
    ("AveragePool", {"kernel_shape": [5, 5], "pads": [0, 1, 0, 0]}, "window", 5),
])
def test_kernel_or_window_past_its_padded_input_has_one_message(op, attrs, what, span):
    """A kernel or window larger than its padded input leaves no output; the messages were three different
    ones ("computed a negative dimension", "dimension 0 cannot be a DLA tensor dimension")."""
    g = G()
    x = g.input("x", [1, 2, 3, 3])
    ins = [x, g.const(np.ones((2, 2, 5, 5), np.float32))] if op == "Conv" else [x]
    msg = build_error(g.model([g.node(op, ins, **attrs)]))
    assert f"the {what} spans {span} positions, more than its input (3) with its padding" in msg


def test_an_empty_slice_says_so_and_pow_of_an_activation_suggests_mul():
    """An empty Slice read "dimension 0 cannot be a DLA tensor dimension" (as if about axis 0); Pow(x, 2) of
    an activation was refused with no way out."""
    g = G()
    x = g.input("x", [1, 2, 4, 4])
    starts, ends, axes = (g.const(np.array([v], np.int64)) for v in (2, 1, 3))
    msg = build_error(g.model([g.node("Slice", [x, starts, ends, axes])]))
    assert "its output [1, 2, 4, 0] is empty (axis 3 has 0 elements" in msg and "Slice_" in msg, msg
    g = G()
    x = g.input("x", [1, 2, 4, 4])
    msg = build_error(g.model([g.node("Pow", [x, g.const(np.float32(2))])]))
    assert "Pow(x, 2) of an activation is Mul(x, x)" in msg, msg


def test_a_constant_operand_holding_an_infinity_runs_in_fp16_or_is_named(tmp_path):
    """Div by a full-size constant with one +inf: INT8 took an infinite range, and the loadable's checks
    refused an infinite scale naming no node. Its layer now runs in FP16 (which saturates the constant to
    65504, as the FP16 build does), and an INT8-only build names the constant."""
    b = np.full((1, 2, 2, 2), 4.0, np.float32)
    b[0, 0, 0, 0] = np.inf
    g = G()
    x = g.input("x", [1, 2, 2, 2])
    m = g.model([g.node("Div", [x, g.const(b)])])
    calib = tmp_path / "calib"
    calib.mkdir()
    np.save(calib / "a.npy", np.random.default_rng(0).uniform(50, 150, (16, 2, 2, 2)).astype(np.float32))
    xs = np.full((1, 2, 2, 2), 100.0, np.float32)
    with pytest.warns(softdla.BuildWarning, match="constant 'c0', which holds an infinity"):
        mixed = softdla.build(m, int8=True, fp16=True, calib_data=str(calib), progress=False)
    assert [p for _, _, p in softdla.inspect(mixed)["layers"]] == ["fp16"]
    got = run_loadable(mixed, xs)[0].ravel()
    assert np.allclose(got[1:], 25.0) and got[0] == np.float32(np.float16(100.0 / 65504))
    with pytest.raises(softdla.BuildError, match="holds an infinity, which has no INT8 scale"):
        softdla.build(m, int8=True, calib_data=str(calib), progress=False)


def test_conv_transpose_same_that_would_need_negative_padding_names_auto_pad():
    """SAME asks a deconvolution for input x stride outputs; a 1x1 kernel of stride 3 makes only
    (x - 1) x 3 + 1, so it would need negative padding. The message named output_shape, which the model
    does not set."""
    g = G()
    x = g.input("x", [1, 1, 4, 4])
    m = g.model([g.node("ConvTranspose", [x, g.const(np.ones((1, 1, 1, 1), np.float32))], strides=[3, 3],
                        auto_pad="SAME_UPPER")])
    msg = build_error(m)
    assert "auto_pad=SAME_UPPER asks for input x stride = 12 outputs" in msg and "(10)" in msg
    assert "output_shape" not in msg


@pytest.mark.parametrize("weight", [0.0, 1e-8], ids=["zero", "tiny"])
def test_int8_channel_of_zero_or_tiny_weights_keeps_its_bias(weight, tmp_path):
    """A pruned filter (or a BN with gamma 0): the bias alone is the output; it was rounded on the input's
    grid (zero weights took a weight scale of 1) or cut to int32 (tiny weights), giving 0."""
    g = G(2)
    x = g.input("x", [1, 4, 8, 8])
    w = (np.random.default_rng(0).standard_normal((2, 4, 3, 3)) * 0.02).astype(np.float32)
    w[1] = weight
    m = g.model([g.node("Conv", [x, g.const(w), g.const(np.array([0.0, 0.1], np.float32))], pads=[1, 1, 1, 1])])
    xi = (np.random.default_rng(3).standard_normal((1, 4, 8, 8)) * 4).astype(np.float32)
    got, want = _int8_against_ort(m, tmp_path, xi)
    assert np.abs(got.reshape(want.shape)[0, 1] - 0.1).max() < 0.01


def test_int8_clip_after_clip_takes_the_smaller_bound(tmp_path):
    g = G(3)
    x = g.input("x", [1, 4, 8, 8])
    zero, a, b = (g.const(np.float32(v)) for v in (0, 3, 6))
    m = g.model([g.node("Clip", [g.node("Clip", [g.conv(x, 4, 4, k=1), zero, a]), zero, b])])
    got, want = _int8_against_ort(m, tmp_path, np.random.default_rng(4).standard_normal((1, 4, 8, 8)).astype(np.float32) * 3)
    assert want.max() == 3.0 and got.max() <= 3.0 + 1e-6 and cosine(got, want) > 0.99


def test_int8_clip_alone_keeps_its_bounds(tmp_path):
    """A Clip(-0.5, 0.7) that cannot fuse (its input is a graph output too) after a convolution whose
    outputs reach +-200: its bounds are finer than one input step and used to round to 0."""
    g = G(4)
    x = g.input("x", [1, 4, 8, 8])
    c = g.conv(x, 4, 4, k=1, bias=False)
    g.inits[-1] = onnx.numpy_helper.from_array(np.random.default_rng(5).standard_normal((4, 4, 1, 1)).astype(np.float32) * 100,
                                               g.inits[-1].name)
    m = g.model([c, g.node("Clip", [c, g.const(np.float32(-0.5)), g.const(np.float32(0.7))])])
    got, want = _int8_against_ort(m, tmp_path, np.random.default_rng(6).standard_normal((1, 4, 8, 8)).astype(np.float32), out=1)
    assert np.isclose(got.min(), -0.5, atol=0.01) and np.isclose(got.max(), 0.7, atol=0.01), np.unique(got)


def test_int8_large_slopes_and_gains(tmp_path):
    g = G(5)
    x = g.input("x", [1, 4, 8, 8])
    m = g.model([g.node("LeakyRelu", [g.conv(x, 4, 4, k=1)], alpha=1e5)])
    xi = np.random.default_rng(7).standard_normal((1, 4, 8, 8)).astype(np.float32)
    got, want = _int8_against_ort(m, tmp_path, xi)
    assert cosine(got, want) > 0.99  # the Q15 slope wrapped: cosine -1
    g = G(5)
    x = g.input("x", [1, 4, 8, 8])
    m = g.model([g.node("Mul", [g.node("Mul", [g.conv(x, 4, 4, k=1), g.const(np.float32(3e9))]), g.const(np.float32(1e-9))])])
    with pytest.raises(softdla.BuildError, match="beyond its 32-bit multipliers"):
        _int8_against_ort(m, tmp_path, xi)


@pytest.mark.parametrize("op, expected", [("Add", "no input has the output's shape"), ("Mul", "no input has the output's shape"),
                                          ("PRelu", "broadcasts the input (shape [1, 1, 4, 4]) up to [1, 3, 4, 4]")])
def test_constant_that_broadcasts_a_convolution_up_is_a_clear_error_check_agrees(op, expected):
    """A one-channel convolution then Add/Mul/PRelu with a [1, 3, 1, 1] constant: not a per-channel step of
    the convolution (it was fused and failed the loadable's own check with an internal message)."""
    g = G()
    x = g.input("x", [1, 2, 4, 4])
    m = g.model([g.node(op, [g.conv(x, 2, 1, k=1), g.const(np.full((1, 3, 1, 1), 0.5, np.float32))])])
    assert expected in build_error(m)
    assert any(expected in r["reason"] for r in softdla.check(m) if not r["supported"])


# ------------------------------------------------------------------ casts between float types
def _keep_io_types_model():
    """onnxconverter-common's convert_float_to_float16(keep_io_types=True): float32 graph I/O, a float16
    network between Cast nodes at its edges."""
    g = G(3)
    x = g.input("x", [1, 4, 8, 8])
    h = g.node("Cast", [x], to=TensorProto.FLOAT16)
    w = g.const((g.rng.standard_normal((6, 4, 3, 3)) / 6).astype(np.float16))
    y = g.node("Relu", [g.node("Conv", [h, w], kernel_shape=[3, 3], pads=[1] * 4)])
    return g.model(g.node("Cast", [y], to=TensorProto.FLOAT))


@pytest.mark.parametrize("int8", [False, True])
def test_float_casts_of_activations_are_nothing(tmp_path, int8):
    """A float32 <-> float16 Cast of an activation was refused as 'build-time shape arithmetic'; it is
    nothing on the DLA (each layer's precision is the build's)."""
    from sdla_testkit.onnx_models import built_output_vs_ort
    x = np.random.default_rng(0).standard_normal((1, 4, 8, 8)).astype(np.float32)
    got, ref = built_output_vs_ort(_keep_io_types_model(), tmp_path, x, int8)
    assert cosine(got, ref) > 0.995 if int8 else rel_l2(got, ref) < 2e-3


def test_cast_of_an_activation_to_an_integer_is_refused_by_name():
    g = G(0)
    x = g.input("x", [1, 4, 8, 8])
    m = g.model(g.node("Cast", [g.node("Cast", [g.conv(x, 4, 4)], to=TensorProto.INT32)], to=TensorProto.FLOAT))
    assert "(Cast): computes int32 values at run time; the DLA runs floating-point layers only" in build_error(m)


# ------------------------------------------------------------------ vectors and malformed shapes
@pytest.mark.parametrize("int8", [False, True])
def test_matmul_of_a_squeezed_vector(tmp_path, int8):
    """torch's x.squeeze() after a batch-1 global average, then nn.Linear: MatMul of [C] by [C, M] (+ bias).
    It was refused with "flatten first" although the input is flat."""
    from sdla_testkit.onnx_models import built_output_vs_ort
    g = G(8)
    x = g.input("x", [1, 8, 6, 6])
    v = g.node("Squeeze", [g.node("GlobalAveragePool", [g.node("Relu", [g.conv(x, 8, 16)])])])
    y = g.node("Add", [g.node("MatMul", [v, g.weight(16, 5)]), g.weight(5, scale=0.1)])
    xin = np.random.default_rng(9).standard_normal((1, 8, 6, 6)).astype(np.float32)
    got, ref = built_output_vs_ort(g.model(y, opset=13), tmp_path, xin, int8)
    assert cosine(got, ref) > 0.995 if int8 else rel_l2(got, ref) < 2e-3


def test_matmul_over_tokens_says_what_runs_instead():
    g = G(0)
    x = g.input("x", [1, 4, 6, 8])
    m = g.model(g.node("MatMul", [g.node("Relu", [x]), g.weight(8, 3)]))
    assert "a 1x1 Conv over channels does" in build_error(m)


def test_reshape_with_a_2d_shape_tensor_is_refused():
    """ONNX's shape input is 1-D (ONNX Runtime refuses another); a [3, 1] one was read as its values."""
    g = G(0)
    x = g.input("x", [1, 4, 2, 2])
    m = g.model(g.node("Reshape", [g.node("Relu", [x]), g.const(np.array([[1], [4], [4]], np.int64))]))
    assert "the shape input must be a 1-D tensor, and it is [3, 1]" in build_error(m)
