"""ctypes wrapper of libsoftdla_engine_c.so (include/softdla/engine_c.h)."""
import ctypes
import os

import numpy as np

from . import formats

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
_lib = None


class EngineError(RuntimeError):
    pass


class IoInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 256), ("n", ctypes.c_uint32), ("c", ctypes.c_uint32), ("h", ctypes.c_uint32),
                ("w", ctypes.c_uint32), ("dtype", ctypes.c_uint32), ("format", ctypes.c_uint32),
                ("target", ctypes.c_uint32), ("scale", ctypes.c_float), ("size", ctypes.c_uint64)]


NP_TYPES = {0: np.float32, 1: np.float16, 2: np.int8}


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
        _lib.softdla_engine_io_info.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32,
                                                 ctypes.POINTER(IoInfo)]
        _lib.softdla_engine_num_inputs.argtypes = [ctypes.c_void_p]
        _lib.softdla_engine_num_inputs.restype = ctypes.c_uint32
        _lib.softdla_engine_num_outputs.argtypes = [ctypes.c_void_p]
        _lib.softdla_engine_num_outputs.restype = ctypes.c_uint32
        _lib.softdla_gpu_available.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        _lib.softdla_engine_use_gpu.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        if hasattr(_lib, "softdla_engine_op_fused"):  # benchmarks also load builds older than it
            _lib.softdla_engine_op_fused.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
        _lib.softdla_engine_run.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                            ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_size_t]
    return _lib


def gpu_available():
    """(True, device description) when the CUDA backend can run, else (False, reason)."""
    why = ctypes.create_string_buffer(512)
    ok = lib().softdla_gpu_available(why, 512) == 1
    return ok, why.value.decode()


def default_backend():
    """SOFTDLA_TEST_BACKEND=cuda runs every engine-level test on the CUDA backend."""
    return os.environ.get("SOFTDLA_TEST_BACKEND", "cpu")


class Engine:
    def __init__(self, loadable: bytes, backend=None):
        self.h = ctypes.c_void_p()
        err = ctypes.create_string_buffer(1024)
        if lib().softdla_engine_load(loadable, len(loadable), ctypes.byref(self.h), err, 1024) != 0:
            raise EngineError(err.value.decode())
        self.blob = bytes(loadable)
        self.backend = backend or default_backend()
        if self.backend == "cuda" and lib().softdla_engine_use_gpu(self.h, err, 1024) != 0:
            raise EngineError(err.value.decode())

    def __del__(self):
        if getattr(self, "h", None):
            lib().softdla_engine_free(self.h)

    def io_info(self, is_output):
        count = (lib().softdla_engine_num_outputs if is_output else lib().softdla_engine_num_inputs)(self.h)
        infos = []
        for i in range(count):
            info = IoInfo()
            lib().softdla_engine_io_info(self.h, int(is_output), i, ctypes.byref(info))
            infos.append(info)
        return infos

    def run_float(self, *arrays):
        """Runs on float NCHW arrays (quantized / rounded to each input's type) and returns float outputs
        (INT8 outputs dequantized)."""
        from . import reference
        raw = []
        for info, a in zip(self.io_info(False), arrays):
            a = np.asarray(a, np.float32).reshape(info.n, info.c, info.h, info.w)
            if info.dtype == 2:
                a = reference.quantize(a, info.scale)
            else:
                a = a.astype(NP_TYPES[info.dtype])
            raw.append(formats.pack(a, info.format, "xavier" if info.target else "orin"))
        outs = []
        for info, r in zip(self.io_info(True), self.run_raw(raw, len(self.io_info(True)))):
            y = formats.unpack(r, (info.n, info.c, info.h, info.w), NP_TYPES[info.dtype], info.format,
                               "xavier" if info.target else "orin").astype(np.float32)
            outs.append(y * np.float32(info.scale) if info.dtype == 2 else y)
        return outs

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
        """inputs: list of bytes in the bound formats. Returns output byte buffers. On the CUDA backend
        the same inputs also run on the CPU backend and the two must agree (INT8 byte for byte)."""
        run, out_bufs = self.prepare(inputs, n_outputs)
        run()
        out = [b.raw for b in out_bufs]
        if self.backend == "cuda":
            cpu = Engine(self.blob, backend="cpu").run_raw(inputs, n_outputs)
            assert_backends_agree(cpu, out, [NP_TYPES[i.dtype] for i in self.io_info(True)[:n_outputs]])
        return out


def assert_backends_agree(cpu_out, gpu_out, dtypes):
    """The CUDA backend's outputs against the CPU backend's: INT8 byte for byte, FP16 within the stated
    tolerance (docs/NUMERICS.md), FP32 within float rounding."""
    for c, g, dt in zip(cpu_out, gpu_out, dtypes):
        if np.dtype(dt) == np.int8:
            assert c == g, f"INT8 output differs between CPU and CUDA backends in {sum(a != b for a, b in zip(c, g))} bytes"
        else:
            a = np.frombuffer(c, dt).astype(np.float64)
            b = np.frombuffer(g, dt).astype(np.float64)
            assert np.array_equal(np.isnan(a), np.isnan(b)), "NaN positions differ between backends"
            a, b = np.nan_to_num(a), np.nan_to_num(b)
            tol = 2e-3 if np.dtype(dt) == np.float16 else 1e-5
            assert np.linalg.norm(a - b) <= tol * max(np.linalg.norm(a), 1e-30) + 1e-6, "float outputs differ"


def run_graph(g, *arrays):
    """Serializes graph g, runs it with NCHW arrays (already in each input's dtype), returns NCHW outputs.
    With SOFTDLA_TEST_BACKEND=cuda it runs on both backends (Engine.run_raw checks that they agree) and
    returns the CUDA backend's outputs, which the caller then checks against its NumPy reference."""
    blob = g.serialize()
    eng = Engine(blob)
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
