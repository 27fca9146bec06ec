"""I/O formats at the graph boundary: descriptors (size, strides, cuDLA constants) for every format on
Orin and Xavier, the worked sizes of docs/FORMATS.md, and data round trips through the engine."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sdla_testkit import fbgen
from sdla_testkit import formats as F
from sdla_testkit import writer
from sdla_testkit.engine import Engine, run_graph


@pytest.mark.parametrize("fmt,dtype,size", [
    (F.CHW16, np.float16, 14_450_688),   # 1x16x672x672x2
    (F.CHW32, np.int8, 14_450_688),
    (F.DLA_HWC4, np.int8, 1_806_336),    # row 672*4 = 2688 B
    (F.DLA_LINEAR, np.float16, 2_709_504),
])
def test_worked_sizes_yolo_input(fmt, dtype, size):
    assert F.layout((1, 3, 672, 672), dtype, fmt)[0] == size


@pytest.mark.parametrize("fmt,dtype,line", [(F.DLA_HWC4, np.int8, 1216), (F.DLA_LINEAR, np.float16, 640),
                                            (F.DLA_LINEAR, np.int8, 320)])
def test_worked_line_strides_w300(fmt, dtype, line):
    assert F.layout((1, 3, 300, 300), dtype, fmt)[2] == line


def test_xavier_line_stride_is_32_bytes():
    assert F.layout((1, 3, 5, 5), np.int8, F.DLA_HWC4, "xavier")[2] == 32
    assert F.layout((1, 3, 5, 5), np.int8, F.DLA_HWC4, "orin")[2] == 64


def _cli_build(model, tmp_path, *flags, calibrate=False):
    """softdla build (the CLI: the GPU machine's Python has no builder extension); (loadable or None, stderr).
    calibrate: calibrate on random samples of the model's input shape."""
    from sdla_testkit.onnx_models import softdla_build
    calib = None
    if calibrate:
        dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
        calib = np.random.default_rng(0).standard_normal([4] + dims[1:]).astype(np.float32)
    blob, r = softdla_build(model, str(tmp_path), *flags, calib=calib, check=False)
    return blob, r.stderr


def _conv_model(c, h=6, w=6):
    from sdla_testkit.onnx_models import G
    g = G(0)
    x = g.input("x", [1, c, h, w])
    return g.model(g.node("Relu", [g.conv(x, c, 4)]))


@pytest.mark.parametrize("target", ["orin", "xavier"])
@pytest.mark.parametrize("precision", ["fp16", "int8"])
def test_dla_linear_rows_are_64_bytes_on_every_dla(target, precision, tmp_path):
    """TensorRT's kDLA_LINEAR rounds the H stride up to 64 bytes, on Xavier too (only dla_hwc4 has the
    32-byte Xavier rule); Xavier's dla_linear tensors were laid out at 32 bytes, half the size a DLA reads.
    Checked on a built loadable's descriptors, sizes computed here from the rule."""
    flags = ["--fp16"] if precision == "fp16" else ["--int8"]
    fmt = f"{precision}:dla_linear"
    blob, err = _cli_build(_conv_model(3, 5, 7), tmp_path, *flags, f"--target={target}", f"--inputIOFormats={fmt}",
                           f"--outputIOFormats={fmt}", calibrate=precision == "int8")
    assert blob, err
    e = 2 if precision == "fp16" else 1
    row = -(-7 * e // 64) * 64
    for i, output, c in ((0, False, 3), (0, True, 4)):
        d = descriptor_of(blob, i, output)
        assert d["stride"][1] == row and d["size"] == c * 5 * row, (target, d)


def descriptor_of(loadable, i, output):
    L = fbgen.mod("Loadable").Loadable.GetRootAs(loadable, 0)
    b = L.Outputs(i) if output else L.Inputs(i)
    return dict(name=b.Name().decode(), size=b.Size(), n=b.N(), c=b.C(), h=b.H(), w=b.W(),
                data_format=b.DataFormat(), data_type=b.DataType(), data_category=b.DataCategory(),
                pixel_format=b.PixelFormat(), pixel_mapping=b.PixelMapping(),
                stride=[b.Stride(j) for j in range(b.StrideLength())])


VALID = [(F.LINEAR, np.float32), (F.LINEAR, np.float16), (F.LINEAR, np.int8), (F.DLA_LINEAR, np.float16),
         (F.DLA_LINEAR, np.int8), (F.DLA_HWC4, np.float16), (F.DLA_HWC4, np.int8), (F.CHW16, np.float16),
         (F.CHW32, np.int8)]


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(VALID), st.sampled_from(VALID), st.integers(1, 3), st.integers(1, 70), st.integers(1, 9),
       st.integers(1, 70), st.sampled_from(["orin", "xavier"]))
def test_format_round_trip(fin, fout, n, c, h, w, target):
    """An identity shuffle from format A to format B moves every element to the right byte, zero padding."""
    (fa, da), (fb, db) = fin, fout
    if da != db:
        return
    if F.DLA_HWC4 in (fa, fb) and c not in (1, 3, 4):
        c = 3
    x = np.random.default_rng(c * h * w).standard_normal((n, c, h, w)) * 50
    x = x.astype(da)
    g = writer.Graph(target)
    xi = g.input("in", x.shape, da, 0.1, fmt=fa)
    y = g.tensor("out", x.shape, da, 0.1)
    g.op("Shuffle", [xi], y, g.params("Shuffle", perm=[0, 1, 2, 3]))
    g.output(y, fb)
    loadable = g.serialize()
    eng = Engine(loadable)
    assert eng.io_size(False, 0) == F.layout(x.shape, da, fa, target)[0]
    assert eng.io_size(True, 0) == F.layout(x.shape, da, fb, target)[0]
    raw = eng.run_raw([F.pack(x, fa, target)], 1)[0]
    assert raw == F.pack(x, fb, target)  # byte-exact, padding included


def test_descriptor_fields_match_cudla_constants():
    g = writer.Graph()
    xi = g.input("images", (1, 3, 300, 300), np.int8, 1 / 127, fmt=F.DLA_HWC4)
    y = g.tensor("features", (1, 3, 300, 300), np.int8, 1 / 127)
    g.op("Shuffle", [xi], y, g.params("Shuffle", perm=[0, 1, 2, 3]))
    g.output(y, F.CHW32)
    d_in = descriptor_of(g.serialize(), 0, False)
    assert d_in == dict(name="images", size=1216 * 300, n=1, c=3, h=300, w=300, data_format=2, data_type=4,
                        data_category=0, pixel_format=12, pixel_mapping=0, stride=[4, 1216, 364800, 364800, 0, 0, 0, 0])
    d_out = descriptor_of(g.serialize(), 0, True)
    assert d_out["data_format"] == 3 and d_out["pixel_format"] == 36 and d_out["stride"][:4] == [32, 9600, 2880000, 2880000]


def test_wrong_descriptor_is_rejected():
    g = writer.Graph()
    xi = g.input("x", (1, 3, 4, 4), np.float16, fmt=F.CHW16)
    y = g.tensor("y", (1, 3, 4, 4), np.float16)
    g.op("Shuffle", [xi], y, g.params("Shuffle", perm=[0, 1, 2, 3]))
    g.output(y)
    obj = g.to_object()
    obj.inputs[0].size += 32
    import flatbuffers
    b = flatbuffers.Builder(0)
    b.Finish(obj.Pack(b), b"SDLA")
    with pytest.raises(Exception, match="descriptor does not match"):
        Engine(bytes(b.Output()))


def _with_input_format(dtype, fmt, channels=3):
    """A valid linear-I/O loadable whose input binding is then switched to fmt (descriptor left stale)."""
    import flatbuffers
    g = writer.Graph()
    xi = g.input("x", (1, channels, 4, 4), dtype, fmt=F.LINEAR)
    y = g.tensor("y", (1, channels, 4, 4), dtype)
    g.op("Shuffle", [xi], y, g.params("Shuffle", perm=[0, 1, 2, 3]))
    g.output(y)
    obj = g.to_object()
    obj.inputs[0].format = fmt
    b = flatbuffers.Builder(0)
    b.Finish(obj.Pack(b), b"SDLA")
    return bytes(b.Output())


@pytest.mark.parametrize("fmt,dtype,msg", [(F.CHW16, np.int8, "chw16 is an fp16 format"),
                                           (F.CHW32, np.float16, "chw32 is an int8 format"),
                                           (F.DLA_LINEAR, np.float32, "fp32 I/O")])
def test_invalid_format_type_pairs(fmt, dtype, msg):
    with pytest.raises(Exception, match=msg):
        Engine(_with_input_format(dtype, fmt))


def test_hwc4_rejects_five_channels():
    with pytest.raises(Exception, match="dla_hwc4 holds 1, 3 or 4 channels"):
        Engine(_with_input_format(np.int8, F.DLA_HWC4, channels=5))


@pytest.mark.parametrize("spec, want", [
    ("fp16:chw32+chw16", F.CHW16),       # chw32 holds int8 only: the second alternative is the one taken
    ("fp16:dla_hwc4+chw16", F.CHW16),    # 16 channels: no dla_hwc4
    ("fp16:chw16+dla_linear", F.CHW16),  # both allowed: the first
])
def test_format_alternatives_take_the_first_the_dla_accepts(spec, want, tmp_path):
    """trtexec's 'type:fmt+fmt': the first alternative was always taken (an error where the DLA refuses it)
    and the others never read."""
    blob, err = _cli_build(_conv_model(16), tmp_path, "--fp16", f"--inputIOFormats={spec}")
    assert blob, err
    assert Engine(blob).io_info(False)[0].format == want


@pytest.mark.parametrize("spec, words", [
    ("fp16:chw16+bogus", "'bogus' is not a DLA format"),
    ("fp16:chw16+", "has an empty format"),
    ("fp16:+chw16", "has an empty format"),
    ("fp16:chw16,", "end with ','"),
    ("fp16:chw32+dla_hwc4", "none of the 2 alternatives given is"),
])
def test_format_alternatives_are_each_checked(spec, words, tmp_path):
    blob, err = _cli_build(_conv_model(16), tmp_path, "--fp16", f"--inputIOFormats={spec}")
    assert blob is None and words in err, err


@pytest.mark.parametrize("fmt, layer_precision", [("fp16:dla_hwc4", "int8"), ("int8:dla_hwc4", "fp16")])
def test_dla_hwc4_input_must_feed_a_layer_of_its_precision(fmt, layer_precision, tmp_path):
    """dla-facts: a dla_hwc4 input into a convolution of the other precision is unsupported on the DLA; the
    builder slipped a conversion layer in between."""
    m = _conv_model(3)
    conv = m.graph.node[0].name
    flags = ["--int8", "--fp16", "--precisionConstraints=prefer", f"--layerPrecisions={conv}:{layer_precision}"]
    blob, err = _cli_build(m, tmp_path, *flags, f"--inputIOFormats={fmt}", calibrate=True)
    assert blob is None and f"feeds layer '{conv}', which runs in {layer_precision}" in err, err
    blob, err = _cli_build(m, tmp_path, *flags, f"--inputIOFormats={layer_precision}:dla_hwc4", calibrate=True)
    assert blob, err
    assert Engine(blob).io_info(False)[0].format == F.DLA_HWC4


def _two_readers_model():
    from sdla_testkit.onnx_models import G
    g = G(0)
    x = g.input("x", [1, 3, 6, 6])
    return g.model([g.node("Relu", [g.conv(x, 3, 4)]), g.node("Relu", [g.conv(x, 3, 4)])])


@pytest.mark.parametrize("fmt, other", [("int8:dla_hwc4", "fp16"), ("fp16:dla_hwc4", "int8")])
def test_dla_hwc4_input_must_feed_every_reader_in_its_precision(fmt, other, tmp_path):
    """Every layer that reads a dla_hwc4 image must run in its precision, not only the first: with two
    readers of different precisions the second read the image through a conversion layer."""
    m = _two_readers_model()
    first, second = [n.name for n in m.graph.node if n.op_type == "Conv"]
    same = fmt.split(":")[0]
    flags = ["--int8", "--fp16", "--precisionConstraints=prefer", f"--layerPrecisions={first}:{same},{second}:{other}",
             f"--inputIOFormats={fmt}"]
    blob, err = _cli_build(m, tmp_path, *flags, calibrate=True)
    assert blob is None and f"feeds layer '{second}', which runs in {other}" in err, err


def test_format_alternatives_pass_over_a_hwc4_of_the_wrong_precision(tmp_path):
    """'fp16:dla_hwc4+dla_linear' into an INT8 layer: the hwc4 alternative breaks the image rule, so the
    next one is taken (trtexec's '+' rule); it used to be an error."""
    m = _conv_model(3)
    blob, err = _cli_build(m, tmp_path, "--int8", "--fp16", "--inputIOFormats=fp16:dla_hwc4+dla_linear",
                           calibrate=True)
    assert blob, err
    info = Engine(blob).io_info(False)[0]
    assert info.format == F.DLA_LINEAR and info.dtype == 1  # fp16 (cudla's data type code)


@pytest.mark.parametrize("call, words", [
    (lambda: F.layout((1, 3, 2, 5), np.float16, 99), "format 99 is not one of"),
    (lambda: F.layout((1, 3, 2, 5), np.float16, "chw17"), "format 'chw17' is not one of"),
    (lambda: F.layout((1, 3, 2, 5), np.float16, F.DLA_LINEAR, "Xavier"), "target 'Xavier' is not"),
    (lambda: F.layout((1, 5, 2, 5), np.int8, F.DLA_HWC4), "dla_hwc4 holds 1, 3 or 4 channels, not 5"),
    (lambda: F.layout((1, 3, 2, 5), np.float64, F.LINEAR), "float64 is not a DLA I/O type"),
    (lambda: F.layout((1, 3, 2, 5), np.float16, F.CHW32), "chw32 holds int8 only"),
    (lambda: F.pack(np.zeros((1, 3, 2, 5), np.int8), F.CHW16), "chw16 holds float16 only"),
    (lambda: F.unpack(b"\0" * 10, (1, 3, 2, 5), np.float16, F.DLA_LINEAR), "the buffer holds 10 bytes"),
    (lambda: F.descriptor("x", (1, 3, 2, 5), np.float32, F.CHW16), "float32 I/O is laid out linear"),
])
def test_format_helpers_refuse_what_has_no_layout(call, words):
    """An unknown format fell back to chw32's layout, an unknown target to Orin's; a 5-channel dla_hwc4 was
    a bare AssertionError, a short buffer a reshape error."""
    with pytest.raises(ValueError, match=words):
        call()


def test_format_helpers_take_format_names():
    assert F.layout((1, 3, 2, 5), np.float16, "dla_linear") == F.layout((1, 3, 2, 5), np.float16, F.DLA_LINEAR)


def test_python_formats_refuse_layouts_they_cannot_pack():
    """softdla.formats.from_descriptor read strides it knew no layout for as `linear` (rows packed at the wrong
    pitch); unpack(out=) broadcast one batch into an out of several."""
    import types
    from softdla import formats as pf
    # fp16 (cuDLA's data type 2), nchw, 5 columns in 32-byte rows: neither linear (10) nor dla_linear (64)
    desc = types.SimpleNamespace(name="t", data_type=2, data_format=1, n=1, c=3, h=4, w=5,
                                 stride=[2, 32, 128, 384], size_=384)
    with pytest.raises(ValueError, match="match no DLA layout"):
        pf.from_descriptor(desc)
    data = pf.pack(np.ones((1, 3, 4, 4), np.float16), pf.LINEAR)
    with pytest.raises(ValueError, match="must be the NCHW shape"):
        pf.unpack(data, (1, 3, 4, 4), np.float16, pf.LINEAR, out=np.zeros((2, 3, 4, 4), np.float32))
