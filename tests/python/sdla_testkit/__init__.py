"""Test-side tools for softdla: an independent loadable writer (FlatBuffers Python object API), NumPy
implementations of the I/O formats and of every op's numerics, and a ctypes wrapper of the engine."""
import os as _os
import sys as _sys

# The softdla package of this source tree (softdla.formats), also for the scripts in bench/.
_python = _os.path.join(_os.path.dirname(__file__), "..", "..", "..", "python")
if _os.path.abspath(_python) not in [_os.path.abspath(p) for p in _sys.path]:
    _sys.path.insert(0, _python)
