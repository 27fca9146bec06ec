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
    (["run", MODEL, "--input", "=" + IMAGES], "--input takes NAME=FILE.npy"),
    (["run", MODEL, "--input", "images="], "--input takes NAME=FILE.npy"),
    (["run", MODEL, "--input", "images=" + IMAGES, "--input", "images=/b.npy"],
     f"--input names 'images' twice ('{IMAGES}' and '/b.npy'): give each input once"),
    (["run", IMAGES], "not a softdla loadable"),
    (["run", MODEL, "--input", "imagse=" + IMAGES], "--input names 'imagse', which is not an input of this loadable; its inputs are 'images'"),
    (["frobnicate"], "unknown command 'frobnicate'; the commands are run, profile, inspect, build, check, ops, compare"),
])
def test_run_errors(args, message):
    r = run(*args, check=False)
    assert r.returncode != 0
    assert message in r.stderr


EXPECTS = "This loadable's inputs: 'images' (4x1x16x16, int8:dla_hwc4)"


def test_wrong_input_size(tmp_path):
    np.save(tmp_path / "small.npy", np.zeros((1, 1, 4, 4), np.float32))
    r = run("run", MODEL, "--input", f"images={tmp_path / 'small.npy'}", check=False)
    assert r.returncode == 1
    assert "input 'images' takes NCHW arrays of 4x1x16x16 (or (k*4)x1x16x16 for k batches); the .npy is 1x1x4x4" in r.stderr
    assert EXPECTS in r.stderr


@pytest.mark.parametrize("shape", [(4, 1, 256), (4, 16, 16, 1), (1024,), (2, 1, 16, 16)])
def test_wrong_input_shape_is_an_error_listing_the_inputs(tmp_path, shape):
    """The same values in another shape (or half a batch) are another tensor: an error, not a run."""
    images = np.load(IMAGES)
    np.save(tmp_path / "x.npy", images.reshape(-1)[:int(np.prod(shape))].reshape(shape))
    r = run("run", MODEL, "--input", f"images={tmp_path / 'x.npy'}", check=False)
    assert r.returncode == 1 and "ran " not in r.stdout
    assert f"the .npy is {'x'.join(map(str, shape))}. {EXPECTS}" in r.stderr, r.stderr


def test_rank2_input_maps_as_the_builder_maps_it(tmp_path):
    """[N, K] arrays are the NCHW tensor [N, K, 1, 1], as softdla.build maps ONNX inputs of rank 2."""
    from sdla_testkit.onnx_models import G, softdla_build
    g = G()
    model = g.model(g.node("Relu", [g.input("x", [2, 16])]))
    loadable, _ = softdla_build(model, tmp_path, "--fp16")
    (tmp_path / "m.loadable").write_bytes(loadable)
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(2, 16)
    np.save(tmp_path / "x.npy", np.concatenate([x, -x]))  # two batches
    r = run("run", str(tmp_path / "m.loadable"), "-i", f"x={tmp_path / 'x.npy'}", "-o", str(tmp_path))
    assert "2 batch(es)" in r.stdout
    out = next(f for f in tmp_path.glob("*.npy") if f.name != "x.npy")
    np.testing.assert_allclose(np.load(out).reshape(4, 16), np.maximum(np.concatenate([x, -x]), 0), atol=1e-3)


def test_inputs_must_agree_on_the_number_of_batches(tmp_path):
    from sdla_testkit.onnx_models import G, softdla_build
    g = G()
    model = g.model(g.node("Add", [g.input("a", [1, 4, 2, 2]), g.input("b", [1, 4, 2, 2])]))
    loadable, _ = softdla_build(model, tmp_path, "--fp16")
    (tmp_path / "m.loadable").write_bytes(loadable)
    np.save(tmp_path / "a.npy", np.ones((2, 4, 2, 2), np.float32))
    np.save(tmp_path / "b.npy", np.ones((3, 4, 2, 2), np.float32))
    r = run("run", str(tmp_path / "m.loadable"), "-i", f"a={tmp_path / 'a.npy'}", "-i", f"b={tmp_path / 'b.npy'}",
            check=False)
    assert r.returncode == 1
    assert "input 'b' holds 3 batches and input 'a' 2; give every input one batch (reused for each) or the same " \
           "number of batches" in r.stderr
    np.save(tmp_path / "b.npy", np.ones((1, 4, 2, 2), np.float32))  # one batch: reused for both
    assert "2 batch(es)" in run("run", str(tmp_path / "m.loadable"), "-i", f"a={tmp_path / 'a.npy'}", "-i",
                                f"b={tmp_path / 'b.npy'}").stdout


@pytest.mark.parametrize("labels,message", [
    ([0, 1, 2], "--labels '{f}' holds 3 label(s); the run has 4 sample(s) (1 batch(es) of 4): give one label per sample"),
    ([0, 1, 2, 3, 0], "holds 5 label(s); the run has 4 sample(s)"),
    ([0, 1, 2, 9], "--labels '{f}': label 3 is 9, not a class of output 0 (whole numbers 0 to 3)"),
    ([0, 1, 2.5, 3], "label 2 is 2.5, not a class of output 0"),
])
def test_labels_must_match_the_samples(tmp_path, labels, message):
    f = tmp_path / "labels.npy"
    np.save(f, np.array(labels, np.float32))
    r = run("run", MODEL, "--input", f"images={IMAGES}", "--labels", str(f), check=False)
    assert r.returncode == 1 and "ran " not in r.stdout  # checked before running
    assert message.format(f=f) in r.stderr, r.stderr


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


def test_no_progress_bars_in_a_log(tmp_path):
    """Progress bars redraw a line with carriage returns: on a terminal only, never into a captured log."""
    onnx = os.path.join(ROOT, "examples", "models", "digits.onnx")
    calib = os.path.join(ROOT, "examples", "models", "digits_calib")
    r = run("build", f"--onnx={onnx}", "--int8", "--fp16", f"--calib-data={calib}", f"--saveEngine={tmp_path / 'd.loadable'}")
    assert "\r" not in r.stderr and "[###" not in r.stderr, r.stderr[:300]
    assert "built " in r.stdout + r.stderr
    forced = run("build", f"--onnx={onnx}", "--fp16", "--progress", f"--saveEngine={tmp_path / 'f.loadable'}")
    assert "import and lowering" in forced.stderr and "[####" in forced.stderr  # --progress: bars into the log too


def cmake_read_version(pyproject):
    r = subprocess.run(["cmake", f"-DPYPROJECT={pyproject}", "-P", os.path.join(ROOT, "cmake", "version.cmake")],
                       capture_output=True, text=True)
    # CMake wraps a message's lines at a width, so where a line breaks depends on the path's length.
    return r.stdout.strip() if r.returncode == 0 else " ".join(r.stderr.split())


def test_version_is_pyprojects(tmp_path):
    """--version comes from pyproject.toml through CMake (cmake/version.cmake), as softdla.__version__ does;
    the C++ sources do not write it a second time."""
    import re
    text = open(os.path.join(ROOT, "pyproject.toml")).read()
    version = re.search(r'^version = "([^"]+)"', text, re.M).group(1)
    assert run("--version").stdout.strip() == f"softdla {version}"
    assert cmake_read_version(os.path.join(ROOT, "pyproject.toml")) == version
    assert f'"{version}"' not in open(os.path.join(ROOT, "src", "loadable", "format_version.h")).read()
    # The reader takes the [project] table's version, not another table's.
    (tmp_path / "pyproject.toml").write_text('[tool.x]\nversion = "9.9.9"\n[project]\nname = "softdla"\n'
                                             'version = "2.3.4"\n')
    assert cmake_read_version(tmp_path / "pyproject.toml") == "2.3.4"
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "softdla"\n')
    assert "no version" in cmake_read_version(tmp_path / "pyproject.toml")


def test_int8_input_values_past_its_range_are_reported(tmp_path):
    """A real-valued array for an INT8 input is quantized with the input's scale: values past the codes'
    range are saturated, and the run says how many (an int8 array holds codes and is taken as is)."""
    images = np.load(IMAGES).astype(np.float32)
    np.save(tmp_path / "big.npy", images * 3)
    r = run("run", MODEL, "--input", f"images={tmp_path / 'big.npy'}")
    expected = int((np.round(images * 3 / (1 / 127)) > 127).sum())
    assert expected > 0 and f"input 'images': {expected} of {images.size} values lie outside its INT8 range" in r.stderr
    assert "outside its INT8 range" not in run("run", MODEL, "--input", f"images={IMAGES}").stderr
