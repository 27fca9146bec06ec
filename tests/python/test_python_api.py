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


def test_run_argument_errors(digits_int8):
    with softdla.Device() as dev:
        m = dev.load(digits_int8)
        with pytest.raises(ValueError, match="pixels"):
            m.run({"wrong": np.zeros((1, 1, 8, 8))})
        with pytest.raises(ValueError, match="needs shape"):
            m.run([np.zeros((2, 1, 8, 8))])
        with pytest.raises(cudla.CudlaError) as e:
            dev.load(digits_int8)  # one module per handle, as on the DLA
        assert e.value.status == cudla.Status.ErrorUnsupportedOperation


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
