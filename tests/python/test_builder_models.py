"""Whole networks with random weights, built with softdla and compared with ONNX Runtime FP32:
ResNet-, MobileNetV2-, YOLO- and U-Net-style graphs. FP16 within 1e-3 relative L2; INT8 calibrated on
the same input distribution with cosine >= 0.99 per output."""
import numpy as np
import pytest

from sdla_testkit.engine import Engine
from sdla_testkit.onnx_models import G, cosine, ort_run, rel_l2, run_loadable, softdla_build


def resnet_like(g):
    x = g.input("images", [1, 3, 64, 64])
    y = g.node("Relu", [g.bn(g.conv(x, 3, 16, k=7, stride=2, pad=3, bias=False), 16)])
    y = g.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = 16
    for out, stride in [(16, 1), (32, 2), (64, 2)]:
        h = g.node("Relu", [g.bn(g.conv(y, c, out, stride=stride, bias=False), out)])
        h = g.bn(g.conv(h, out, out, bias=False), out)
        skip = y if (stride == 1 and c == out) else g.bn(g.conv(y, c, out, k=1, stride=stride, pad=0, bias=False), out)
        y = g.node("Relu", [g.node("Add", [h, skip])])
        c = out
    y = g.node("Flatten", [g.node("GlobalAveragePool", [y])])
    return g.node("Gemm", [y, g.weight(10, 64), g.weight(10)], transB=1)


def mobilenetv2_like(g):
    x = g.input("images", [1, 3, 48, 48])
    y = g.node("Clip", [g.bn(g.conv(x, 3, 16, stride=2, bias=False), 16), g.const(np.float32(0)), g.const(np.float32(6))])
    c = 16
    for out, stride, expand in [(16, 1, 1), (24, 2, 4), (24, 1, 4), (32, 2, 4)]:
        hidden = c * expand
        h = y
        if expand != 1:
            h = g.node("Clip", [g.bn(g.conv(h, c, hidden, k=1, pad=0, bias=False), hidden), g.const(np.float32(0)), g.const(np.float32(6))])
        h = g.node("Clip", [g.bn(g.conv(h, hidden, hidden, stride=stride, groups=hidden, bias=False), hidden),
                            g.const(np.float32(0)), g.const(np.float32(6))])
        h = g.bn(g.conv(h, hidden, out, k=1, pad=0, bias=False), out)
        y = g.node("Add", [h, y]) if (stride == 1 and c == out) else h
        c = out
    y = g.node("ReduceMean", [y], axes=[2, 3], keepdims=0)
    return g.node("Gemm", [y, g.weight(8, 32), g.weight(8)], transB=1)


def yolo_like(g):
    x = g.input("images", [1, 3, 64, 64])
    def cbs(t, cin, cout, k=3, s=1):  # conv + BN + SiLU (x * sigmoid(x))
        t = g.bn(g.conv(t, cin, cout, k=k, stride=s, bias=False), cout)
        return g.node("Mul", [t, g.node("Sigmoid", [t])])
    p3 = cbs(cbs(x, 3, 16, s=2), 16, 32, s=2)            # 16x16
    p4 = cbs(p3, 32, 64, s=2)                             # 8x8
    up = g.node("Resize", [cbs(p4, 64, 32, k=1), g.const(np.array([], np.float32)),
                           g.const(np.array([1, 1, 2, 2], np.float32))], mode="nearest")
    f = cbs(g.node("Concat", [up, p3], axis=1), 64, 32)
    a, b = g.node("Split", [f, g.const(np.array([16, 16], np.int64))], n_out=2, axis=1)
    head3 = g.node("Sigmoid", [g.conv(g.node("Concat", [a, cbs(b, 16, 16)], axis=1), 32, 18, k=1, pad=0)])
    head4 = g.node("Sigmoid", [g.conv(p4, 64, 18, k=1, pad=0)])
    return [head3, head4]


def unet_like(g):
    x = g.input("image", [1, 1, 32, 32])
    def block(t, cin, cout):
        t = g.node("Relu", [g.bn(g.conv(t, cin, cout, bias=False), cout)])
        return g.node("Relu", [g.bn(g.conv(t, cout, cout, bias=False), cout)])
    e1 = block(x, 1, 8)
    e2 = block(g.node("MaxPool", [e1], kernel_shape=[2, 2], strides=[2, 2]), 8, 16)
    bott = block(g.node("MaxPool", [e2], kernel_shape=[2, 2], strides=[2, 2]), 16, 32)
    u2 = g.node("ConvTranspose", [bott, g.weight(32, 16, 2, 2), g.weight(16)], strides=[2, 2], kernel_shape=[2, 2])
    d2 = block(g.node("Concat", [u2, e2], axis=1), 32, 16)
    u1 = g.node("ConvTranspose", [d2, g.weight(16, 8, 2, 2), g.weight(8)], strides=[2, 2], kernel_shape=[2, 2])
    d1 = block(g.node("Concat", [u1, e1], axis=1), 16, 8)
    return g.node("Sigmoid", [g.conv(d1, 8, 2, k=1, pad=0)])


NETS = [resnet_like, mobilenetv2_like, yolo_like, unet_like]


def make(net):
    g = G(seed=5)
    outs = net(g)
    m = g.model(outs if isinstance(outs, list) else [outs])
    return m, [d.dim_value for d in g.inputs[0].type.tensor_type.shape.dim]


@pytest.mark.parametrize("net", NETS, ids=lambda f: f.__name__)
def test_network_fp16(net, tmp_path):
    m, shape = make(net)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    loadable, _ = softdla_build(m, tmp_path, "--fp16", "--inputIOFormats=fp16:chw16", "--outputIOFormats=fp16:chw16")
    for a, b in zip(run_loadable(loadable, x), ort_run(m, x)):
        assert rel_l2(a, b) < 1e-3, rel_l2(a, b)


@pytest.mark.parametrize("net", NETS, ids=lambda f: f.__name__)
def test_network_int8(net, tmp_path):
    m, shape = make(net)
    rng = np.random.default_rng(2)
    calib = rng.standard_normal([32] + shape[1:]).astype(np.float32)
    loadable, r = softdla_build(m, tmp_path, "--int8", "--fp16", calib=calib)
    x = rng.standard_normal(shape).astype(np.float32)
    for k, (a, b) in enumerate(zip(run_loadable(loadable, x), ort_run(m, x))):
        assert cosine(a, b) >= 0.99, f"output {k}: cosine {cosine(a, b):.4f}"


def _smooth_images(rng, n, shape):
    """Low-pass filtered noise, standardised: image-like inputs with spatially correlated pixels."""
    x = rng.standard_normal((n, *shape))
    for _ in range(3):
        x = (x + np.roll(x, 1, -1) + np.roll(x, -1, -1) + np.roll(x, 1, -2) + np.roll(x, -1, -2)) / 5
    return ((x - x.mean()) / x.std()).astype(np.float32)


def _reestimate_batchnorm(model, images):
    """Sets every BatchNormalization's mean/variance to the statistics of its input on `images` (in graph
    order, so each sees the normalised output of the ones before it), as training would leave them."""
    import onnx
    import onnxruntime as ort
    from onnx import helper as oh, numpy_helper
    inits = {i.name: i for i in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type != "BatchNormalization":
            continue
        probe = onnx.ModelProto()
        probe.CopyFrom(model)
        probe.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
        del probe.graph.output[:]
        probe.graph.output.append(oh.make_tensor_value_info(node.input[0], onnx.TensorProto.FLOAT, None))
        sess = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
        a = sess.run(None, {model.graph.input[0].name: images})[0]
        inits[node.input[3]].CopyFrom(numpy_helper.from_array(a.mean(axis=(0, 2, 3)).astype(np.float32), node.input[3]))
        inits[node.input[4]].CopyFrom(numpy_helper.from_array(a.var(axis=(0, 2, 3)).astype(np.float32), node.input[4]))
    return model


def deep_resnet(g, res=64):
    x = g.input("images", [1, 3, res, res])
    y = g.node("Relu", [g.bn(g.conv(x, 3, 32, k=7, stride=2, pad=3, bias=False), 32)])
    y = g.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = 32
    for stage, out in enumerate([32, 64, 128, 256]):
        for b in range(2):
            stride = 2 if b == 0 and stage > 0 else 1
            h = g.node("Relu", [g.bn(g.conv(y, c, out, stride=stride, bias=False), out)])
            h = g.bn(g.conv(h, out, out, bias=False), out)
            skip = y if stride == 1 and c == out else g.bn(g.conv(y, c, out, k=1, stride=stride, pad=0, bias=False), out)
            y = g.node("Relu", [g.node("Add", [h, skip])])
            c = out
    return g.node("Gemm", [g.node("Flatten", [g.node("GlobalAveragePool", [y])]), g.weight(100, c), g.weight(100)], transB=1)


@pytest.mark.parametrize("calibrator", ["auto", "entropy", "minmax", "percentile", "mse"])
def test_calibrators_on_relu_network(calibrator, tmp_path):
    """A ResNet-18-shaped net whose BN statistics match image-like data: every ReLU output has its spike of
    exact zeros. Every calibrator, the default entropy one included, must keep INT8 close to FP32."""
    g = G(seed=3)
    m = g.model([deep_resnet(g)])
    rng = np.random.default_rng(0)
    m = _reestimate_batchnorm(m, _smooth_images(rng, 16, (3, 64, 64)))
    calib, test = _smooth_images(rng, 32, (3, 64, 64)), _smooth_images(rng, 4, (3, 64, 64))
    loadable, _ = softdla_build(m, tmp_path, "--int8", "--fp16", f"--calibrator={calibrator}", calib=calib)
    for i in range(len(test)):
        c = cosine(run_loadable(loadable, test[i:i + 1])[0], ort_run(m, test[i:i + 1])[0])
        assert c >= 0.99, f"sample {i}: cosine {c:.4f} with the {calibrator} calibrator"


def test_int8_flatten_into_wide_gemm(tmp_path):
    """AlexNet/VGG: a Flatten of more features than a DLA channel count, absorbed by the Gemm after it. The
    Flatten's own tensor is never computed, so calibration must not see (or reject) it."""
    g = G(seed=1)
    x = g.input("images", [1, 3, 12, 12])
    y = g.node("Flatten", [g.node("Relu", [g.conv(x, 3, 256, k=3, stride=2, pad=1)])])  # 256 x 6 x 6 = 9216
    m = g.model([g.node("Gemm", [y, g.weight(10, 256 * 36), g.weight(10)], transB=1)])
    rng = np.random.default_rng(0)
    loadable, _ = softdla_build(m, tmp_path, "--int8", "--fp16", calib=rng.standard_normal((16, 3, 12, 12)).astype(np.float32))
    x = rng.standard_normal((1, 3, 12, 12)).astype(np.float32)
    assert cosine(run_loadable(loadable, x)[0], ort_run(m, x)[0]) >= 0.99


def _average_pool(x, k, stride, pad=0):
    """NumPy average pooling, padding counted (count_include_pad=1)."""
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    h, w = (x.shape[2] - k) // stride + 1, (x.shape[3] - k) // stride + 1
    return np.stack([[x[:, :, i * stride:i * stride + k, j * stride:j * stride + k].mean(axis=(2, 3))
                      for j in range(w)] for i in range(h)]).transpose(2, 3, 0, 1)


def test_int8_average_pooling_keeps_its_own_range(tmp_path):
    """DenseNet's transitions and every classifier's global average: an average is a fraction of its input's
    range, and the DLA's pooling engine would write it at the input's scale, dividing with two rounded Q16
    reciprocals (a 2x2 window summing to 4k+1 averages to k+1). Built as a depthwise convolution with its own
    output range, each INT8 average must be close to the exact average of the INT8 tensor it reads (also an
    output here, so the comparison isolates the pool's own error)."""
    g = G(seed=5)
    x = g.input("images", [1, 3, 16, 16])
    feat = g.node("Relu", [g.conv(x, 3, 32, k=3, stride=2)])  # 8 x 8: the global average is one window
    pools = [("2x2 average", 2, 2, 0), ("global average", 8, 1, 0), ("3x3 average, padding counted", 3, 1, 1)]
    outs = [g.node("AveragePool", [feat], kernel_shape=[2, 2], strides=[2, 2]),
            g.node("GlobalAveragePool", [feat]),
            g.node("AveragePool", [feat], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], count_include_pad=1)]
    m = g.model(outs + [feat])
    rng = np.random.default_rng(0)
    calib = _smooth_images(rng, 16, (3, 16, 16))
    loadable, _ = softdla_build(m, tmp_path, "--int8", "--fp16", "--calibrator=minmax", "--outputIOFormats=" + ",".join(["int8:chw32"] * 4),
                                calib=calib)
    engine = Engine(loadable)
    scales = [info.scale for info in engine.io_info(True)]
    assert scales[0] != scales[3] and scales[1] < scales[3] / 2, f"output scales {scales}: the averages kept their input's"
    test = calib[:4]  # min-max ranges of these samples: no output saturates
    for i in range(len(test)):
        got = engine.run_float(test[i:i + 1])
        for k, (name, size, stride, pad) in enumerate(pools):
            # One rounding of the exact average at the output's own scale: never more than half a step off.
            exact = _average_pool(got[3].astype(np.float64), size, stride, pad)
            worst = np.abs(got[k] - exact).max() / scales[k]
            assert worst <= 0.5 + 1e-4, f"sample {i}: {name}: {worst:.3f} steps from the exact average of its INT8 input"


def test_auto_calibrator_scores_every_rule_held_out(tmp_path):
    """--calibrator=auto scores five rules (percentile at --percentile and at 99.999 among them) by
    cross-validation and keeps the best, entropy unless another beats it by more than 0.002; the cache it
    writes names that rule, and a build from the cache computes the same outputs."""
    import re
    g = G(seed=4)
    x = g.input("images", [1, 3, 16, 16])
    y = g.node("Relu", [g.conv(g.node("Relu", [g.conv(x, 3, 16)]), 16, 16, stride=2)])
    m = g.model([g.node("Gemm", [g.node("Flatten", [g.node("GlobalAveragePool", [y])]), g.weight(10, 16), g.weight(10)], transB=1)])
    calib = _smooth_images(np.random.default_rng(1), 12, (3, 16, 16))
    cache = tmp_path / "model.cache"
    loadable, r = softdla_build(m, tmp_path, "--int8", "--fp16", "--verbose", f"--calib={cache}", calib=calib)
    scores = dict((k, float(v)) for k, v in re.findall(r"calibration rule ([a-z0-9. ]+): worst output's mean cosine ([0-9.]+)", r.stderr))
    assert set(scores) == {"entropy", "percentile 99.99", "percentile 99.999", "mse", "minmax"}, r.stderr
    best = max(scores, key=scores.get)
    expected = best if scores[best] > scores["entropy"] + 0.002 else "entropy"
    assert f"calibration rule chosen: {expected}" in r.stderr, (scores, r.stderr[-500:])
    header = open(cache).readline().strip()
    assert header.endswith({"entropy": "EntropyCalibration2", "minmax": "MinMaxCalibration", "mse": "softdla-mse"}.get(
        expected, "softdla-percentile")), header
    again, _ = softdla_build(m, tmp_path, "--int8", "--fp16", f"--calib={cache}")
    np.testing.assert_array_equal(run_loadable(again, calib[:1])[0], run_loadable(loadable, calib[:1])[0])
