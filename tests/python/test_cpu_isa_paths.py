"""Every instruction-set path of the CPU backend (SOFTDLA_CPU_ISA: portable, avx2, avxvnni, amx,
avx512vnni; src/engine/cpu/cpu_isa.h) on this machine: the switch selects what it names, the
convolution suites (with the fused residual adds) pass against NumPy on each path, whole INT8 networks give the same bytes on
every path, and whole FP16 networks the same bytes on the avx2 and avx512vnni paths (both FMA kernels
give every output the same sequence of FMAs, as the portable path's std::fma does). Paths this CPU
cannot run are skipped (the CPU model changes between machines)."""
import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest

from sdla_testkit.engine import ROOT
from sdla_testkit.onnx_models import softdla_build

import test_builder_models as nets

BUILD = os.environ.get("SOFTDLA_BUILD_DIR", os.path.join(ROOT, "build"))
PATHS = ["portable", "avx2", "avxvnni", "avx512vnni", "amx"]
HERE = os.path.dirname(__file__)


def _env(isa):
    return {**os.environ, "SOFTDLA_CPU_ISA": isa, "SOFTDLA_LOG": "warn", "PYTHONPATH": HERE + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _active(isa):
    """(active path, detected path) in a process started with SOFTDLA_CPU_ISA=isa."""
    code = ("import ctypes, sys; l = ctypes.CDLL(sys.argv[1]); l.softdla_engine_cpu_isa.restype = ctypes.c_char_p; "
            "print(l.softdla_engine_cpu_isa().decode())")
    r = subprocess.run([sys.executable, "-c", code, os.path.join(BUILD, "libsoftdla_engine_c.so")], env=_env(isa),
                       capture_output=True, text=True, check=True)
    text = r.stdout.strip()  # "avx2 (detected: avx512vnni)"
    return text.split()[0], text.split("detected: ")[1].rstrip(")"), r.stderr


def _skip_unless_runs(isa):
    active, detected, _ = _active(isa)
    if active != isa:
        pytest.skip(f"this CPU cannot run the {isa} path (best: {detected})")


@pytest.mark.parametrize("isa", PATHS)
def test_switch_selects_the_path(isa):
    active, detected, log = _active(isa)
    assert active == isa or PATHS.index(isa) > PATHS.index(detected) or isa == "avxvnni", (active, detected)
    if active != isa:  # a path this CPU lacks: said once, and the best path is used
        assert "cannot run that path" in log and active == detected, log


def test_unknown_switch_value_is_reported():
    active, detected, log = _active("sse9")
    assert active == detected and "not one of auto" in log, log


@pytest.mark.parametrize("isa", PATHS)
def test_conv_suite_on_each_path(isa):
    _skip_unless_runs(isa)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
                        os.path.join(HERE, "test_conv.py"), os.path.join(HERE, "test_conv_residual_fusion.py")],
                       env=_env(isa), capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


def test_conv_suite_with_every_fp16_convolution_on_amx_tiles():
    """SOFTDLA_AMX_F16=all: the AMX-BF16 kernel takes every FP16 convolution it can (the default rule
    leaves short reductions to the FMA kernels, conv_amx_f16.h), so the suite's odd shapes reach it."""
    _skip_unless_runs("amx")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", "-k", "fp16",
                        os.path.join(HERE, "test_conv.py")], env={**_env("amx"), "SOFTDLA_AMX_F16": "all"},
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


RUN_RAW = """
import sys, numpy as np
from sdla_testkit.engine import Engine
eng = Engine(open(sys.argv[1], "rb").read(), backend="cpu")
raw = [open(p, "rb").read() for p in sys.argv[2:]]
outs = eng.run_raw(raw, len(eng.io_info(True)))
sys.stdout.buffer.write(b"".join(outs))
"""


@pytest.mark.parametrize("net", nets.NETS, ids=lambda f: f.__name__)
def test_int8_networks_identical_on_every_path(net, tmp_path):
    m, shape = nets.make(net)
    rng = np.random.default_rng(11)
    calib = rng.standard_normal([8] + shape[1:]).astype(np.float32)
    loadable, _ = softdla_build(m, tmp_path, "--int8", "--inputIOFormats=int8:chw32", "--outputIOFormats=int8:chw32",
                                calib=calib)
    path = tmp_path / "net.loadable"
    path.write_bytes(loadable)
    from sdla_testkit import formats as F
    from sdla_testkit.engine import Engine
    info = Engine(loadable, backend="cpu").io_info(False)
    inputs = []
    for i, t in enumerate(info):
        p = tmp_path / f"in{i}.bin"
        p.write_bytes(F.pack(rng.integers(-128, 128, (t.n, t.c, t.h, t.w)).astype(np.int8), t.format))
        inputs.append(str(p))
    results = {}
    for isa in PATHS:
        if _active(isa)[0] != isa:
            continue
        r = subprocess.run([sys.executable, "-c", RUN_RAW, str(path), *inputs], env=_env(isa), capture_output=True,
                           check=True)
        results[isa] = r.stdout
    assert len(results) >= 2, results.keys()  # portable and avx2 run everywhere this suite runs
    first = next(iter(results.values()))
    for isa, out in results.items():
        assert out == first, f"{isa} differs from {next(iter(results))}"


@pytest.mark.parametrize("net", nets.NETS, ids=lambda f: f.__name__)
def test_fp16_networks_identical_on_fma_paths(net, tmp_path):
    for isa in ("avx2", "avx512vnni"):
        _skip_unless_runs(isa)
    m, shape = nets.make(net)
    loadable, _ = softdla_build(m, tmp_path, "--fp16", "--inputIOFormats=fp16:chw16", "--outputIOFormats=fp16:chw16")
    path = tmp_path / "net.loadable"
    path.write_bytes(loadable)
    from sdla_testkit import formats as F
    from sdla_testkit.engine import Engine
    info = Engine(loadable, backend="cpu").io_info(False)
    rng = np.random.default_rng(12)
    inputs = []
    for i, t in enumerate(info):
        p = tmp_path / f"in{i}.bin"
        p.write_bytes(F.pack(rng.standard_normal((t.n, t.c, t.h, t.w)).astype(np.float16), t.format))
        inputs.append(str(p))
    results = {isa: subprocess.run([sys.executable, "-c", RUN_RAW, str(path), *inputs], env=_env(isa),
                                   capture_output=True, check=True).stdout for isa in ("avx2", "avx512vnni")}
    assert len(results["avx2"]) > 0
    assert results["avx512vnni"] == results["avx2"]


@pytest.mark.parametrize("post", ["bias_relu", "scale_clip", "prelu_bias"])
def test_fp16_epilogue_edge_values_identical_on_fma_paths(post, tmp_path):
    """The fused FP16 epilogue (SDP steps and the fp16 store in registers: AVX-512 tiles, one pass over
    the sums on AVX2) against the step-by-step scalar passes (portable): the same bits for signed zeros, NaN, values at the clip bounds, and sums
    past the fp16 range, through a 1x1 convolution that passes its input through (weight 1)."""
    from sdla_testkit import formats as F
    from sdla_testkit import writer
    for isa in ("avx2", "avx512vnni"):
        _skip_unless_runs(isa)
    c, h, w = 3, 5, 37
    x = np.random.default_rng(5).standard_normal((1, c, h, w)).astype(np.float16)
    # The edge values in every channel, so each meets every channel's operands (PReLU's negative slope on -0).
    x[0, :, 0, :12] = np.array([0.0, -0.0, np.nan, -np.nan, 2.0, -2.0, 65504, -65504, 6.0, 1e-7, -1e-7, 0.5], np.float16)
    wt = np.zeros((c, c, 1, 1), np.float16)
    for i in range(c):
        wt[i, i] = 1
    steps = {"bias_relu": [writer.sdp_step("bias", fvalues=np.array([0.0, -2.0, 60000.0], np.float32)),
                           writer.sdp_step("relu")],
             "scale_clip": [writer.sdp_step("scale", fvalues=np.array([3.0, -1.0, 0.5], np.float32)),
                            writer.sdp_step("clip", lo=-2.0, hi=6.0)],
             "prelu_bias": [writer.sdp_step("prelu", fvalues=np.array([-0.25, -3.0, 1e5], np.float32)),
                            writer.sdp_step("bias", fvalues=np.array([-0.0, 0.0, 1.0], np.float32))]}[post]
    g = writer.Graph()
    xi = g.input("x", x.shape, np.float16)
    y = g.tensor("y", x.shape, np.float16)
    g.op("Conv", [xi], y, g.conv_params(g.constant(wt, np.float16), (1, 1), (0, 0, 0, 0), (1, 1), 1, writer.sdp(steps)))
    g.output(y, F.LINEAR)
    path = tmp_path / "net.loadable"
    path.write_bytes(g.serialize())
    inp = tmp_path / "in0.bin"
    inp.write_bytes(F.pack(x, F.LINEAR, g.target))
    results = {isa: subprocess.run([sys.executable, "-c", RUN_RAW, str(path), str(inp)], env=_env(isa),
                                   capture_output=True, check=True).stdout for isa in ("portable", "avx2", "avx512vnni")}
    assert len(results["avx2"]) == x.size * 2
    assert results["avx512vnni"] == results["avx2"] == results["portable"]


def _same_bits_on_every_path(g, arrays, tmp_path, extra_env=None):
    """The graph (inputs `arrays`, linear) run on every path this machine has (`extra_env` added to each
    process's environment), each output the same bytes as the portable path's: ({path: output bytes},
    the loadable's path, the input files)."""
    from sdla_testkit import formats as F
    path = tmp_path / "net.loadable"
    path.write_bytes(g.serialize())
    inputs = []
    for i, a in enumerate(arrays):
        p = tmp_path / f"in{i}.bin"
        p.write_bytes(F.pack(a, F.LINEAR, g.target))
        inputs.append(str(p))
    results = {}
    for isa in PATHS:
        if _active(isa)[0] == isa:
            results[isa] = subprocess.run([sys.executable, "-c", RUN_RAW, str(path), *inputs],
                                          env={**_env(isa), **(extra_env or {})}, capture_output=True,
                                          check=True).stdout
    assert len(results) >= 2
    for isa, out in results.items():
        assert out == results["portable"], f"{isa} differs from portable"
    return results, path, inputs


@pytest.mark.parametrize("residual", [False, True], ids=["plain", "residual"])
@pytest.mark.parametrize("post", ["bias_relu", "scale_clip6", "prelu_bias", "scale_wide_clip"])
def test_fp16_whole_tile_epilogue_edge_values_identical_on_every_float_path(post, residual, tmp_path):
    """The AVX-512 pixel-vector tiles store a whole tile (12 channels x 32 outputs) through the chain laid
    out step by step (channel_step_rows.h): NaN looked for once per row, the saturation to +-65504 skipped
    after a clip inside it (ReLU6 here) and kept after one past it (the wide clip: 3 x 65504 must still
    store 65504). The same bits as the portable path's step-by-step passes for signed zeros, NaN, values
    at the clip bounds and sums past the fp16 range, through a 24-channel 1x1 convolution that passes its
    input through (weight 1), with and without a fused residual add (NaN and +-65504 in its other input
    too, then ReLU or a clip)."""
    from sdla_testkit import formats as F
    from sdla_testkit import writer
    k, h, w = 24, 4, 32
    rng = np.random.default_rng(6)
    # The finite edge values in every channel (each meets every channel's operands); NaNs in a few rows
    # only, since a row holding one is stored by the general rule (its other tiles and rows are not).
    edges = np.array([0.0, -0.0, 2.0, -2.0, 65504, -65504, 6.0, 1e-7, -1e-7, 0.5], np.float16)
    x = rng.standard_normal((1, k, h, w)).astype(np.float16)
    x[0, :, 0, :10] = edges
    x[0, :, 2, 22:] = edges  # the second tile of a row block
    e = rng.standard_normal((1, k, h, w)).astype(np.float16)
    e[0, :, 1, :10] = edges
    e[0, :, 0, 12:22] = edges[::-1]
    for a, (ch, row, col), bits in [(x, (5, 1, 3), 0x7E00), (x, (17, 3, 5), 0x7C01), (x, (9, 1, 30), 0xFD55),
                                    (x, (20, 2, 7), 0xFE00), (e, (2, 3, 9), 0x7C01), (e, (13, 0, 17), 0xFF00)]:
        a.view(np.uint16)[0, ch, row, col] = bits  # NaNs, some whose payloads the fp16 store makes canonical
    wt = np.zeros((k, k, 1, 1), np.float16)
    for i in range(k):
        wt[i, i] = 1
    per_channel = lambda *v: np.resize(np.array(v, np.float32), k)  # noqa: E731
    steps = {"bias_relu": [writer.sdp_step("bias", fvalues=per_channel(0.0, -2.0, 60000.0)), writer.sdp_step("relu")],
             "scale_clip6": [writer.sdp_step("scale", fvalues=per_channel(3.0, -1.0, 0.5)),
                             writer.sdp_step("clip", lo=0.0, hi=6.0)],
             "prelu_bias": [writer.sdp_step("prelu", fvalues=per_channel(-0.25, -3.0, 1e5)),
                            writer.sdp_step("bias", fvalues=per_channel(-0.0, 0.0, 1.0))],
             "scale_wide_clip": [writer.sdp_step("scale", fvalues=per_channel(3.0, -3.0, 1.0)),
                                 writer.sdp_step("clip", lo=-1e6, hi=1e6)]}[post]
    g = writer.Graph()
    xi = g.input("x", x.shape, np.float16)
    c = g.tensor("c", x.shape, np.float16)
    g.op("Conv", [xi], c, g.conv_params(g.constant(wt, np.float16), (1, 1), (0, 0, 0, 0), (1, 1), 1, writer.sdp(steps)))
    arrays = [x]
    if residual:
        ei = g.input("e", e.shape, np.float16)
        y = g.tensor("y", x.shape, np.float16)
        after = writer.sdp_step("clip", lo=0.0, hi=6.0) if post == "scale_clip6" else writer.sdp_step("relu")
        g.op("Sdp", [c, ei], y, writer.sdp([writer.sdp_step("add", tensor=ei), after]))
        g.output(y, F.LINEAR)
        arrays.append(e)
    else:
        g.output(c, F.LINEAR)
    results, path, inputs = _same_bits_on_every_path(g, arrays, tmp_path)
    assert len(results["portable"]) == x.size * 2
    got = np.frombuffer(results["portable"], np.float16)
    assert np.isnan(got).any() and not np.isinf(got).any()
    assert (np.abs(got) == 65504).any() == (post != "scale_clip6")  # saturated, or clipped to [0, 6]
    if "amx" in results:
        # The AMX-BF16 kernel (forced onto this short reduction) adds in its own order, exact here (one
        # weight of 1 an output): the same values, its blocks' epilogue taking the same chain; NaN's sign
        # and zero's are the tiles' own.
        amx = subprocess.run([sys.executable, "-c", RUN_RAW, str(path), *inputs],
                             env={**_env("amx"), "SOFTDLA_AMX_F16": "all"}, capture_output=True, check=True).stdout
        assert np.array_equal(np.frombuffer(amx, np.float16), got, equal_nan=True)


@pytest.mark.parametrize("post", ["bias_relu", "scale_prelu_clip"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_fully_connected_identical_on_every_float_path(dtype, post, tmp_path):
    """Fully connected layers take matrix-vector products on avx2 and up (gemv_f32.h) and the im2col GEMM
    on portable: one FMA per input channel in ascending order from zero on every path, so the same bits
    (5 images: a group of three and one of two; 203 output channels: a partial block of 128). On AVX-512
    the chain runs sixteen channels a vector (channel_lanes.h): the same bits for NaN and infinite inputs,
    sums past the fp16 range and values at the clip bounds."""
    from sdla_testkit import formats as F
    from sdla_testkit import writer
    rng = np.random.default_rng(9)
    n, c, k = 5, 77, 203
    x = rng.standard_normal((n, c, 1, 1)).astype(dtype)
    x[1, 3], x[2, 5], x[3, 0], x[4] = np.nan, np.inf, -np.inf, x[4] * 400  # image 4: sums past 65504
    wt = rng.standard_normal((k, c, 1, 1)).astype(dtype)
    g = writer.Graph()
    xi = g.input("x", x.shape, dtype)
    y = g.tensor("y", (n, k, 1, 1), dtype)
    if post == "bias_relu":
        steps = [writer.sdp_step("bias", fvalues=rng.standard_normal(k).astype(np.float32)), writer.sdp_step("relu")]
    else:
        steps = [writer.sdp_step("scale", fvalues=rng.uniform(-2, 2, k).astype(np.float32)),
                 writer.sdp_step("prelu", fvalues=rng.uniform(-1, 1, k).astype(np.float32)),
                 writer.sdp_step("clip", lo=-3.0, hi=3.0)]
    g.op("Conv", [xi], y, g.conv_params(g.constant(wt, dtype), (1, 1), (0, 0, 0, 0), (1, 1), 1, writer.sdp(steps)))
    g.output(y, F.LINEAR)
    path = tmp_path / "fc.loadable"
    path.write_bytes(g.serialize())
    inp = tmp_path / "in0.bin"
    inp.write_bytes(F.pack(x, F.LINEAR, g.target))
    results = {}
    for isa in PATHS:
        if _active(isa)[0] == isa:
            results[isa] = subprocess.run([sys.executable, "-c", RUN_RAW, str(path), str(inp)], env=_env(isa),
                                          capture_output=True, check=True).stdout
    assert len(results) >= 2 and len(results["portable"]) == n * k * x.itemsize
    for isa, out in results.items():
        assert out == results["portable"], f"{isa} differs from portable"


@pytest.mark.parametrize("residual", [False, True], ids=["plain", "residual"])
@pytest.mark.parametrize("cin,k,h,w,stride", [(20, 5, 7, 7, 1), (24, 64, 14, 14, 1), (40, 13, 9, 9, 1),
                                              (17, 200, 3, 11, 1), (8, 30, 7, 7, 1), (32, 85, 13, 13, 2),
                                              (96, 200, 37, 37, 1), (70, 9, 5, 13, 1), (24, 100, 33, 33, 1),
                                              (16, 60, 47, 47, 1)])
def test_fp16_1x1_tiles_identical_on_every_float_path(cin, k, h, w, stride, residual, tmp_path):
    """FP16 1x1 convolutions on each kind of AVX-512 tile (conv_implicit_f32.cpp): pixel-vector tiles
    whose output channels end on a 4-, 8- or 12-row tile with rows past K (5 channels) and whose grid ends
    on a one-vector tile (7 x 7), storing through the epilogue themselves; and output-channel lane tiles
    (conv_lanes_f32.h, for grids the pixel vectors fit badly: 14 x 14, 9 x 9, 3 x 11, and 7 x 7 with 30
    channels or after a stride of 2) with one, two or three vectors of channels and tiles of 1 to 8 pixels.
    Inputs of up to 160 channels read as fp16 or widened (200), with and without the residual add fused;
    24 -> 100 on 33 x 33 widens each 64-pixel block once for its nine tiles (the last block one pixel);
    16 -> 60 on 47 x 47 widens spans of several blocks at once, the last span short and its last block 33
    pixels.
    Off AVX-512, 64 input channels or more read the widened rows as the GEMM's B (gemm_f32_rows): 96 -> 200
    on 37 x 37 takes two column tiles that split a row, each ending inside a panel.
    One FMA per input channel in ascending order from zero on every path: the same bits as the portable
    path's std::fma, and within fp16 rounding of NumPy."""
    _fp16_conv_identical_on_every_float_path(cin, k, h, w, 1, stride, (0, 0, 0, 0), 1, residual, tmp_path)


@pytest.mark.parametrize("residual", [False, True], ids=["plain", "residual"])
@pytest.mark.parametrize("cin,k,h,w,r,stride,pads,dil", [
    (3, 32, 35, 41, 3, 2, (1, 1, 1, 1), 1), (3, 20, 40, 38, 7, 2, (3, 3, 3, 3), 1),
    (8, 13, 19, 50, 5, 1, (2, 1, 2, 0), 1), (5, 30, 20, 30, 3, 1, (2, 2, 2, 2), 2), (6, 25, 30, 17, 3, 2, (1, 1, 1, 1), 1),
    (64, 50, 7, 7, 3, 1, (1, 1, 1, 1), 1), (40, 70, 14, 14, 3, 2, (1, 1, 1, 1), 1)])
def test_fp16_kxk_tiles_identical_on_every_float_path(cin, k, h, w, r, stride, pads, dil, residual, tmp_path):
    """FP16 k x k convolutions on the AVX-512 tiles (no Winograd, no AMX), whose grid rows are wider than
    the output rows: where the output rows have 16 pixels or more the tiles store through the epilogue
    themselves, each vector's lanes split between two output rows (ResNet's 7x7 and MobileNetV2's 3x3
    stride-2 first layers; 5x5 with asymmetric padding; dilation); 9 outputs a row go through the block's
    rows. Grids the pixel vectors fit badly (the last three: 15 x 9, and 7 x 7 at stride 1 and 2) take
    the output-channel lane tiles with each pixel gathered from its grid position: whole 8-pixel tiles
    storing themselves, the last short one through the rows, a block of 2 channels (50) and of 22 (70).
    The same bits as the portable path."""
    _fp16_conv_identical_on_every_float_path(cin, k, h, w, r, stride, pads, dil, residual, tmp_path)


def _fp16_conv_identical_on_every_float_path(cin, k, h, w, r, stride, pads, dil, residual, tmp_path):
    """An FP16 convolution (bias, ReLU, optionally a fused residual add) run on every path the machine
    has: the same bits as the portable path, and within fp16 rounding of NumPy."""
    g, arrays, ref = _fp16_conv_graph(cin, k, h, w, r, stride, pads, dil, residual, 2)
    # The FMA kernels' bits: on the amx path the AMX-BF16 tiles would take many of these shapes (their own
    # order of additions, tested against NumPy in test_conv.py), so they are kept off here.
    results, _, _ = _same_bits_on_every_path(g, arrays, tmp_path, {"SOFTDLA_AMX_F16": "0"})
    assert len(results["portable"]) == ref.size * 2
    got = np.frombuffer(results["portable"], np.float16).reshape(ref.shape).astype(np.float64)
    np.testing.assert_allclose(got, ref, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("cin,k,h,w,r,stride,pads,dil", [
    (3, 32, 35, 41, 3, 2, (1, 1, 1, 1), 1),   # MobileNetV2's first layer's kind: 18 output rows
    (20, 24, 13, 29, 3, 1, (1, 1, 1, 1), 1),  # 20 channels: the AMX tiles' planes where they are forced
    (16, 40, 9, 9, 3, 2, (1, 1, 1, 1), 1),    # 5 output rows split three ways
    (5, 12, 10, 30, 3, 1, (0, 0, 0, 0), 1),   # stride 1 without padding: the planes are the input's
    (18, 8, 4, 40, 3, 1, (0, 0, 0, 0), 1),    # 2 output rows: fewer than three threads
    (32, 40, 7, 7, 3, 1, (1, 1, 1, 1), 1),    # gathered lane tiles: the 49 pixels in parts
    # 1x1 on the tiles' blocked input: small grids (7 and 2 pixel blocks) that each thread packs whole
    # on two threads or more and splits by row blocks, on one thread by pixel blocks
    (64, 200, 14, 14, 1, 1, (0, 0, 0, 0), 1), (40, 130, 7, 9, 1, 1, (0, 0, 0, 0), 1)])
def test_fp16_kxk_batch1_same_bits_on_any_thread_count(cin, k, h, w, r, stride, pads, dil, tmp_path):
    """At batch 1 the threads split one image's packed planes and its pixel blocks between them
    (conv_implicit_f32.cpp, conv_amx_f16.cpp). On 1, 2 and 3 threads: the FMA paths give the portable
    path's bits on one thread, the AMX tiles (every FP16 convolution forced onto them) the same bits on
    every thread count; all within fp16 rounding of NumPy."""
    g, arrays, ref = _fp16_conv_graph(cin, k, h, w, r, stride, pads, dil, False, 1)
    from sdla_testkit import formats as F
    path = tmp_path / "net.loadable"
    path.write_bytes(g.serialize())
    inp = tmp_path / "in0.bin"
    inp.write_bytes(F.pack(arrays[0], F.LINEAR, g.target))

    def run(isa, threads, amx="auto"):
        env = {**_env(isa), "SOFTDLA_THREADS": str(threads), "SOFTDLA_AMX_F16": amx}
        return subprocess.run([sys.executable, "-c", RUN_RAW, str(path), str(inp)], env=env, capture_output=True,
                              check=True).stdout

    portable = run("portable", 1)
    got = np.frombuffer(portable, np.float16).reshape(ref.shape).astype(np.float64)
    np.testing.assert_allclose(got, ref, rtol=2e-2, atol=2e-2)
    for isa in PATHS:
        if _active(isa)[0] != isa:
            continue
        for threads in (1, 2, 3):
            if isa != "amx":
                assert run(isa, threads) == portable, f"{isa} on {threads} threads differs from portable"
        if isa == "amx":
            tiles = [run(isa, threads, "all") for threads in (1, 2, 3)]
            assert tiles[1] == tiles[0] and tiles[2] == tiles[0], "the AMX tiles' bits depend on the thread count"
            got = np.frombuffer(tiles[0], np.float16).reshape(ref.shape).astype(np.float64)
            np.testing.assert_allclose(got, ref, rtol=2e-2, atol=2e-2)


def _fp16_conv_graph(cin, k, h, w, r, stride, pads, dil, residual, n):
    """A graph of one FP16 convolution (bias, ReLU, optionally a fused residual add) of batch n: (graph,
    input arrays, NumPy's output)."""
    from sdla_testkit import formats as F
    from sdla_testkit import reference as R
    from sdla_testkit import writer
    rng = np.random.default_rng(cin * k + h)
    pt, pl, pb, pr = pads
    oh = (h + pt + pb - (r - 1) * dil - 1) // stride + 1
    ow = (w + pl + pr - (r - 1) * dil - 1) // stride + 1
    x = rng.uniform(-1, 1, (n, cin, h, w)).astype(np.float16)
    e = rng.uniform(-2, 2, (n, k, oh, ow)).astype(np.float16)
    wt = rng.uniform(-0.5, 0.5, (k, cin, r, r)).astype(np.float16)
    bias = rng.uniform(-1, 1, k).astype(np.float32)
    g = writer.Graph()
    xi = g.input("x", x.shape, np.float16)
    c = g.tensor("c", (n, k, oh, ow), np.float16)
    g.op("Conv", [xi], c, g.conv_params(g.constant(wt, np.float16), (stride, stride), pads, (dil, dil), 1,
                                        writer.sdp([writer.sdp_step("bias", fvalues=bias), writer.sdp_step("relu")])))
    conv = R.conv_acc(x, wt, (stride, stride), pads, (dil, dil)) + bias.reshape(1, -1, 1, 1)
    ref = np.maximum(conv, 0).astype(np.float16).astype(np.float64)
    arrays = [x]
    if residual:
        ei = g.input("e", e.shape, np.float16)
        y = g.tensor("y", (n, k, oh, ow), np.float16)
        g.op("Sdp", [c, ei], y, writer.sdp([writer.sdp_step("add", tensor=ei), writer.sdp_step("relu")]))
        g.output(y, F.LINEAR)
        ref = np.maximum(ref + e.astype(np.float64), 0)
        arrays.append(e)
    else:
        g.output(c, F.LINEAR)
    return g, arrays, ref




@pytest.mark.parametrize("post", ["bias_clip", "scale_prelu_bias"])
@pytest.mark.parametrize("c,h,w,r,s,stride,pad,dil", [
    (13, 9, 10, 3, 3, 1, 1, 1),   # a partial group of 8 (AVX2) and of 16 (AVX-512)
    (24, 14, 14, 3, 3, 2, 1, 1),  # stride 2; a block of 16 and one of 8 channels
    (40, 7, 7, 3, 3, 1, 1, 1),    # 7-wide rows: every row a partial group of pixels and of columns
    (9, 11, 23, 5, 5, 2, 2, 1),   # 5 x 5 of stride 2, 23 columns: a row tail of 7
    (20, 12, 17, 3, 3, 1, 2, 2),  # dilation 2
    (8, 6, 5, 7, 7, 1, 3, 1),     # a 7 x 7 kernel on a 6 x 5 plane: padding taps everywhere
    (17, 5, 19, 1, 3, 1, 0, 1),   # a 1 x 3 kernel, no padding
])
def test_fp16_depthwise_identical_on_every_float_path(c, h, w, r, s, stride, pad, dil, post, tmp_path):
    """FP16 depthwise convolutions: the channel-block kernels (depthwise_f16_blocks.h: sixteen channels a
    vector on AVX-512, eight on AVX2) against the portable plane-by-plane loop (std::fma): one FMA per tap
    in (r, s) order from zero, padding taps included, the chain's steps and the fp16 store as in
    SdpChain, so the same bits on every path (two images, so the last plane's row tail is read at the
    tensor's end), NaN, -0, values at the clip bounds and sums past the fp16 range included; and within
    fp16 rounding of NumPy where the inputs are finite."""
    from sdla_testkit import formats as F
    from sdla_testkit import reference as R
    from sdla_testkit import writer
    rng = np.random.default_rng(c * h + w + r)
    n = 2
    oh = (h + 2 * pad - dil * (r - 1) - 1) // stride + 1
    ow = (w + 2 * pad - dil * (s - 1) - 1) // stride + 1
    x = rng.uniform(-2, 2, (n, c, h, w)).astype(np.float16)
    wt = rng.uniform(-1, 1, (c, 1, r, s)).astype(np.float16)
    if post == "bias_clip":
        bias = rng.uniform(-1, 1, c).astype(np.float32)
        bias[1] = 60000.0  # channel 1 saturates to 65504 (then clipped to 6)
        ref_steps = [("bias", {"values": bias}), ("clip", {"lo": 0.0, "hi": 6.0})]
    else:
        scale = rng.uniform(-2, 2, c).astype(np.float32)
        scale[2] = 1e5  # channel 2 past the fp16 range
        ref_steps = [("scale", {"values": scale}), ("prelu", {"values": rng.uniform(-1, 1, c).astype(np.float32)}),
                     ("bias", {"values": np.where(np.arange(c) % 2 == 0, -0.0, 0.5).astype(np.float32)})]
    steps = [writer.sdp_step(kind, fvalues=p["values"]) if "values" in p else writer.sdp_step(kind, lo=p["lo"], hi=p["hi"])
             for kind, p in ref_steps]
    g = writer.Graph()
    xi = g.input("x", x.shape, np.float16)
    y = g.tensor("y", (n, c, oh, ow), np.float16)
    g.op("Conv", [xi], y, g.conv_params(g.constant(wt, np.float16), (stride, stride), (pad, pad, pad, pad),
                                        (dil, dil), c, writer.sdp(steps)))
    g.output(y, F.LINEAR)
    path = tmp_path / "dw.loadable"
    path.write_bytes(g.serialize())

    def run_all(xv):
        inp = tmp_path / "in0.bin"
        inp.write_bytes(F.pack(xv, F.LINEAR, g.target))
        results = {isa: subprocess.run([sys.executable, "-c", RUN_RAW, str(path), str(inp)], env=_env(isa),
                                       capture_output=True, check=True).stdout
                   for isa in PATHS if _active(isa)[0] == isa}
        assert len(results) >= 2 and len(results["portable"]) == n * c * oh * ow * 2
        for isa, out in results.items():
            assert out == results["portable"], f"{isa} differs from portable"
        return np.frombuffer(results["portable"], np.float16).reshape(n, c, oh, ow).astype(np.float64)

    got = run_all(x)
    ref = R.sdp_float(R.conv_acc(x, wt, (stride, stride), (pad, pad, pad, pad), (dil, dil), groups=c), ref_steps)
    ref = np.clip(ref, -65504, 65504).astype(np.float16).astype(np.float64)
    np.testing.assert_allclose(got, ref, rtol=2e-2, atol=2e-2)
    # Edge values: NaN, -0 and large inputs (sums past 65504) give the same bits on every path.
    x_edge = x.copy()
    x_edge[0, 0, 0, :3] = [np.nan, -0.0, 60000.0]
    x_edge[1, c - 1, h - 1, w - 1] = -np.nan
    x_edge[1, 3 % c] *= 4000
    run_all(x_edge)


@pytest.mark.parametrize("cin", [4, 32], ids=["fma", "amx_rule"])
def test_fp16_nan_is_one_code_on_every_path(cin, tmp_path):
    """NaNs of both signs meeting in one sum (an input NaN, and inf - inf, which x86 makes a negative NaN):
    which survives depends on the order a convolution accumulates in, so every fp16 store writes the one
    quiet NaN 0x7e00 (docs/NUMERICS.md). Two 3x3 convolutions of an input holding +-inf and NaN, added, on
    every path (32 input channels let the default AMX rule take them), each NaN output 0x7e00."""
    from sdla_testkit.onnx_models import G
    g = G(seed=3)
    x = g.input("x", [1, cin, 12, 12])
    y = g.node("Add", [g.conv(x, cin, 32), g.conv(x, cin, 32)])
    m = g.model([y])
    loadable, _ = softdla_build(m, tmp_path, "--fp16", "--inputIOFormats=fp16:chw16", "--outputIOFormats=fp16:chw16")
    path = tmp_path / "net.loadable"
    path.write_bytes(loadable)
    from sdla_testkit import formats as F
    a = np.random.default_rng(7).standard_normal((1, cin, 12, 12)).astype(np.float16)
    a[0, 0, 2, 2], a[0, 1, 2, 3], a[0, 2, 6, 6] = np.inf, -np.inf, np.inf  # mixed-sign weights: inf - inf
    a.view(np.uint16)[0, 3, 2, 2] = 0x7E00  # and NaNs of both signs from the input
    a.view(np.uint16)[0, 0, 9, 9] = 0xFE00
    a.view(np.uint16)[0, 1, 9, 10] = 0x7C01  # a signalling payload
    inp = tmp_path / "in0.bin"
    inp.write_bytes(F.pack(a, F.CHW16))
    results = {isa: subprocess.run([sys.executable, "-c", RUN_RAW, str(path), str(inp)], env=_env(isa),
                                   capture_output=True, check=True).stdout
               for isa in PATHS if _active(isa)[0] == isa}
    assert len(results) >= 2
    for isa, out in results.items():
        bits = np.frombuffer(out, np.uint16)
        nan = (bits & 0x7FFF) > 0x7C00
        assert nan.sum() > 20, isa  # the windows around each inf and NaN, in every output channel
        assert set(np.unique(bits[nan])) == {0x7E00}, (isa, sorted({hex(b) for b in np.unique(bits[nan])}))
    nan_at = {isa: (np.frombuffer(out, np.uint16) & 0x7FFF) > 0x7C00 for isa, out in results.items()}
    for isa in results:
        assert np.array_equal(nan_at[isa], nan_at["portable"]), isa
    for isa in ("avx2", "avx512vnni"):  # the FMA paths give the same bits everywhere
        if isa in results:
            assert results[isa] == results["portable"], isa
