"""ctypes wrapper of libsoftdla_engine_c.so (include/softdla/engine_c.h)."""
import ctypes
import os

import numpy as np

from . import formats

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
_lib = None


class EngineError(RuntimeError):
    pass


def lib():
    global _lib
    if _lib is None:
        build = os.environ.get("SOFTDLA_BUILD_DIR", os.path.join(ROOT, "build"))
        _lib = ctypes.CDLL(os.path.join(build, "libsoftdla_engine_c.so"))
        _lib.softdla_engine_load.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p),
                                             ctypes.c_char_p, ctypes.c_size_t]
        _lib.softdla_engine_free.argtypes = [ctypes.c_void_p]
        _lib.softdla_engine_io_size.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
        _lib.softdla_engine_io_size.restype = ctypes.c_uint64
        _lib.softdla_engine_run.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                            ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_size_t]
    return _lib


class Engine:
    def __init__(self, loadable: bytes):
        self.h = ctypes.c_void_p()
        err = ctypes.create_string_buffer(1024)
        if lib().softdla_engine_load(loadable, len(loadable), ctypes.byref(self.h), err, 1024) != 0:
            raise EngineError(err.value.decode())

    def __del__(self):
        if getattr(self, "h", None):
            lib().softdla_engine_free(self.h)

    def io_size(self, is_output, i):
        return lib().softdla_engine_io_size(self.h, int(is_output), i)

    def prepare(self, inputs, n_outputs):
        """Copies inputs (bytes in the bound formats) into buffers once; returns (run, outputs) where
        run() executes on them and outputs are the output ctypes buffers (for benchmarks)."""
        in_bufs = [ctypes.create_string_buffer(bytes(b), len(b)) for b in inputs]
        out_bufs = [ctypes.create_string_buffer(self.io_size(True, i)) for i in range(n_outputs)]
        ins = (ctypes.c_void_p * max(1, len(in_bufs)))(*[ctypes.cast(b, ctypes.c_void_p) for b in in_bufs])
        outs = (ctypes.c_void_p * max(1, n_outputs))(*[ctypes.cast(b, ctypes.c_void_p) for b in out_bufs])
        err = ctypes.create_string_buffer(1024)

        def run():
            if lib().softdla_engine_run(self.h, ins, outs, err, 1024) != 0:
                raise EngineError(err.value.decode())
            return in_bufs  # keeps the input buffers alive as long as run is

        return run, out_bufs

    def run_raw(self, inputs, n_outputs):
        """inputs: list of bytes in the bound formats. Returns output byte buffers."""
        run, out_bufs = self.prepare(inputs, n_outputs)
        run()
        return [b.raw for b in out_bufs]


def run_graph(g, *arrays):
    """Serializes graph g, runs it with NCHW arrays (already in each input's dtype), returns NCHW outputs."""
    eng = Engine(g.serialize())
    raw_in = []
    for (t, fmt), a in zip(g.inputs, arrays):
        T = g.tensors[t]
        a = np.asarray(a)
        assert a.dtype == T["dtype"] and list(a.shape) == T["shape"], (a.dtype, a.shape, T)
        raw_in.append(formats.pack(a, fmt, g.target))
    raw_out = eng.run_raw(raw_in, len(g.outputs))
    outs = []
    for (t, fmt), raw in zip(g.outputs, raw_out):
        T = g.tensors[t]
        outs.append(formats.unpack(raw, T["shape"], T["dtype"], fmt, g.target))
    return outs[0] if len(outs) == 1 else outs
