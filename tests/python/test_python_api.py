"""softdla's high-level Python API (Device, Module.run, formats), softdla.build/check/inspect, the
documented signatures, and the nine-steps example."""
import inspect as pyinspect
import os
import subprocess
import sys

import numpy as np
import pytest

softdla = pytest.importorskip("softdla")
from softdla import cudla, formats  # noqa: E402

from sdla_testkit.engine import ROOT, Engine  # noqa: E402
from sdla_testkit.onnx_models import ort_run  # noqa: E402

MODELS = os.path.join(ROOT, "examples", "models")


@pytest.fixture(scope="module")
def digits_int8():
    return softdla.build(os.path.join(MODELS, "digits.onnx"), int8=True, fp16=True,
                         calib_data=os.path.join(MODELS, "digits_calib"), progress=False)


def test_module_run_matches_engine_and_quantizes(digits_int8):
    images = np.load(os.path.join(MODELS, "digits_test_images.npy")).astype(np.float32)
    with softdla.Device(0) as dev:
        m = dev.load(digits_int8)
        (t_in,), (t_out,) = m.inputs, m.outputs
        assert t_in.name == "pixels" and t_in.shape == (1, 1, 8, 8) and t_in.dtype == np.int8
        assert t_in.format_name == "dla_linear" and abs(t_in.scale - 16 / 127) < 1e-6
        assert t_out.dtype == np.float16
        got = m.run({"pixels": images[:1]})["probabilities"]
        raw_in = formats.pack(formats.quantize(images[:1], t_in.scale), t_in.format)
        ref = formats.unpack(Engine(digits_int8).run_raw([raw_in], 1)[0], (1, 10, 1, 1), np.float16, t_out.format)
        np.testing.assert_array_equal(got, ref.astype(np.float32))
        codes = formats.quantize(images[:1], t_in.scale)  # int8 arrays are taken as codes
        np.testing.assert_array_equal(m.run([codes])["probabilities"], got)


def test_fp16_build_matches_onnxruntime():
    import onnx
    model = onnx.load(os.path.join(MODELS, "digits.onnx"))
    x = np.load(os.path.join(MODELS, "digits_test_images.npy"))[:1].astype(np.float32)
    with softdla.Device(1) as dev:
        y = dev.load(softdla.build(model, fp16=True, progress=False)).run([x])["probabilities"]
    ref = ort_run(model, x)[0]
    assert np.linalg.norm(y.ravel() - ref.ravel()) / np.linalg.norm(ref) < 1e-3


def test_io_names_past_the_descriptors_80_bytes(tmp_path):
    """Exporters write long scoped I/O names (tf2onnx, the dynamo exporter); cuDLA's descriptors keep 80
    bytes of them. Module's tensors carry the whole name (softdlaModuleGetTensorName), so run() takes and
    returns the model's own names; it used to know only the cut ones, and compare() failed on them."""
    from sdla_testkit.onnx_models import G
    g = G(0)
    long_in = "serving_default_" + "".join(f"encoder/block_{i}/" for i in range(6)) + "input_tensor:0"
    long_out = "StatefulPartitionedCall/" + "model/decoder_head/" * 4 + "logits:0"
    x = g.input(long_in, [1, 3, 8, 8])
    y = g.conv(x, 3, 4)
    g.nodes[-1].output[0] = long_out
    model = g.model([long_out])
    xin = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    with softdla.Device(0) as dev:
        m = dev.load(softdla.build(model, fp16=True, progress=False))
        assert [t.name for t in m.inputs] == [long_in] and [t.name for t in m.outputs] == [long_out]
        assert len(m.inputs[0].descriptor.name) == 80  # cuDLA's own view stays as NVIDIA's
        got = m.run({long_in: xin})[long_out]
    ref = ort_run(model, xin)[0]
    assert np.linalg.norm(got.ravel() - ref.ravel()) / np.linalg.norm(ref) < 1e-3
    assert y is not None


def test_run_argument_errors(digits_int8):
    with softdla.Device() as dev:
        m = dev.load(digits_int8)
        with pytest.raises(ValueError, match="pixels"):
            m.run({"wrong": np.zeros((1, 1, 8, 8))})
        with pytest.raises(ValueError, match="needs shape"):
            m.run([np.zeros((2, 1, 8, 8))])
        with pytest.raises(cudla.CudlaError, match="already holds a module") as e:
            dev.load(digits_int8)  # one module per handle, as on the DLA; the reason is in the exception
        assert e.value.status == cudla.Status.ErrorUnsupportedOperation
        with pytest.raises(TypeError, match="load takes the loadable's bytes"):
            softdla.Device(1).load(5)  # bytes(5) is five zero bytes
        with pytest.raises(ValueError, match="takes a DLA core index"):
            softdla.Device(-1)
        if not softdla._cuda.available():
            with pytest.raises(ValueError, match="leave stream out to run synchronously"):
                m.run([np.zeros((1, 1, 8, 8), np.float32)], stream=5)
        with pytest.raises(OverflowError, match="negative value -1"):
            cudla.set_task_timeout_in_ms(dev.handle, -1)


def test_inputs_beyond_the_stored_type_are_refused_not_infinite():
    """Integers as values: 70000 has no float16, and it became inf (the outputs NaN) with only NumPy's
    warning; floats already raised. Mappings other than dict are feeds too; np.matrix reads as its array."""
    import types
    import onnx
    model = onnx.load(os.path.join(MODELS, "digits.onnx"))
    with softdla.Device(1) as dev:
        m = dev.load(softdla.build(model, fp16=True, progress=False))
        for dtype in (np.int32, np.int64, np.uint16):
            with pytest.raises(ValueError, match="finite value\\(s\\) overflow float16"):
                m.run([np.full((1, 1, 8, 8), 65535 if dtype == np.uint16 else 70000, dtype)])
        x = np.load(os.path.join(MODELS, "digits_test_images.npy"))[:1].astype(np.float32)
        want = m.run([x])["probabilities"]
        np.testing.assert_array_equal(m.run(types.MappingProxyType({"pixels": x}))["probabilities"], want)
    from sdla_testkit.onnx_models import G
    g = G(0)
    row = g.input("row", [1, 16])
    fc = g.model(g.node("Gemm", [row, g.weight(4, 16)], transB=1))
    v = np.random.default_rng(0).standard_normal((1, 16)).astype(np.float32)
    with softdla.Device(1) as dev:
        m = dev.load(softdla.build(fc, fp16=True, progress=False))
        (name,) = [t.name for t in m.outputs]
        np.testing.assert_array_equal(m.run([np.matrix(v)])[name], m.run([v])[name])


def test_context_managers_clean_up_in_order(digits_int8):
    dev = softdla.Device()
    m = dev.load(digits_int8)
    handle, module = dev.handle, m.handle
    dev.close()  # closes the module first: unregister, unload, destroy
    assert m.handle == 0 and dev.handle == 0
    with pytest.raises(cudla.CudlaError):
        cudla.destroy_device(handle)
    with pytest.raises(cudla.CudlaError):
        cudla.module_unload(module, 0)


def test_build_check_inspect_from_python(tmp_path):
    saved = tmp_path / "d.loadable"
    lb = softdla.build(os.path.join(MODELS, "digits.onnx"), fp16=True, output_formats="fp16:chw16", save=saved,
                       progress=False)
    assert saved.read_bytes() == lb
    info = softdla.inspect(saved)
    assert info["outputs"][0]["format"] == "chw16" and info["target"] == "orin"
    assert [layer[1] for layer in info["layers"]][:2] == ["sdp", "conv"]
    rows = softdla.check(os.path.join(MODELS, "digits.onnx"), target="xavier")
    softmax = next(r for r in rows if r["op"] == "Softmax")
    assert not softmax["supported"] and "Orin" in softmax["reason"]
    with pytest.raises(softdla.BuildError, match="not a valid ONNX model"):
        softdla.build(b"junk", fp16=True, progress=False)
    with pytest.raises(ValueError):
        softdla.build(os.path.join(MODELS, "digits.onnx"), progress=False)  # no precision


def test_signatures_are_documented():
    sig = pyinspect.signature(cudla.mem_register)
    assert list(sig.parameters) == ["dev_handle", "ptr", "size", "flags"]
    assert list(pyinspect.signature(cudla.module_load_from_memory).parameters) == ["dev_handle", "p_module",
                                                                                   "module_size", "flags"]
    assert list(pyinspect.signature(cudla.submit_task).parameters) == ["dev_handle", "ptr_to_tasks", "num_tasks",
                                                                       "stream", "flags"]
    for name in ("get_version", "create_device", "submit_task", "module_get_attributes"):
        assert getattr(cudla, name).__doc__
    assert "fp16" in pyinspect.signature(softdla.build).parameters


def test_nine_steps_example_classifies_correctly():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "python", "nine_steps.py")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "image 0: predicted 7, label 7" in r.stdout
    acc = float(r.stdout.strip().splitlines()[-1].split(": ")[1].rstrip("%"))
    assert acc >= 97.0


def test_version_is_pyprojects_and_the_clis(tmp_path):
    """One source of truth: pyproject.toml's [project] version is softdla.__version__ and `softdla --version`."""
    import re
    from softdla import _version
    text = open(os.path.join(ROOT, "pyproject.toml")).read()
    version = re.search(r'^version = "([^"]+)"', text, re.M).group(1)
    assert softdla.__version__ == version
    cli = os.path.join(os.environ.get("SOFTDLA_BUILD_DIR", os.path.join(ROOT, "build")), "softdla")
    assert subprocess.run([cli, "--version"], capture_output=True, text=True).stdout.strip() == f"softdla {version}"
    assert version not in open(os.path.join(ROOT, "python", "softdla", "__init__.py")).read()
    f = tmp_path / "pyproject.toml"
    f.write_text('[tool.x]\nversion = "9.9.9"\n\n[project]\nname = "softdla"\nversion = "2.3.4"\n')
    assert _version._from_pyproject(str(f)) == "2.3.4"
    f.write_text('[project]\nname = "other"\nversion = "2.3.4"\n')  # another project's file above site-packages
    assert _version._from_pyproject(str(f)) is None


def _stderr_on_a_terminal(*python_args):
    """Runs the venv's Python with stderr on a pseudo-terminal (as a person's shell gives it); returns
    (stdout, what reached the terminal)."""
    import pty
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "python")}
    try:
        r = subprocess.run([sys.executable, *python_args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=slave, env=env, cwd=ROOT, timeout=300)
    finally:
        os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the terminal's other side is closed and drained
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    return r.stdout.decode(), seen.decode(errors="replace")


BUILD_SNIPPET = ("import sys, softdla; softdla.build({model!r}, fp16=True); "
                 "print('built, stderr is a terminal:', sys.stderr.isatty())")


def test_build_shows_no_progress_from_a_script_even_on_a_terminal():
    """progress=None draws bars only for a person at an interactive prompt: a script's stderr, even on a
    terminal, often ends up in a log (issue 13)."""
    code = BUILD_SNIPPET.format(model=os.path.join(MODELS, "digits.onnx"))
    out, terminal = _stderr_on_a_terminal("-c", code)
    assert "built, stderr is a terminal: True" in out
    assert "import and lowering" not in terminal and "\r" not in terminal.replace("\r\n", "\n"), terminal
    out, terminal = _stderr_on_a_terminal("-i", "-c", code)  # interactive Python: the bar is drawn
    assert "built, stderr is a terminal: True" in out
    assert "import and lowering" in terminal and "[####" in terminal, terminal
