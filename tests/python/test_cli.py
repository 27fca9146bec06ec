"""The softdla command on the bundled example model: outputs against a NumPy computation of the same
network, inspect output, error messages, and the committed files matching their generator."""
import os
import subprocess

import numpy as np
import pytest

from sdla_testkit import reference as R
from sdla_testkit.engine import ROOT

BUILD = os.environ.get("SOFTDLA_BUILD_DIR", os.path.join(ROOT, "build"))
SOFTDLA = os.path.join(BUILD, "softdla")
MODEL = os.path.join(ROOT, "examples", "models", "bars.loadable")
IMAGES = os.path.join(ROOT, "examples", "models", "bars_images.npy")


def run(*args, check=True):
    return subprocess.run([SOFTDLA, *args], capture_output=True, text=True, check=check)


def bars_reference(images):
    """The network of examples/models/make_bars_model.cpp, recomputed from its stated weights."""
    x = R.quantize(images, 1 / 127)
    a, b = 80, -40
    w = np.array([[b, b, b, a, a, a, b, b, b], [b, a, b, b, a, b, b, a, b],
                  [a, b, b, b, a, b, b, b, a], [b, b, a, b, a, b, a, b, b]]).reshape(4, 1, 3, 3)
    edges = R.sdp_int8(R.sat32(R.conv_acc(x, w, pads=(1, 1, 1, 1), exact=True)), [("relu", {})], [4128], [20])
    pooled = R.pool(edges, "max", (2, 2), (2, 2), (0, 0, 0, 0), int8=True)
    mean = R.pool(pooled, "avg", (8, 8), (8, 8), (0, 0, 0, 0), int8=True)
    fw = np.full((4, 4, 1, 1), -16)
    for k in range(4):
        fw[k, k] = 64
    logits = R.sdp_int8(R.sat32(R.conv_acc(mean, fw, exact=True)), [], [107], [10])
    logits16 = (logits.astype(np.float32) * np.float32(0.05)).astype(np.float16)
    return R.softmax(logits16, 1)


def test_run_bundled_model(tmp_path):
    r = run("run", MODEL, "--input", f"images={IMAGES}", "--output-dir", str(tmp_path))
    for n in range(4):
        assert f"[{n}] argmax {n}" in r.stdout
    got = np.load(tmp_path / "probabilities.npy")
    ref = bars_reference(np.load(IMAGES))
    assert R.rel_l2(got, ref) < 1e-3
    assert list(got.reshape(4, 4).argmax(1)) == [0, 1, 2, 3]


def test_inspect_bundled_model():
    out = run("inspect", MODEL).stdout
    assert "input  'images' 4x1x16x16 int8:dla_hwc4 size 4096 B, strides 1/64/1024/1024" in out
    assert "softmax    fp16   softmax -> probabilities" in out


def test_committed_example_matches_generator(tmp_path):
    subprocess.run([os.path.join(BUILD, "make_bars_model"), str(tmp_path)], check=True, capture_output=True)
    assert (tmp_path / "bars.loadable").read_bytes() == open(MODEL, "rb").read()
    assert (tmp_path / "bars_images.npy").read_bytes() == open(IMAGES, "rb").read()


@pytest.mark.parametrize("args,message", [
    (["run", MODEL, "--input", "images=/nonexistent.npy"], "cannot open '/nonexistent.npy'"),
    (["run", MODEL, "--input", "images"], "--input takes NAME=FILE.npy"),
    (["run", IMAGES], "not a softdla loadable"),
    (["run", MODEL, "--input", "imagse=" + IMAGES], "--input names 'imagse', which is not an input of this loadable; its inputs are 'images'"),
    (["frobnicate"], "unknown command 'frobnicate'; the commands are run, inspect, build, check, ops, compare"),
])
def test_run_errors(args, message):
    r = run(*args, check=False)
    assert r.returncode != 0
    assert message in r.stderr


def test_wrong_input_size(tmp_path):
    np.save(tmp_path / "small.npy", np.zeros((1, 1, 4, 4), np.float32))
    r = run("run", MODEL, "--input", f"images={tmp_path / 'small.npy'}", check=False)
    assert r.returncode == 1 and "needs a multiple of 1024 values" in r.stderr


def test_int8_codes_pass_through_unchanged(tmp_path):
    """An int8 .npy holds quantized codes: they reach an int8 input as they are (the bars images
    quantized at 1/127 classify as the float images do)."""
    codes = np.round(np.load(IMAGES) * 127).astype(np.int8)
    np.save(tmp_path / "codes.npy", codes)
    r = run("run", MODEL, "--input", f"images={tmp_path / 'codes.npy'}", "--output-dir", str(tmp_path))
    got = np.load(tmp_path / "probabilities.npy")
    assert list(got.reshape(4, 4).argmax(1)) == [0, 1, 2, 3]
    assert R.rel_l2(got, bars_reference(np.load(IMAGES))) < 1e-3


def test_many_batches_and_accuracy(tmp_path):
    images = np.load(IMAGES)
    np.save(tmp_path / "x3.npy", np.concatenate([images] * 3))
    np.save(tmp_path / "labels.npy", np.array([0, 1, 2, 3] * 3, np.uint8))
    r = run("run", MODEL, "--input", f"images={tmp_path / 'x3.npy'}", "--labels", str(tmp_path / "labels.npy"),
            "--output-dir", str(tmp_path))
    assert "3 batch(es)" in r.stdout and "top-1 accuracy: 100.00% (12/12)" in r.stdout
    assert np.load(tmp_path / "probabilities.npy").shape == (12, 4, 1, 1)


def test_version():
    r = run("--version")
    assert r.stdout.strip() == "softdla 0.1.0", r.stdout


def test_no_progress_bars_in_a_log(tmp_path):
    """Progress bars redraw a line with carriage returns: on a terminal only, never into a captured log."""
    onnx = os.path.join(ROOT, "examples", "models", "digits.onnx")
    calib = os.path.join(ROOT, "examples", "models", "digits_calib")
    r = run("build", f"--onnx={onnx}", "--int8", "--fp16", f"--calib-data={calib}", f"--saveEngine={tmp_path / 'd.loadable'}")
    assert "\r" not in r.stderr and "[###" not in r.stderr, r.stderr[:300]
    assert "built " in r.stdout + r.stderr
