"""The CUDA backend (libsoftdla_cuda.so) on a machine with a GPU; skipped cleanly without one.

The op-level suites run on the GPU with SOFTDLA_TEST_BACKEND=cuda (every graph then runs on both
backends and INT8 outputs must match byte for byte; see sdla_testkit.engine). This file adds what
those cannot: whole networks built from ONNX compared across backends, repeated runs (CUDA graph
replay), and hybrid mode through NVIDIA's own cuda.bindings on a real CUDA stream."""
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

from sdla_testkit import formats as F
from sdla_testkit.engine import NP_TYPES, ROOT, Engine, gpu_available
from sdla_testkit.onnx_models import softdla_build

import test_builder_models as nets

GPU, WHY = gpu_available()
pytestmark = pytest.mark.skipif(not GPU, reason=f"CUDA backend unavailable: {WHY}")
BUILD = os.environ.get("SOFTDLA_BUILD_DIR", os.path.join(ROOT, "build"))
HAVE_BINDINGS = importlib.util.find_spec("cuda") is not None and importlib.util.find_spec("cuda.bindings") is not None


def random_raw_inputs(eng, rng):
    raw = []
    for info in eng.io_info(False):
        shape = (info.n, info.c, info.h, info.w)
        if info.dtype == 2:
            a = rng.integers(-128, 128, shape).astype(np.int8)
        else:
            a = rng.standard_normal(shape).astype(NP_TYPES[info.dtype])
        raw.append(F.pack(a, info.format, "xavier" if info.target else "orin"))
    return raw


@pytest.mark.parametrize("net", nets.NETS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("precision", ["int8", "fp16"])
def test_network_same_on_both_backends(net, precision, tmp_path):
    m, shape = nets.make(net)
    rng = np.random.default_rng(7)
    if precision == "int8":
        calib = rng.standard_normal([16] + shape[1:]).astype(np.float32)
        loadable, _ = softdla_build(m, tmp_path, "--int8", "--inputIOFormats=int8:chw32",
                                    "--outputIOFormats=int8:chw32", calib=calib)
    else:
        loadable, _ = softdla_build(m, tmp_path, "--fp16", "--inputIOFormats=fp16:chw16", "--outputIOFormats=fp16:chw16")
    gpu = Engine(loadable, backend="cuda")
    cpu = Engine(loadable, backend="cpu")
    n_out = len(gpu.io_info(True))
    for _ in range(3):  # fresh inputs each time; the second and third runs replay the CUDA graph
        raw = random_raw_inputs(gpu, rng)
        got = gpu.run_raw(raw, n_out)  # checks against the CPU backend itself
        want = cpu.run_raw(raw, n_out)
        if precision == "int8":
            assert got == want


def residual_tail(g):
    """Two images, a channels-last input conversion (16 channels), a residual add fused into the
    convolution before it and written NCHW because it is the graph's output."""
    x = g.input("features", [2, 16, 20, 20])
    skip = g.bn(g.conv(x, 16, 32, k=1, pad=0, bias=False), 32)
    h = g.node("Relu", [g.bn(g.conv(x, 16, 32, bias=False), 32)])
    h = g.bn(g.conv(h, 32, 32, stride=1, bias=False), 32)
    return g.node("Relu", [g.node("Add", [h, skip])])


def wide_block(g):
    """Two images, more than 128 output channels (the 128 x 128 tile, a partial second column of
    tiles), a residual add fused into the convolution that computes its second operand."""
    x = g.input("features", [2, 32, 14, 14])
    h = g.node("Relu", [g.bn(g.conv(x, 32, 160, k=1, pad=0, bias=False), 160)])
    h = g.node("Relu", [g.bn(g.conv(h, 160, 128, bias=False), 128)])
    h = g.bn(g.conv(h, 128, 256, k=1, pad=0, bias=False), 256)
    skip = g.bn(g.conv(x, 32, 256, k=1, pad=0, bias=False), 256)
    y = g.node("Relu", [g.node("Add", [h, skip])])
    return g.node("Relu", [g.bn(g.conv(y, 256, 32, bias=False), 32)])


def tap_tile_block(g):
    """Two images of 11 x 14, 3 x 3 convolutions whose channels are whole 128-byte k-tiles (each k-tile
    one tap: the TMA im2col boxes of SOFTDLA_CUDA_WG_TMA=wai): stride 1 over 128 channels into 160 (three
    pixel tiles across the two images, a partial second column of channels), a 1 x 1 into 256, stride 2
    over 256 with pads of 0 above and 1 to the left (pixel-box corners that differ in H and W), and a
    dilation of 2 over 128."""
    x = g.input("features", [2, 128, 11, 14])
    h = g.node("Relu", [g.bn(g.conv(x, 128, 160, bias=False), 160)])
    h = g.node("Relu", [g.bn(g.conv(h, 160, 256, k=1, pad=0, bias=False), 256)])
    h = g.node("Relu", [g.bn(g.node("Conv", [h, g.weight(128, 256, 3, 3)], kernel_shape=[3, 3], strides=[2, 2],
                                    pads=[0, 1, 1, 1]), 128)])
    h = g.node("Relu", [g.bn(g.conv(h, 128, 128, pad=2, bias=False, dilations=[2, 2]), 128)])
    return g.node("Relu", [g.bn(g.conv(h, 128, 32, k=1, pad=0, bias=False), 32)])


def assert_int8_same_on_both_backends(net, seed, tmp_path):
    """Builds `net` for INT8 (calibrated on 8 random images) and runs two random inputs on the CUDA and
    CPU backends; the outputs must be the same bytes."""
    m, shape = nets.make(net)
    rng = np.random.default_rng(seed)
    calib = rng.standard_normal([8] + shape[1:]).astype(np.float32)
    loadable, _ = softdla_build(m, tmp_path, "--int8", "--inputIOFormats=int8:chw32", "--outputIOFormats=int8:chw32",
                                calib=calib)
    gpu, cpu = Engine(loadable, backend="cuda"), Engine(loadable, backend="cpu")
    n_out = len(gpu.io_info(True))
    for _ in range(2):
        raw = random_raw_inputs(gpu, rng)
        assert gpu.run_raw(raw, n_out) == cpu.run_raw(raw, n_out)


# The CUDA backend evaluates INT8 SDP chains on channels-last runs three ways (sdp_device.cuh): a
# 256 x 256 table for two-input chains, the residual form, and the general step interpreter.
@pytest.mark.parametrize("net", [nets.resnet_like, residual_tail, wide_block], ids=lambda f: f.__name__)
@pytest.mark.parametrize("sdp_path", ["auto", "residual", "steps"])
def test_int8_chain_paths_match_cpu(net, sdp_path, tmp_path, monkeypatch):
    monkeypatch.setenv("SOFTDLA_CUDA_SDP_PATH", sdp_path)
    assert_int8_same_on_both_backends(net, 11, tmp_path)


# Split-K (conv_igemm.cu): a cluster of blocks shares an output tile and sums its partial accumulators
# through distributed shared memory; forced to every cluster size, the bytes must not change.
@pytest.mark.parametrize("net", [nets.resnet_like, residual_tail, wide_block], ids=lambda f: f.__name__)
@pytest.mark.parametrize("splits", ["1", "2", "4", "8"])
def test_int8_split_k_matches_cpu(net, splits, tmp_path, monkeypatch):
    monkeypatch.setenv("SOFTDLA_CUDA_SPLITK", splits)
    assert_int8_same_on_both_backends(net, 5, tmp_path)


def int8_mobile_block(g):
    """Two images, INT8 MobileNet-style: pointwise implicit GEMM -> channels-last depthwise (144 channels,
    nine 16-channel runs, ReLU6) -> pointwise implicit GEMM with the residual add fused, a stride-2
    depthwise, a depthwise without an activation (the windows' signed form), and the depthwise that
    writes the graph's output NCHW."""
    x = g.input("features", [2, 32, 14, 14])
    lo, hi = g.const(np.float32(0)), g.const(np.float32(6))
    y = g.node("Clip", [g.bn(g.conv(x, 32, 32, k=1, pad=0, bias=False), 32), lo, hi])
    h = g.node("Clip", [g.bn(g.conv(y, 32, 144, k=1, pad=0, bias=False), 144), lo, hi])
    h = g.node("Clip", [g.bn(g.conv(h, 144, 144, groups=144, bias=False), 144), lo, hi])
    y = g.node("Add", [y, g.bn(g.conv(h, 144, 32, k=1, pad=0, bias=False), 32)])
    h = g.node("Clip", [g.bn(g.conv(y, 32, 96, k=1, pad=0, bias=False), 96), lo, hi])
    h = g.node("Clip", [g.bn(g.conv(h, 96, 96, stride=2, groups=96, bias=False), 96), lo, hi])
    h = g.bn(g.conv(h, 96, 48, k=1, pad=0, bias=False), 48)
    h = g.bn(g.conv(h, 48, 48, k=5, groups=48, bias=False), 48)
    return g.node("Relu", [g.conv(g.node("Relu", [h]), 48, 48, groups=48, bias=False)])


def depthwise_between_pointwise(k, stride, pads, dil):
    """An INT8 depthwise convolution read and written channels-last between two 1 x 1 implicit GEMMs."""
    def net(g):
        x = g.input("features", [2, 16, 17, 19])
        h = g.node("Relu", [g.bn(g.conv(x, 16, 48, k=1, pad=0, bias=False), 48)])
        h = g.node("Conv", [h, g.weight(48, 1, k, k), g.weight(48, scale=0.1)], kernel_shape=[k, k],
                   strides=list(stride), pads=list(pads), dilations=[dil, dil], group=48)
        h = g.node("Relu", [g.bn(h, 48)])
        return g.conv(h, 48, 16, k=1, pad=0)
    net.__name__ = f"dw{k}_s{stride[0]}{stride[1]}_p{''.join(map(str, pads))}_d{dil}"
    return net


DEPTHWISE_CASES = [depthwise_between_pointwise(3, (1, 1), (1, 1, 1, 1), 1),
                   depthwise_between_pointwise(3, (2, 2), (1, 1, 1, 1), 1),
                   depthwise_between_pointwise(3, (2, 2), (0, 0, 1, 1), 1),
                   depthwise_between_pointwise(3, (1, 2), (0, 2, 1, 0), 1),
                   depthwise_between_pointwise(3, (1, 1), (2, 2, 2, 2), 2),
                   depthwise_between_pointwise(3, (2, 2), (2, 1, 0, 2), 3),
                   depthwise_between_pointwise(5, (1, 1), (2, 2, 2, 2), 1),
                   depthwise_between_pointwise(7, (2, 2), (3, 3, 3, 3), 1),
                   depthwise_between_pointwise(1, (2, 2), (0, 0, 0, 0), 1)]


# The channels-last INT8 depthwise kernel (conv_depthwise_s8.cu) inside INT8 chains: every stride,
# padding and dilation it takes, its windowed and general epilogues, NHWC and NCHW outputs.
@pytest.mark.parametrize("net", [int8_mobile_block, nets.mobilenetv2_like] + DEPTHWISE_CASES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("sdp_path", ["auto", "steps"])
def test_int8_depthwise_matches_cpu(net, sdp_path, tmp_path, monkeypatch):
    monkeypatch.setenv("SOFTDLA_CUDA_SDP_PATH", sdp_path)
    assert_int8_same_on_both_backends(net, 13, tmp_path)


def fp16_mobile_block(g):
    """Two images, FP16 MobileNet-style: a stride-1 RGB convolution (4 channels per tap), a depthwise
    convolution between channels-last 1 x 1 convolutions, 24 channels (three 8-channel runs), a residual
    add fused into the convolution that computes its second operand, a stride-2 convolution, global
    average pooling of channels-last data."""
    x = g.input("images", [2, 3, 20, 20])
    lo, hi = g.const(np.float32(0)), g.const(np.float32(6))
    y = g.node("Clip", [g.bn(g.conv(x, 3, 24, bias=False), 24), lo, hi])
    h = g.node("Clip", [g.bn(g.conv(y, 24, 144, k=1, pad=0, bias=False), 144), lo, hi])
    h = g.node("Clip", [g.bn(g.conv(h, 144, 144, groups=144, bias=False), 144), lo, hi])
    y = g.node("Add", [y, g.bn(g.conv(h, 144, 24, k=1, pad=0, bias=False), 24)])
    y = g.node("Relu", [g.bn(g.conv(y, 24, 40, stride=2, bias=False), 40)])
    return g.node("Flatten", [g.node("GlobalAveragePool", [y])])


# The FP16 implicit GEMM (conv_igemm_f16.cu) on channels-last fp16 tensors, with its epilogues (the short
# chain, the step interpreter, the residual add fused on either side, NCHW outputs) and split-K forced
# to 1, 2 and 8 blocks: within docs/NUMERICS.md's FP16 tolerance of the CPU backend (Engine.run_raw).
@pytest.mark.parametrize("net", [nets.resnet_like, nets.mobilenetv2_like, residual_tail, wide_block,
                                 fp16_mobile_block], ids=lambda f: f.__name__)
@pytest.mark.parametrize("splits", ["1", "2", "8"])
def test_fp16_split_k_matches_cpu(net, splits, tmp_path, monkeypatch):
    monkeypatch.setenv("SOFTDLA_CUDA_SPLITK", splits)
    m, shape = nets.make(net)
    rng = np.random.default_rng(9)
    loadable, _ = softdla_build(m, tmp_path, "--fp16", "--inputIOFormats=fp16:chw16", "--outputIOFormats=fp16:chw16")
    gpu = Engine(loadable, backend="cuda")
    n_out = len(gpu.io_info(True))
    for _ in range(2):  # the second run replays the CUDA graph
        gpu.run_raw(random_raw_inputs(gpu, rng), n_out)


@pytest.mark.parametrize("cin", [8, 64])
def test_fp16_nan_is_one_code_on_both_backends(cin, tmp_path):
    """Infinities under mixed-sign weights (inf - inf) and input NaNs of both signs through two 3x3
    convolutions and a residual add: NaN where the CPU backend has NaN, and every NaN the one code 0x7e00
    (docs/NUMERICS.md), whatever order the tensor cores sum in."""
    from sdla_testkit.onnx_models import G
    g = G(seed=5)
    x = g.input("x", [2, cin, 16, 16])
    m = g.model([g.node("Relu", [g.node("Add", [g.conv(x, cin, 64), g.conv(x, cin, 64)])])])
    loadable, _ = softdla_build(m, tmp_path, "--fp16", "--inputIOFormats=fp16:chw16", "--outputIOFormats=fp16:chw16")
    a = np.random.default_rng(2).standard_normal((2, cin, 16, 16)).astype(np.float16)
    a[0, 0, 3, 3], a[0, 1, 3, 4], a[1, 2, 9, 9] = np.inf, -np.inf, np.inf
    a.view(np.uint16)[0, 3, 12, 12], a.view(np.uint16)[1, 4, 2, 2] = 0xFE00, 0x7C01
    raw = [F.pack(a, F.CHW16)]
    got = np.frombuffer(Engine(loadable, backend="cuda").run_raw(raw, 1)[0], np.uint16)
    want = np.frombuffer(Engine(loadable, backend="cpu").run_raw(raw, 1)[0], np.uint16)
    nan = (want & 0x7FFF) > 0x7C00
    assert nan.sum() > 20
    assert np.array_equal((got & 0x7FFF) > 0x7C00, nan)
    assert set(np.unique(got[nan])) == {0x7E00} and set(np.unique(want[nan])) == {0x7E00}


# Programmatic dependent launch (conv_igemm.cu) is on by default; SOFTDLA_CUDA_PDL=0, read once per
# process, launches every kernel plainly: a child process runs the same comparison that way.
def test_int8_plain_launches_match_cpu(tmp_path):
    here = os.path.dirname(os.path.abspath(__file__))
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import test_cuda_backend as t; "
            "t.assert_int8_same_on_both_backends(t.nets.resnet_like, 3, sys.argv[2]); print('same bytes')")
    r = subprocess.run([sys.executable, "-c", code, here, str(tmp_path)], capture_output=True, text=True,
                       env={**os.environ, "SOFTDLA_CUDA_PDL": "0"})
    assert r.returncode == 0 and "same bytes" in r.stdout, r.stderr + r.stdout


def k_tile_block(g):
    """Two images, reductions that end half-way through a 128-byte k-tile: a 1 x 1 over 64 channels into
    192 (one 64-byte k-tile) and one over 192 (three), a stride-2 3 x 3 over 192 channels (1,728 bytes)
    into 64 (256 x 64 tiles), a stride-2 1 x 1 (not pointwise), a residual add fused into a 128 x 128
    tile, and a 3 x 3 over 256 channels written NCHW as the graph's output."""
    x = g.input("features", [2, 64, 15, 15])
    h = g.node("Relu", [g.bn(g.conv(x, 64, 192, k=1, pad=0, bias=False), 192)])
    h = g.node("Relu", [g.bn(g.conv(h, 192, 192, k=1, pad=0, bias=False), 192)])
    h = g.node("Relu", [g.bn(g.conv(h, 192, 64, stride=2, bias=False), 64)])
    h = g.bn(g.conv(h, 64, 256, k=1, pad=0, bias=False), 256)
    skip = g.bn(g.conv(x, 64, 256, k=1, stride=2, pad=0, bias=False), 256)
    y = g.node("Relu", [g.node("Add", [h, skip])])
    return g.node("Relu", [g.bn(g.conv(y, 256, 128, bias=False), 128)])


# The INT8 implicit GEMM's pipelines (conv_igemm.cu), each read once per process: the default (128-byte
# k-tiles on 128 x 128 tiles, narrow tiles of 32 x 32 warps where wide ones would not fill the GPU,
# which in these small nets is nearly everywhere), `wide` (no narrow tiles: SOFTDLA_CUDA_NARROW_FILL=0)
# and `base` (64-byte k-tiles on wide tiles everywhere: SOFTDLA_CUDA_IGEMM=base as well), each with
# split-K forced to 1, 2 and 8 blocks: a child process per pipeline runs the byte comparison with the
# CPU backend. `exact-add`: the default pipeline with fused residual adds kept in their exact window
# form (SOFTDLA_CUDA_ADD=exact) instead of the shared-scale one; `full-requant`: every channel's
# requantization as make_requant_window gives it (SOFTDLA_CUDA_REQUANT=full: no folded rounding sign,
# no high-word form; `no-trim`: the shared-scale add with its saturation before the add and its upper clamp
# kept (SOFTDLA_CUDA_TRIM=off). `no-wgmma`: `wide` with the products of the 128-byte k-tile tiles and
# the 256 x 64 tiles on mma.sync where the default takes Hopper's wgmma (SOFTDLA_CUDA_WGMMA=off). `persist`: `wide` with the
# one-k-tile pointwise layers (64- and 128-byte reductions) on igemm_stream_kernel, one block a channel
# column walking every pixel tile (SOFTDLA_CUDA_PERSIST=128, SOFTDLA_CUDA_PERSIST_GRID=1); `no-persist`:
# `wide` without it. `wg-mbar` / `wg-barrier`: `wide` with the 128 x 128 wgmma tiles on the per-stage
# mbarrier pipeline / on the one with a block barrier a k-tile, every stage by cp.async
# (SOFTDLA_CUDA_WG_TMA=off, SOFTDLA_CUDA_WG_MBAR=1 / 0); the other pipelines copy those tiles' weights
# and pointwise layers' pixels by TMA, and `wg-tma-w` the weights alone (SOFTDLA_CUDA_WG_TMA=w).
# The default pipelines also take the pixels of 3 x 3 layers over whole 128-byte channel tiles by TMA's
# im2col mode (tap_tile_block has them), and every launch whose stages are all TMA copies has no block
# barrier in its k-loop. `wg-tma-wa`: `wide` with those layers' pixels by cp.async and every k-loop's
# block barrier kept (SOFTDLA_CUDA_WG_TMA=wa, SOFTDLA_CUDA_WG_TMA_FREE=0); `wg-im2col`: `wide` with
# im2col and the block barrier kept (SOFTDLA_CUDA_WG_TMA_FREE=0); `wg-tma-free`: `wa` with the
# pointwise layers' k-loop free of the block barrier (SOFTDLA_CUDA_WG_TMA=wa); `wg-im2col-free`: `wide`
# with both named (SOFTDLA_CUDA_WG_TMA=wai, SOFTDLA_CUDA_WG_TMA_FREE=1).
@pytest.mark.parametrize("pipeline", ["base", "wide", "no-wgmma", "default", "exact-add", "full-requant", "no-trim",
                                      "persist", "no-persist", "wg-mbar", "wg-barrier", "wg-tma-w", "wg-tma-wa",
                                      "wg-tma-free", "wg-im2col", "wg-im2col-free"])
def test_int8_pipelines_match_cpu(pipeline, tmp_path):
    here = os.path.dirname(os.path.abspath(__file__))
    code = ("import os, sys; sys.path.insert(0, sys.argv[1]); import test_cuda_backend as t\n"
            "for splits in ('1', '2', '8'):\n"
            "    os.environ['SOFTDLA_CUDA_SPLITK'] = splits\n"
            "    for i, net in enumerate([t.k_tile_block, t.wide_block, t.residual_tail, t.nets.resnet_like,\n"
            "                             t.tap_tile_block]):\n"
            "        d = os.path.join(sys.argv[2], splits + net.__name__); os.makedirs(d)\n"
            "        t.assert_int8_same_on_both_backends(net, 17 + i, d)\n"
            "print('same bytes')")
    env = {**os.environ, "SOFTDLA_CUDA_IGEMM": "base" if pipeline == "base" else "",
           "SOFTDLA_CUDA_NARROW": "",
           "SOFTDLA_CUDA_NARROW_FILL": "0" if pipeline in ("base", "wide", "no-wgmma", "persist", "no-persist", "wg-mbar",
                                                           "wg-barrier", "wg-tma-w", "wg-tma-wa", "wg-tma-free",
                                                           "wg-im2col", "wg-im2col-free") else "",
           "SOFTDLA_CUDA_PERSIST": {"persist": "128", "no-persist": "off"}.get(pipeline, ""),
           "SOFTDLA_CUDA_PERSIST_GRID": "1" if pipeline == "persist" else "",
           "SOFTDLA_CUDA_WGMMA": "off" if pipeline == "no-wgmma" else "",
           "SOFTDLA_CUDA_ADD": "exact" if pipeline == "exact-add" else "",
           "SOFTDLA_CUDA_REQUANT": "full" if pipeline == "full-requant" else "",
           "SOFTDLA_CUDA_TRIM": "off" if pipeline == "no-trim" else "",
           "SOFTDLA_CUDA_WG_MBAR": {"wg-mbar": "1", "wg-barrier": "0"}.get(pipeline, ""),
           "SOFTDLA_CUDA_WG_TMA_FREE": {"wg-tma-free": "1", "wg-im2col-free": "1", "wg-tma-wa": "0",
                                        "wg-im2col": "0"}.get(pipeline, ""),
           "SOFTDLA_CUDA_WG_TMA": {"wg-mbar": "off", "wg-barrier": "off", "wg-tma-w": "w", "wg-tma-wa": "wa",
                                   "wg-tma-free": "wa", "wg-im2col-free": "wai"}.get(pipeline, "")}
    r = subprocess.run([sys.executable, "-c", code, here, str(tmp_path)], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "same bytes" in r.stdout, r.stderr + r.stdout


def run_hybrid(loadable_path, packed, tmp_path, *extra, env=None):
    input_path = os.path.join(tmp_path, "input.bin")
    with open(input_path, "wb") as f:
        f.write(bytes(packed))
    r = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "nvidia_bindings_hybrid.py"),
                        os.path.join(BUILD, "libcudla.so.1"), loadable_path, input_path, *extra],
                       capture_output=True, text=True, env={**os.environ, "SOFTDLA_LOG": "warn", **(env or {})})
    assert r.returncode == 0, r.stderr + r.stdout
    return bytes.fromhex(r.stdout.strip().splitlines()[-1]), r.stderr


@pytest.mark.skipif(not HAVE_BINDINGS, reason="cuda-bindings not installed")
@pytest.mark.parametrize("backend", ["auto", "cpu"])
@pytest.mark.parametrize("statistics", [False, True])
def test_nvidia_nine_steps_on_a_real_stream(backend, statistics, tmp_path):
    """NVIDIA's cuda.bindings.cudla + cudart: cudaMalloc'd buffers, a non-blocking stream, the task
    between the caller's own copies. `cpu` forces the CPU backend, which then runs in stream order
    through pinned staging and a host function."""
    loadable = os.path.join(ROOT, "examples", "models", "bars.loadable")
    images = np.load(os.path.join(ROOT, "examples", "models", "bars_images.npy"))
    packed = F.pack(np.round(images * 127).astype(np.int8), F.DLA_HWC4)
    theirs, log = run_hybrid(loadable, packed, tmp_path, *(["--statistics"] if statistics else []),
                             env={"SOFTDLA_BACKEND": backend})
    ours = Engine(open(loadable, "rb").read(), backend="cpu").run_raw([packed], 1)[0]
    assert theirs == ours
    probs = F.unpack(theirs, (4, 4, 1, 1), np.float16, F.CHW16).reshape(4, 4)
    assert list(probs.argmax(1)) == [0, 1, 2, 3]


@pytest.mark.skipif(not HAVE_BINDINGS, reason="cuda-bindings not installed")
def test_hybrid_int8_network_matches_cpu(tmp_path):
    m, shape = nets.make(nets.resnet_like)
    rng = np.random.default_rng(3)
    loadable, _ = softdla_build(m, tmp_path, "--int8", "--inputIOFormats=int8:chw32", "--outputIOFormats=int8:chw32",
                                calib=rng.standard_normal([8] + shape[1:]).astype(np.float32))
    path = os.path.join(tmp_path, "model.loadable")
    eng = Engine(loadable, backend="cpu")
    if len(eng.io_info(True)) != 1:
        pytest.skip("the script drives single-output models")
    raw = random_raw_inputs(eng, rng)[0]
    theirs, _ = run_hybrid(path, raw, tmp_path)
    assert theirs == eng.run_raw([raw], 1)[0]
