"""The builder end to end, op by op and pattern by pattern: ONNX made with onnx.helper -> softdla build
-> engine, against ONNX Runtime FP32. FP16 within 1e-3 relative L2; INT8 (calibrated on the same input
distribution) with cosine similarity >= 0.99."""
import numpy as np
import pytest

from sdla_testkit.onnx_models import G, cosine, ort_run, rel_l2, run_loadable, softdla_build


def case_conv_variants(g):
    x = g.input("x", [2, 6, 13, 11])
    a = g.conv(x, 6, 8, k=3, stride=2)
    b = g.conv(x, 6, 6, k=3, groups=6)                       # depthwise
    c = g.node("Conv", [x, g.weight(4, 6, 3, 3)], kernel_shape=[3, 3], dilations=[2, 2], pads=[2, 2, 2, 2])
    d = g.node("Conv", [x, g.weight(4, 3, 1, 1)], kernel_shape=[1, 1], group=2)
    e = g.node("Conv", [x, g.weight(5, 6, 3, 3), g.weight(5)], kernel_shape=[3, 3], auto_pad="SAME_UPPER", strides=[2, 2])
    return [a, b, c, d, e]


def case_conv_bn_relu(g):
    x = g.input("x", [1, 3, 16, 16])
    return g.node("Relu", [g.bn(g.conv(x, 3, 16), 16)])


def case_conv_activations(g):
    x = g.input("x", [1, 4, 9, 9])
    a = g.node("LeakyRelu", [g.conv(x, 4, 8)], alpha=0.1)
    b = g.node("Clip", [g.conv(x, 4, 8), g.const(np.float32(0)), g.const(np.float32(6))])
    c = g.node("PRelu", [g.conv(x, 4, 8), g.const((np.random.default_rng(3).random((8, 1, 1)) * 0.3).astype(np.float32))])
    return [a, b, c]


def case_sigmoid_tanh(g):
    x = g.input("x", [1, 4, 8, 8])
    return [g.node("Sigmoid", [g.conv(x, 4, 4)]), g.node("Tanh", [g.conv(x, 4, 4)])]


def case_residual(g):
    x = g.input("x", [1, 8, 10, 10])
    y = g.node("Relu", [g.bn(g.conv(x, 8, 8), 8)])
    y = g.bn(g.conv(y, 8, 8), 8)
    return g.node("Relu", [g.node("Add", [y, x])])


def case_deconv(g):
    x = g.input("x", [1, 6, 5, 7])
    return g.node("Relu", [g.node("ConvTranspose", [x, g.weight(6, 4, 2, 2), g.weight(4)], strides=[2, 2], kernel_shape=[2, 2])])


def case_gemm_flatten(g):
    x = g.input("x", [2, 4, 6, 6])
    f = g.node("Flatten", [g.conv(x, 4, 8)])
    y = g.node("Gemm", [f, g.weight(10, 8 * 36), g.weight(10)], transB=1)
    return g.node("Softmax", [y], axis=1)


def case_matmul_add(g):
    x = g.input("x", [3, 20])
    y = g.node("MatMul", [x, g.weight(20, 7)])
    y = g.node("Add", [y, g.weight(7)])
    return g.node("Gemm", [g.node("Relu", [y]), g.weight(7, 5), g.weight(5)], alpha=0.5, beta=2.0)


def case_pooling(g):
    x = g.input("x", [1, 5, 15, 17])
    a = g.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    b = g.node("AveragePool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1)
    c = g.node("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)
    d = g.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    e = g.node("AveragePool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], count_include_pad=0)
    return [a, b, c, d, e]


def case_global_pools(g):
    # Pooling shares its input's INT8 range on the DLA: pool ReLU features, as real networks do.
    x = g.node("Relu", [g.conv(g.input("x", [2, 8, 14, 14]), 8, 8)])
    a = g.node("GlobalAveragePool", [x])
    b = g.node("GlobalMaxPool", [x])
    c = g.node("ReduceMean", [x], axes=[2, 3], keepdims=1)
    d = g.node("ReduceMax", [x], axes=[1], keepdims=1)
    return [a, b, c, d]


def case_eltwise(g):
    x = g.input("x", [2, 6, 5, 5])
    y = g.conv(x, 6, 6)
    a = g.node("Add", [x, y])
    b = g.node("Sub", [y, x])
    c = g.node("Mul", [x, y])
    d = g.node("Max", [x, y])
    e = g.node("Min", [x, y])
    f = g.node("Sum", [x, y, a])
    h = g.node("Sub", [g.node("GlobalAveragePool", [x]), x])     # broadcast operand first (NC11)
    divisor = g.node("Add", [g.node("Sigmoid", [y]), g.const(np.float32(0.5))])  # in [0.5, 1.5]
    k = g.node("Div", [x, divisor])                                # by a full-size tensor
    m = g.node("Div", [y, g.node("Add", [g.node("GlobalAveragePool", [g.node("Sigmoid", [x])]), g.const(np.float32(0.5))])])  # NC11
    return [a, b, c, d, e, f, h, k, m]


def case_constant_operands(g):
    x = g.input("x", [1, 6, 4, 4])
    a = g.node("Add", [x, g.const(np.arange(6, dtype=np.float32).reshape(6, 1, 1))])
    b = g.node("Mul", [a, g.const(np.float32(0.5))])
    c = g.node("Div", [b, g.const(np.full((1, 6, 1, 1), 4.0, np.float32))])
    d = g.node("Sub", [c, g.const(np.float32(1))])
    e = g.node("Add", [d, g.const(np.random.default_rng(0).standard_normal((1, 6, 4, 4)).astype(np.float32))])
    return e


def case_concat_split_slice(g):
    x = g.input("x", [1, 8, 6, 6])
    a, b = g.node("Split", [x, g.const(np.array([3, 5], np.int64))], n_out=2, axis=1)
    c = g.node("Concat", [g.conv(b, 5, 4), a, g.conv(a, 3, 2)], axis=1)
    s = g.node("Slice", [c, g.const(np.array([1, 2], np.int64)), g.const(np.array([7, 5], np.int64)),
                         g.const(np.array([1, 2], np.int64))])
    return s


def case_reshape_transpose(g):
    x = g.input("x", [2, 4, 6, 3])
    t = g.node("Transpose", [x], perm=[0, 2, 1, 3])
    shape = g.node("Shape", [t])
    n = g.node("Gather", [shape, g.const(np.array(0, np.int64))], axis=0)
    flat = g.node("Concat", [g.node("Unsqueeze", [n, g.const(np.array([0], np.int64))]), g.const(np.array([-1], np.int64))], axis=0)
    r = g.node("Reshape", [t, flat])
    return g.node("Softmax", [r], axis=-1)


def case_squeeze_unsqueeze(g):
    x = g.input("x", [2, 12, 1, 1])
    s = g.node("Squeeze", [x, g.const(np.array([2, 3], np.int64))])
    y = g.node("Gemm", [s, g.weight(12, 6)])
    return g.node("Unsqueeze", [y, g.const(np.array([2, 3], np.int64))])


def case_resize(g):
    x = g.input("x", [1, 3, 5, 6])
    empty = g.const(np.array([], np.float32))
    a = g.node("Resize", [x, empty, g.const(np.array([1, 1, 2, 3], np.float32))], mode="nearest",
               coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    b = g.node("Resize", [x, empty, g.const(np.array([1, 1, 2, 2], np.float32))], mode="linear",
               coordinate_transformation_mode="half_pixel")
    c = g.node("Resize", [x, empty, g.const(np.array([1, 1, 4, 4], np.float32))], mode="nearest")
    return [a, b, c]


def case_lrn_softmax(g):
    x = g.input("x", [1, 7, 4, 4])
    return [g.node("LRN", [g.conv(x, 7, 7)], size=5, alpha=1e-2, beta=0.75, bias=2.0), g.node("Softmax", [x], axis=1)]


def case_standalone(g):
    x = g.input("x", [1, 5, 6, 6])
    a = g.node("Relu", [x])
    b = g.node("Clip", [x, g.const(np.float32(-0.5)), g.const(np.float32(0.75))])
    c = g.bn(x, 5)
    d = g.node("Abs", [x])
    e = g.node("LeakyRelu", [x], alpha=0.2)
    return [a, b, c, d, e]


def case_trt_rewrites(g):
    """The DLA rewrites TensorRT performs: one-input Concat, Neg, ReduceSum, ShuffleNet's rank-5 channel
    shuffle, and average windows beyond the pooling limit of 8."""
    x = g.input("x", [1, 8, 13, 13])
    y = g.node("Relu", [g.conv(x, 8, 8)])
    a = g.node("Concat", [y], axis=1)
    b = g.node("Neg", [a])
    c = g.node("ReduceSum", [y, g.const(np.array([2, 3], np.int64))], keepdims=1)
    d = g.node("ReduceSum", [y, g.const(np.array([1], np.int64))], keepdims=1)
    r5 = g.node("Reshape", [y, g.const(np.array([1, 2, 4, 13, 13], np.int64))])
    e = g.node("Reshape", [g.node("Transpose", [r5], perm=[0, 2, 1, 3, 4]), g.const(np.array([1, 8, 13, 13], np.int64))])
    f = g.node("GlobalAveragePool", [y])                                    # 13 x 13: a prime above 8
    h = g.node("AveragePool", [y], kernel_shape=[10, 10], strides=[3, 3])  # a window above 8
    return [b, c, d, e, f, h]


def case_pad(g):
    """Pads as exporters write them: all zeros (UNet's F.pad of a skip connection whose size already agrees:
    nothing), and zeros around H and W before a Conv (F.pad then a convolution, TensorRT merges them: the
    Conv's padding), asymmetric, on top of the Conv's own pads."""
    x = g.input("x", [1, 4, 9, 10])
    none = g.node("Pad", [x, g.const(np.zeros(8, np.int64)), g.const(np.float32(0))], mode="constant")
    a = g.node("MaxPool", [none], kernel_shape=[2, 2], strides=[2, 2])
    p = g.node("Pad", [x, g.const(np.array([0, 0, 2, 1, 0, 0, 1, 0], np.int64))])
    b = g.node("Conv", [p, g.weight(6, 4, 3, 3), g.weight(6)], kernel_shape=[3, 3], pads=[0, 0, 0, 1])
    q = g.node("Pad", [x, g.const(np.array([0, 0, 1, 2, 0, 0, 1, 0], np.int64)), g.const(np.float32(0))])
    c = g.node("Conv", [q, g.weight(5, 4, 3, 3)], kernel_shape=[3, 3], strides=[2, 2])
    return [a, b, c]


CASES = [case_conv_variants, case_conv_bn_relu, case_conv_activations, case_sigmoid_tanh, case_residual, case_deconv,
         case_gemm_flatten, case_matmul_add, case_pooling, case_global_pools, case_eltwise, case_constant_operands,
         case_concat_split_slice, case_reshape_transpose, case_squeeze_unsqueeze, case_resize, case_lrn_softmax,
         case_standalone, case_trt_rewrites, case_pad]


def make(case):
    g = G(seed=len(case.__name__))
    outs = case(g)
    m = g.model(outs if isinstance(outs, list) else [outs])
    shapes = [[d.dim_value for d in i.type.tensor_type.shape.dim] for i in g.inputs]
    return m, shapes


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__[5:])
def test_fp16_matches_onnxruntime(case, tmp_path):
    m, shapes = make(case)
    xs = [np.random.default_rng(7).standard_normal(s).astype(np.float32) for s in shapes]
    ref = ort_run(m, *xs)
    loadable, _ = softdla_build(m, tmp_path, "--fp16", "--buildDLAStandalone", "--useDLACore=0")
    got = run_loadable(loadable, *xs)
    for k, (a, b) in enumerate(zip(got, ref)):
        assert rel_l2(a, b) < 1e-3, f"output {k}: rel L2 {rel_l2(a, b):.2e}"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__[5:])
def test_int8_calibrated_cosine(case, tmp_path):
    m, shapes = make(case)
    rng = np.random.default_rng(11)
    calib = rng.standard_normal([64 // shapes[0][0] * shapes[0][0]] + shapes[0][1:]).astype(np.float32)
    loadable, _ = softdla_build(m, tmp_path, "--int8", "--fp16", calib=calib)
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    ref = ort_run(m, *xs)
    got = run_loadable(loadable, *xs)
    for k, (a, b) in enumerate(zip(got, ref)):
        assert cosine(a, b) >= 0.99, f"output {k}: cosine {cosine(a, b):.4f}"


@pytest.mark.parametrize("kind", ["reflect", "value", "before_pool", "channels", "too_wide"])
def test_pads_the_dla_cannot_run_are_refused(kind, tmp_path):
    """The DLA has no padding layer: a Pad that is neither nothing nor zeros before a Conv is an error
    naming it, never a loadable without it."""
    g = G(seed=3)
    x = g.input("x", [1, 4, 8, 8])
    pads = [0, 1 if kind == "channels" else 0, 3 if kind == "too_wide" else 1, 1, 0, 0, 1, 1]
    value = [g.const(np.float32(1.0 if kind == "value" else 0.0))]
    p = g.node("Pad", [x, g.const(np.array(pads, np.int64))] + value, mode="reflect" if kind == "reflect" else "constant")
    y = (g.node("MaxPool", [p], kernel_shape=[2, 2], strides=[2, 2]) if kind == "before_pool"
         else g.node("Conv", [p, g.weight(4, 5 if kind == "channels" else 4, 3, 3)], kernel_shape=[3, 3]))
    import subprocess, onnx
    from sdla_testkit.onnx_models import SOFTDLA
    onnx.save(g.model([y], opset=18), tmp_path / "m.onnx")
    r = subprocess.run([SOFTDLA, "build", f"--onnx={tmp_path / 'm.onnx'}", "--fp16", f"--saveEngine={tmp_path / 'm.l'}"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "Pad" in r.stderr
    assert {"reflect": "'reflect' is not supported (only 'constant')",
            "too_wide": "would then pad by 3 where the DLA pads by less than the kernel's 3"}.get(
        kind, "the DLA has no padding layer") in r.stderr, r.stderr


def test_pad_with_axes_before_a_conv(tmp_path):
    """Opset 18's axes input: pads for H and W only (negative axes), merged into the Conv."""
    g = G(seed=4)
    x = g.input("x", [1, 4, 7, 8])
    p = g.node("Pad", [x, g.const(np.array([1, 2, 1, 0], np.int64)), g.const(np.float32(0)),
                      g.const(np.array([-2, -1], np.int64))])
    m = g.model([g.node("Conv", [p, g.weight(5, 4, 3, 3)], kernel_shape=[3, 3], strides=[2, 2])], opset=18)
    xs = np.random.default_rng(2).standard_normal((1, 4, 7, 8)).astype(np.float32)
    loadable, _ = softdla_build(m, tmp_path, "--fp16")
    assert rel_l2(run_loadable(loadable, xs)[0], ort_run(m, xs)[0]) < 1e-3


@pytest.mark.parametrize("coord", ["half_pixel", "align_corners", "asymmetric"])
def test_bilinear_resize_of_a_1x1_map_is_a_broadcast(coord, tmp_path):
    """DeepLabV3's image-pooling branch: a global average upsampled bilinearly to the feature map (x12 here,
    past the DLA's bilinear factors of 1-4). From one pixel every output is that pixel: it runs as the
    nearest resize, whatever the coordinate mode."""
    g = G(seed=5)
    x = g.input("x", [1, 4, 12, 12])
    pooled = g.node("GlobalAveragePool", [g.conv(x, 4, 4)])
    up = g.node("Resize", [pooled, "", "", g.const(np.array([1, 4, 12, 12], np.int64))], mode="linear",
                coordinate_transformation_mode=coord)
    m = g.model([g.node("Add", [up, x])], opset=13)
    xs = np.random.default_rng(3).standard_normal((1, 4, 12, 12)).astype(np.float32)
    loadable, _ = softdla_build(m, tmp_path, "--fp16")
    assert rel_l2(run_loadable(loadable, xs)[0], ort_run(m, xs)[0]) < 1e-3
