"""A convolution fused with the residual add after it (the CPU backend runs both in one kernel and never
writes the intermediate): byte-exact against NumPy's integer reference on every convolution path
(implicit GEMM, 1x1 planes, im2col, depthwise), with the convolution computing the add's first or
second input, and not fused where the intermediate has another reader."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdla_testkit import reference as R
from sdla_testkit import writer
from sdla_testkit.engine import Engine, lib, run_graph

# (input channels, output channels, kernel, stride, pads, groups): one per CPU convolution path.
GEOMETRIES = {
    "3x3": (16, 24, 3, 1, 1, 1),          # implicit GEMM
    "3x3-stride2": (8, 16, 3, 2, 1, 1),  # implicit GEMM, stride phases
    "1x1": (32, 40, 1, 1, 0, 1),          # the input planes read directly
    "1x1-deep": (96, 40, 1, 1, 0, 1),     # AMX tiles where the CPU has them (64 channels or more): a
                                          # partial second block of 32 rows, an odd panel last
    "grouped": (12, 12, 3, 1, 1, 3),      # im2col
    "depthwise": (20, 20, 3, 1, 1, 20),   # depthwise planes
}


def build(geometry, seed, swapped, residual_chain, also_output=False, nhw=(2, 9, 23), conv_headroom=1,
          add_scale=None, add_out=None, conv_input_from_arena=False):
    """conv_headroom: bits the convolution's shift keeps above what its results need (negative: most of
    them saturate). add_scale: the add's (multiplier, shift) of its second input, add_out: its output's,
    random if None. conv_input_from_arena: the convolution reads an intermediate "a" = relu(x) (an SDP op
    of its own, first) instead of the graph's input, and the output is z = relu(y) (y an intermediate)."""
    cin, cout, k, stride, pad, groups = GEOMETRIES.get(geometry, geometry)  # a name, or the tuple itself
    rng = np.random.default_rng(seed)
    n, h, w = nhw
    oh = (h + 2 * pad - k) // stride + 1
    ow = (w + 2 * pad - k) // stride + 1
    x = rng.integers(-128, 128, (n, cin, h, w)).astype(np.int8)
    e = rng.integers(-128, 128, (n, cout, oh, ow)).astype(np.int8)
    wt = rng.integers(-128, 128, (cout, cin // groups, k, k)).astype(np.int8)
    bias = rng.integers(-(2 ** 16), 2 ** 16, cout)
    kdim = cin // groups * k * k
    mult = rng.integers(1, 2 ** 15, cout)
    shift = np.full(cout, int(np.ceil(np.log2(128 * 128 * np.sqrt(kdim) * 2 ** 15 / 127))) + conv_headroom)
    g = writer.Graph()
    xi = g.input("x", x.shape, np.int8, 0.05)
    ei = g.input("e", e.shape, np.int8, 0.05)
    c = g.tensor("c", (n, cout, oh, ow), np.int8, 0.1)
    y = g.tensor("y", (n, cout, oh, ow), np.int8, 0.1)
    conv_steps = [("bias", {"values": bias}), ("relu", {})]
    post = writer.sdp([writer.sdp_step("bias", ivalues=bias), writer.sdp_step("relu")], multiplier=mult, shift=shift)
    conv_in, x_conv = xi, x
    if conv_input_from_arena:
        conv_in, x_conv = g.tensor("a", x.shape, np.int8, 0.05), np.maximum(x, 0)
        g.op("Sdp", [xi], conv_in, writer.sdp([writer.sdp_step("relu")], multiplier=[1], shift=[0]))
    g.op("Conv", [conv_in], c, g.conv_params(g.constant(wt, np.int8), (stride, stride), (pad,) * 4, (1, 1), groups, post))
    # The add: [Scale] EltAdd(second input) [ReLU | Clip], one multiplier.
    tm, ts = add_scale or (int(rng.integers(1, 2 ** 14)), int(rng.integers(0, 15)))
    steps, ref_steps = [], []
    if "scale" in residual_chain:
        sm, ss = int(rng.integers(1, 2 ** 14)), int(rng.integers(0, 15))
        steps.append(writer.sdp_step("scale", ivalues=[sm], shift=ss))
        ref_steps.append(("scale", {"values": [sm], "shift": ss}))
    first, second = (ei, c) if swapped else (c, ei)
    steps.append(writer.sdp_step("add", tensor=second, tensor_multiplier=tm, tensor_shift=ts))
    ref_steps.append(("add", {"operand": 0, "tm": tm, "ts": ts}))
    if "relu" in residual_chain:
        steps.append(writer.sdp_step("relu"))
        ref_steps.append(("relu", {}))
    if "clip" in residual_chain:
        steps.append(writer.sdp_step("clip", lo_i=-3000, hi_i=90000))
        ref_steps.append(("clip", {"lo": -3000, "hi": 90000}))
    m, s = add_out or (int(rng.integers(1, 2 ** 15)), int(rng.integers(12, 26)))
    g.op("Sdp", [first, second], y, writer.sdp(steps, multiplier=[m], shift=[s]))
    if conv_input_from_arena:  # y an intermediate too: z = relu(y) is the output
        z = g.tensor("z", (n, cout, oh, ow), np.int8, 0.1)
        g.op("Sdp", [y], z, writer.sdp([writer.sdp_step("relu")], multiplier=[1], shift=[0]))
        g.output(z)
    else:
        g.output(y)
    if also_output:
        g.output(c)
    conv_ref = R.sdp_int8(R.sat32(R.conv_acc(x_conv, wt, (stride, stride), (pad,) * 4, (1, 1), groups, exact=True)),
                          conv_steps, mult, shift)
    a, b = (e, conv_ref) if swapped else (conv_ref, e)
    ref = R.sdp_int8(a.astype(np.int64), ref_steps, [m], [s], [b])
    if conv_input_from_arena:
        ref = np.maximum(ref, 0)
    return g, (x, e), ref, conv_ref


def fused_ops(g):
    eng = Engine(g.serialize(), backend="cpu")
    return [i for i in range(len(g.ops)) if lib().softdla_engine_op_fused(eng.h, i)]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(GEOMETRIES)), st.integers(0, 2 ** 31), st.booleans(),
       st.sampled_from(["", "relu", "scale relu", "clip", "scale"]))
def test_fused_residual_add_is_exact(geometry, seed, swapped, chain):
    g, arrays, ref, _ = build(geometry, seed, swapped, chain)
    assert fused_ops(g) == [1]  # the add ran inside the convolution's kernel
    np.testing.assert_array_equal(run_graph(g, *arrays), ref)


# The convolution's results saturate (its shift 8 or 16 bits short: with 16, a multiplier above 1, whose
# requantization window ends past int8's range), and the add reads them as int8: every path must clamp
# them before the add, in whole lines of 64 results and in the tails. With the second
# input on the first one's scale (multiplier 1, shift 0, no scale step), the add's result depends on the
# sum of its inputs only: the kernels' shared-scale form. The add's output scale (1/4 or 1/2) keeps a
# saturated input's sum within int8, so a result computed from the unclamped value would differ; at 1/2
# the add's own upper clamp is int8's (the kernels may leave it to the final saturation, but not the
# clamp of a convolution whose window ends past int8).
@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(GEOMETRIES)), st.integers(0, 2 ** 31), st.booleans(), st.sampled_from(["", "relu"]),
       st.booleans(), st.sampled_from([-8, -16]), st.sampled_from([14, 15]))
def test_fused_residual_add_of_saturated_results(geometry, seed, swapped, chain, same_scale, headroom, add_bits):
    g, arrays, ref, conv_ref = build(geometry, seed, swapped, chain, conv_headroom=headroom,
                                     add_scale=(1, 0) if same_scale else None, add_out=(1 << add_bits, 16))
    assert np.mean(np.abs(conv_ref.astype(np.int32)) >= 127) > 0.1  # the case this test is about (half are ReLU zeros)
    assert fused_ops(g) == [1]
    np.testing.assert_array_equal(run_graph(g, *arrays), ref)


# Three 64-channel 60 x 60 images: the implicit GEMM runs them as image groups (two, then one), each
# group's adds reading the other operand of its own images.
@pytest.mark.parametrize("swapped", [False, True])
def test_fused_residual_add_over_image_groups(swapped):
    g, arrays, ref, _ = build((64, 40, 3, 1, 1, 1), 11, swapped, "relu", nhw=(3, 60, 60))
    assert fused_ops(g) == [1]
    np.testing.assert_array_equal(run_graph(g, *arrays), ref)


# Deep GEMMs over a 7 x 7 grid go on the output-channel lane tiles on AVX-512 VNNI (gemm_lanes_s8.h): 85
# output channels end on a block of 37 (three vectors, the last partly past K), 20 on two vectors; a
# 1x1 of stride 2 takes them through im2col; 160 deep (the smallest depth they take) with 90 channels (a
# block of 48 and one of 42). Columns 49 (tiles of 8, then 1) and 49 more for the second image. The k x k
# convolutions over 7 x 7 and 14 x 14 grids take the implicit GEMM's lane tiles (each pixel's quads
# gathered from the packed planes): 100 channels end on a block of 4, stride 2 reads two phases, 196
# columns end on a group of 4. Exact against NumPy, with the add fused and (the intermediate also an
# output) without.
@pytest.mark.parametrize("also_output", [False, True], ids=["fused", "unfused"])
@pytest.mark.parametrize("geometry,hw", [((512, 85, 1, 1, 0, 1), 7), ((640, 20, 1, 2, 0, 1), 13),
                                         ((160, 90, 1, 1, 0, 1), 7), ((64, 100, 3, 1, 1, 1), 7),
                                         ((48, 70, 3, 2, 1, 1), 14), ((24, 50, 3, 1, 1, 1), 14),
                                         ((40, 33, 5, 1, 2, 1), 7)])
def test_deep_gemm_over_a_small_grid_is_exact(geometry, hw, also_output):
    g, arrays, ref, conv_ref = build(geometry, 21, False, "relu", also_output=also_output, nhw=(2, hw, hw))
    if also_output:
        y, c = run_graph(g, *arrays)
        np.testing.assert_array_equal(c, conv_ref)
    else:
        assert fused_ops(g) == [1]
        y = run_graph(g, *arrays)
    np.testing.assert_array_equal(y, ref)


@pytest.mark.parametrize("geometry", sorted(GEOMETRIES))
def test_not_fused_when_the_intermediate_is_also_an_output(geometry):
    g, arrays, ref, conv_ref = build(geometry, 7, False, "relu", also_output=True)
    assert fused_ops(g) == []
    y, c = run_graph(g, *arrays)
    np.testing.assert_array_equal(y, ref)
    np.testing.assert_array_equal(c, conv_ref)


# FP16: on AVX-512 the convolution takes the add where the add's chain is the add then per-channel steps.
# Its results must have the bits of the unfused graph (the intermediate rounded to fp16, stored, read
# back by the add's kernel): the same graph with the intermediate also an output is not fused and is
# the reference, and both are checked against NumPy's float64 convolution within fp16 rounding.
def build_fp16(geometry, seed, swapped, add_chain, also_output, nhw=(2, 9, 23)):
    cin, cout, k, stride, pad, groups = GEOMETRIES.get(geometry, geometry)
    rng = np.random.default_rng(seed)
    n, h, w = nhw
    oh = (h + 2 * pad - k) // stride + 1
    ow = (w + 2 * pad - k) // stride + 1
    x = rng.uniform(-1, 1, (n, cin, h, w)).astype(np.float16)
    e = rng.uniform(-2, 2, (n, cout, oh, ow)).astype(np.float16)
    wt = rng.uniform(-0.5, 0.5, (cout, cin // groups, k, k)).astype(np.float16)
    bias = rng.uniform(-1, 1, cout).astype(np.float32)
    g = writer.Graph()
    xi = g.input("x", x.shape, np.float16)
    ei = g.input("e", e.shape, np.float16)
    c = g.tensor("c", (n, cout, oh, ow), np.float16)
    y = g.tensor("y", (n, cout, oh, ow), np.float16)
    post = writer.sdp([writer.sdp_step("bias", fvalues=bias), writer.sdp_step("relu")])
    g.op("Conv", [xi], c, g.conv_params(g.constant(wt, np.float16), (stride, stride), (pad,) * 4, (1, 1), groups, post))
    first, second = (ei, c) if swapped else (c, ei)
    steps = [writer.sdp_step("add", tensor=second)]
    if "relu" in add_chain:
        steps.append(writer.sdp_step("relu"))
    if "clip" in add_chain:
        steps.append(writer.sdp_step("clip", lo=-0.75, hi=1.5))
    g.op("Sdp", [first, second], y, writer.sdp(steps))
    g.output(y)
    if also_output:
        g.output(c)
    conv = R.conv_acc(x.astype(np.float64), wt.astype(np.float64), (stride, stride), (pad,) * 4, (1, 1), groups)
    conv = np.maximum(conv + bias.reshape(1, -1, 1, 1), 0).astype(np.float16).astype(np.float64)
    ref = conv + e.astype(np.float64)
    if "relu" in add_chain:
        ref = np.maximum(ref, 0)
    if "clip" in add_chain:
        ref = np.clip(ref, -0.75, 1.5)
    return g, (x, e), ref


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(sorted(GEOMETRIES)), st.integers(0, 2 ** 31), st.booleans(), st.sampled_from(["", "relu", "clip"]))
def test_fp16_fused_residual_add_has_the_unfused_bits(geometry, seed, swapped, chain):
    g, arrays, ref = build_fp16(geometry, seed, swapped, chain, also_output=False)
    unfused, _, _ = build_fp16(geometry, seed, swapped, chain, also_output=True)
    assert fused_ops(unfused) == []
    y = run_graph(g, *arrays)
    y_unfused, _ = run_graph(unfused, *arrays)
    np.testing.assert_array_equal(y.view(np.uint16), y_unfused.view(np.uint16))
    np.testing.assert_allclose(y.astype(np.float64), ref, rtol=2e-2, atol=2e-2)


# Three 16-channel 60 x 60 images: the FP16 implicit GEMM runs them as image groups (two, then one), 3x3
# and 1x1 (whose blocks store straight into the output).
@pytest.mark.parametrize("geometry", [(16, 24, 3, 1, 1, 1), (16, 24, 1, 1, 0, 1)])
def test_fp16_fused_residual_add_over_image_groups(geometry):
    g, arrays, ref = build_fp16(geometry, 5, False, "relu", also_output=False, nhw=(3, 60, 60))
    unfused, _, _ = build_fp16(geometry, 5, False, "relu", also_output=True, nhw=(3, 60, 60))
    y = run_graph(g, *arrays)
    y_unfused, _ = run_graph(unfused, *arrays)
    np.testing.assert_array_equal(y.view(np.uint16), y_unfused.view(np.uint16))
    np.testing.assert_allclose(y.astype(np.float64), ref, rtol=2e-2, atol=2e-2)


def has_fp16_fusion():
    import ctypes
    lib().softdla_engine_cpu_isa.restype = ctypes.c_char_p
    return lib().softdla_engine_cpu_isa().decode().split()[0] in ("avx512vnni", "amx")


def test_fp16_residual_add_is_fused_on_avx512():
    if not has_fp16_fusion():
        pytest.skip("the FP16 residual fusion runs on AVX-512 only")
    g, _, _ = build_fp16("3x3", 1, False, "relu", also_output=False)
    assert fused_ops(g) == [1]


def fp16_residual_graph(x, e, wt, bias, stride, pad, groups, conv_input, also_output):
    """Inputs x and e; a = relu(e), an intermediate, is the add's operand; the convolution of conv_input ("x":
    the input, "a": the operand itself, "relu_x": relu(x), an intermediate of its own, made after a) plus
    bias is c; y = relu(c + a) and z = relu(y), the output (c also one with also_output). Returns the graph
    and its tensors by name."""
    g = writer.Graph()
    t = {"x": g.input("x", x.shape, np.float16), "e": g.input("e", e.shape, np.float16)}
    t["a"] = g.tensor("a", e.shape, np.float16)
    g.op("Sdp", [t["e"]], t["a"], writer.sdp([writer.sdp_step("relu")]))
    if conv_input == "relu_x":
        t["relu_x"] = g.tensor("relu_x", x.shape, np.float16)
        g.op("Sdp", [t["x"]], t["relu_x"], writer.sdp([writer.sdp_step("relu")]))
    c = t["c"] = g.tensor("c", e.shape, np.float16)
    post = writer.sdp([writer.sdp_step("bias", fvalues=bias)])
    g.op("Conv", [t[conv_input]], c, g.conv_params(g.constant(wt, np.float16), (stride, stride), (pad,) * 4, (1, 1),
                                                   groups, post))
    t["y"] = g.tensor("y", e.shape, np.float16)  # in the arena too: read by one more op
    g.op("Sdp", [c, t["a"]], t["y"], writer.sdp([writer.sdp_step("add", tensor=t["a"]), writer.sdp_step("relu")]))
    t["z"] = g.tensor("z", e.shape, np.float16)
    g.op("Sdp", [t["y"]], t["z"], writer.sdp([writer.sdp_step("relu")]))
    g.output(t["z"])
    if also_output:
        g.output(c)
    return g, t


def check_fp16_residual(fused, unfused, x, e, wt, bias, stride, pad, groups, conv_in):
    """The fused graph's output has the unfused one's bits, and NumPy's float64 values within fp16 rounding."""
    y = run_graph(fused, x, e)
    y_unfused, _ = run_graph(unfused, x, e)
    np.testing.assert_array_equal(y.view(np.uint16), y_unfused.view(np.uint16))
    conv = R.conv_acc(conv_in, wt.astype(np.float64), (stride, stride), (pad,) * 4, (1, 1), groups)
    conv = (conv + bias.reshape(1, -1, 1, 1)).astype(np.float16).astype(np.float64)
    ref = np.maximum(conv + np.maximum(e.astype(np.float64), 0), 0)
    np.testing.assert_allclose(y.astype(np.float64), ref, rtol=2e-2, atol=2e-2)


# The residual operand an intermediate that dies at the add (as in ResNet and MobileNetV2, where it is the
# block's input), past 1 MiB: the CPU engine then plans the add's output over it
# (Engine::plan_residuals_in_place), the fused epilogue (or on AVX2 the add's own pass) reading each
# position before writing it; except where the convolution reads that operand itself (y = conv(a) + a),
# which would read positions the epilogue already wrote. Both against the unfused graph's bits and NumPy.
@pytest.mark.parametrize("geometry", [(24, 24, 3, 1, 1, 1), (40, 40, 1, 1, 0, 1), (96, 96, 1, 1, 0, 1)])
@pytest.mark.parametrize("conv_reads_operand", [False, True], ids=["operand-apart", "operand-is-conv-input"])
def test_fp16_residual_operand_from_the_arena(geometry, conv_reads_operand):
    cin, cout, k, stride, pad, groups = geometry
    rng = np.random.default_rng(cin + conv_reads_operand)
    n, w = 2, 64
    h = -(-(1 << 20) // (n * cout * w * 2)) + 1  # the operand just past 1 MiB of fp16
    x = rng.uniform(-1, 1, (n, cin, h, w)).astype(np.float16)
    e = rng.uniform(-2, 2, (n, cout, h, w)).astype(np.float16)
    wt = rng.uniform(-0.25, 0.25, (cout, cin, k, k)).astype(np.float16)
    bias = rng.uniform(-1, 1, cout).astype(np.float32)
    conv_input = "a" if conv_reads_operand else "x"
    graphs = [fp16_residual_graph(x, e, wt, bias, stride, pad, groups, conv_input, out)[0] for out in (False, True)]
    conv_in = np.maximum(e.astype(np.float64), 0) if conv_reads_operand else x.astype(np.float64)
    check_fp16_residual(*graphs, x, e, wt, bias, stride, pad, groups, conv_in)


# A loadable whose memory plan put the add's output over the convolution's own input (legal there: that
# input dies at the convolution, before the add writes). Fused as planned, the kernel would read input
# positions its epilogue had already written, so the engine plans its own memory with the convolution's
# inputs kept alive through the add (Engine::plan_residuals_in_place) and fuses the pair; the values must
# be the unfused graph's bits and NumPy's within fp16 rounding.
def test_fp16_add_planned_over_the_convolution_input_still_fuses():
    rng = np.random.default_rng(5)
    n, c, h, w = 2, 24, 20, 18
    x = rng.uniform(-1, 1, (n, c, h, w)).astype(np.float16)
    e = rng.uniform(-2, 2, (n, c, h, w)).astype(np.float16)
    wt = rng.uniform(-0.25, 0.25, (c, c, 3, 3)).astype(np.float16)
    bias = rng.uniform(-1, 1, c).astype(np.float32)
    graphs = []
    for also_output in (False, True):
        g, t = fp16_residual_graph(x, e, wt, bias, 1, 1, 1, "relu_x", also_output)
        offsets, _ = g._memory_plan()
        offsets[t["y"]] = offsets[t["relu_x"]]  # relu_x last read by the convolution (op 2), y born at op 3
        arena = [t[k] for k in ("a", "relu_x", "c", "y", "z") if not (also_output and k == "c")]
        g.plan = (offsets, max(offsets[k] + x.size * 2 for k in arena))  # every intermediate has x's size
        graphs.append(g)
    if has_fp16_fusion():
        assert fused_ops(graphs[0]) == [3]  # the add ran inside the convolution
    check_fp16_residual(*graphs, x, e, wt, bias, 1, 1, 1, np.maximum(x.astype(np.float64), 0))


# The same for INT8, whose engine plans its own memory only for such pairs (no in-place adds): the loadable
# put the add's output over the convolution's input "a", which the add's kernel would otherwise run
# apart from the convolution. Exact against NumPy either way; fused wherever the convolution can take it.
@pytest.mark.parametrize("geometry", [(40, 40, 1, 1, 0, 1), (24, 24, 3, 1, 1, 1)])
def test_int8_add_planned_over_the_convolution_input_still_fuses(geometry):
    g, arrays, ref, _ = build(geometry, 3, False, "relu", conv_input_from_arena=True)
    names = [t["name"] for t in g.tensors]
    a, y = names.index("a"), names.index("y")
    offsets, arena = g._memory_plan()
    assert g.tensors[a]["shape"] == g.tensors[y]["shape"]  # a dies at the convolution (op 1), y is born at op 2
    offsets[y] = offsets[a]
    g.plan = (offsets, arena)
    assert fused_ops(g) == [2]  # the add ran inside the convolution
    np.testing.assert_array_equal(run_graph(g, *arrays), ref)
