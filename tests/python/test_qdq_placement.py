"""Q/DQ pairs placed as explicitly quantized models place them (NVIDIA ModelOpt, pytorch-quantization,
hand-written TensorRT models), not only after every op as onnxruntime's quantize_static does: a pair is a
quantization point whose rounding and saturation every reader of its output sees, and that no reader of
its input sees. The reference is ONNX Runtime running the model with graph optimizations off (the fake
quantization evaluated in float); the loadable may differ by its INT8 requantization's rounding, a step
or two of the output's scale, never by a pair's saturation."""
import re
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest

softdla = pytest.importorskip("softdla")

from sdla_testkit.onnx_models import G, run_loadable  # noqa: E402


def qdq(g, t, scale):
    s, z = g.const(np.float32(scale)), g.const(np.int8(0))
    return g.node("DequantizeLinear", [g.node("QuantizeLinear", [t, s, z]), s, z])


def qconv(g, t, cin, cout, x_scale=None):
    """A 3x3 convolution with per-channel int8 weights (a DequantizeLinear of codes) and, given x_scale, a
    Q/DQ pair on its input: ModelOpt's pattern (no pair on the output)."""
    w = (g.rng.standard_normal((cout, cin, 3, 3)) / np.sqrt(cin * 9)).astype(np.float32)
    ws = (np.abs(w).max(axis=(1, 2, 3)) / 127).astype(np.float32)
    codes = np.rint(w / ws[:, None, None, None]).astype(np.int8)
    wd = g.node("DequantizeLinear", [g.const(codes), g.const(ws)], axis=0)
    x = qdq(g, t, x_scale) if x_scale else t
    return g.node("Conv", [x, wd, g.weight(cout, scale=0.1)], kernel_shape=[3, 3], pads=[1] * 4)


def reference(model, x):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return s.run(None, {s.get_inputs()[0].name: x})


def build(model):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", softdla.BuildWarning)
        return softdla.build(model, int8=True, fp16=True, progress=False)


def steps_off(model, x, step):
    """Per output: the largest |loadable - ONNX Runtime| in units of `step`."""
    blob = build(model)
    got = run_loadable(blob, x)
    return [float(np.abs(np.asarray(a).reshape(r.shape) - r).max() / step) for a, r in zip(got, reference(model, x))]


def images(shape, scale=1.0, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def test_two_pairs_of_different_scales_on_one_tensor():
    """Two quantizers calibrated apart read one ReLU output (each convolution's input pair its own scale):
    each convolution sees the tensor on its own grid. The last pair's scale used to serve both (the first
    branch 11 steps off)."""
    g = G(2)
    x = g.input("x", [1, 4, 8, 8])
    r = g.node("Relu", [qconv(g, x, 4, 8, 0.03)])
    a = qdq(g, qconv(g, r, 8, 4, 0.01), 0.02)
    b = qdq(g, qconv(g, r, 8, 4, 0.03), 0.02)
    assert max(steps_off(g.model([a, b]), images((1, 4, 8, 8)), 0.02)) <= 1.01


@pytest.mark.parametrize("s1,s2", [(0.01, 0.05), (0.02, 0.03), (0.05, 0.01)])
def test_back_to_back_pairs_requantize(s1, s2):
    """conv -> Q/DQ(s1) -> Q/DQ(s2) -> conv: the second pair reads the first's rounded and saturated values
    (s1 = 0.01 clips at 1.27, which the coarser s2 alone would not: 34 steps off when the last scale won)."""
    g = G(3)
    x = g.input("x", [1, 4, 8, 8])
    t = qdq(g, qdq(g, qconv(g, x, 4, 8, 0.03), s1), s2)
    y = qdq(g, qconv(g, t, 8, 4), 0.02)
    assert steps_off(g.model(y), images((1, 4, 8, 8)), 0.02)[0] <= 1.01


def test_pair_read_by_an_fp16_layer_still_quantizes():
    """ModelOpt's last convolution: a pair on its input and none on its output, so the convolution has no
    INT8 output scale and runs in FP16. It must read the pair's values (rounded to 0.01, saturated at
    1.27), not the unquantized input (25 INT8 steps off when the pair was dropped)."""
    g = G(1)
    x = g.input("x", [1, 4, 6, 6])
    m = g.model(qconv(g, x, 4, 4, 0.01))
    x_ = images((1, 4, 6, 6))
    want = reference(m, x_)[0]
    got = run_loadable(build(m), x_)[0].reshape(want.shape)
    assert np.abs(got - want).max() <= 2e-3 * np.abs(want).max()  # FP16's rounding, not the pair's
    layers = softdla.inspect(build(m))["layers"]
    assert [k for _, k, _ in layers].count("convert") >= 1 and layers[-1][2] == "fp16"
    # The warning for the FP16 layer says what a Q/DQ model lacks: a pair on the layer's output.
    with pytest.warns(softdla.BuildWarning, match="add a Q/DQ pair on the output too"):
        softdla.build(m, int8=True, fp16=True, progress=False)


def test_pair_before_a_graph_output_saturates():
    """Sigmoid -> Q/DQ(1/254) -> graph output: the pair clips at 0.5 (the model's own clamp), though both
    layers run in FP16 (110 steps off when the pair was dropped)."""
    g = G(4)
    x = g.input("x", [1, 4, 6, 6])
    y = qdq(g, g.node("Sigmoid", [qconv(g, x, 4, 4, 0.02)]), 1 / 254)
    assert steps_off(g.model(y), images((1, 4, 6, 6)), 1 / 254)[0] <= 1.05  # 1 + the FP16 output's rounding


@pytest.mark.parametrize("skip_from", ["input", "conv"])
def test_skip_branch_without_a_pair_reads_the_unquantized_tensor(skip_from):
    """A residual block whose input feeds the first convolution through a pair and the add directly: the
    add reads the tensor unquantized (it was saturated at the pair's 2.0: 66-76 steps off)."""
    g = G(3)
    x = g.input("x", [1, 4, 8, 8])
    t = x if skip_from == "input" else g.node("Relu", [qconv(g, x, 4, 4, 6 / 127)])
    y = qconv(g, g.node("Relu", [qconv(g, t, 4, 4, 2 / 127)]), 4, 4, 0.03)
    out = qdq(g, g.node("Relu", [g.node("Add", [y, t])]), 0.05)
    assert steps_off(g.model(out), images((1, 4, 8, 8), 2.0), 0.05)[0] <= 2.01


@pytest.mark.parametrize("op", ["Concat", "Add"])
def test_shared_scale_keeps_the_finer_pairs_saturation(op):
    """Inputs of a concatenation or an add share the largest of their scales on the DLA; a finer pair that
    saturates (0.01: 1.27) still clips its values before they take the shared scale (67 steps off when its
    scale was simply raised). What stays is the coarser grid's rounding."""
    g = G(1)
    x = g.input("x", [1, 8, 8, 8])
    a = qdq(g, qconv(g, x, 8, 4, 3 / 127), 0.01)
    b = qdq(g, qconv(g, x, 8, 4, 3 / 127), 0.05)
    o = qdq(g, g.node(op, [a, b], **({"axis": 1} if op == "Concat" else {})), 0.03)
    assert steps_off(g.model(o), images((1, 8, 8, 8)), 0.03)[0] <= 2.01


def test_one_quantize_feeding_two_dequantizes():
    """One QuantizeLinear read by two DequantizeLinears of its scale (valid ONNX; it was refused as "not
    followed by DequantizeLinear")."""
    g = G(5)
    x = g.input("x", [1, 4, 8, 8])
    s, z = g.const(np.float32(0.02)), g.const(np.int8(0))
    q = g.node("QuantizeLinear", [g.node("Relu", [qconv(g, x, 4, 4, 0.03)]), s, z])
    a = qdq(g, qconv(g, g.node("DequantizeLinear", [q, s, z]), 4, 4), 0.02)
    b = qdq(g, qconv(g, g.node("DequantizeLinear", [q, s, z]), 4, 4), 0.02)
    assert max(steps_off(g.model([a, b]), images((1, 4, 8, 8)), 0.02)) <= 1.01


def test_pair_on_its_own_tensor_adds_no_layer():
    """The usual case, a pair whose input nothing else reads, stays free: the producer writes INT8 at the
    pair's scale and no layer of its own runs it."""
    g = G(6)
    x = g.input("x", [1, 4, 8, 8])
    y = qdq(g, qconv(g, qdq(g, g.node("Relu", [qconv(g, x, 4, 8, 0.03)]), 0.02), 8, 4), 0.02)
    layers = softdla.inspect(build(g.model(y)))["layers"]
    assert [k for _, k, _ in layers] == ["conv", "conv"] and {p for _, _, p in layers} == {"int8"}


@pytest.mark.parametrize("dtype,ok", [(onnx.TensorProto.INT8, True), (onnx.TensorProto.UINT8, False)])
def test_opset21_output_dtype(dtype, ok):
    """Opset 21's QuantizeLinear names its type in output_dtype when it has no zero point: int8 is the
    DLA's INT8, uint8 is refused as any other asymmetric pair."""
    g = G(7)
    x = g.input("x", [1, 4, 6, 6])
    s = g.const(np.float32(0.02))
    t = g.node("DequantizeLinear", [g.node("QuantizeLinear", [x, s], output_dtype=dtype), s])
    m = g.model(qdq(g, qconv(g, t, 4, 4), 0.02), opset=21)
    if ok:
        assert steps_off(m, images((1, 4, 6, 6)), 0.02)[0] <= 1.01
    else:
        with pytest.raises(softdla.BuildError, match="quantizes to uint8"):
            build(m)


def test_dedicated_pairs_of_one_scale_add_no_layer():
    """onnxruntime's DedicatedQDQPair (and quantizers that share a calibration) give each reader of a tensor
    its own pair of one scale: they are one scale of that tensor, no layers of their own."""
    g = G(8)
    x = g.input("x", [1, 4, 8, 8])
    t = g.node("Relu", [qconv(g, x, 4, 8, 0.03)])
    a = qdq(g, qconv(g, qdq(g, t, 0.02), 8, 4), 0.02)
    b = qdq(g, qconv(g, qdq(g, t, 0.02), 8, 4), 0.02)
    m = g.model([a, b])
    layers = softdla.inspect(build(m))["layers"]
    assert [k for _, k, _ in layers] == ["conv"] * 3 and {p for _, _, p in layers} == {"int8"}
    assert max(steps_off(m, images((1, 4, 8, 8)), 0.02)) <= 1.01


def test_an_op_named_like_a_pair_is_not_taken_for_one():
    """An unnamed Relu (the importer names it Relu_0) and a QuantizeLinear named Relu_0: pairs are known by
    the tensor they write, not by name (the Relu was folded away as if it were the pair, negative values
    passing)."""
    from onnx import TensorProto, helper, numpy_helper
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "s", "z"], ["q"], name="Relu_0"),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4, 4])],
                              [numpy_helper.from_array(np.array(0.02, np.float32), "s"),
                               numpy_helper.from_array(np.array(0, np.int8), "z")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    assert steps_off(m, images((1, 4, 4, 4)), 0.02)[0] <= 1.05


def test_pad_read_through_a_pair_merges_into_the_conv():
    """F.pad then a quantized convolution: the Conv reads the padded tensor through its input pair. The
    pair quantizes the padding zeros to zeros, so the Pad still becomes the Conv's padding."""
    g = G(9)
    x = g.input("x", [1, 4, 8, 8])
    p = g.node("Pad", [g.node("Relu", [qconv(g, x, 4, 4, 0.03)]), g.const(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))])
    w = (g.rng.standard_normal((4, 4, 3, 3)) / 6).astype(np.float32)
    ws = (np.abs(w).max(axis=(1, 2, 3)) / 127).astype(np.float32)
    wd = g.node("DequantizeLinear", [g.const(np.rint(w / ws[:, None, None, None]).astype(np.int8)), g.const(ws)], axis=0)
    y = qdq(g, g.node("Conv", [qdq(g, p, 0.02), wd], kernel_shape=[3, 3]), 0.02)
    m = g.model(y)
    assert steps_off(m, images((1, 4, 8, 8)), 0.02)[0] <= 1.01
    assert {k for _, k, _ in softdla.inspect(build(m))["layers"]} == {"conv"}


def test_int8_input_at_a_shared_scale_keeps_its_pairs_saturation(tmp_path):
    """An INT8 graph input (codes given by the user) whose pair (0.01: clips at 1.27) is raised to the scale
    it shares with a concatenation (0.05): its values still pass the pair's saturation before anything
    reads them."""
    from sdla_testkit.onnx_models import softdla_build
    g = G(10)
    x = g.input("x", [1, 4, 6, 6])
    a = qdq(g, x, 0.01)
    b = qdq(g, qconv(g, a, 4, 4), 0.05)
    m = g.model(qdq(g, g.node("Concat", [a, b], axis=1), 0.05))
    loadable, _ = softdla_build(m, tmp_path, "--int8", "--fp16", "--inputIOFormats=int8:chw32")
    codes = np.clip(np.rint(images((1, 4, 6, 6), 2.0) / 0.05), -127, 127)
    x_ = (codes * 0.05).astype(np.float32)  # what the INT8 input holds at its scale of 0.05
    want = reference(m, x_)[0]
    got = run_loadable(loadable, x_)[0].reshape(want.shape)
    assert np.abs(got - want).max() / 0.05 <= 1.01


def test_int8_input_with_two_pair_scales_says_why(tmp_path):
    """One quantizer per reader on a graph input, at different scales: an int8 input cannot hold both, and
    the error says so (it said the input had no scale, as if calibration were missing)."""
    from sdla_testkit.onnx_models import softdla_build
    g = G(2)
    x = g.input("x", [1, 4, 8, 8])
    a, b = qconv(g, x, 4, 8, x_scale=4 / 127), qconv(g, x, 4, 8, x_scale=1 / 127)
    m = g.model([qdq(g, a, 6 / 127), qdq(g, b, 6 / 127)], opset=13)
    _, r = softdla_build(m, tmp_path, "--int8", "--fp16", "--inputIOFormats=int8:dla_linear", check=False)
    assert r.returncode == 1 and re.search(r"its Q/DQ pairs quantize it at 0\.0078740\d* and 0\.031496\d*", r.stderr), r.stderr
    _, r = softdla_build(m, tmp_path, "--int8", "--fp16")  # fp16 input: the pairs are conversions, no warning
    assert "run in FP16" not in r.stderr, r.stderr

    # Pairs on the readers' outputs only (none on x): x simply has no scale, as the message said before.
    g = G(3)
    x = g.input("x", [1, 4, 8, 8])
    m = g.model([qdq(g, qconv(g, x, 4, 8), 0.05), qdq(g, qconv(g, x, 4, 8), 0.07)], opset=13)
    _, r = softdla_build(m, tmp_path, "--int8", "--fp16", "--inputIOFormats=int8:dla_linear", check=False)
    assert r.returncode == 1 and "input 'x' is int8 but has no scale: calibrate" in r.stderr, r.stderr
