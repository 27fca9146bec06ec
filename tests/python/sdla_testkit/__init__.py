"""Test-side tools for softdla: an independent loadable writer (FlatBuffers Python object API), NumPy
implementations of the I/O formats and of every op's numerics, and a ctypes wrapper of the engine."""
