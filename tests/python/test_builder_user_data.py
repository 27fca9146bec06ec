"""What users' own data and models put in front of the builder and `softdla run`, found by the sweeps of
2026-12-07 (night): calibration data whose stray values silence an input, weights and Q/DQ scales that
have no INT8 meaning, layers computing on constants, tensors past the DLA's sizes (check agreeing with
build), inputs no layer reads, raw input files that read two ways. Each case fails without its fix."""
import subprocess

import numpy as np
import onnx
import pytest

from sdla_testkit.engine import Engine
from sdla_testkit.onnx_models import SOFTDLA, G, cosine, ort_run, softdla_build

from softdla import formats


def conv_relu(shape=(1, 3, 12, 12), cout=8):
    g = G()
    x = g.input("x", shape)
    return g.model([g.node("Relu", [g.conv(x, shape[1], cout)])])


def softdla(*args):
    return subprocess.run([SOFTDLA, *args], capture_output=True, text=True)


# ------------------------------------------------------------------ calibration data quality
def test_a_stray_calibration_value_that_silences_an_input_is_reported(tmp_path):
    rng = np.random.default_rng(0)
    data = rng.standard_normal((16, 3, 12, 12)).astype(np.float32)
    model = conv_relu()
    clean_dir, stray_dir = tmp_path / "clean", tmp_path / "stray"
    clean_dir.mkdir(), stray_dir.mkdir()
    _, clean = softdla_build(model, clean_dir, "--int8", "--fp16", calib=data)
    assert "round to 0" not in clean.stderr and "inaccurate" not in clean.stderr, clean.stderr
    data[5, 1, 3, 4] = 1e4  # one value: inputs keep their whole range, so the scale is 1e4 / 127
    loadable, r = softdla_build(model, stray_dir, "--int8", "--fp16", calib=data)
    assert "input 'x' keeps its whole observed range" in r.stderr and "100 % of its non-zero values" in r.stderr, r.stderr
    assert "INT8 calibration: the best range rule" in r.stderr, r.stderr
    # An input no INT8 layer reads loses nothing to an INT8 scale: no warning about it.
    fp16_dir = tmp_path / "fp16_layer"
    fp16_dir.mkdir()
    _, r16 = softdla_build(model, fp16_dir, "--int8", "--fp16", "--layerPrecisions=Conv_1:fp16",
                           "--precisionConstraints=obey", calib=data)
    assert "keeps its whole observed range" not in r16.stderr, r16.stderr
    # What the warning is about: the INT8 output has lost the input (ReLU of a conv of zeros = bias only).
    x = rng.standard_normal((1, 3, 12, 12)).astype(np.float32)
    got = Engine(loadable).run_float(x)[0].reshape(-1)
    assert cosine(got, ort_run(model, x)[0].reshape(-1)) < 0.9


def test_auto_calibration_judges_rules_by_their_worst_output(tmp_path):
    # A head that squares its features (heavy tails, which entropy clips) beside five plain heads: averaged
    # over the outputs, entropy's loss on that head hid behind the others (cosine 0.977 there).
    g = G(seed=1)
    x = g.input("x", [1, 1, 13, 7])
    t = g.conv(x, 1, 16)
    heads = [g.conv(g.node("Relu", [t]), 16, c, k=1) for c in (1, 3, 16, 17, 33)]
    squared = g.conv(g.node("Add", [g.node("Mul", [t, t]), t]), 16, 1, stride=2)
    model = g.model([squared] + heads)
    rng = np.random.default_rng(1)
    calib, held_out = rng.standard_normal((12, 1, 13, 7)).astype(np.float32), rng.standard_normal((4, 1, 13, 7)).astype(np.float32)
    def squared_head_cosine(calibrator):
        d = tmp_path / calibrator
        d.mkdir()
        loadable, _ = softdla_build(model, d, "--int8", "--fp16", f"--calibrator={calibrator}", calib=calib)
        e = Engine(loadable)
        return np.mean([cosine(e.run_float(s[None])[0].reshape(-1), ort_run(model, s[None])[0].reshape(-1)) for s in held_out])
    auto, entropy = squared_head_cosine("auto"), squared_head_cosine("entropy")
    assert auto > 0.99 and auto > entropy + 0.01, (auto, entropy)


# ------------------------------------------------------------------ values without an INT8 meaning
@pytest.mark.parametrize("bad", [np.inf, np.nan])
def test_int8_weights_that_are_not_finite_are_refused_naming_the_layer(tmp_path, bad):
    model = conv_relu()
    w = onnx.numpy_helper.to_array(model.graph.initializer[0]).copy()
    w[2, 1, 0, 0] = bad
    model.graph.initializer[0].CopyFrom(onnx.numpy_helper.from_array(w, model.graph.initializer[0].name))
    data = np.random.default_rng(1).standard_normal((4, 3, 12, 12)).astype(np.float32)
    _, r = softdla_build(model, tmp_path, "--int8", "--fp16", calib=data, check=False)
    assert r.returncode == 1
    assert "layer 'Conv_1': its weights hold" in r.stderr and "INT8 weights must be finite" in r.stderr, r.stderr


def qdq_model(scale):
    g = G()
    x = g.input("x", [1, 4, 6, 6])
    s, z = g.const(np.float32(scale)), g.const(np.int8(0))
    q = g.node("QuantizeLinear", [x, s, z])
    dq = g.node("DequantizeLinear", [q, s, z])
    return g.model([g.node("Relu", [g.conv(dq, 4, 4)])], opset=13)


@pytest.mark.parametrize("scale", [0.0, -0.03, np.nan, np.inf])
def test_qdq_scales_that_are_not_positive_finite_are_refused_by_build_and_check(tmp_path, scale):
    # Scale 0 used to read as "no scale": the pair was dropped and the layer ran in FP16 (ORT gives 0).
    model = qdq_model(scale)
    _, r = softdla_build(model, tmp_path, "--int8", "--fp16", check=False)
    assert r.returncode == 1
    assert "QuantizeLinear" in r.stderr and "a Q/DQ scale must be a positive finite number" in r.stderr, r.stderr
    c = softdla("check", str(tmp_path / "model.onnx"))
    assert c.returncode == 1 and "a Q/DQ scale must be a positive finite number" in c.stdout, c.stdout


# ------------------------------------------------------------------ layers on constants, sizes: check == build
def test_a_conv_of_a_constant_is_refused_by_check_and_build_alike(tmp_path):
    g = G()
    x = g.input("x", [1, 3, 8, 8])
    folded_away = g.conv(g.const(np.ones((1, 3, 8, 8), np.float32)), 3, 4)  # the builder cannot evaluate a Conv
    model = g.model([g.node("Add", [g.conv(x, 3, 4), folded_away])])
    _, r = softdla_build(model, tmp_path, "--fp16", check=False)
    assert r.returncode == 1 and "computes on constants only" in r.stderr, r.stderr
    c = softdla("check", str(tmp_path / "model.onnx"))
    assert c.returncode == 1
    assert any("Conv" in line and "NO" in line and "computes on constants only" in line for line in c.stdout.splitlines())


@pytest.mark.parametrize("shape,message", [([1, 8193, 4, 4], "dim 1 = 8193 is outside the DLA range [1, 8192]"),
                                           ([4097, 2, 2, 2], "batch = 4097 is outside the DLA range [1, 4096]")])
def test_check_reports_the_tensor_sizes_build_refuses(tmp_path, shape, message):
    g = G()
    model = g.model([g.node("Relu", [g.input("x", shape)])])
    _, r = softdla_build(model, tmp_path, "--fp16", check=False)
    assert r.returncode == 1 and message in r.stderr, r.stderr
    c = softdla("check", str(tmp_path / "model.onnx"))
    assert c.returncode == 1 and "(graph)" in c.stdout and message in c.stdout, c.stdout


@pytest.mark.parametrize("op,attrs", [("MaxPool", dict(kernel_shape=[2, 2], strides=[2, 2])),
                                      ("AveragePool", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])), ("Softmax", dict(axis=1))])
def test_pools_and_softmax_of_a_constant_still_build_and_compute(tmp_path, op, attrs):
    # Engines other than the convolution and SDP ones read a constant as data (the loader allows it).
    g = G()
    x = g.input("x", [1, 4, 6, 6])
    c = g.const(np.random.default_rng(3).standard_normal((1, 4, 6, 6)).astype(np.float32))
    model = g.model([g.node("Relu", [x]), g.node(op, [c], **attrs)])
    loadable, _ = softdla_build(model, tmp_path, "--fp16")
    xin = np.ones((1, 4, 6, 6), np.float32)
    np.testing.assert_allclose(Engine(loadable).run_float(xin)[1].reshape(-1), ort_run(model, xin)[1].reshape(-1),
                               rtol=2e-3, atol=2e-3)


def test_intermediate_tensors_alive_at_once_past_the_dla_pool_are_refused(tmp_path):
    # Three fp16 tensors of 512 MiB: two are alive at once (1 GiB + the third), each under the 1 GiB limit.
    g = G()
    x = g.input("x", [1, 4096, 256, 256])
    a = g.node("Relu", [x])
    b = g.node("Sigmoid", [a])
    model = g.model([g.node("Add", [g.node("Tanh", [b]), a])])
    _, r = softdla_build(model, tmp_path, "--fp16", check=False)
    assert r.returncode == 1 and "local DRAM pool, 1 GiB by default" in r.stderr, r.stderr
    # FP32 is softdla's reference, not a DLA build: no pool to fit.
    _, r = softdla_build(model, tmp_path, "--fp32-reference", check=False)
    assert "local DRAM pool" not in r.stderr, r.stderr


# ------------------------------------------------------------------ small refusals made right or clearer
def test_calibration_data_needs_no_samples_for_an_input_no_layer_reads(tmp_path):
    g = G()
    x = g.input("x", [1, 3, 8, 8])
    g.input("unused", [1, 2, 4, 4])
    model = g.model([g.node("Relu", [g.conv(x, 3, 4)])])
    data = {"x": np.random.default_rng(2).standard_normal((8, 3, 8, 8)).astype(np.float32)}
    loadable, r = softdla_build(model, tmp_path, "--int8", "--fp16", calib=data)
    assert loadable is not None, r.stderr


def test_reduce_sum_axes_attribute_past_opset_13_is_refused(tmp_path):
    g = G()
    x = g.input("x", [1, 4, 6, 6])
    model = g.model([g.node("ReduceSum", [x], axes=[2, 3], keepdims=1)], opset=13)  # invalid ONNX: ORT refuses it
    _, r = softdla_build(model, tmp_path, "--fp16", check=False)
    assert r.returncode == 1 and "no longer has at opset 13" in r.stderr, r.stderr


def test_average_windows_past_8_that_leave_padding_out_say_why(tmp_path):
    g = G()
    x = g.input("x", [1, 4, 20, 20])
    model = g.model([g.node("AveragePool", [x], kernel_shape=[9, 9], pads=[1, 1, 1, 1], count_include_pad=0)])
    _, r = softdla_build(model, tmp_path, "--fp16", check=False)
    assert r.returncode == 1 and "set count_include_pad=1" in r.stderr, r.stderr


def test_division_of_two_tensors_is_orin_only(tmp_path):
    g = G()
    x = g.input("x", [1, 4, 6, 6])
    model = g.model([g.node("Div", [g.conv(x, 4, 4), g.node("Sigmoid", [x])])])
    _, r = softdla_build(model, tmp_path, "--fp16", "--target=xavier", check=False)
    assert r.returncode == 1 and "Xavier's DLA has none" in r.stderr, r.stderr
    for divisor in (np.full((1, 4, 6, 6), 3, np.float32), np.full((1, 1, 6, 6), 3, np.float32)):  # constants: built
        g = G()
        x = g.input("x", [1, 4, 6, 6])
        loadable, _ = softdla_build(g.model([g.node("Div", [g.conv(x, 4, 4), g.const(divisor)])]), tmp_path, "--fp16",
                                    "--target=xavier")
        assert loadable is not None
    g = G()
    x = g.input("x", [1, 4, 6, 6])
    by_constant = g.model([g.node("Div", [g.conv(x, 4, 4), g.const(np.full((1, 4, 1, 1), 3, np.float32))])])
    loadable, _ = softdla_build(by_constant, tmp_path, "--fp16", "--target=xavier")  # a scale: Xavier has it
    assert loadable is not None


def test_descriptor_names_keep_80_bytes_cut_at_a_whole_character():
    assert formats.descriptor_name("é" * 45).encode() == ("é" * 40).encode()
    assert formats.descriptor_name("a" + "é" * 45) == "a" + "é" * 39
    assert formats.descriptor("n" * 90, (1, 3, 4, 4), np.float16, formats.CHW16)["name"] == "n" * 80


# ------------------------------------------------------------------ softdla run's inputs
def chw16_loadable(tmp_path):
    g = G()
    model = g.model([g.node("Relu", [g.input("x", [1, 16, 4, 4])])])
    loadable, _ = softdla_build(model, tmp_path, "--fp16", "--inputIOFormats=fp16:chw16")
    return tmp_path / "model.loadable"


def test_run_warns_where_a_raw_input_reads_two_ways(tmp_path):
    # fp16 chw16 with 16 channels: the padded layout and the NCHW values have the same size.
    path = chw16_loadable(tmp_path)
    raw = tmp_path / "x.bin"
    raw.write_bytes(np.arange(256, dtype=np.float16).tobytes())
    r = softdla("run", f"--loadEngine={path}", f"--loadInputs=x:{raw}", "--backend=cpu")
    assert r.returncode == 0, r.stderr
    assert "fits both the I/O format of 'x'" in r.stderr and "give a .npy" in r.stderr, r.stderr


def test_run_warns_when_fp16_inputs_saturate(tmp_path):
    path = chw16_loadable(tmp_path)
    x = np.ones((1, 16, 4, 4), np.float32)
    x[0, 0, 0, 0] = 70000.0
    np.save(tmp_path / "x.npy", x)
    r = softdla("run", f"--loadEngine={path}", f"--loadInputs=x:{tmp_path / 'x.npy'}", "--backend=cpu")
    assert r.returncode == 0, r.stderr
    assert "1 of 256 values lie outside the FP16 range" in r.stderr, r.stderr
