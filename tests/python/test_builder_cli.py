"""softdla build / check as a user drives them: the bundled trained model's INT8 accuracy, malformed
models, the capability table, calibration caches, Q/DQ models, trtexec flags and their errors."""
import os
import struct
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from sdla_testkit.engine import ROOT, Engine
from sdla_testkit.onnx_models import SOFTDLA, G, cosine, ort_run, run_loadable, softdla_build

MODELS = os.path.join(ROOT, "examples", "models")


def softdla(*args):
    return subprocess.run([SOFTDLA, *args], capture_output=True, text=True)


def test_trained_digits_int8_within_one_point_of_fp32(tmp_path):
    out = tmp_path / "digits.loadable"
    r = softdla("build", f"--onnx={MODELS}/digits.onnx", "--int8", "--fp16", f"--calib-data={MODELS}/digits_calib",
                f"--saveEngine={out}")
    assert r.returncode == 0, r.stderr
    images = np.load(f"{MODELS}/digits_test_images.npy").astype(np.float32)
    labels = np.load(f"{MODELS}/digits_test_labels.npy")
    model = onnx.load(f"{MODELS}/digits.onnx")
    fp32 = np.array([ort_run(model, im[None])[0].argmax() for im in images])
    eng = Engine(out.read_bytes())
    int8 = np.array([eng.run_float(im[None])[0].reshape(-1).argmax() for im in images])
    acc32, acc8 = (fp32 == labels).mean() * 100, (int8 == labels).mean() * 100
    assert acc32 > 95
    assert abs(acc8 - acc32) <= 1.0, (acc8, acc32)


# ------------------------------------------------------------------ malformed models
def write(tmp_path, model_or_bytes, name="bad.onnx"):
    p = tmp_path / name
    p.write_bytes(model_or_bytes if isinstance(model_or_bytes, bytes) else model_or_bytes.SerializeToString())
    return p


def small_model(**kw):
    g = G()
    x = g.input("x", kw.get("shape", [1, 3, 8, 8]))
    return g, g.model([g.node("Relu", [g.conv(x, 3, 4)])])


@pytest.mark.parametrize("kind,message", [
    ("truncated", "not a valid ONNX model"),
    ("garbage", "not a valid ONNX model"),
    ("unknown_op", "operator 'TopK' does not run on the DLA"),
    ("dynamic", "dynamic dimension 'batch'"),
    ("cycle", "or the graph has a cycle"),
    ("wrong_type", "holds string values"),
    ("opset", "opset 9 is not supported"),
    ("short_weights", "holds 10 values but its shape needs 108"),
])
def test_malformed_models_give_clear_errors(tmp_path, kind, message):
    _, m = small_model()
    if kind == "truncated":
        data = m.SerializeToString()[:40]
    elif kind == "garbage":
        data = bytes(range(256)) * 4
    elif kind == "unknown_op":
        g = G()
        x = g.input("x", [1, 4, 4, 4])
        g.nodes.append(helper.make_node("TopK", [x, g.const(np.array([2], np.int64))], ["v", "i"], axis=1))
        data = g.model(["v"])
    elif kind == "dynamic":
        g = G()
        g.inputs.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8]))
        data = g.model([g.node("Relu", ["x"])])
    elif kind == "cycle":
        g = G()
        x = g.input("x", [1, 3, 4, 4])
        g.nodes.append(helper.make_node("Add", [x, "b"], ["a"], name="A"))
        g.nodes.append(helper.make_node("Relu", ["a"], ["b"], name="B"))
        data = g.model(["b"])
    elif kind == "wrong_type":
        g = G()
        x = g.input("x", [1, 3, 4, 4])
        g.inits.append(helper.make_tensor("s", TensorProto.STRING, [1], [b"hello"]))
        data = g.model([g.node("Add", [x, "s"])])
    elif kind == "opset":
        data = helper.make_model(m.graph, opset_imports=[helper.make_opsetid("", 9)])
    else:
        m.graph.initializer[0].ClearField("float_data")
        m.graph.initializer[0].raw_data = np.zeros(10, np.float32).tobytes()
        data = m
    p = write(tmp_path, data)
    r = softdla("build", f"--onnx={p}", "--fp16", f"--saveEngine={tmp_path / 'out.loadable'}")
    assert r.returncode == 1, (r.returncode, r.stderr)  # a clean error, never a signal
    assert message in r.stderr, r.stderr
    assert not (tmp_path / "out.loadable").exists()


def test_random_corruption_never_crashes(tmp_path):
    data = open(f"{MODELS}/digits.onnx", "rb").read()
    rng = np.random.default_rng(0)
    for i in range(60):
        b = bytearray(data)
        for pos in rng.integers(0, len(b), 4):
            b[pos] = rng.integers(0, 256)
        p = write(tmp_path, bytes(b), f"c{i}.onnx")
        r = softdla("build", f"--onnx={p}", "--fp16", f"--saveEngine={tmp_path / 'c.loadable'}")
        assert r.returncode in (0, 1), r.stderr  # never killed by a signal


def test_dynamic_batch_fixed_with_shapes(tmp_path):
    g = G()
    g.inputs.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8]))
    m = g.model([g.node("Relu", [g.conv("x", 3, 4)])])
    p = write(tmp_path, m)
    r = softdla("build", f"--onnx={p}", "--fp16", "--shapes=x:2x3x8x8", f"--saveEngine={tmp_path / 'o.loadable'}")
    assert r.returncode == 0, r.stderr
    assert Engine((tmp_path / "o.loadable").read_bytes()).io_info(False)[0].n == 2


def test_shapes_cannot_change_a_static_dimension(tmp_path):
    """--shapes on a dimension the model fixes built a loadable of the other shape without a word (trtexec
    does not take --shapes for static dimensions); the model's own size, and trtexec's text form in
    Python, are accepted; a channel count the weights do not take says both counts."""
    import softdla as sd
    g = G()
    g.inputs.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 8, 8]))
    m = g.model([g.node("Relu", [g.conv("x", 4, 6)])])
    p = write(tmp_path, m)
    r = softdla("build", f"--onnx={p}", "--fp16", "--shapes=x:2x4x16x16", f"--saveEngine={tmp_path / 'o.loadable'}")
    assert r.returncode != 0 and "fixes its dimension 2 at 8" in r.stderr, r.stderr
    blob = sd.build(m, fp16=True, shapes={"x": "2x4x8x8"})
    assert Engine(blob).io_info(False)[0].n == 2
    with pytest.raises(sd.BuildError, match="give a list of ints"):
        sd.build(m, fp16=True, shapes={"x": "2,4,8,8"})
    g = G()
    g.inputs.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "c", 8, 8]))
    m = g.model([g.node("Relu", [g.conv("x", 4, 6)])])
    with pytest.raises(sd.BuildError, match="input has 3 channels, but the weights take 4 x 1 group"):
        sd.build(m, fp16=True, shapes={"x": [1, 3, 8, 8]})


def test_stale_value_info_under_shapes_is_named(tmp_path):
    """A symbolic batch fixed by --shapes where the model's value_info still declares batch 1 (exported or
    simplified at 1): the error used to say the builder did not implement the node as the exporter did."""
    g = G()
    g.inputs.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8]))
    c = g.conv("x", 3, 4)
    m = g.model([g.node("Relu", [c])])
    m.graph.value_info.append(helper.make_tensor_value_info(c, TensorProto.FLOAT, [1, 4, 8, 8]))
    r = softdla("build", f"--onnx={write(tmp_path, m)}", "--fp16", "--shapes=x:2x3x8x8",
                f"--saveEngine={tmp_path / 'o.loadable'}")
    assert r.returncode == 1 and "--shapes set the inputs' dynamic dimensions" in r.stderr, r.stderr
    assert "remove the stale value_info entries" in r.stderr


# ------------------------------------------------------------------ check
def test_check_table_names_node_rule_and_fix(tmp_path):
    g = G()
    x = g.input("x", [1, 8, 16, 16])
    y = g.node("Conv", [x, g.weight(8, 8, 3, 3)], kernel_shape=[3, 3], strides=[9, 9])
    z = g.node("Softmax", [g.node("Relu", [x])], axis=1)
    p = write(tmp_path, g.model([y, z]))
    r = softdla("check", str(p))
    assert r.returncode == 1
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("Conv_1"))
    assert "NO" in line and "stride height = 9 is outside the DLA range [1, 8]" in line
    assert "2 of 3 nodes run on the DLA (orin)" in r.stdout
    rx = softdla("check", str(p), "--target", "xavier")
    assert "softmax runs on Orin's DLA only" in rx.stdout
    # build's --onnx works for check too (it used to be "model is required")
    assert softdla("check", f"--onnx={p}").stdout == r.stdout
    missing = softdla("check")
    assert missing.returncode == 2 and "check needs the model" in missing.stderr


def test_check_blames_the_node_at_fault_in_a_qdq_pair(tmp_path):
    """A DequantizeLinear's nonzero zero point is found while its QuantizeLinear's pair is lowered: the DQ's
    row gives the reason, the Q's row points at it (it used to be the other way round, the DQ's row saying
    only that DequantizeLinear does not run)."""
    g = G()
    x = g.input("x", [1, 3, 8, 8])
    s = g.const(np.float32(0.05))
    q = g.node("QuantizeLinear", [x, s, g.const(np.int8(0))])
    dq = g.node("DequantizeLinear", [q, s, g.const(np.int8(3))])
    y = g.node("Conv", [dq, g.weight(4, 3, 3, 3)], kernel_shape=[3, 3], pads=[1] * 4)
    p = write(tmp_path, g.model([y]))
    r = softdla("check", str(p))
    assert r.returncode == 1
    rows = {ln.split()[0]: ln for ln in r.stdout.splitlines()[1:-1]}
    (qrow,) = [v for k, v in rows.items() if k.startswith("QuantizeLinear")]
    (dqrow,) = [v for k, v in rows.items() if k.startswith("DequantizeLinear")]
    assert "zero points must be 0" in dqrow and " NO " in dqrow
    assert "does not lower because node 'DequantizeLinear" in qrow and "zero points" not in qrow
    assert "1 of 3 nodes run on the DLA" in r.stdout


# ------------------------------------------------------------------ calibration caches
def test_calibration_cache_round_trip(tmp_path):
    cache = tmp_path / "digits.cache"
    a = tmp_path / "a.loadable"
    r = softdla("build", f"--onnx={MODELS}/digits.onnx", "--int8", "--fp16", f"--calib-data={MODELS}/digits_calib",
                f"--calib={cache}", f"--saveEngine={a}")
    assert r.returncode == 0 and "wrote calibration cache" in r.stdout, r.stderr
    lines = cache.read_text().splitlines()
    assert lines[0] == "TRT-8600-EntropyCalibration2"
    assert all(len(ln.split(": ")[1]) == 8 for ln in lines[1:])
    b = tmp_path / "b.loadable"  # the cache now exists: it is read instead of calibrating
    r = softdla("build", f"--onnx={MODELS}/digits.onnx", "--int8", "--fp16", f"--calib={cache}", f"--saveEngine={b}")
    assert r.returncode == 0, r.stderr
    # Same layers, precisions and scales; only the file name and the recorded flags differ.
    ia = softdla("inspect", str(a)).stdout.splitlines()[1:]
    ib = softdla("inspect", str(b)).stdout.splitlines()[1:]
    assert [x for x in ia if "flags" not in x] == [x for x in ib if "flags" not in x]


@pytest.mark.zoo  # whole-network calibrated builds: minutes under the sanitizers
def test_cache_written_when_auto_chooses_the_tail_percentile(tmp_path):
    """The cache's unfused pass calibrates again with the rule auto chose; for the tail percentile (99.999)
    it read ranges only an auto pass fills, and the build died of a segmentation fault. MobileNetV3's hard
    swishes make auto choose that rule on smooth images."""
    from sdla_testkit import zoo
    (tmp_path / "calib").mkdir()
    np.save(tmp_path / "calib" / "x.npy", zoo.smooth_images(16, 64, seed=1))
    onnx.save(zoo.mobilenet_v3_large(64, 1, 0), tmp_path / "m.onnx")
    cache = tmp_path / "m.cache"
    r = softdla("build", f"--onnx={tmp_path / 'm.onnx'}", "--int8", "--fp16", f"--calib-data={tmp_path / 'calib'}",
                f"--calib={cache}", f"--saveEngine={tmp_path / 'm.loadable'}", "--verbose")
    assert "calibration rule chosen: percentile 99.999" in r.stderr + r.stdout  # else pick a model that does
    assert r.returncode == 0 and "wrote calibration cache" in r.stdout, r.stderr
    names = {ln.split(": ")[0] for ln in cache.read_text().splitlines()[1:]}
    graph = onnx.load(tmp_path / "m.onnx").graph
    assert {n.output[0] for n in graph.node if n.op_type in ("Conv", "Clip", "Mul", "Div")} <= names


@pytest.mark.zoo  # whole-network calibrated builds: minutes under the sanitizers
def test_calibration_does_not_depend_on_the_batch_size(tmp_path):
    """The same 16 calibration images give the same ranges at batch 1 and 2: auto's folds hold the same
    images and judge each image's cosine (they held batches, so the folds and the chosen rule moved with the
    batch size: MobileNetV3 here chose the tail percentile at batch 1 and min-max at batch 2)."""
    from sdla_testkit import zoo
    (tmp_path / "calib").mkdir()
    np.save(tmp_path / "calib" / "x.npy", zoo.smooth_images(16, 64, seed=1))
    caches = []
    for batch in (1, 2):
        onnx.save(zoo.mobilenet_v3_large(64, batch, 0), tmp_path / f"m{batch}.onnx")
        cache = tmp_path / f"m{batch}.cache"
        r = softdla("build", f"--onnx={tmp_path / f'm{batch}.onnx'}", "--int8", "--fp16",
                    f"--calib-data={tmp_path / 'calib'}", f"--calib={cache}", f"--saveEngine={tmp_path / 'm.loadable'}")
        assert r.returncode == 0, r.stderr
        caches.append(cache.read_text())
    assert caches[0] == caches[1]


def test_reads_a_cache_in_tensorrts_format(tmp_path):
    # A cache line of NVIDIA's cuDLA samples, "images: 3c00f9f4": big-endian float32 bits of the scale, ~1/127.
    scale = struct.unpack(">f", bytes.fromhex("3c00f9f4"))[0]
    assert abs(scale - 0.0078721) < 1e-7
    cache = tmp_path / "trt.cache"
    cache.write_text("TRT-8600-EntropyCalibration2\npixels: 3c00f9f4\nx: 3c00f9f4\nr1: 3d000000\nr2: 3d000000\n"
                     "p: 3d000000\nlogits: 3e000000\n")
    out = tmp_path / "t.loadable"
    r = softdla("build", f"--onnx={MODELS}/digits.onnx", "--int8", "--fp16", f"--calib={cache}", f"--saveEngine={out}")
    assert r.returncode == 0, r.stderr
    info = Engine(out.read_bytes()).io_info(False)[0]
    assert info.dtype == 2 and info.scale == np.float32(scale)


def test_bad_cache_is_rejected(tmp_path):
    cache = tmp_path / "bad.cache"
    cache.write_text("TRT-8600-EntropyCalibration2\npixels: zz00f9f4\n")
    r = softdla("build", f"--onnx={MODELS}/digits.onnx", "--int8", f"--calib={cache}", f"--saveEngine={tmp_path / 'x'}")
    assert r.returncode == 1 and "is not 8 hex digits" in r.stderr


# ------------------------------------------------------------------ Q/DQ models
def test_qdq_model_folds_into_scales(tmp_path):
    g = G(seed=3)
    x = g.input("x", [1, 4, 8, 8])
    s_in = g.const(np.float32(4.0 / 127))
    zp = g.const(np.int8(0))
    q = g.node("QuantizeLinear", [x, s_in, zp])
    dq = g.node("DequantizeLinear", [q, s_in, zp])
    w = (np.random.default_rng(0).standard_normal((8, 4, 3, 3)) * 0.3).astype(np.float32)
    ws = (np.abs(w).reshape(8, -1).max(1) / 127).astype(np.float32)
    wq = np.clip(np.round(w / ws[:, None, None, None]), -127, 127).astype(np.int8)
    wdq = g.node("DequantizeLinear", [g.const(wq), g.const(ws), g.const(np.zeros(8, np.int8))], axis=0)
    c = g.node("Relu", [g.node("Conv", [dq, wdq], kernel_shape=[3, 3], pads=[1, 1, 1, 1])])
    s_out = g.const(np.float32(6.0 / 127))
    y = g.node("DequantizeLinear", [g.node("QuantizeLinear", [c, s_out, zp]), s_out, zp])
    m = g.model([y], opset=13)
    loadable, r = softdla_build(m, tmp_path, "--int8")  # no calibration: Q/DQ gives every scale
    info = Engine(loadable).io_info(False)[0]
    assert info.dtype == 2 and abs(info.scale - 4.0 / 127) < 1e-7
    xin = np.random.default_rng(1).standard_normal((1, 4, 8, 8)).astype(np.float32)
    assert cosine(run_loadable(loadable, xin)[0], ort_run(m, xin)[0]) > 0.99


# ------------------------------------------------------------------ trtexec flags
def test_trtexec_command_line_works(tmp_path):
    r = softdla("build", f"--onnx={MODELS}/digits.onnx", f"--saveEngine={tmp_path / 'd.loadable'}", "--int8", "--fp16",
                f"--calib={tmp_path / 'new.cache'}", f"--calib-data={MODELS}/digits_calib",
                "--inputIOFormats=int8:dla_hwc4", "--outputIOFormats=fp16:chw16", "--buildDLAStandalone",
                "--useDLACore=1", "--precisionConstraints=prefer", "--layerPrecisions=conv2:fp16", "--skipInference",
                "--memPoolSize=dlaSRAM:1", "--verbose")
    assert r.returncode == 0, r.stderr
    out = softdla("inspect", str(tmp_path / "d.loadable")).stdout
    assert "input  'pixels' 1x1x8x8 int8:dla_hwc4" in out and "fp16:chw16" in out
    assert "conv       fp16   conv2" in out and "conv       int8   conv1" in out
    assert "layer conv2 (conv): fp16" in r.stderr


def layer_precisions_of(loadable):
    """{layer: precision} of a loadable as `softdla inspect` lists its ops (conversion ops left out)."""
    rows = [ln.split() for ln in softdla("inspect", str(loadable)).stdout.splitlines() if ln.startswith("    ")]
    return {row[2]: row[1] for row in rows if row[0] != "convert"}


def test_layer_precisions_take_trtexec_wildcards(tmp_path):
    """trtexec's --layerPrecisions: a name may hold one '*' (any text; "*" alone every layer); an exact
    name wins over a pattern, a longer pattern over a shorter one. It used to be "not a layer"."""
    def layers(*spec):
        out = tmp_path / "w.loadable"
        r = softdla("build", f"--onnx={MODELS}/digits.onnx", f"--saveEngine={out}", "--int8", "--fp16",
                    f"--calib-data={MODELS}/digits_calib", "--precisionConstraints=obey", *spec)
        assert r.returncode == 0, r.stderr
        return layer_precisions_of(out)

    got = layers("--layerPrecisions=*:fp16,conv2:int8")
    assert got == {"normalize": "fp16", "conv1": "fp16", "conv2": "int8", "pool": "fp16", "fc": "fp16", "softmax": "fp16"}
    got = layers("--layerPrecisions=conv*:fp16,conv1*:int8")
    assert got["conv1"] == "int8" and got["conv2"] == "fp16" and got["fc"] == "int8"
    r = softdla("build", f"--onnx={MODELS}/digits.onnx", f"--saveEngine={tmp_path / 'x.loadable'}", "--int8", "--fp16",
                f"--calib-data={MODELS}/digits_calib", "--precisionConstraints=prefer", "--layerPrecisions=*:int8")
    assert r.returncode == 0 and "asks int8 for layer 'softmax' (by '*'), which runs in fp16" in r.stderr, r.stderr
    r = softdla("build", f"--onnx={MODELS}/digits.onnx", f"--saveEngine={tmp_path / 'x.loadable'}", "--fp16",
                "--precisionConstraints=prefer", "--layerPrecisions=zz*:fp16")
    assert r.returncode == 1 and "'zz*', which matches no layer of this model" in r.stderr, r.stderr


def test_layer_precisions_without_constraints_have_no_effect_as_in_trtexec(tmp_path):
    """trtexec sets per-layer precisions only under --precisionConstraints=prefer or obey; with none it warns
    and the device's engine has the default precisions. softdla builds that same engine, and says so; the
    Python API applies given layer precisions (its default constraints are then prefer)."""
    def precisions(*flags):
        out = tmp_path / "p.loadable"
        r = softdla("build", f"--onnx={MODELS}/digits.onnx", f"--saveEngine={out}", "--int8", "--fp16",
                    f"--calib-data={MODELS}/digits_calib", "--layerPrecisions=conv2:fp16", *flags)
        assert r.returncode == 0, r.stderr
        return layer_precisions_of(out), r.stderr

    got, err = precisions()
    assert got["conv2"] == "int8" and "--layerPrecisions has no effect with --precisionConstraints=none" in err, err
    for constraints in ("prefer", "obey"):
        got, err = precisions(f"--precisionConstraints={constraints}")
        assert got["conv2"] == "fp16" and "no effect" not in err, err
    import softdla as sd
    blob = sd.build(f"{MODELS}/digits.onnx", int8=True, fp16=True, calib_data=f"{MODELS}/digits_calib",
                    layer_precisions={"conv2": "fp16"}, progress=False)
    path = tmp_path / "py.loadable"
    path.write_bytes(blob)
    assert layer_precisions_of(path)["conv2"] == "fp16"


def test_layer_precisions_name_a_split_by_its_node(tmp_path):
    """A Split becomes one layer a piece ('name [k]'); the ONNX node's own name selects them all."""
    g = G()
    x = g.input("x", [1, 8, 8, 8])
    a, b = g.node("Split", [g.conv(x, 8, 8)], n_out=2, axis=1)
    m = g.model([g.node("Relu", [a]), g.node("Sigmoid", [b])])
    split = next(n.name for n in m.graph.node if n.op_type == "Split")
    calib = np.random.default_rng(0).standard_normal((4, 8, 8, 8)).astype(np.float32)
    _, r = softdla_build(m, tmp_path, "--int8", "--fp16", "--precisionConstraints=obey",
                         f"--layerPrecisions={split}:fp16", calib=calib, check=False)
    assert r.returncode == 0, r.stderr
    rows = [ln.split() for ln in softdla("inspect", str(tmp_path / "model.loadable")).stdout.splitlines()
            if f"{split} [" in ln]
    assert len(rows) == 2 and all(row[1] == "fp16" for row in rows), rows


def test_existing_cache_over_calibration_data_is_said(tmp_path):
    """trtexec reads an existing --calib cache and never calibrates; with --calib-data given too, a stale
    cache silently won. The build now says so."""
    cache = tmp_path / "c.cache"
    args = [f"--onnx={MODELS}/digits.onnx", "--int8", "--fp16", f"--calib-data={MODELS}/digits_calib", f"--calib={cache}"]
    r = softdla("build", *args, f"--saveEngine={tmp_path / 'a.loadable'}")
    assert r.returncode == 0 and "calibration cache" not in r.stderr, r.stderr
    r = softdla("build", *args, f"--saveEngine={tmp_path / 'b.loadable'}")
    assert r.returncode == 0 and f"calibration cache '{cache}' exists: its scales are used and --calib-data is not read" in r.stderr, r.stderr


def test_trtexec_profile_shapes_and_flags_dla_scripts_pass(tmp_path):
    """NVIDIA's DLA build scripts give trtexec --minShapes/--optShapes/--maxShapes (all equal: the DLA is
    static) and flags such as --best, --buildOnly, --noTF32, --workspace: they were unknown options."""
    g = G()
    g.inputs.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 8, 8]))
    p = write(tmp_path, g.model([g.node("Relu", [g.conv("x", 3, 4)])]))
    out = tmp_path / "p.loadable"
    profile = [f"--{k}Shapes=x:2x3x8x8" for k in ("min", "opt", "max")]
    r = softdla("build", f"--onnx={p}", f"--saveEngine={out}", "--fp16", *profile, "--buildOnly", "--noTF32",
                "--workspace=1024", "--safe", "--sparsity=enable", "--timingCacheFile=t.cache", "--profilingVerbosity=detailed")
    assert r.returncode == 0, r.stderr
    assert "input  'x' 2x3x8x8" in softdla("inspect", str(out)).stdout
    r = softdla("build", f"--onnx={p}", f"--saveEngine={out}", "--fp16", "--minShapes=x:1x3x8x8", "--maxShapes=x:4x3x8x8")
    assert r.returncode == 1 and "the DLA runs static shapes only" in r.stderr, r.stderr
    r = softdla("build", f"--onnx={p}", f"--saveEngine={out}", "--fp16", "--sparsity=force", "--shapes=x:1x3x8x8")
    assert r.returncode == 1 and "--sparsity=force rewrites the weights" in r.stderr, r.stderr
    r = softdla("build", f"--onnx={MODELS}/digits.onnx", f"--saveEngine={out}", "--best",
                f"--calib-data={MODELS}/digits_calib")
    assert r.returncode == 0 and "int8+fp16" in softdla("inspect", str(out)).stdout, r.stderr


@pytest.mark.parametrize("flags,message", [
    (["--fp16", "--allowGPUFallback"], "GPU fallback (--allowGPUFallback) not allowed for DLA standalone mode"),
    (["--fp16", "--outputIOFormats=fp16:dla_hwc4"], "restricted to fp16/int8:dla_linear"),
    (["--fp16", "--inputIOFormats=fp16:chw32"], "fp16:chw32 is not allowed for a DLA standalone loadable"),
    (["--fp16", "--inputIOFormats=fp16:hwc8"], "not a DLA format"),
    (["--int8"], "--int8 needs scales"),
    ([], "choose a precision"),
    (["--int8", "--fp16", "--precisionConstraints=prefer", "--layerPrecisions=nope:fp16"], "'nope', which is not a layer"),
    (["--int8", "--precisionConstraints=obey", "--layerPrecisions=softmax:int8",
      f"--calib-data={MODELS}/digits_calib"], "constrained to int8 but the DLA runs this layer in FP16 only"),
])
def test_flag_errors(tmp_path, flags, message):
    r = softdla("build", f"--onnx={MODELS}/digits.onnx", f"--saveEngine={tmp_path / 'x.loadable'}", *flags)
    assert r.returncode != 0 and message in r.stderr, r.stderr
