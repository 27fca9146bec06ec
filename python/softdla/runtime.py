"""The high-level API: open a DLA device, load a loadable, run it on NumPy or GPU arrays.

Written only against the cuDLA C API (through softdla.cudla), so it also runs over NVIDIA's
libcudla.so.1 on a Jetson (SOFTDLA_CUDLA_LIBRARY).

    with softdla.Device(0) as dev:
        model = dev.load("model.loadable")
        outputs = model.run({"images": batch})   # NCHW float arrays in, float arrays out

Memory: without a GPU, NumPy arrays in the stored form of `linear` tensors are registered and used in
place, and other data is packed once into buffers registered for the run. On a GPU machine, where hybrid
mode takes CUDA device memory (softdla's CUDA backend, a Jetson), NumPy data goes through device staging
buffers registered at load. GPU arrays (PyTorch, CuPy, anything with __cuda_array_interface__ or DLPack)
are registered and used in place. _tensor_io.py has the per-tensor rules; docs/PYTHON.md lists which
calls copy.

Threads: Module.run may be called from any number of threads on one module; inputs are checked and
packed, and outputs unpacked, outside a per-module lock that covers only the registrations of the run,
the staging copies, the submission and its status. (A DLA core runs one task at a time, so the lock
costs no parallelism.)

Lifetime: close() (or a `with` block) releases handles at once; objects dropped without it are
released when collected (weakref.finalize): registered memory is unregistered and the module
unloaded before its device is destroyed, in any collection order and at interpreter exit.
"""
import collections.abc
import os
import threading
import weakref

import numpy as np

from . import _cuda, cudla, formats
from . import _tensor_io as io
from ._gpu_arrays import empty_like_framework, gpu_array


class TensorInfo:
    """One I/O tensor: name, NCHW shape, storage dtype, memory format, INT8 scale, byte size."""

    def __init__(self, desc, scale, name=None):
        self.name = name or desc.name  # the whole name: the descriptor keeps 80 bytes of it
        self.shape = (int(desc.n), int(desc.c), int(desc.h), int(desc.w))
        self.dtype, self.format, self.target = formats.from_descriptor(desc)
        self.scale = scale
        self.size = int(desc.size_)
        self.descriptor = desc

    @property
    def format_name(self):
        return {v: k for k, v in formats.FORMAT_NAMES.items()}[self.format]

    def describe(self):
        """'name' (dtype:format, shape (N, C, H, W)): how errors name the tensor."""
        return f"'{self.name}' ({self.dtype.name}:{self.format_name}, shape {self.shape})"

    def empty(self):
        """A zeroed NumPy array of this tensor's NCHW shape and stored dtype, aligned for the DLA: for a
        `linear` tensor, Module.run reads it in place as an input, and writes it in place as out=
        (with raw=True, or for float32 tensors)."""
        a = io.aligned_empty(int(np.prod(self.shape)) * self.dtype.itemsize, self.dtype, self.shape)
        a[...] = 0
        return a

    def __repr__(self):
        s = f", scale={self.scale:g}" if self.dtype == np.int8 and self.scale is not None else ""
        return f"TensorInfo({self.name!r}, shape={self.shape}, {self.dtype.name}:{self.format_name}{s})"


class _DeviceState:
    """What releasing a device needs: its handle and the states of its live modules (closed first)."""

    def __init__(self, handle):
        self.handle = handle
        self.modules = set()
        self.lock = threading.Lock()  # guards modules; never held while a module lock is taken


class _ModuleState:
    """What running and releasing a module needs (no reference to the Module object, so the module's
    finalizer can hold it): handle, the device staging buffers and their registrations (only where the
    library takes no host memory), a lock."""

    def __init__(self, device_state):
        self.device = device_state
        self.handle = 0
        self.registered = []          # DLA addresses registered for the module's lifetime
        self.host_memory = True       # NumPy memory is registered as it is (else: device staging)
        self.in_stage, self.out_stage = [], []  # _cuda.DeviceMemory per tensor, when not host_memory
        self.in_dla, self.out_dla = [], []      # their DLA addresses
        # Host memory: a buffer per tensor registered once, and the task that uses them, for runs of
        # NumPy arrays (Module._run_staged: no registration, no task building per run).
        self.host_in, self.host_out = [], []
        self.task, self.task_array = None, None
        # Their C++ converters (_cudla_ext.StagedTensor), and per raw= whether every output of such a run
        # is unpacked anyway (else a `linear` output is returned as the buffer the task wrote).
        self.staged_in, self.staged_out, self.unpacks_outputs = [], [], (False, False)
        self.lock = threading.Lock()  # one submission (and its status) at a time; close waits for it


def _release_module(state):
    """Unregisters the buffers and unloads the module (idempotent); the first error is raised after
    everything that can be released is."""
    error = None
    with state.lock:
        dev = state.device.handle
        while state.registered:
            ptr = state.registered.pop()
            try:
                if dev:
                    cudla.mem_unregister(dev, ptr)
            except cudla.CudlaError as e:
                error = error or e
        if state.handle:
            handle, state.handle = state.handle, 0
            try:
                cudla.module_unload(handle, 0)
            except cudla.CudlaError as e:
                error = error or e
        state.in_stage, state.out_stage, state.in_dla, state.out_dla = [], [], [], []  # after unregistering
        state.host_in, state.host_out, state.task, state.task_array = [], [], None, None
        state.staged_in, state.staged_out = [], []
    with state.device.lock:
        state.device.modules.discard(state)
    if error is not None:
        raise error


def _release_device(state):
    """Releases the device's modules, then destroys it (idempotent)."""
    with state.lock:
        modules = list(state.modules)
    error = None
    for m in modules:
        try:
            _release_module(m)
        except cudla.CudlaError as e:
            error = error or e
    with state.lock:
        handle, state.handle = state.handle, 0
    if handle:
        cudla.destroy_device(handle)
    if error is not None:
        raise error


def _stream_handle(stream):
    """A CUDA stream as the int cudlaSubmitTask takes: None or 0 (the legacy default stream), an int, a
    torch.cuda.Stream (.cuda_stream) or a cupy.cuda.Stream (.ptr)."""
    if stream is None:
        return 0
    for attr in ("cuda_stream", "ptr"):
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    if isinstance(stream, int):
        return stream
    raise TypeError(f"stream must be None, an int cudaStream_t, a torch.cuda.Stream or a cupy.cuda.Stream, "
                    f"not {type(stream).__name__}")


def _staged_tensors(inputs, in_buffers, outputs, out_buffers):
    """The C++ converters between NumPy arrays and each tensor's staging buffer (formats.layout's strides),
    as ([per input], [per output]); ([], []) where one cannot convert exactly as the NumPy path does: an int8
    scale that is not a positive number (the NumPy path multiplies by it as it is), or a layout the
    converter refuses. run() then takes the NumPy path for every call."""
    def make(t, buf):
        if t.dtype == np.int8 and t.scale is not None and not t.scale > 0:
            raise ValueError("int8 scale is not positive")
        size, s0, line, surf, batch, cpg = formats.layout(t.shape, t.dtype, t.format, t.target)
        return cudla._ext.StagedTensor(*t.shape, formats.CUDLA_TYPE[t.dtype], s0, line, surf, batch, cpg, size,
                                       float(t.scale or 0.0), buf.ctypes.data, t.format == formats.LINEAR)
    try:
        return ([make(t, b) for t, b in zip(inputs, in_buffers)], [make(t, b) for t, b in zip(outputs, out_buffers)])
    except ValueError:
        return [], []


class _Run:
    """One call of Module.run: what each input and output uses as memory, and what to hand back."""

    def __init__(self, module, raw, stream):
        self.module, self.raw, self.stream = module, raw, stream
        self.inputs = []    # per input: a NumPy array or GpuArray the task reads (registered for the run),
        #                     or, where the library takes no host memory, packed bytes for the staging buffer
        self.outputs = []   # per output: (memory the task writes or None for staging, host buffer or None, out)
        self.borrowed = []  # GpuArrays to release when the run ends

    def plan_inputs(self, values):
        st = self.module._state
        for t, value in zip(self.module.inputs, values):
            g = gpu_array(value, self.stream)
            if g is not None:
                self.borrowed.append(g)
                why = io.gpu_form_error(t, g, "input")
                if why:
                    raise ValueError(why)
                self.inputs.append(g)
                continue
            x = io.input_array(t, value)
            self.inputs.append(x if st.host_memory and io.reads_in_place(t, x) else io.packed_input(t, x))

    def plan_outputs(self, outs):
        st = self.module._state
        for g_or_value in outs:
            if g_or_value is not None:
                g = gpu_array(g_or_value, self.stream)
                if g is not None:
                    self.borrowed.append(g)
        example = self.borrowed[0].obj if self.borrowed else None
        for t, out in zip(self.module.outputs, outs):
            g = next((b for b in self.borrowed if out is not None and b.obj is out), None)
            if g is not None:
                why = io.gpu_form_error(t, g, "output")
                if why:
                    raise ValueError(why)
                self.outputs.append((g, None, out))
            elif out is not None:
                io.check_host_out(t, out, self.raw)
                if st.host_memory and io.writes_in_place(t, out, self.raw):
                    self.outputs.append((out, None, out))
                else:
                    buf = io.output_buffer(t, self.raw)
                    self.outputs.append((buf if st.host_memory else None, buf, out))
            elif example is not None:  # a GPU run: outputs on the GPU too, in the stored form
                shape, dtype = io.gpu_form(t)
                new = empty_like_framework(example, shape, dtype)
                g = gpu_array(new, self.stream)
                self.borrowed.append(g)
                self.outputs.append((g, None, new))
            else:
                buf = io.output_buffer(t, self.raw)
                self.outputs.append((buf if st.host_memory else None, buf, None))

    def check_overlaps(self):
        """Outputs the task writes must not overlap any other memory of the task (the caller's arrays)."""
        spans = [(f"input {t.describe()}", *io.memory_of(m)) for t, m in zip(self.module.inputs, self.inputs)]
        spans += [(f"output {t.describe()}", *io.memory_of(m)) for t, (m, _, _) in zip(self.module.outputs, self.outputs)
                  if m is not None]
        for i, (what, ptr, n) in enumerate(spans):
            for other, ptr2, n2 in spans[i + 1:]:
                if ptr < ptr2 + n2 and ptr2 < ptr + n and other.startswith("output"):
                    raise ValueError(f"{other} overlaps the memory of {what}; give the task separate arrays")

    def release(self):
        for g in self.borrowed:
            g.release()


class Module:
    """A loaded loadable. Use Device.load to create one.

    run() is thread-safe (a per-module lock around the registrations and the submission);
    the handles are released by close(), a `with` block, or when the object is collected."""

    def __init__(self, device, data):
        if not device.handle:
            raise ValueError("this Device is closed")
        self.device = device  # the device outlives its modules
        data = bytes(data)
        st = self._state = _ModuleState(device._state)
        self._finalizer = weakref.finalize(self, _release_module, st)
        try:
            st.handle = cudla.module_load_from_memory(device.handle, data, len(data), 0)
            with device._state.lock:
                device._state.modules.add(st)
            self.inputs = self._tensors(False)
            self.outputs = self._tensors(True)
            # Hybrid mode on a GPU machine takes CUDA device memory (softdla's CUDA backend, a Jetson; the CPU
            # backend takes both), so NumPy data goes through device buffers there.
            st.host_memory = not _cuda.available()
            if not st.host_memory:
                st.in_stage = [_cuda.DeviceMemory(t.size) for t in self.inputs]
                st.out_stage = [_cuda.DeviceMemory(t.size) for t in self.outputs]
                st.in_dla = [self._register(m.ptr, m.nbytes) for m in st.in_stage]
                st.out_dla = [self._register(m.ptr, m.nbytes) for m in st.out_stage]
            else:
                st.host_in = [io.aligned_empty(t.size) for t in self.inputs]
                st.host_out = [io.aligned_empty(t.size) for t in self.outputs]
                task = cudla.Task()
                task.module_handle = st.handle
                task.input_tensor = [self._register(b.ctypes.data, b.nbytes) for b in st.host_in]
                task.output_tensor = [self._register(b.ctypes.data, b.nbytes) for b in st.host_out]
                st.task = task  # owns the address arrays the cudlaTask below points into
                st.task_array = np.frombuffer(bytes(memoryview(task)), cudla.task_dtype).copy()
                st.staged_in, st.staged_out = _staged_tensors(self.inputs, st.host_in, self.outputs, st.host_out)
                st.unpacks_outputs = tuple(bool(st.staged_in or st.staged_out) and
                                           not any(t.format == formats.LINEAR and io.result_dtype(t, raw) == t.dtype
                                                   for t in self.outputs) for raw in (False, True))
        except BaseException:
            self.close()
            raise

    @property
    def handle(self):
        """The cudlaModule handle (int); 0 once closed."""
        return self._state.handle

    def _tensors(self, outputs):
        kind = (cudla.ModuleAttributeType.OUTPUT_TENSOR_DESCRIPTORS if outputs
                else cudla.ModuleAttributeType.INPUT_TENSOR_DESCRIPTORS)
        infos = []
        for i, desc in enumerate(cudla.module_get_attributes(self.handle, kind)):
            status, scale = cudla._ext.tensor_scale(self.handle, int(outputs), i)
            name_status, name = cudla._ext.tensor_name(self.handle, int(outputs), i)
            infos.append(TensorInfo(desc, scale if status == 0 else None, name if name_status == 0 else None))
        return infos

    def _register(self, ptr, nbytes):
        dla = cudla.mem_register(self.device.handle, ptr, nbytes, 0)
        self._state.registered.append(dla)
        return dla

    def _expected(self, tensors):
        return ", ".join(t.describe() for t in tensors)

    def _feeds(self, feeds):
        """[value per input, in input order], checking names and count."""
        names = [t.name for t in self.inputs]
        if isinstance(feeds, collections.abc.Mapping):  # any mapping (MappingProxyType, ChainMap), not only dict
            unknown = [k for k in feeds if k not in names]
            missing = [n for n in names if n not in feeds]
            if unknown or missing:
                said = (f"unknown input name(s) {unknown}" if unknown else "") + \
                       ("; " if unknown and missing else "") + (f"no value for input(s) {missing}" if missing else "")
                raise ValueError(f"{said}; the module's inputs: {self._expected(self.inputs)}")
            return [feeds[n] for n in names]
        if isinstance(feeds, (np.ndarray, str, bytes)) or not hasattr(feeds, "__iter__") or \
                hasattr(feeds, "__cuda_array_interface__") or hasattr(feeds, "__dlpack__"):
            raise TypeError(f"feeds must be a dict {{name: array}} or a sequence of arrays in input order, not "
                            f"{type(feeds).__name__}; the module's inputs: {self._expected(self.inputs)}")
        values = list(feeds)
        if len(values) != len(names):
            raise ValueError(f"{len(values)} array(s) given; the module has {len(names)} input(s): "
                             f"{self._expected(self.inputs)}")
        return values

    def _outs(self, out):
        """[out= array or None per output], checking names."""
        if out is None:
            return [None] * len(self.outputs)
        if not isinstance(out, collections.abc.Mapping):
            raise TypeError(f"out must be a dict {{output name: array}}, not {type(out).__name__}")
        names = [t.name for t in self.outputs]
        unknown = [k for k in out if k not in names]
        if unknown:
            raise ValueError(f"out= names unknown output(s) {unknown}; the module's outputs: "
                             f"{self._expected(self.outputs)}")
        return [out.get(n) for n in names]

    def run(self, feeds, raw=False, out=None, stream=None):
        """Runs once and returns {output name: array} when the outputs are written.

        feeds: {name: array} or a sequence in input order, with exactly the module's inputs.
        NumPy (or array-like) inputs have the tensor's NCHW shape (or the ONNX shape of rank < 4 that
        maps to it); real dtypes only (bool, complex, object and strings raise TypeError). Float and
        integer arrays are values: quantized with the tensor's scale for INT8 inputs (round half away from
        zero; NaN/inf raise ValueError; finite values beyond the int8 range saturate), converted for
        FP16/FP32 inputs (a finite value that overflows the type raises ValueError; NaN/inf pass through).
        int8 arrays for INT8 inputs are taken as codes. Outputs are float32 NumPy arrays (INT8 outputs
        dequantized), or the stored values with raw=True.

        GPU arrays (anything with __cuda_array_interface__ or DLPack on a CUDA device: PyTorch, CuPy, ...)
        are used in place, never converted: a `linear` tensor takes its NCHW array in the stored dtype,
        other formats the TensorInfo.size bytes of their layout. When any input is a GPU array, the
        outputs are GPU arrays in that stored form too (PyTorch for PyTorch inputs, CuPy for CuPy,
        otherwise softdla DeviceArray), and `raw` has no effect on them.

        out: {output name: array} to write instead of allocating: a GPU array in the stored form, or a
        writable C-contiguous NumPy array of the output's shape and returned dtype (float32; the stored
        dtype with raw=True). Those objects are returned. They must not overlap the inputs.
        stream: the CUDA stream to order the task on (an int, torch.cuda.Stream or cupy.cuda.Stream;
        default the legacy default stream); run() waits for it before returning.

        Errors name the tensor, its dtype, format and shape. Thread-safe: calls on one module are
        serialized around the submission only. docs/PYTHON.md says which calls copy."""
        stream = _stream_handle(stream)
        if stream and not _cuda.available():  # the library's reason, in the exception a notebook shows
            raise ValueError(f"stream={stream}: {_cuda.why_unavailable()}, so no task can be ordered on a CUDA "
                             "stream; leave stream out to run synchronously")
        values, outs = self._feeds(feeds), self._outs(out)
        if self._state.task is not None and not stream and out is None and \
                all(type(v) is np.ndarray for v in values):
            results = self._run_converted(values, bool(raw))
            if results is not None:
                return results
            # Data that is converted or packed anyway goes through the buffers made at load; an input
            # the task could read in place, or an output it could write as returned, keeps its zero copy.
            xs = [io.input_array(t, v) for t, v in zip(self.inputs, values)]
            if not any(io.reads_in_place(t, x) for t, x in zip(self.inputs, xs)) and \
                    not any(t.format == formats.LINEAR and io.result_dtype(t, raw) == t.dtype for t in self.outputs):
                return self._run_staged(xs, raw)
        r = _Run(self, raw, stream)
        try:
            r.plan_inputs(values)
            r.plan_outputs(outs)
            r.check_overlaps()
            self._submit(r)
            results = {}
            for t, (_, buf, given) in zip(self.outputs, r.outputs):
                results[t.name] = given if buf is None else io.host_result(t, buf, raw, given)
            return results
        finally:
            r.release()

    def _run_converted(self, values, raw):
        """run() for NumPy inputs on a CPU machine whose conversions the C++ half does in one pass each
        (float32 values or stored-type arrays in, every output unpacked): None when it does not apply,
        and run() goes the NumPy way (which also raises for NaNs, overflows and wrong shapes)."""
        st = self._state
        if not st.unpacks_outputs[raw]:
            return None
        results = [np.empty(t.shape, io.result_dtype(t, raw)) for t in self.outputs]
        with st.lock:
            if not st.handle or not st.device.handle:
                raise ValueError("this Module is closed")
            for staged, x in zip(st.staged_in, values):
                if not staged.put(x):
                    return None
            dev = st.device.handle
            cudla.check_status(cudla._ext.submit_task(dev, st.task_array.ctypes.data, 1, 0, 0))
            status = cudla.get_last_error(dev)
            if status != 0:
                raise cudla.CudlaError(status)
            for staged, r in zip(st.staged_out, results):
                if not staged.take(r, raw):
                    raise AssertionError("softdla: an output array made for StagedTensor.take was refused")
        return {t.name: r for t, r in zip(self.outputs, results)}

    def _run_staged(self, xs, raw):
        """run() for NumPy inputs (xs: from io.input_array) that need packing and outputs that need
        unpacking, where the library takes host memory (a CPU machine): through the buffers and the task
        made at load, so a run registers nothing."""
        st = self._state
        with st.lock:
            if not st.handle or not st.device.handle:
                raise ValueError("this Module is closed")
            for t, x, buf in zip(self.inputs, xs, st.host_in):
                formats.pack(x, t.format, t.target, out=buf)
            dev = st.device.handle
            cudla.check_status(cudla._ext.submit_task(dev, st.task_array.ctypes.data, 1, 0, 0))
            status = cudla.get_last_error(dev)
            if status != 0:
                raise cudla.CudlaError(status)
            return {t.name: io.host_result(t, buf, raw) for t, buf in zip(self.outputs, st.host_out)}

    def _submit(self, r):
        """Registers the run's memory, fills the staging buffers, submits, waits for the stream, reads the
        status and the staged outputs, and unregisters: all under the module's lock."""
        st = self._state
        # On a GPU machine submissions are stream-ordered (device memory): they return before the task runs.
        ordered = _cuda.available()
        with st.lock:
            if not st.handle or not st.device.handle:
                raise ValueError("this Module is closed")
            dev = st.device.handle

            def staged(m):  # NumPy data of a GPU machine: copied through the module's device buffers
                return not st.host_memory and isinstance(m, np.ndarray)
            sizes = {}  # address -> bytes: memory registered for this run, each address once
            for m in (*r.inputs, *(m for m, _, _ in r.outputs)):
                if m is not None and not staged(m):
                    ptr, n = io.memory_of(m)
                    sizes[ptr] = max(n, sizes.get(ptr, 0))
            registered = {}  # address -> DLA address
            try:
                for ptr, n in sizes.items():
                    registered[ptr] = cudla.mem_register(dev, ptr, n, 0)

                def address(m, staging):
                    return staging if m is None or staged(m) else registered[io.memory_of(m)[0]]
                task = cudla.Task()
                task.module_handle = st.handle
                task.input_tensor = [address(m, st.in_dla[i] if st.in_dla else 0) for i, m in enumerate(r.inputs)]
                task.output_tensor = [address(m, st.out_dla[i] if st.out_dla else 0) for i, (m, _, _) in enumerate(r.outputs)]
                for i, m in enumerate(r.inputs):
                    if staged(m):
                        _cuda.copy_to_device(st.in_stage[i].ptr, m, r.stream)
                for g in r.borrowed:  # work their producers left on other streams (CUDA array interface v3)
                    if g.stream not in (None, r.stream):
                        _cuda.synchronize(g.stream)
                cudla.submit_task(dev, task, 1, r.stream, 0)
                if ordered:
                    _cuda.synchronize(r.stream)
                status = cudla.get_last_error(dev)
                if status == 0:
                    for i, (m, buf, _) in enumerate(r.outputs):
                        if m is None:
                            _cuda.copy_to_host(buf, st.out_stage[i].ptr)
            finally:
                for dla in registered.values():
                    cudla.mem_unregister(dev, dla)
        if status != 0:
            raise cudla.CudlaError(status)

    def close(self):
        """Unregisters the buffers and unloads the module (idempotent); waits for a run in progress."""
        if self._finalizer.detach() is not None:
            _release_module(self._state)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Device:
    """A DLA device handle (hybrid mode). Closing it closes its modules first; a Device or Module
    dropped without close() is released when collected."""

    def __init__(self, index=0, mode=cudla.Mode.CUDA_DLA):
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or index < 0:
            raise ValueError(f"Device takes a DLA core index (0, 1, ...), not {index!r}")
        try:
            handle = cudla.create_device(index, mode)
        except cudla.CudlaError as e:  # the reason the library logs, in the exception a notebook shows
            if e.status == cudla.Status.ErrorOutOfResources:
                raise cudla.CudlaError(e.status, f"core {index} has 16 device handles open already (cuDLA's "
                                                 "limit a core): close a Device, or use the other core") from None
            raise
        self._state = _DeviceState(handle)
        self._finalizer = weakref.finalize(self, _release_device, self._state)

    @property
    def handle(self):
        """The cudlaDevHandle (int); 0 once closed."""
        return self._state.handle

    def load(self, loadable):
        """A Module from loadable bytes or a file path. One module per handle, as on the DLA: open
        another Device for another model."""
        if isinstance(loadable, (str, os.PathLike)):
            with open(loadable, "rb") as f:
                loadable = f.read()
        if isinstance(loadable, (int, float)) or loadable is None:  # bytes(5) would be five zero bytes
            raise TypeError(f"load takes the loadable's bytes (bytes, bytearray, a buffer) or a path, not "
                            f"{type(loadable).__name__}")
        with self._state.lock:
            holds = bool(self._state.modules)
        if holds:  # the status cudlaModuleLoadFromMemory returns, with its reason
            raise cudla.CudlaError(cudla.Status.ErrorUnsupportedOperation,
                                   "this Device already holds a module: cuDLA loads one loadable per device handle; "
                                   "open another Device for another model (16 a core)")
        return Module(self, loadable)

    @property
    def version(self):
        return cudla.device_get_attribute(self.handle, cudla.DevAttributeType.DEVICE_VERSION).device_version

    def close(self):
        """Closes the device's modules (unregister, unload), then destroys it (idempotent)."""
        if self._finalizer.detach() is not None:
            _release_device(self._state)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def device_count():
    return cudla.device_get_count()
