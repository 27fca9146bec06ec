"""Module.run with GPU arrays (issue 13, item 5), on a machine with a CUDA GPU; skipped cleanly without one.
PyTorch tensors and CuPy arrays (and anything with __cuda_array_interface__ or DLPack) are registered and
used in place, outputs come back as arrays of the same framework, and NumPy arrays still work where the
library takes only device memory (softdla's CUDA backend), through device staging buffers. Loadables are
built with the softdla command, so only the cuDLA extension needs to match the Python running this."""
import importlib.util
import os

import numpy as np
import pytest

softdla = pytest.importorskip("softdla")
from softdla import _cuda, formats  # noqa: E402

from sdla_testkit.engine import ROOT, Engine  # noqa: E402
from sdla_testkit.onnx_models import G, softdla_build  # noqa: E402

pytestmark = pytest.mark.skipif(not _cuda.available(), reason=f"no CUDA GPU: {_cuda.why_unavailable()}")
MODELS = os.path.join(ROOT, "examples", "models")


def _torch():
    if importlib.util.find_spec("torch") is None:
        pytest.skip("PyTorch is not installed")
    import torch
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no GPU")
    return torch


def _cupy():
    if importlib.util.find_spec("cupy") is None:
        pytest.skip("CuPy is not installed")
    import cupy
    return cupy


@pytest.fixture(scope="module")
def fp32_linear(tmp_path_factory):
    """x [1, 2, 4, 32] -> 1x1 conv -> relu, float32 linear I/O."""
    g = G(seed=5)
    model = g.model(g.node("Relu", [g.conv(g.input("x", [1, 2, 4, 32]), 2, 3, k=1, pad=0)]))
    loadable, _ = softdla_build(model, tmp_path_factory.mktemp("fp32"), "--fp32-reference")
    return loadable


X = np.random.default_rng(0).standard_normal((1, 2, 4, 32)).astype(np.float32)


def cpu_reference(loadable, x):
    return Engine(loadable, backend="cpu").run_float(x)[0]


def test_numpy_arrays_work_where_the_library_takes_device_memory(fp32_linear):
    with softdla.Device(0) as dev:
        m = dev.load(fp32_linear)
        got = m.run([X])["relu2_0"]
    assert isinstance(got, np.ndarray) and got.dtype == np.float32
    np.testing.assert_allclose(got, cpu_reference(fp32_linear, X).reshape(got.shape), rtol=1e-5, atol=1e-6)


def test_torch_tensors_in_place_and_torch_out(fp32_linear):
    torch = _torch()
    x = torch.from_numpy(X).cuda()
    with softdla.Device(0) as dev:
        m = dev.load(fp32_linear)
        want = m.run([X])["relu2_0"]
        y = m.run({"x": x})["relu2_0"]
        assert isinstance(y, torch.Tensor) and y.is_cuda and y.dtype == torch.float32 and tuple(y.shape) == (1, 3, 4, 32)
        np.testing.assert_array_equal(y.cpu().numpy(), want)
        out = torch.full((1, 3, 4, 32), float("nan"), device="cuda")
        ptr = out.data_ptr()
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            got = m.run([x], out={"relu2_0": out}, stream=stream)
        assert got["relu2_0"] is out and out.data_ptr() == ptr
        np.testing.assert_array_equal(out.cpu().numpy(), want)


def test_work_queued_before_the_run_is_seen(fp32_linear):
    """The input is produced by a kernel still queued on PyTorch's stream when run() is called."""
    torch = _torch()
    with softdla.Device(0) as dev:
        m = dev.load(fp32_linear)
        want = m.run([X * 3])["relu2_0"]
        x = torch.from_numpy(X).cuda()
        torch.cuda._sleep(50_000_000)  # keeps the stream busy, so the multiply below is still pending
        y = m.run([x * 3])["relu2_0"]
        np.testing.assert_array_equal(y.cpu().numpy(), want)


def test_cupy_in_cupy_out(fp32_linear):
    cupy = _cupy()
    with softdla.Device(0) as dev:
        m = dev.load(fp32_linear)
        want = m.run([X])["relu2_0"]
        y = m.run([cupy.asarray(X)])["relu2_0"]
        assert isinstance(y, cupy.ndarray) and y.dtype == np.float32
        np.testing.assert_array_equal(cupy.asnumpy(y), want)


class DLPackOnly:
    """A producer that offers DLPack alone (no __cuda_array_interface__)."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None):
        return self.t.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


class InterfaceOnly:
    """A producer that offers __cuda_array_interface__ alone, from no known framework."""

    def __init__(self, t):
        self.t = t
        self.__cuda_array_interface__ = t.__cuda_array_interface__


def test_dlpack_and_array_interface_producers(fp32_linear):
    torch = _torch()
    x = torch.from_numpy(X).cuda()
    with softdla.Device(0) as dev:
        m = dev.load(fp32_linear)
        want = m.run([X])["relu2_0"]
        out = torch.empty((1, 3, 4, 32), device="cuda")
        assert m.run([DLPackOnly(x)], out={"relu2_0": out})["relu2_0"] is out
        np.testing.assert_array_equal(out.cpu().numpy(), want)
        for producer in (DLPackOnly(x), InterfaceOnly(x)):  # no known framework: outputs are DeviceArrays
            y = m.run([producer])["relu2_0"]
            assert isinstance(y, _cuda.DeviceArray) and y.shape == (1, 3, 4, 32) and y.dtype == np.float32
            np.testing.assert_array_equal(y.get(), want)
            np.testing.assert_array_equal(torch.as_tensor(y, device="cuda").cpu().numpy(), want)  # taken without a copy


def test_packed_formats_take_and_return_the_layout_bytes():
    """bars.loadable: int8:dla_hwc4 in, fp16:chw16 out. GPU arrays are the layouts' bytes, packed and unpacked
    by the caller (here on the host with softdla.formats, as examples/python/hybrid_pipeline.py does on the GPU)."""
    torch = _torch()
    images = np.load(os.path.join(MODELS, "bars_images.npy"))
    with softdla.Device(0) as dev:
        m = dev.load(os.path.join(MODELS, "bars.loadable"))
        (t_in,), (t_out,) = m.inputs, m.outputs
        packed = formats.pack(formats.quantize(images, t_in.scale), t_in.format, t_in.target)
        y = m.run([torch.frombuffer(bytearray(packed), dtype=torch.uint8).cuda()])["probabilities"]
        assert y.dtype == torch.uint8 and tuple(y.shape) == (t_out.size,)
        probs = formats.unpack(y.cpu().numpy(), t_out.shape, t_out.dtype, t_out.format, t_out.target)
        assert list(probs.reshape(4, 4).argmax(1)) == [0, 1, 2, 3]
        np.testing.assert_array_equal(probs.astype(np.float32), m.run([images])["probabilities"])
        with pytest.raises(ValueError, match="must hold the 4096 bytes of the dla_hwc4 layout"):
            m.run([torch.zeros((4, 1, 16, 16), dtype=torch.int8, device="cuda")])
