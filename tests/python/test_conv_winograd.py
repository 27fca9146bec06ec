"""FP16 3x3 convolutions of stride 1 on Winograd F(2x2, 3x3) (src/engine/cpu/conv_winograd.h): within
the FP16 tolerance of NumPy's float64 convolution over odd output sizes, asymmetric padding, few and many
channels, batches and both epilogues (channel steps stored by the kernel, other chains through the
generic path); the same bits on every CPU path; SOFTDLA_WINOGRAD=0 selects the direct convolution; and an
input holding an infinity or NaN runs the direct convolution (the transforms would spread it over a
whole 2x2 tile)."""
import os
import subprocess
import sys

import numpy as np
import pytest

from sdla_testkit import formats as F
from sdla_testkit import reference as R
from sdla_testkit import writer
from sdla_testkit.engine import run_graph

import test_cpu_isa_paths as paths

# (n, c, k, h, w, pads top/left/bottom/right): grids of at least 64 tiles, so the path applies.
CASES = [
    (1, 16, 24, 16, 16, (1, 1, 1, 1)),
    (2, 3, 7, 17, 23, (1, 1, 1, 1)),    # odd outputs: a tile's second row and column dropped
    (1, 8, 30, 15, 20, (0, 2, 2, 0)),   # asymmetric padding
    (3, 64, 40, 28, 28, (1, 1, 1, 1)),  # output channels past whole 24-channel blocks, three images
    (1, 5, 9, 40, 12, (2, 1, 0, 2)),
    (1, 1, 1, 18, 18, (0, 0, 0, 0)),    # one channel, no padding
]


def build(case, post, seed=0):
    n, c, k, h, w, pads = case
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, (n, c, h, w)).astype(np.float16)
    wt = rng.uniform(-0.5, 0.5, (k, c, 3, 3)).astype(np.float16)
    bias = rng.uniform(-1, 1, k).astype(np.float32)
    oh, ow = h + pads[0] + pads[2] - 2, w + pads[1] + pads[3] - 2
    g = writer.Graph()
    xi = g.input("x", x.shape, np.float16)
    y = g.tensor("y", (n, k, oh, ow), np.float16)
    steps = [writer.sdp_step("bias", fvalues=bias)]
    steps.append(writer.sdp_step("relu" if post == "bias_relu" else "sigmoid"))
    g.op("Conv", [xi], y, g.conv_params(g.constant(wt, np.float16), (1, 1), pads, (1, 1), 1, writer.sdp(steps)))
    g.output(y, F.LINEAR)
    acc = R.conv_acc(x.astype(np.float64), wt.astype(np.float64), (1, 1), pads, (1, 1), 1) + bias.reshape(1, -1, 1, 1)
    ref = np.maximum(acc, 0) if post == "bias_relu" else 1 / (1 + np.exp(-acc))
    return g, x, ref


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("post", ["bias_relu", "sigmoid"])
def test_winograd_within_the_fp16_tolerance(case, post):
    g, x, ref = build(case, post)
    assert R.rel_l2(run_graph(g, x), ref) < 1e-3


def _run(g, x, tmp_path, env):
    path = tmp_path / "conv.loadable"
    path.write_bytes(g.serialize())
    inp = tmp_path / "in0.bin"
    inp.write_bytes(F.pack(x, F.LINEAR, g.target))
    return subprocess.run([sys.executable, "-c", paths.RUN_RAW, str(path), str(inp)], env=env, capture_output=True,
                          check=True).stdout


def test_switch_and_non_finite_inputs(tmp_path):
    g, x, ref = build(CASES[3], "bias_relu")
    # The direct kernel Winograd falls back to is the FMA one: keep the AMX-BF16 tiles, which would take
    # this layer once Winograd is off, out of the comparison.
    on = {**paths._env("auto"), "SOFTDLA_AMX_F16": "0"}
    off = {**on, "SOFTDLA_WINOGRAD": "0"}
    wino, direct = _run(g, x, tmp_path, on), _run(g, x, tmp_path, off)
    assert wino != direct  # other summation orders: the switch selects another path
    for raw in (wino, direct):
        assert R.rel_l2(F.unpack(raw, list(ref.shape), np.float16, F.LINEAR, g.target), ref) < 1e-3
    bad = x.copy()
    bad[0, 3, 5, 7], bad[1, 0, 0, 0], bad[2, 63, 27, 27] = np.inf, np.nan, -np.inf
    assert _run(g, bad, tmp_path, on) == _run(g, bad, tmp_path, off)


def test_same_bits_on_every_path(tmp_path):
    g, x, _ = build(CASES[1], "bias_relu")
    results = {isa: _run(g, x, tmp_path, paths._env(isa)) for isa in paths.PATHS if paths._active(isa)[0] == isa}
    assert len(results) >= 2
    for isa, out in results.items():
        assert out == results["portable"], f"{isa} differs from portable"


def test_large_weights_at_batch_one_take_the_direct_kernel_on_avx512(tmp_path):
    """WinogradConvF16::pays: 272 -> 272 channels hold 4.5 MB of transformed weights, past the 4 MB
    that batch 1 on AVX-512 reads from memory for less than it saves. There the direct FMA kernel runs
    (the same bits as with SOFTDLA_WINOGRAD=0); at batch 2, and on the AVX2 path, Winograd still does
    (other bits). Every result within the FP16 tolerance."""
    if paths._active("avx512vnni")[0] != "avx512vnni":
        pytest.skip("needs an AVX-512 VNNI CPU")
    for n, isa, winograd in ((1, "avx512vnni", False), (2, "avx512vnni", True), (1, "avx2", True)):
        g, x, ref = build((n, 272, 272, 14, 14, (1, 1, 1, 1)), "bias_relu", seed=n)
        on = {**paths._env(isa), "SOFTDLA_AMX_F16": "0"}
        got, direct = _run(g, x, tmp_path, on), _run(g, x, tmp_path, {**on, "SOFTDLA_WINOGRAD": "0"})
        assert (got != direct) == winograd, (n, isa)
        assert R.rel_l2(F.unpack(got, list(ref.shape), np.float16, F.LINEAR, g.target), ref) < 1e-3
