"""1-D networks ([N, C, T] tensors: audio, sequences, sensors), which TensorRT's ONNX parser runs as 2-D
layers (softdla over [N, C, 1, T], where rank-3 tensors lie on the DLA): Conv and ConvTranspose with 3-D weights, 1-D pools, resizes along T, the mean
over time. They were refused ("only 2-D convolution"). References: ONNX Runtime on the same model; FP16
within FP16 rounding, INT8 by cosine."""
import numpy as np
import pytest
from onnx import TensorProto

from sdla_testkit.onnx_models import G, built_output_vs_ort, cosine, ort_run, rel_l2, run_loadable, softdla_build

T = 50


def _w(g, *shape):
    return g.const((g.rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32))


def audio_net():
    """Conv1d + BN + ReLU, MaxPool1d, a strided dilated Conv1d, AvgPool1d, ConvTranspose1d back up, the mean
    over time, a classifier: the shapes 1-D models take."""
    g = G(5)
    x = g.input("x", [1, 12, T])
    c = g.node("Conv", [x, _w(g, 16, 12, 3), g.weight(16, scale=0.1)], kernel_shape=[3], pads=[1, 1])
    c = g.node("Relu", [g.bn(c, 16)])
    c = g.node("MaxPool", [c], kernel_shape=[2], strides=[2])
    c = g.node("Relu", [g.node("Conv", [c, _w(g, 16, 8, 5)], kernel_shape=[5], pads=[4, 4], dilations=[2], group=2)])
    c = g.node("Conv", [c, _w(g, 24, 16, 3)], kernel_shape=[3], strides=[2], pads=[1, 1])
    c = g.node("AveragePool", [g.node("Relu", [c])], kernel_shape=[3], strides=[1], pads=[1, 1],
               count_include_pad=0)
    up = g.node("ConvTranspose", [c, _w(g, 24, 8, 2)], kernel_shape=[2], strides=[2])
    m = g.node("ReduceMean", [g.node("Relu", [up])], axes=[-1], keepdims=0)
    y = g.node("Gemm", [m, _w(g, 10, 8)], transB=1)
    return g.model(y, opset=13)


@pytest.mark.parametrize("int8", [False, True])
def test_one_d_network_matches_onnxruntime(tmp_path, int8):
    x = np.random.default_rng(0).standard_normal((1, 12, T)).astype(np.float32)
    got, ref = built_output_vs_ort(audio_net(), tmp_path, x, int8, calib_samples=16)
    assert cosine(got, ref) > 0.99 if int8 else rel_l2(got, ref) < 3e-3


@pytest.mark.parametrize("mode, coord, rounding", [
    ("nearest", "asymmetric", "floor"),
    ("nearest", "half_pixel", "round_prefer_floor"),
    ("nearest", "pytorch_half_pixel", "round_prefer_floor"),
    ("linear", "pytorch_half_pixel", "round_prefer_floor"),
])
def test_resize_along_time_and_global_pool(tmp_path, mode, coord, rounding):
    """Resize of a rank-3 tensor scales T (its W on the DLA); pytorch_half_pixel is half_pixel for whole
    factors (they differ only for an output of length 1)."""
    g = G(1)
    x = g.input("x", [1, 6, 9])
    c = g.node("Relu", [g.node("Conv", [x, _w(g, 8, 6, 3)], kernel_shape=[3], pads=[1, 1])])
    u = g.node("Resize", [c, "", g.const(np.array([1, 1, 3], np.float32))], mode=mode,
               coordinate_transformation_mode=coord, nearest_mode=rounding)
    m = g.model([u, g.node("GlobalAveragePool", [u])], opset=13)
    x_in = np.random.default_rng(2).standard_normal((1, 6, 9)).astype(np.float32)
    blob, _ = softdla_build(m, tmp_path, "--fp16")
    refs = ort_run(m, x_in)
    for got, ref in zip(run_loadable(blob, x_in), refs):
        assert rel_l2(got.reshape(ref.shape), ref) < 2e-3


def test_one_d_attributes_of_the_wrong_length_are_refused(tmp_path):
    g = G(0)
    x = g.input("x", [1, 4, 16])
    m = g.model(g.node("Conv", [x, _w(g, 4, 4, 3)], kernel_shape=[3], pads=[1, 1, 1, 1]))
    _, r = softdla_build(m, tmp_path, "--fp16", check=False)
    assert r.returncode == 1 and "attribute 'pads' must be 2 values (two per spatial dim of the rank-3 input); it has 4" in r.stderr, r.stderr


def test_one_d_float16_model_with_casts_at_its_edges(tmp_path):
    """A float16 1-D model as onnxconverter-common writes it (float16 weights, Casts at the graph's edges)
    builds and matches ONNX Runtime."""
    g = G(4)
    x = g.input("x", [1, 4, 20])
    w = g.const((g.rng.standard_normal((6, 4, 5)) / 5).astype(np.float16))
    h = g.node("Cast", [x], to=TensorProto.FLOAT16)
    y = g.node("Cast", [g.node("Conv", [h, w], kernel_shape=[5], pads=[2, 2])], to=TensorProto.FLOAT)
    m = g.model(y, opset=13)
    x_in = np.random.default_rng(3).standard_normal((1, 4, 20)).astype(np.float32)
    blob, _ = softdla_build(m, tmp_path, "--fp16")
    ref = ort_run(m, x_in)[0]
    assert rel_l2(run_loadable(blob, x_in)[0].reshape(ref.shape), ref) < 2e-3


def test_one_d_convolutions_sharing_their_weights(tmp_path):
    """Two 1-D convolutions of one weight initializer (a tied or repeated block): the weights are viewed
    as 2-D once, and both read them so."""
    g = G(6)
    x = g.input("x", [1, 8, 16])
    w = _w(g, 8, 8, 3)
    a = g.node("Relu", [g.node("Conv", [x, w], kernel_shape=[3], pads=[1, 1])])
    m = g.model(g.node("Conv", [a, w], kernel_shape=[3], pads=[1, 1]), opset=13)
    x_in = np.random.default_rng(7).standard_normal((1, 8, 16)).astype(np.float32)
    blob, _ = softdla_build(m, tmp_path, "--fp16")
    ref = ort_run(m, x_in)[0]
    assert rel_l2(run_loadable(blob, x_in)[0].reshape(ref.shape), ref) < 2e-3


def test_one_d_weights_keep_their_shape_for_other_readers(tmp_path):
    """The 2-D view of 1-D weights is the convolution's own: a Shape of the same initializer after it reads
    [K, C, k] (the view used to be written into the weights, and this Reshape came out [1, 8, 1, 15])."""
    g = G(3)
    x = g.input("x", [1, 8, 15])
    w = _w(g, 8, 8, 3)
    c = g.node("Conv", [x, w], kernel_shape=[3], pads=[1, 1])
    k = g.node("Gather", [g.node("Shape", [w]), g.const(np.array([2], np.int64))], axis=0)
    shape = g.node("Concat", [g.const(np.array([1, 8], np.int64)), k, g.const(np.array([-1], np.int64))], axis=0)
    m = g.model(g.node("Reshape", [c, shape]), opset=13)
    x_in = np.random.default_rng(11).standard_normal((1, 8, 15)).astype(np.float32)
    blob, _ = softdla_build(m, tmp_path, "--fp16")
    ref = ort_run(m, x_in)[0]
    assert ref.shape == (1, 8, 3, 5)
    got = run_loadable(blob, x_in)[0]
    assert got.shape == (1, 8, 3, 5) and rel_l2(got, ref) < 2e-3
