"""INT8 scales that come from the model or the user rather than from softdla's calibration: Q/DQ pairs in
the ONNX graph and TensorRT calibration caches (docs/BUILDER.md, "INT8 scales"). Values against ONNX Runtime
running the same Q/DQ model (graph optimizations off: its fusions round differently), or against the scales
written in the cache."""
import struct
import subprocess
import warnings

import numpy as np
import onnxruntime as ort
import pytest

import softdla
import onnx
from sdla_testkit.onnx_models import SOFTDLA, G, ort_run, rel_l2, run_loadable, softdla_build


def write_cache(path, scales):
    lines = ["TRT-8601-EntropyCalibration2"] + [f"{name}: {struct.pack('>f', s).hex()}" for name, s in scales.items()]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def qdq(g, t, scale, zero_point=np.int8(0), dq_scale=None, dq_zero_point=None):
    q = g.node("QuantizeLinear", [t, g.const(np.float32(scale)), g.const(zero_point)])
    dq_zp = zero_point if dq_zero_point is None else dq_zero_point
    return g.node("DequantizeLinear", [q, g.const(np.float32(dq_scale or scale)), g.const(dq_zp)])


def ort_plain(model, *arrays):
    """ONNX Runtime without graph optimizations: each Q/DQ node computed as the ONNX spec says."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), arrays)})


def build(model, **kw):
    return softdla.build(model, progress=False, **kw)


def build_error(model, **kw):
    with pytest.raises(softdla.BuildError) as e:
        build(model, **kw)
    return str(e.value)


X = np.random.default_rng(0).standard_normal((1, 4, 8, 8)).astype(np.float32)


# ------------------------------------------------------------------ Q/DQ pairs
def test_qdq_scale_wins_over_a_cache_entry(tmp_path):
    g = G(3)
    x = g.input("x", [1, 4, 8, 8])
    r = g.node("Relu", [g.conv(qdq(g, x, 4 / 127), 4, 8)])
    m = g.model([qdq(g, r, 6 / 127)], opset=13)
    cache = write_cache(tmp_path / "c.txt", {"x": 1 / 127, r: 1 / 127})
    loadable = build(m, int8=True, calib_cache=cache)
    assert softdla.inspect(loadable)["inputs"][0]["scale"] == pytest.approx(4 / 127)
    assert rel_l2(run_loadable(loadable, X)[0], ort_plain(m, X)[0]) < 0.05  # 0.48 with the cache's 1/127


@pytest.mark.parametrize("variant, expected", [
    ("uint8", "quantizes to uint8"),
    ("no_zero_point", "quantizes to uint8"),  # ONNX's default type
    ("int16", "quantizes to int16"),
    ("dq_scale", "dequantizes with another scale"),
    ("dq_zero_point", "zero points must be 0"),
])
def test_qdq_pairs_that_are_not_symmetric_int8_are_refused(variant, expected):
    g = G(3)
    x = g.input("x", [1, 4, 8, 8])
    if variant == "no_zero_point":
        s = g.const(np.float32(1 / 127))
        y = g.node("DequantizeLinear", [g.node("QuantizeLinear", [x, s]), s])
    else:
        kw = {"uint8": dict(zero_point=np.uint8(0)), "int16": dict(zero_point=np.int16(0)),
              "dq_scale": dict(dq_scale=2 / 127), "dq_zero_point": dict(dq_zero_point=np.int8(5))}[variant]
        y = qdq(g, x, 1 / 127, **kw)
    m = g.model([g.node("Relu", [y])], opset=21 if variant == "int16" else 13)
    message = build_error(m, int8=True, fp16=True)
    assert expected in message and ("ActivationSymmetric" in message or variant == "dq_scale"), message


def conv_with_qdq_weights(per_channel, seed=0):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((8, 4, 3, 3)) * 0.3).astype(np.float32)
    if per_channel:
        ws = (np.abs(w).reshape(8, -1).max(1) / 127).astype(np.float32)
        wq = np.clip(np.round(w / ws[:, None, None, None]), -127, 127).astype(np.int8)
    else:
        ws = np.float32(np.abs(w).max() / 127)
        wq = np.clip(np.round(w / ws), -127, 127).astype(np.int8)
    g = G(seed)
    x = g.input("x", [1, 4, 8, 8])
    zp = np.zeros(8, np.int8) if per_channel else np.int8(0)
    wdq = g.node("DequantizeLinear", [g.const(wq), g.const(ws), g.const(zp)], **({"axis": 0} if per_channel else {}))
    b = g.const((rng.standard_normal(8) * 0.1).astype(np.float32))
    y = g.node("Conv", [qdq(g, x, 3 / 127), wdq, b], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    return g.model([qdq(g, y, 4 / 127)], opset=13)


@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
def test_qdq_weights_keep_their_codes(per_channel):
    """Per-tensor weight codes sit below 127 in most output channels; re-quantizing each channel to its own
    amax / 127 moved them (2-7 output steps off ONNX Runtime). The model's own grid is kept."""
    m = conv_with_qdq_weights(per_channel, seed=1)
    x = np.random.default_rng(5).standard_normal((1, 4, 8, 8)).astype(np.float32)
    got, want = run_loadable(build(m, int8=True), x)[0], ort_plain(m, x)[0]
    steps = np.abs(got - want) / (4 / 127)
    assert steps.max() <= 1.01 and (steps > 0.5).mean() <= 0.02, (steps.max(), (steps > 0.5).mean())


@pytest.mark.parametrize("codes, zero_point, expected", [
    (np.int8, np.full(8, 3, np.int8), "has the zero point 3 (index 0)"),
    (np.int8, np.int8(-2), "has the zero point -2;"),
    (np.uint8, np.uint8(0), "dequantizes uint8 codes"),
    (np.uint8, np.uint8(128), "dequantizes uint8 codes"),
], ids=["int8_zp3_per_channel", "int8_zp-2", "uint8_zp0", "uint8_zp128"])
def test_qdq_weights_that_are_not_symmetric_int8_are_refused(codes, zero_point, expected):
    """Weights with a zero point (or unsigned codes) folded to their values, then an INT8 build re-quantized
    them symmetrically: other numbers than the model's, without an error; TensorRT's parser refuses them."""
    rng = np.random.default_rng(4)
    w = rng.integers(0, 120, (8, 4, 3, 3)).astype(codes)
    g = G(2)
    x = g.input("x", [1, 4, 8, 8])
    axis = {"axis": 0} if np.ndim(zero_point) else {}
    scales = np.full(8, 0.01, np.float32) if np.ndim(zero_point) else np.float32(0.01)
    wdq = g.node("DequantizeLinear", [g.const(w), g.const(scales), g.const(zero_point)], **axis)
    m = g.model([qdq(g, g.node("Conv", [qdq(g, x, 3 / 127), wdq], kernel_shape=[3, 3]), 4 / 127)], opset=13)
    for flags in (dict(int8=True, fp16=True), dict(fp16=True)):
        message = build_error(m, **flags)
        assert expected in message and "WeightSymmetric" in message, message


def test_onnxruntime_quantize_static_output_builds(tmp_path):
    """onnxruntime's own QDQ output with int8 activations (its int8 weights are symmetric, per channel, with
    int32 biases): it builds, and matches ONNX Runtime running the same QDQ model."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    g = G(6)
    x = g.input("x", [1, 4, 8, 8])
    m = g.model(g.conv(g.node("Relu", [g.conv(x, 4, 8)]), 8, 6), opset=13)
    src, dst = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(m, str(src))
    samples = [np.random.default_rng(i).standard_normal((1, 4, 8, 8)).astype(np.float32) for i in range(8)]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(samples)

        def get_next(self):
            s = next(self.it, None)
            return None if s is None else {"x": s}

    quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    extra_options={"ActivationSymmetric": True})
    q = onnx.load(str(dst))
    got, want = run_loadable(build(q, int8=True), samples[0])[0], ort_plain(q, samples[0])[0]
    out_scale = max(float(np.abs(want).max()), 1e-6) / 127
    assert np.abs(got - want).max() <= 2.01 * out_scale


def test_quantize_of_a_constant_is_folded():
    """Q/DQ on a constant operand: ONNX Runtime multiplies by the constant's quantized value (0.4 for 0.37
    at a step of 0.1), not by 0.37."""
    g = G(1)
    x = g.input("x", [1, 4, 8, 8])
    k = qdq(g, g.const(np.full((1, 4, 1, 1), 0.37, np.float32)), 0.1)
    m = g.model([qdq(g, g.node("Mul", [qdq(g, x, 3 / 127), k]), 4 / 127)], opset=13)
    got, want = run_loadable(build(m, int8=True), X)[0], ort_plain(m, X)[0]
    assert np.abs(got - want).max() <= 4 / 127 + 1e-6  # at most one step; 3 with 0.37


def test_per_axis_scales_must_match_their_axis():
    g = G(1)
    x = g.input("x", [1, 4, 8, 8])
    scales = g.const(np.linspace(0.01, 0.08, 8).astype(np.float32))  # 8 scales, axis 1 (the default) has 4
    w = g.node("DequantizeLinear", [g.const(np.ones((8, 4, 3, 3), np.int8)), scales, g.const(np.zeros(8, np.int8))])
    m = g.model([g.node("Conv", [x, w], kernel_shape=[3, 3])], opset=13)
    assert "has 8 scales along axis 1, of size 4" in build_error(m, fp16=True)


# ------------------------------------------------------------------ calibration caches
def relu_reshape_conv():
    g = G(1)
    x = g.input("x", [1, 4, 8, 8])
    r = g.node("Relu", [g.conv(x, 4, 8)])
    a = g.node("Reshape", [r, g.const(np.array([1, 8, 8, 8], np.int64))])
    y = g.conv(a, 8, 4)
    return g.model(y), r, a, y


def test_a_cache_entry_under_any_name_of_a_tensor_is_used(tmp_path):
    """A Reshape that only renames a tensor: the cache may name either side (TensorRT's caches name both)."""
    m, r, a, y = relu_reshape_conv()
    loadable = build(m, int8=True, calib_cache=write_cache(tmp_path / "c.txt", {"x": 3 / 127, r: 2 / 127, y: 1.5 / 127}))
    assert {p for _, _, p in softdla.inspect(loadable)["layers"]} == {"int8"}
    ref = ort_run(m, X)[0]
    assert rel_l2(run_loadable(loadable, X)[0], ref) < 0.1


def test_cache_entries_that_disagree_for_one_tensor_are_an_error(tmp_path):
    m, r, a, y = relu_reshape_conv()
    cache = write_cache(tmp_path / "c.txt", {"x": 3 / 127, r: 2 / 127, a: 4 / 127, y: 1.5 / 127})
    message = build_error(m, int8=True, calib_cache=cache)
    assert f"'{r}'" in message and f"'{a}'" in message and "one tensor on the DLA" in message


def test_a_cache_that_names_no_tensor_is_an_error(tmp_path):
    m, r, a, y = relu_reshape_conv()
    cache = write_cache(tmp_path / "c.txt", {"X": 3 / 127, r.upper(): 2 / 127})
    assert "names none of this model's tensors" in build_error(m, int8=True, fp16=True, calib_cache=cache)


def test_missing_scale_names_the_tensor(tmp_path):
    m, r, a, y = relu_reshape_conv()
    message = build_error(m, int8=True, calib_cache=write_cache(tmp_path / "c.txt", {"x": 3 / 127, r: 2 / 127}))
    assert f"no scale for its tensor '{y}'" in message


def test_tensors_the_builder_makes_take_their_inputs_range(tmp_path):
    """An output that is also given back through an Identity (the builder copies it) and a global average
    over 64 x 64 (two pooling steps: past one 32 x 32 convolution): tensors no cache can name, which take the
    range they copy or average."""
    g = G(1)
    x = g.input("x", [1, 4, 16, 16])
    r = g.node("Relu", [g.conv(x, 4, 8)])
    m1 = g.model([r, g.node("Identity", [r])])
    g = G(0)
    x = g.input("x", [1, 4, 64, 64])
    c = g.node("Relu", [g.conv(x, 4, 8, k=1)])
    gap = g.node("GlobalAveragePool", [c])
    m2 = g.model(gap)
    assert [name for name, *_ in build_layers(m2)] == ["Conv_1", "GlobalAveragePool_3 (step 1)", "GlobalAveragePool_3 (step 2)"]
    rng = np.random.default_rng(3)
    for m, scales, shape in ((m1, {"x": 3 / 127, r: 2 / 127, m1.graph.output[1].name: 2 / 127}, (1, 4, 16, 16)),
                             (m2, {"x": 3 / 127, c: 2 / 127, gap: 0.5 / 127}, (1, 4, 64, 64))):
        xi = rng.standard_normal(shape).astype(np.float32)
        loadable = build(m, int8=True, calib_cache=write_cache(tmp_path / "c.txt", scales))
        for got, want in zip(run_loadable(loadable, xi), ort_run(m, xi)):
            assert rel_l2(got, want) < 0.1


def build_layers(m):
    return softdla.inspect(build(m, fp16=True))["layers"]


@pytest.mark.parametrize("hw", [(8, 12), (16, 16), (24, 32)])
def test_global_average_needing_several_windows_is_one_rounding(hw):
    """A global average past one 8 x 8 pooling window ran as a chain of pools whose intermediate results,
    from Q/DQ scales alone, took the input's scale: a second rounding that put zero-mean maps' averages
    up to 13 output steps off ONNX Runtime. Up to 32 x 32 it is one depthwise convolution: one rounding,
    as ONNX Runtime's."""
    h, w = hw
    x = np.random.default_rng(0).standard_normal((1, 8, h, w)).astype(np.float32)
    s_in, s_out = float(np.abs(x).max() / 127), float(np.abs(x.mean(axis=(2, 3))).max() / 127)
    g = G(0)
    m = g.model([qdq(g, g.node("GlobalAveragePool", [qdq(g, g.input("x", [1, 8, h, w]), s_in)]), s_out)], opset=13)
    assert len(build_layers(m)) == 1
    steps = np.abs(run_loadable(build(m, int8=True), x)[0] - ort_plain(m, x)[0]) / s_out
    assert steps.max() <= 0.51, steps.max()  # ORT rounds ties to even, the DLA away from zero: half a step
    g = G(0)
    plain = g.model([g.node("GlobalAveragePool", [g.input("x", [1, 8, h, w])])], opset=13)
    assert rel_l2(run_loadable(build(plain, fp16=True), x)[0], x.mean(axis=(2, 3), keepdims=True)) < 1e-3


def test_layer_precision_for_a_fused_node_lists_the_layers():
    g = G(1)
    x = g.input("x", [1, 4, 8, 8])
    m = g.model(g.node("Relu", [g.bn(g.conv(x, 4, 8), 8)]))
    message = build_error(m, fp16=True, layer_precisions={m.graph.node[-1].name: "fp16"})
    assert "takes that layer's precision. Layers: Conv_1" in message


def test_channel_shuffle_with_qdq_pairs_between_its_nodes():
    """quantize_static puts a Q/DQ pair after the rank-5 Reshape and the Transpose of a channel shuffle
    too: the shuffle is still found (a 1x1 convolution of 0/1 weights), and exact."""
    g = G(2)
    x = g.input("x", [1, 8, 8, 8])
    codes = np.random.default_rng(4).integers(-127, 128, (8, 8, 1, 1)).astype(np.int8)
    w = g.node("DequantizeLinear", [g.const(codes), g.const(np.float32(0.004)), g.const(np.int8(0))])
    c = qdq(g, g.node("Conv", [qdq(g, x, 3 / 127), w]), 6 / 127)  # Q/DQ weights: exact against ONNX Runtime
    r = qdq(g, g.node("Reshape", [c, g.const(np.array([1, 2, 4, 8, 8], np.int64))]), 6 / 127)
    t = qdq(g, g.node("Transpose", [r], perm=[0, 2, 1, 3, 4]), 6 / 127)
    y = qdq(g, g.node("Reshape", [t, g.const(np.array([1, 8, 8, 8], np.int64))]), 6 / 127)
    m = g.model([y], opset=13)
    loadable = build(m, int8=True)
    assert [p for _, _, p in softdla.inspect(loadable)["layers"]] == ["int8", "int8"]
    xi = np.random.default_rng(9).standard_normal((1, 8, 8, 8)).astype(np.float32)
    assert np.abs(run_loadable(loadable, xi)[0] - ort_plain(m, xi)[0]).max() <= 1e-6


def test_a_qdq_scale_raised_by_a_shared_range_is_reported(tmp_path):
    """An add's inputs share one scale on the DLA: the smaller Q/DQ scale is raised, and --verbose says so."""
    g = G(1)
    x = g.input("x", [1, 4, 8, 8])
    xq = qdq(g, x, 4 / 127)
    c = qdq(g, g.conv(xq, 4, 4, k=1), 1 / 127)
    m = g.model([qdq(g, g.node("Add", [c, xq]), 5 / 127)], opset=13)
    _, r = softdla_build(m, tmp_path, "--int8", "--verbose")
    assert "its Q/DQ scale 0.007874 becomes 0.031496" in r.stdout + r.stderr, r.stdout + r.stderr


# ------------------------------------------------------------------ caches and calibration data
def one_conv():
    g = G(1)
    x = g.input("x", [1, 4, 8, 8])
    w = (np.random.default_rng(2).standard_normal((4, 4, 3, 3)) * 0.2).astype(np.float32)
    return g.model([g.node("Relu", [g.node("Conv", [x, g.const(w)], pads=[1, 1, 1, 1])])])


@pytest.mark.parametrize("text", ["TRT-8601-EntropyCalibration2\n", "TRT-8601-EntropyCalibration2",
                                  "TRT-8601-EntropyCalibration2\rx: 3c000000\r"], ids=["header", "no-newline", "cr"])
def test_a_cache_without_entries_is_an_error(text, tmp_path):
    """A header-only cache (or one whose lines end in a lone CR, read as one line) built all-FP16 with no word,
    calibration data ignored."""
    cache = tmp_path / "c.cache"
    cache.write_bytes(text.encode())
    calib = tmp_path / "calib"
    calib.mkdir()
    np.save(calib / "a.npy", X)
    assert "has no entries" in build_error(one_conv(), int8=True, fp16=True, calib_cache=str(cache), calib_data=str(calib))


def test_no_cache_is_written_without_a_calibration(tmp_path):
    """--calib=FILE with no data wrote a header-only cache, which the next build then took as its scales
    (all FP16, no word); without --int8 likewise."""
    m = one_conv()
    onnx_path = tmp_path / "m.onnx"
    onnx.save(m, onnx_path)
    calib = tmp_path / "calib"
    calib.mkdir()
    np.save(calib / "a.npy", np.random.default_rng(0).standard_normal((8, 4, 8, 8)).astype(np.float32))
    cache = tmp_path / "a.cache"
    r = subprocess.run([SOFTDLA, "build", f"--onnx={onnx_path}", "--int8", "--fp16", f"--calib={cache}",
                        f"--saveEngine={tmp_path / 'm.loadable'}"], capture_output=True, text=True)
    assert r.returncode == 1 and "does not exist, and there is no calibration data" in r.stderr and not cache.exists()
    r = subprocess.run([SOFTDLA, "build", f"--onnx={onnx_path}", "--fp16", f"--calib={cache}", f"--calib-data={calib}",
                        f"--saveEngine={tmp_path / 'm.loadable'}"], capture_output=True, text=True)
    assert r.returncode == 0 and "wrote calibration cache" not in r.stdout and not cache.exists()
    r = subprocess.run([SOFTDLA, "build", f"--onnx={onnx_path}", "--int8", "--fp16", f"--calib={cache}",
                        f"--calib-data={calib}", f"--saveEngine={tmp_path / 'm.loadable'}"], capture_output=True, text=True)
    assert r.returncode == 0 and "1 int8" in r.stdout and "wrote calibration cache" in r.stdout
    assert len(cache.read_text().splitlines()) > 1


@pytest.mark.parametrize("shape", [(8, 8, 8, 4), (8, 3, 8, 8), (8, 256), (8, 8, 4)], ids=["nhwc", "3ch", "flat", "hwc-one-sample"])
def test_calibration_arrays_of_another_shape_are_refused(shape, tmp_path):
    """NHWC images, another channel count or a flat array were reshaped into scrambled NCHW samples."""
    calib = tmp_path / "calib"
    calib.mkdir()
    np.save(calib / "a.npy", np.ones(shape, np.float32))
    msg = build_error(one_conv(), int8=True, fp16=True, calib_data=str(calib))
    assert "takes samples of 4 x 8 x 8 (C x H x W)" in msg and "stack the samples on the first axis" in msg


@pytest.mark.parametrize("shape", [(8, 4, 8, 8), (4, 8, 8), (8, 1, 4, 8, 8)], ids=["nchw", "one-sample", "extra-axis"])
def test_calibration_arrays_of_the_input_shape_are_taken(shape, tmp_path):
    calib = tmp_path / "calib"
    calib.mkdir()
    np.save(calib / "a.npy", np.random.default_rng(0).standard_normal(shape).astype(np.float32))
    build(one_conv(), int8=True, fp16=True, calib_data=str(calib))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_calibration_data_is_an_error(bad, tmp_path):
    """NaN and infinities were skipped without a word (all-NaN data built all-FP16)."""
    calib = tmp_path / "calib"
    calib.mkdir()
    data = np.random.default_rng(0).standard_normal((8, 4, 8, 8)).astype(np.float32)
    data[3, 1, 2, 2] = bad
    np.save(calib / "a.npy", data)
    msg = build_error(one_conv(), int8=True, fp16=True, calib_data=str(calib))
    assert "sample 3 of 'x' holds" in msg and "calibration data must be finite" in msg


def two_inputs():
    g = G(1)
    a, b = g.input("a", [1, 4, 4, 4]), g.input("b", [1, 4, 4, 4])
    return g.model([g.node("Add", [g.node("Relu", [a]), g.node("Relu", [b])])])


def test_multi_input_calibration_data_names_what_is_wrong(tmp_path):
    calib = tmp_path / "calib"
    calib.mkdir()
    rng = np.random.default_rng(0)
    np.savez(calib / "d.npz", a=rng.standard_normal((8, 4, 4, 4)).astype(np.float32),
             b=rng.standard_normal((3, 4, 4, 4)).astype(np.float32))
    assert "8 samples of 'a' but 3 of 'b'" in build_error(two_inputs(), int8=True, fp16=True, calib_data=str(calib))
    (calib / "d.npz").unlink()
    np.save(calib / "d.npy", rng.standard_normal((8, 4, 4, 4)).astype(np.float32))
    msg = build_error(two_inputs(), int8=True, fp16=True, calib_data=str(calib))
    assert "this model has 2 inputs ('a', 'b')" in msg and "one array per input" in msg


def test_python_calib_cache_is_written_when_it_does_not_exist(tmp_path):
    """softdla.build(calib_cache=NEW, calib_data=DIR) calibrated and wrote nothing (the CLI's --calib=FILE
    writes a new file), so the next build with that cache failed: now it is written, then read back."""
    m = one_conv()
    calib = tmp_path / "calib"
    calib.mkdir()
    np.save(calib / "a.npy", np.random.default_rng(0).standard_normal((8, 4, 8, 8)).astype(np.float32))
    cache = tmp_path / "new.cache"
    first = build(m, int8=True, fp16=True, calib_cache=str(cache), calib_data=str(calib))
    assert cache.read_text().splitlines()[0].startswith("TRT-") and len(cache.read_text().splitlines()) > 1
    again = build(m, int8=True, fp16=True, calib_cache=str(cache))
    assert softdla.inspect(first)["layers"] == softdla.inspect(again)["layers"]
    assert np.array_equal(run_loadable(first, X)[0], run_loadable(again, X)[0])


def test_written_cache_lists_the_values_fusions_hide(tmp_path):
    """TensorRT's caches list every activation tensor; a cache softdla wrote left out the values its fusions
    hide (a convolution's output before its BatchNormalization and ReLU), which TensorRT then finds without a
    scale. Every value is now listed, each at the min-max range ONNX Runtime computes for it (an
    independent run with every value an output), and the cache builds the same loadable back."""
    g = G(3)
    x = g.input("x", [1, 4, 8, 8])
    c1 = g.conv(x, 4, 8)
    b1 = g.bn(c1, 8)
    r1 = g.node("Relu", [b1])
    c2 = g.conv(r1, 8, 6)
    y = g.node("Clip", [c2, g.const(np.float32(0)), g.const(np.float32(6))])
    m = g.model(y)
    calib = tmp_path / "calib"
    calib.mkdir()
    xs = np.random.default_rng(0).standard_normal((16, 4, 8, 8)).astype(np.float32)
    np.save(calib / "a.npy", xs)
    cache = tmp_path / "new.cache"
    first = build(m, int8=True, fp16=True, calib_data=str(calib), calib_cache=str(cache), calibrator="minmax")
    lines = cache.read_text().splitlines()
    scales = {ln.rsplit(": ", 1)[0]: struct.unpack(">f", bytes.fromhex(ln.rsplit(": ", 1)[1]))[0] for ln in lines[1:]}
    hidden = [c1, b1, r1, c2]
    assert set(hidden) | {"x", y} <= set(scales), sorted(scales)
    probe = onnx.ModelProto.FromString(m.SerializeToString())
    for name in hidden:
        probe.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    sess = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    values = [sess.run(hidden, {"x": xs[i:i + 1]}) for i in range(len(xs))]
    for k, name in enumerate(hidden[:2] + hidden[3:]):  # r1 is the built model's own tensor (its own rule)
        amax = max(float(np.abs(v[hidden.index(name)]).max()) for v in values)
        assert scales[name] == pytest.approx(amax / 127, rel=1e-5), name
    again = build(m, int8=True, fp16=True, calib_cache=str(cache))
    assert np.array_equal(run_loadable(first, X)[0], run_loadable(again, X)[0])


def test_written_cache_names_values_that_only_rearrange_another(tmp_path):
    """A Flatten a Gemm absorbs never becomes a tensor of its own; TensorRT's cache has it (its values are its
    input's, so the same range)."""
    g = G(5)
    x = g.input("x", [1, 4, 8, 8])
    r = g.node("Relu", [g.conv(x, 4, 8)])
    f = g.node("Flatten", [r])
    y = g.node("Gemm", [f, g.const(np.random.default_rng(1).standard_normal((10, 512)).astype(np.float32))], transB=1)
    m = g.model(y)
    calib = tmp_path / "calib"
    calib.mkdir()
    np.save(calib / "a.npy", np.random.default_rng(0).standard_normal((8, 4, 8, 8)).astype(np.float32))
    cache = tmp_path / "c.cache"
    build(m, int8=True, fp16=True, calib_data=str(calib), calib_cache=str(cache))
    entries = dict(ln.rsplit(": ", 1) for ln in cache.read_text().splitlines()[1:])
    assert entries[f] == entries[r], entries


def test_builds_that_do_not_do_what_their_flags_say_warn(tmp_path):
    """A cache written for another model built all-FP16 without a word; --layerPrecisions int8 without
    --int8, and calibration data without --int8, were ignored without a word."""
    m = one_conv()
    conv = m.graph.node[0].name
    foreign = tmp_path / "foreign.cache"
    foreign.write_text("TRT-8600-EntropyCalibration2\nx: 3c010204\nnot_here: 3c010204\n")
    calib = tmp_path / "calib"
    calib.mkdir()
    np.save(calib / "a.npy", np.random.default_rng(0).standard_normal((4, 4, 8, 8)).astype(np.float32))
    cases = [
        (dict(int8=True, fp16=True, calib_cache=str(foreign)), "the calibration cache has no entry for them"),
        (dict(fp16=True, layer_precisions={conv: "int8"}), f"asks int8 for layer '{conv}', which runs in fp16: --int8 is not set"),
        (dict(fp16=True, calib_data=str(calib)), "--calib-data is not used without --int8"),
    ]
    for kw, words in cases:
        with pytest.warns(softdla.BuildWarning, match=words):
            build(m, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a plain calibrated INT8 build warns of nothing
        build(m, int8=True, fp16=True, calib_data=str(calib))
    onnx.save(m, tmp_path / "m.onnx")
    r = subprocess.run([SOFTDLA, "build", f"--onnx={tmp_path / 'm.onnx'}", "--int8", "--fp16", f"--calib={foreign}",
                        f"--saveEngine={tmp_path / 'm.loadable'}"], capture_output=True, text=True)
    assert r.returncode == 0 and "softdla: warning: 1 of 1 layers that could run in INT8 run in FP16" in r.stderr, r.stderr
