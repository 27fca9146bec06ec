"""softdla: an open cuDLA runtime with a software DLA, and a DLA builder.

- softdla.cudla: drop-in for NVIDIA's cuda.bindings.cudla
- softdla.Device / Module: run loadables on NumPy or GPU arrays (PyTorch, CuPy, DLPack)
- softdla.formats: pack/unpack helpers for every DLA I/O format
- softdla.build / check / inspect: ONNX -> DLA loadable
- softdla.compare: the loadable against ONNX Runtime FP32, layer by layer

The parts backed by compiled extensions load on first use, so `softdla.formats` works even where
the extensions were built for another Python (the error then names the missing extension).
"""
import importlib

from . import formats  # noqa: F401

from ._version import __version__  # noqa: F401  (read from pyproject.toml)

_LAZY = {
    "cudla": ("cudla", None),
    "BuildError": ("builder", "BuildError"), "BuildWarning": ("builder", "BuildWarning"), "build": ("builder", "build"), "check": ("builder", "check"),
    "inspect": ("builder", "inspect"),
    "Device": ("runtime", "Device"), "Module": ("runtime", "Module"), "TensorInfo": ("runtime", "TensorInfo"),
    "device_count": ("runtime", "device_count"),
    "DeviceArray": ("_cuda", "DeviceArray"),  # GPU outputs of Module.run when no framework array is at hand
    "compare": ("compare", None), "CompareResult": ("compare", "CompareResult"),  # the module is callable
    # For C/C++ programs built against the installed package (softdla/paths.py).
    "get_include": ("paths", "get_include"), "get_library_dir": ("paths", "get_library_dir"),
    "get_cmake_dir": ("paths", "get_cmake_dir"), "get_pkgconfig_dir": ("paths", "get_pkgconfig_dir"),
}
__all__ = ["formats", *_LAZY]


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'softdla' has no attribute {name!r}")
    module_name, attr = _LAZY[name]
    module = importlib.import_module(f".{module_name}", __name__)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
