"""Malformed loadables give a clear error naming the problem, never a crash: corrupt bytes, wrong
identifier/version, out-of-range indices, wrong sizes, graph order, DLA limits, overlapping plans."""
import flatbuffers
import numpy as np
import pytest

from sdla_testkit import formats as F
from sdla_testkit import writer
from sdla_testkit.engine import Engine, EngineError


def conv_graph(**conv):
    g = writer.Graph()
    x = g.input("x", (1, 4, 8, 8), np.float16)
    w = g.constant(np.ones((8, 4, 3, 3)), np.float16)
    y = g.tensor("y", (1, 8, 6, 6), np.float16)
    z = g.tensor("z", (1, 8, 6, 6), np.float16)
    g.op("Conv", [x], y, g.conv_params(w, post=writer.sdp(), **conv))
    g.op("Sdp", [y], z, writer.sdp([writer.sdp_step("relu")]))
    g.output(z)
    return g


def pack(obj):
    b = flatbuffers.Builder(0)
    b.Finish(obj.Pack(b), b"SDLA")
    return bytes(b.Output())


def expect_error(data, match):
    with pytest.raises(EngineError, match=match):
        Engine(data)


def test_valid_graph_loads():
    Engine(conv_graph().serialize())


@pytest.mark.parametrize("data,match", [
    (b"", "too short"),
    (b"\x00" * 64, "file identifier"),
    (b"TRT engine file, not a loadable", "file identifier"),
])
def test_garbage(data, match):
    expect_error(data, match)


def test_truncated_and_flipped_bytes_never_crash():
    data = conv_graph().serialize()
    rng = np.random.default_rng(0)
    for cut in range(0, len(data), max(1, len(data) // 200)):
        with pytest.raises(EngineError):
            Engine(data[:cut])
    loaded = 0
    for _ in range(1500):
        b = bytearray(data)
        for pos in rng.integers(0, len(b), rng.integers(1, 4)):
            b[pos] = rng.integers(0, 256)
        try:
            Engine(bytes(b))
            loaded += 1
        except EngineError as e:
            assert str(e)  # every rejection says something
    assert loaded < 1500  # most flips must be caught


def test_version_mismatch():
    o = conv_graph().to_object()
    o.version.major = 2
    expect_error(pack(o), "format version 2.0 is not supported")


def test_tensor_index_out_of_range():
    o = conv_graph().to_object()
    o.ops[1].inputs = [99]
    expect_error(pack(o), "input tensor index 99 out of range")


def test_ops_out_of_order():
    o = conv_graph().to_object()
    o.ops = [o.ops[1], o.ops[0]]
    expect_error(pack(o), "before it is produced")


def test_cycle_by_self_reference():
    o = conv_graph().to_object()
    o.ops[1].inputs = [o.ops[1].outputs[0]]
    expect_error(pack(o), "before it is produced")


def test_weights_wrong_length():
    o = conv_graph().to_object()
    o.constants[0].data = o.constants[0].data[:-2]
    expect_error(pack(o), "holds 574 bytes; its dims and type need 576")


def test_weights_wrong_type():
    o = conv_graph().to_object()
    o.constants[0].dtype = 2  # int8 weights in an fp16 conv
    o.constants[0].data = o.constants[0].data[: 8 * 4 * 9]
    expect_error(pack(o), "weights are int8, expected fp16")


def test_wrong_output_shape():
    o = conv_graph().to_object()
    o.tensors[1].shape = [1, 8, 5, 6]
    expect_error(pack(o), "has shape 1x8x5x6 but the op produces 1x8x6x6")


@pytest.mark.parametrize("conv,match", [
    (dict(stride=(9, 1)), r"stride height = 9 is outside the DLA range \[1, 8\]"),
    (dict(dilation=(33, 1)), "dilation height = 33"),
    (dict(pads=(3, 0, 0, 0)), "must be smaller than the kernel"),
])
def test_conv_limits(conv, match):
    expect_error(_reshape_conv(conv_graph(), conv), match)


def _reshape_conv(g, conv):
    g.ops[0]["params"] = g.conv_params(0, post=writer.sdp(), **conv)
    return g.serialize()


def test_kernel_larger_than_32():
    g = writer.Graph()
    x = g.input("x", (1, 1, 40, 40), np.float16)
    y = g.tensor("y", (1, 1, 7, 7), np.float16)
    g.op("Conv", [x], y, g.conv_params(g.constant(np.ones((1, 1, 34, 34)), np.float16), post=writer.sdp()))
    g.output(y)
    expect_error(g.serialize(), "kernel height = 34")


def test_memory_plan_overlap_rejected():
    g = conv_graph()
    g.outputs.clear()
    out = g.tensor("out", (1, 8, 6, 6), np.float16)
    g.op("Unary", [2], out, g.params("Unary", kind=0))
    g.output(out)
    g.plan = ([0, 0, 64, 0], 640)  # y (576 B at 0) and z (576 B at 64) share bytes while both are alive
    expect_error(g.serialize(), "overlaps two tensors")


def test_memory_plan_arena_larger_than_its_tensors():
    """Issue 17: a 4 GB arena in a loadable whose tensors need 1 KB made the engine allocate 4 GB."""
    g = conv_graph()
    g.plan = ([0, 0, 576], 4 << 30)
    expect_error(g.serialize(), "arena is 4294967296 bytes but its tensors need")


def test_memory_plan_outside_arena():
    g = conv_graph()
    g.plan = ([0, 64, 128], 160)
    expect_error(g.serialize(), "outside the arena")


def test_int8_scale_must_be_positive():
    g = writer.Graph()
    x = g.input("x", (1, 2, 2, 2), np.int8, -1.0)
    y = g.tensor("y", (1, 2, 2, 2), np.int8, 1.0)
    g.op("Unary", [x], y, g.params("Unary", kind=0))
    g.output(y)
    expect_error(g.serialize(), "scale must be a positive finite")


def test_unknown_op_params():
    o = conv_graph().to_object()
    o.ops[1].paramsType = 0
    o.ops[1].params = None
    expect_error(pack(o), "unknown or missing parameters")


OP_PARAM_TYPES = ["Conv", "Deconv", "Sdp", "Pool", "Lrn", "Resize", "Concat", "Slice", "Shuffle", "Softmax", "Unary",
                  "ReduceMax", "Convert"]


@pytest.mark.parametrize("index,kind", list(enumerate(OP_PARAM_TYPES, start=1)), ids=OP_PARAM_TYPES)
def test_params_type_without_table(index, kind):
    """Issue 17: a union type with no table passed the FlatBuffers verifier and every kernel then read its
    parameters through a null pointer."""
    for op in (0, 1):
        o = conv_graph().to_object()
        o.ops[op].paramsType = index
        o.ops[op].params = None
        expect_error(pack(o), f"declares {kind} parameters but carries no parameter table")


def test_duplicate_io_names_rejected():
    g = writer.Graph()
    x = g.input("x", (1, 2, 2, 2), np.float16)
    y = g.tensor("x", (1, 2, 2, 2), np.float16)
    g.op("Unary", [x], y, g.params("Unary", kind=0))
    g.output(y)
    expect_error(g.serialize(), "name 'x' is used by more than one")


def test_output_not_produced():
    g = writer.Graph()
    g.input("x", (1, 2, 2, 2), np.float16)
    y = g.tensor("y", (1, 2, 2, 2), np.float16)
    g.output(y)
    z = g.tensor("z", (1, 2, 2, 2), np.float16)
    g.op("Unary", [0], z, g.params("Unary", kind=0))
    expect_error(g.serialize(), "is not produced by any op")


def test_precision_mismatch_needs_convert():
    g = writer.Graph()
    x = g.input("x", (1, 2, 2, 2), np.int8, 0.1)
    y = g.tensor("y", (1, 2, 2, 2), np.float16)
    g.op("Unary", [x], y, g.params("Unary", kind=0))
    g.output(y)
    expect_error(g.serialize(), "insert a Convert op")


def test_eltwise_bad_broadcast():
    g = writer.Graph()
    x = g.input("x", (1, 4, 3, 3), np.float16)
    e = g.input("e", (1, 4, 3, 1), np.float16)
    y = g.tensor("y", (1, 4, 3, 3), np.float16)
    g.op("Sdp", [x, e], y, writer.sdp([writer.sdp_step("add", tensor=e)]))
    g.output(y)
    expect_error(g.serialize(), "does not broadcast")


def test_int8_requant_missing():
    g = writer.Graph()
    x = g.input("x", (1, 4, 3, 3), np.int8, 0.1)
    y = g.tensor("y", (1, 4, 3, 3), np.int8, 0.1)
    g.op("Sdp", [x], y, writer.sdp([writer.sdp_step("relu")]))
    g.output(y)
    expect_error(g.serialize(), "needs an output converter")


def test_hwc4_input_shape_descriptor_format_consistency():
    g = writer.Graph()
    x = g.input("x", (1, 3, 3, 3), np.int8, 0.1, fmt=F.DLA_HWC4)
    y = g.tensor("y", (1, 3, 3, 3), np.int8, 0.1)
    g.op("Unary", [x], y, g.params("Unary", kind=0))
    g.output(y, F.DLA_HWC4)  # allowed by our engine; standalone output rules are the builder's job
    Engine(g.serialize())


def test_int8_division_shift_limit():
    """INT8 Div shifts the dividend left before dividing; above 30 that could leave int64."""
    def graph(shift):
        g = writer.Graph()
        x = g.input("x", (1, 2, 2, 2), np.int8, 0.1)
        e = g.input("e", (1, 2, 2, 2), np.int8, 0.1)
        y = g.tensor("y", (1, 2, 2, 2), np.int8, 0.1)
        g.op("Sdp", [x, e], y, writer.sdp([writer.sdp_step("div", tensor=e, shift=shift)], multiplier=[1 << 30], shift=[30]))
        g.output(y)
        return g.serialize()
    Engine(graph(30))
    expect_error(graph(31), "INT8 division shift above 30")
