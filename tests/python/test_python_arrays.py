"""Module.run without needless copies on the host (issue 13, item 5): inputs in the stored form of `linear`
tensors are read where they lie, out= arrays are written where they lie, `linear` outputs come back as the
buffer the task wrote; other inputs and outputs still convert exactly as before. The GPU-array plumbing
(__cuda_array_interface__ and DLPack parsing, registration, in-place outputs) is exercised here with host
memory behind the interfaces, which the CPU backend accepts; test_python_gpu_arrays.py runs real GPU arrays."""
import os

import numpy as np
import pytest

softdla = pytest.importorskip("softdla")
from softdla import _cuda, cudla, formats  # noqa: E402

from sdla_testkit.engine import ROOT  # noqa: E402
from sdla_testkit.onnx_models import G  # noqa: E402

MODELS = os.path.join(ROOT, "examples", "models")


def conv_relu():
    """x [1, 2, 4, 32] -> 1x1 conv to 3 channels -> relu: W = 32 keeps dla_linear rows unpadded (linear)."""
    g = G(seed=3)
    return g.model(g.node("Relu", [g.conv(g.input("x", [1, 2, 4, 32]), 2, 3, k=1, pad=0)]))


@pytest.fixture(scope="module")
def fp32_linear():
    return softdla.build(conv_relu(), fp32_reference=True, progress=False)


@pytest.fixture(scope="module")
def fp16_linear():
    return softdla.build(conv_relu(), fp16=True, input_formats="fp16:dla_linear", output_formats="fp16:dla_linear",
                         progress=False)


@pytest.fixture
def registrations(monkeypatch):
    """Every (address, bytes) Module.run registers with cudlaMemRegister."""
    seen = []
    real = cudla.mem_register

    def spy(dev, ptr, size, flags):
        seen.append((int(ptr), int(size)))
        return real(dev, ptr, size, flags)
    monkeypatch.setattr(cudla, "mem_register", spy)
    return seen


def reference(loadable, x):
    """The outputs through the packing path: a non-contiguous copy of x is never read in place."""
    with softdla.Device(1) as dev:
        m = dev.load(loadable)
        wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
        wide[..., ::2] = x
        return m.run([wide[..., ::2]])


def test_linear_input_in_stored_form_is_read_in_place(fp32_linear, registrations, monkeypatch):
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 32)).astype(np.float32)
    want = reference(fp32_linear, x)["relu2_0"]
    with softdla.Device(0) as dev:
        m = dev.load(fp32_linear)
        buf = m.inputs[0].empty()
        buf[...] = x
        assert buf.ctypes.data % 32 == 0
        monkeypatch.setattr(formats, "pack", lambda *a, **k: pytest.fail("packed an input it could read in place"))
        registrations.clear()
        got = m.run({"x": buf})["relu2_0"]
        assert (buf.ctypes.data, buf.nbytes) in registrations  # the task read the caller's memory
        np.testing.assert_array_equal(got, want)
        # the returned float32 output is the memory the task wrote: registered, not copied afterwards
        assert any(ptr == got.ctypes.data for ptr, _ in registrations)


def test_out_arrays_are_written_in_place(fp32_linear, registrations):
    x = np.random.default_rng(1).standard_normal((1, 2, 4, 32)).astype(np.float32)
    want = reference(fp32_linear, x)["relu2_0"]
    with softdla.Device(0) as dev:
        m = dev.load(fp32_linear)
        y = m.outputs[0].empty()
        y[...] = np.nan
        registrations.clear()
        got = m.run([x], out={"relu2_0": y})
        assert got["relu2_0"] is y and (y.ctypes.data, y.nbytes) in registrations
        np.testing.assert_array_equal(y, want)


def test_conversions_still_happen_once_and_out_takes_them(fp16_linear):
    """float16 storage: float32 inputs are converted (a copy), float16 inputs read in place; the float32
    result is converted into out=; raw=True returns the float16 bytes the task wrote."""
    x = (np.random.default_rng(2).standard_normal((1, 2, 4, 32)) * 4).astype(np.float32)
    with softdla.Device(0) as dev:
        m = dev.load(fp16_linear)
        assert (m.inputs[0].dtype, m.inputs[0].format_name) == (np.float16, "linear")
        want = m.run([x])["relu2_0"]
        assert want.dtype == np.float32 and (want > 0).any()
        np.testing.assert_array_equal(m.run([x.astype(np.float16)])["relu2_0"], want)  # rounds the same way
        y = np.empty((1, 3, 4, 32), np.float32)
        assert m.run([x], out={"relu2_0": y})["relu2_0"] is y
        np.testing.assert_array_equal(y, want)
        raw = m.run([x], raw=True)["relu2_0"]
        assert raw.dtype == np.float16 and np.array_equal(raw.astype(np.float32), want)


def test_packed_formats_give_the_same_values_with_out(fp32_linear):
    """The bundled model (int8:dla_hwc4 in, fp16:chw16 out) through out=: one unpack, straight into out."""
    images = np.load(os.path.join(MODELS, "bars_images.npy"))
    with softdla.Device(0) as dev:
        m = dev.load(os.path.join(MODELS, "bars.loadable"))
        want = m.run([images])["probabilities"]
        y = np.full((4, 4, 1, 1), np.nan, np.float32)
        m.run([images], out={"probabilities": y})
        np.testing.assert_array_equal(y, want)
        assert list(y.reshape(4, 4).argmax(1)) == [0, 1, 2, 3]


def test_misaligned_or_strided_inputs_fall_back_to_packing(fp32_linear, registrations):
    x = np.random.default_rng(3).standard_normal((1, 2, 4, 32)).astype(np.float32)
    with softdla.Device(0) as dev:
        m = dev.load(fp32_linear)
        want = m.run([x])["relu2_0"]
        raw = np.zeros(x.nbytes + 64, np.uint8)
        off = next(o for o in range(4, 64, 4) if (raw.ctypes.data + o) % 32)
        shifted = raw[off:off + x.nbytes].view(np.float32).reshape(x.shape)
        shifted[...] = x
        registrations.clear()
        np.testing.assert_array_equal(m.run([shifted])["relu2_0"], want)
        assert shifted.ctypes.data not in [p for p, _ in registrations]


@pytest.mark.parametrize("bad,message", [
    (lambda: np.empty((1, 3, 4, 32), np.float16), r"out= for output 'relu2_0' \(float32:linear, shape \(1, 3, 4, 32\)\) "
                                                  r"must be float32 of shape \(1, 3, 4, 32\), not float16"),
    (lambda: np.empty((1, 3, 32, 4), np.float32), r"must be float32 of shape \(1, 3, 4, 32\), not float32 \(1, 3, 32, 4\)"),
    (lambda: np.empty((1, 3, 4, 64), np.float32)[..., ::2], "must be writable and C-contiguous"),
    (lambda: [0.0] * 384, "must be a NumPy array or a GPU array, not list"),
])
def test_out_arrays_are_checked(fp32_linear, bad, message):
    with softdla.Device(0) as dev:
        m = dev.load(fp32_linear)
        with pytest.raises((ValueError, TypeError), match=message):
            m.run([np.zeros((1, 2, 4, 32), np.float32)], out={"relu2_0": bad()})
        with pytest.raises(ValueError, match=r"out= names unknown output\(s\) \['y'\]; the module's outputs: "
                                             r"'relu2_0' \(float32:linear, shape \(1, 3, 4, 32\)\)"):
            m.run([np.zeros((1, 2, 4, 32), np.float32)], out={"y": np.empty((1, 3, 4, 32), np.float32)})


def test_out_may_not_overlap_an_input():
    """A 1x1 convolution into its own input would read values it already overwrote."""
    g = G()
    same = softdla.build(g.model(g.node("Relu", [g.input("x", [1, 3, 4, 32])])), fp32_reference=True, progress=False)
    with softdla.Device(0) as dev:
        m = dev.load(same)
        x = m.inputs[0].empty()
        with pytest.raises(ValueError, match=r"output 'relu1_0' .* overlaps the memory of input 'x'"):
            m.run([x], out={"relu1_0": x})


# ------------------------------------------------------------------ GPU-array plumbing over host memory
class FakeCudaArray:
    """Host memory presented through __cuda_array_interface__ (v3), as a GPU framework presents its own."""

    def __init__(self, a, stream=None):
        self.a = a
        self.__cuda_array_interface__ = {"shape": a.shape, "typestr": a.dtype.str, "data": (a.ctypes.data, False),
                                         "strides": None, "version": 3, "stream": stream}


class FakeDLPack:
    """Host memory presented as a DLPack producer on a CUDA device (the capsule is NumPy's)."""

    def __init__(self, a):
        self.a, self.borrowed_with = a, []

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None):
        self.borrowed_with.append(stream)
        return self.a.__dlpack__()


needs_no_gpu = pytest.mark.skipif(_cuda.available(), reason="host memory posing as GPU memory: machines without a GPU")


@needs_no_gpu
def test_gpu_arrays_are_registered_and_written_in_place(fp32_linear, registrations):
    x = np.random.default_rng(4).standard_normal((1, 2, 4, 32)).astype(np.float32)
    want = reference(fp32_linear, x)["relu2_0"]
    with softdla.Device(0) as dev:
        m = dev.load(fp32_linear)
        xa, ya = m.inputs[0].empty(), m.outputs[0].empty()
        xa[...] = x
        out = FakeCudaArray(ya)
        registrations.clear()
        got = m.run({"x": FakeCudaArray(xa)}, out={"relu2_0": out})
        assert got["relu2_0"] is out
        assert (xa.ctypes.data, xa.nbytes) in registrations and (ya.ctypes.data, ya.nbytes) in registrations
        np.testing.assert_array_equal(ya, want)
        producer = FakeDLPack(xa)
        ya[...] = 0
        m.run([producer], out={"relu2_0": FakeCudaArray(ya)})
        np.testing.assert_array_equal(ya, want)
        assert producer.borrowed_with == [1]  # DLPack's legacy-default-stream value (0 is not allowed)


@needs_no_gpu
def test_gpu_arrays_must_already_be_in_the_stored_form(fp16_linear):
    """GPU arrays are never converted on the host: the errors say what the tensor needs."""
    with softdla.Device(0) as dev:
        m = dev.load(fp16_linear)
        x32 = np.zeros((1, 2, 4, 32), np.float32)
        with pytest.raises(ValueError, match=r"input 'x' \(float16:linear, shape \(1, 2, 4, 32\)\): a GPU array is "
                                             r"used in place, so it must be float16 of shape \(1, 2, 4, 32\), not "
                                             r"float32 \(1, 2, 4, 32\)"):
            m.run([FakeCudaArray(x32)])
        strided = FakeCudaArray(np.zeros((1, 2, 4, 32), np.float16))
        strided.__cuda_array_interface__["strides"] = (512, 256, 128, 4)
        with pytest.raises(ValueError, match="must be C-contiguous"):
            m.run([strided])
    with softdla.Device(0) as dev:
        m = dev.load(os.path.join(MODELS, "bars.loadable"))
        with pytest.raises(ValueError, match=r"input 'images' \(int8:dla_hwc4, shape \(4, 1, 16, 16\)\): a GPU array "
                                             r"is used in place, so it must hold the 4096 bytes of the dla_hwc4 "
                                             r"layout \(softdla.formats.layout\), not 1024 bytes"):
            m.run([FakeCudaArray(np.zeros((4, 1, 16, 16), np.int8))])


@pytest.mark.skipif(_cuda.available(), reason="the load-time host buffers exist where the library takes host memory")
def test_converted_data_goes_through_buffers_registered_at_load(registrations):
    """Float inputs of an INT8 model are quantized and packed anyway, and its FP16 output unpacked: such runs
    use the buffers the module registered at load (nothing registered per run) and give the same values as
    the per-run path (taken here with out=)."""
    lb = softdla.build(os.path.join(MODELS, "digits.onnx"), int8=True, fp16=True,
                       calib_data=os.path.join(MODELS, "digits_calib"), progress=False)
    images = np.load(os.path.join(MODELS, "digits_test_images.npy")).astype(np.float32)[:6]
    with softdla.Device(0) as dev:
        m = dev.load(lb)
        at_load = len(registrations)
        assert at_load == len(m.inputs) + len(m.outputs)
        staged = [m.run([im[None]])["probabilities"] for im in images]
        assert len(registrations) == at_load  # nothing registered by the runs
        for im, got in zip(images, staged):
            out = np.empty(m.outputs[0].shape, np.float32)
            want = m.run([im[None]], out={"probabilities": out})["probabilities"]
            np.testing.assert_array_equal(got, want)
        assert len(registrations) > at_load  # the out= runs registered their memory
        assert len({g.tobytes() for g in staged}) > 1  # each run's own result, not a stale buffer
