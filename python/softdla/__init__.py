"""softdla: an open cuDLA runtime with a software DLA, and a DLA builder.

- softdla.cudla: drop-in for NVIDIA's cuda.bindings.cudla
- softdla.Device / Module: run loadables on NumPy arrays
- softdla.formats: pack/unpack helpers for every DLA I/O format
- softdla.build / check / inspect: ONNX -> DLA loadable
"""
from . import cudla, formats  # noqa: F401
from .builder import BuildError, build, check, inspect  # noqa: F401
from .runtime import Device, Module, TensorInfo, device_count  # noqa: F401

__version__ = "0.1.0"
