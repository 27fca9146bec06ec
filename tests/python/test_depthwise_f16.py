"""FP16 depthwise convolutions on AVX-512, sixteen channels at a time (src/engine/cpu/depthwise_f16_blocks.h) or one
plane at a time, sixteen columns a vector (depthwise_f16_planes.h; each forced with SOFTDLA_DW_F16):
within the FP16 tolerance of NumPy's float64 convolution, and the same bits as the plane-by-plane kernel
(the avx2 path) and std::fma (the portable path), over strides, dilations, asymmetric padding, kernels
from 1x1 to a whole-plane window (a global average pool), channel counts past whole blocks of 16, batches,
several threads (bands of output rows), every channel-step epilogue, and edge values (NaN, infinities,
signed zeros, sums past the fp16 range). A channel multiplier (two outputs per input channel) keeps the
plane kernel and is checked the same way."""
import os
import subprocess
import sys

import numpy as np
import pytest

from sdla_testkit import formats as F
from sdla_testkit import reference as R
from sdla_testkit import writer

import test_cpu_isa_paths as paths

# (n, c, h, w, r, s, stride, dilation, pads top/left/bottom/right, kg)
CASES = [
    (1, 32, 112, 112, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1), 1),    # MobileNetV2's first depthwise layer
    (1, 96, 56, 57, 3, 3, (2, 2), (1, 1), (0, 0, 1, 1), 1),      # stride 2, odd width, padding after only
    (2, 40, 14, 14, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1), 1),      # a partial block of 8 channels, two images
    (1, 17, 7, 7, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1), 1),        # 7x7 planes, one channel past a block
    (3, 5, 9, 23, 5, 5, (1, 2), (1, 1), (2, 0, 1, 2), 1),        # 5x5, mixed strides, asymmetric padding
    (1, 24, 20, 20, 3, 3, (1, 1), (2, 3), (2, 2, 2, 1), 1),      # dilation
    (1, 33, 7, 7, 7, 7, (1, 1), (1, 1), (0, 0, 0, 0), 1),        # the whole plane: a global average pool
    (1, 16, 31, 25, 1, 1, (1, 1), (1, 1), (0, 0, 0, 0), 1),      # 1x1; 25 columns: a 16-pixel group and nine
    (1, 3, 40, 40, 2, 2, (3, 3), (1, 1), (1, 1, 0, 1), 1),       # stride past the kernel
    (1, 12, 16, 16, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1), 2),      # channel multiplier: the plane kernel
]
# Each epilogue as (kind, per-channel values or None, lo, hi) steps for k channels.
EPILOGUES = {
    "bias_clip": lambda k, rng: [("bias", rng.standard_normal(k), 0.0, 0.0), ("clip", None, 0.0, 6.0)],
    "scale_prelu_bias": lambda k, rng: [("scale", rng.uniform(-2, 2, k), 0.0, 0.0),
                                        ("prelu", rng.uniform(-1, 1, k), 0.0, 0.0),
                                        ("bias", rng.standard_normal(k), 0.0, 0.0), ("relu", None, 0.0, 0.0)],
    "none": lambda k, rng: [],
}


def build(case, epilogue, seed=0, x=None):
    n, c, h, w, r, s, stride, dil, pads, kg = case
    rng = np.random.default_rng(seed)
    if x is None:
        x = rng.standard_normal((n, c, h, w)).astype(np.float16)
    k = c * kg
    wt = rng.uniform(-1, 1, (k, 1, r, s)).astype(np.float16)
    steps = EPILOGUES[epilogue](k, rng)
    oh = (h + pads[0] + pads[2] - ((r - 1) * dil[0] + 1)) // stride[0] + 1
    ow = (w + pads[1] + pads[3] - ((s - 1) * dil[1] + 1)) // stride[1] + 1
    g = writer.Graph()
    xi = g.input("x", x.shape, np.float16)
    y = g.tensor("y", (n, k, oh, ow), np.float16)
    post = writer.sdp([writer.sdp_step(kind, fvalues=None if v is None else v.astype(np.float32), lo=lo, hi=hi)
                       for kind, v, lo, hi in steps])
    g.op("Conv", [xi], y, g.conv_params(g.constant(wt, np.float16), stride, pads, dil, c, post))
    g.output(y, F.LINEAR)
    acc = R.conv_acc(x.astype(np.float64), wt.astype(np.float64), stride, pads, dil, c)
    return g, x, acc, steps, rng


RUN_ALL = """
import sys
from sdla_testkit.engine import Engine
for loadable, inp, out in zip(*[iter(sys.argv[1:])] * 3):
    eng = Engine(open(loadable, "rb").read(), backend="cpu")
    outs = eng.run_raw([open(inp, "rb").read()], len(eng.io_info(True)))
    open(out, "wb").write(b"".join(outs))
"""


def _run_all(jobs, tmp_path, isa, threads, kernel="auto"):
    """Each (graph, input) of jobs on the CPU path `isa` with `threads` threads, in one process: the raw
    outputs. `kernel` picks the AVX-512 FP16 depthwise kernel (SOFTDLA_DW_F16: auto, planes or blocks)."""
    args = []
    for i, (g, x) in enumerate(jobs):
        lp, ip = tmp_path / f"dw{i}.loadable", tmp_path / f"dw{i}.in"
        lp.write_bytes(g.serialize())
        ip.write_bytes(F.pack(x, F.LINEAR, g.target))
        args += [str(lp), str(ip), str(tmp_path / f"dw{i}.{isa}.{threads}.{kernel}.out")]
    env = {**paths._env(isa), "SOFTDLA_THREADS": str(threads), "SOFTDLA_DW_F16": kernel}
    r = subprocess.run([sys.executable, "-c", RUN_ALL, *args], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    return [open(args[i + 2], "rb").read() for i in range(0, len(args), 3)]


def _expected(acc, steps):
    """The chain's steps on float64 sums (the operands as the loadable holds them: fp32)."""
    y = acc.copy()
    for kind, vals, lo, hi in steps:
        v = None if vals is None else vals.astype(np.float32).astype(np.float64).reshape(1, -1, 1, 1)
        if kind == "bias":
            y = y + v
        elif kind == "scale":
            y = y * v
        elif kind == "prelu":
            y = np.where(y < 0, y * v, y)
        elif kind == "relu":
            y = np.maximum(y, 0)
        elif kind == "clip":
            y = np.clip(y, lo, hi)
        else:
            raise AssertionError(kind)
    return y


@pytest.mark.parametrize("epilogue", list(EPILOGUES))
def test_within_tolerance_and_same_bits_on_every_path(epilogue, tmp_path):
    built = [build(case, epilogue, seed=i) for i, case in enumerate(CASES)]
    jobs = [(g, x) for g, x, *_ in built]
    reference = paths._active("avx2")[0] == "avx2" and _run_all(jobs, tmp_path, "avx2", 1)
    portable = _run_all(jobs, tmp_path, "portable", 1)
    runs = {"auto-1": _run_all(jobs, tmp_path, "auto", 1), "auto-2": _run_all(jobs, tmp_path, "auto", 2),
            "auto-3": _run_all(jobs, tmp_path, "auto", 3)}
    # Each AVX-512 kernel on every layer it takes: the planes (depthwise_f16_planes.h: stride 1 or 2
    # across the row, any width) and the channel blocks.
    for kernel in ("planes", "blocks"):
        runs[f"{kernel}-2"] = _run_all(jobs, tmp_path, "auto", 2, kernel)
    for i, (g, x, acc, steps, _) in enumerate(built):
        want = _expected(acc, steps)
        got = F.unpack(runs["auto-2"][i], list(want.shape), np.float16, F.LINEAR, g.target)
        assert R.rel_l2(got, want) < 1e-3, (CASES[i], epilogue)
        for name, outs in runs.items():
            assert outs[i] == portable[i], (CASES[i], epilogue, name)
            if reference:
                assert outs[i] == reference[i], (CASES[i], epilogue, name)


@pytest.mark.parametrize("epilogue", ["bias_clip", "scale_prelu_bias"])
def test_edge_values_same_bits_on_every_path(epilogue, tmp_path):
    case = CASES[2]
    rng = np.random.default_rng(9)
    x = rng.standard_normal(case[:4]).astype(np.float16) * np.float16(4)
    flat = x.reshape(-1)
    flat[:10] = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 65504, -65504, 6.0, 30000], np.float16)
    x[1, 20] = np.float16(60000)  # sums past the fp16 range: saturated at the store
    x[1, 21] = np.float16(-0.0)   # a plane of negative zeros
    g, x, *_ = build(case, epilogue, seed=4, x=x)
    outs = {isa: _run_all([(g, x)], tmp_path, isa, 2)[0] for isa in ("portable", "auto")}
    outs["planes"] = _run_all([(g, x)], tmp_path, "auto", 2, "planes")[0]
    assert len(outs["auto"]) > 0
    assert outs["auto"] == outs["portable"]
    assert outs["planes"] == outs["portable"]
