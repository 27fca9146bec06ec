"""softdla.cudla: a drop-in for NVIDIA's ``cuda.bindings.cudla`` (13.3-13.5) over any libcudla.so.1.

The library is softdla's by default; set SOFTDLA_CUDLA_LIBRARY to use another (e.g. NVIDIA's on a
Jetson). Names, signatures, classes, dtypes, enums and errors follow NVIDIA's module, with its known
defects fixed: fence arrays round-trip as lists, Task keeps the event wrappers assigned to it, standalone
mode is allowed, CudlaError accepts any status code. The 13.5 conveniences are accepted too (wrapper
objects wherever an address is taken, ``None`` as p_module, the new enum member names).

Memory safety (docs/PYTHON.md): an object that aliases Python memory keeps it alive *and* holds a
buffer export on it, so a ``bytearray`` cannot be resized (BufferError) and a NumPy array cannot be
resized in place while the wrapper lives; views a wrapper hands out (``stride``, pointer arrays, fence
lists) keep their memory alive after the field is reassigned; ``submit_task`` checks ``num_tasks``
against the tasks the object holds. Raw int addresses remain the caller's responsibility, as in C.
"""
import ctypes as _ctypes
import enum as _enum
import operator as _operator

import numpy as _np

from . import _cudla_ext as _ext

# --------------------------------------------------------------------------- enums
class Status(_enum.IntEnum):
    Success = 0
    ErrorInvalidParam = 1
    ErrorOutOfResources = 2
    ErrorCreationFailed = 3
    ErrorInvalidAddress = 4
    ErrorOs = 5
    ErrorCuda = 6
    ErrorUmd = 7
    ErrorInvalidDevice = 8
    ErrorInvalidAttribute = 9
    ErrorIncompatibleDlaSWVersion = 10
    ErrorMemoryRegistered = 11
    ErrorInvalidModule = 12
    ErrorUnsupportedOperation = 13
    ErrorNvSci = 14
    ErrorDriverNotFound = 15
    ErrorDlaErrInvalidInput = 0x40000001
    ErrorDlaErrInvalidPreAction = 0x40000002
    ErrorDlaErrNoMem = 0x40000003
    ErrorDlaErrProcessorBusy = 0x40000004
    ErrorDlaErrTaskStatusMismatch = 0x40000005
    ErrorDlaErrEngineTimeout = 0x40000006
    ErrorDlaErrDataMismatch = 0x40000007
    ErrorUnknown = 0x7FFFFFFF
    SUCCESS = 0  # alias (the documented spelling)


class Mode(_enum.IntEnum):
    CUDA_DLA = 0
    STANDALONE = 1


class ModuleAttributeType(_enum.IntEnum):
    NUM_INPUT_TENSORS = 0
    NUM_OUTPUT_TENSORS = 1
    INPUT_TENSOR_DESCRIPTORS = 2
    OUTPUT_TENSOR_DESCRIPTORS = 3
    NUM_OUTPUT_TASK_STATISTICS = 4
    OUTPUT_TASK_STATISTICS_DESCRIPTORS = 5


class FenceType(_enum.IntEnum):
    NVSCISYNC_FENCE = 1
    NVSCISYNC_FENCE_SOF = 2
    FENCE = 1  # 13.5 names
    FENCE_SOF = 2


class ModuleLoadFlags(_enum.IntEnum):
    MODULE_DEFAULT = 0
    MODULE_ENABLE_FAULT_DIAGNOSTICS = 1
    DEFAULT = 0  # 13.5 names
    ENABLE_FAULT_DIAGNOSTICS = 1


class SubmissionFlags(_enum.IntEnum):
    SUBMIT_NOOP = 1
    SUBMIT_SKIP_LOCK_ACQUIRE = 2
    SUBMIT_DIAGNOSTICS_TASK = 4
    NOOP = 1  # 13.5 names
    SKIP_LOCK_ACQUIRE = 2
    DIAGNOSTICS_TASK = 4


class AccessPermissionFlags(_enum.IntEnum):
    READ_WRITE_PERM = 0
    READ_ONLY_PERM = 1
    TASK_STATISTICS = 2


class DevAttributeType(_enum.IntEnum):
    UNIFIED_ADDRESSING = 0
    DEVICE_VERSION = 1


class NvSciSyncAttributes(_enum.IntEnum):
    NVSCISYNC_ATTR_WAIT = 1
    NVSCISYNC_ATTR_SIGNAL = 2


class ScratchMemoryConfig(_enum.IntEnum):
    """13.5 enum; NVIDIA's values are not published, these are softdla's."""
    DEFAULT = 0
    SHARED_STATIC = 1
    CONFIG_MAX = 2
    SCRATCH_MEMORY_DEFAULT = 0
    SCRATCH_MEMORY_SHARED_STATIC = 1
    MAX = 2


# --------------------------------------------------------------------------- errors
class CudlaError(Exception):
    """A non-success cuDLA status. ``status`` is the code as given (any int)."""

    def __init__(self, status, detail=None):
        self.status, self.detail = status, detail
        try:
            name = Status(status).name
        except (TypeError, ValueError):
            name = "UnknownStatus"
        try:
            code = f" ({int(status)})"
        except (TypeError, ValueError):
            code = f" ({status!r})"
        super().__init__(f"{name}{code}" + (f": {detail}" if detail else ""))

    def __reduce__(self):
        return (type(self), (self.status, self.detail))


def check_status(status):
    """Raises CudlaError(status) unless status is 0."""
    if status != 0:
        raise CudlaError(status)


def _checked(result):
    status, value = result
    check_status(status)
    return value


# --------------------------------------------------------------------------- dtypes (LP64 layouts)
external_memory_handle_desc_dtype = _np.dtype([("ext_buf_object", _np.intp), ("size_", "<u8")])
external_semaphore_handle_desc_dtype = _np.dtype([("ext_sync_object", _np.intp)])
module_tensor_descriptor_dtype = _np.dtype({
    "names": ["name", "size_", "n", "c", "h", "w", "data_format", "data_type", "data_category", "pixel_format",
              "pixel_mapping", "stride"],
    "formats": [("i1", (81,)), "<u8", "<u8", "<u8", "<u8", "<u8", "u1", "u1", "u1", "u1", "u1", ("<u4", (8,))],
    "offsets": [0, 88, 96, 104, 112, 120, 128, 129, 130, 131, 132, 136], "itemsize": 168})
fence_dtype = _np.dtype({"names": ["fence", "type"], "formats": [_np.intp, "<i4"], "offsets": [0, 8], "itemsize": 16})
dev_attribute_dtype = _np.dtype({"names": ["unified_addressing_supported", "device_version"], "formats": ["u1", "<u4"],
                                 "offsets": [0, 0], "itemsize": 4})
module_attribute_dtype = _np.dtype({
    "names": ["num_input_tensors", "num_output_tensors", "input_tensor_desc", "output_tensor_desc"],
    "formats": ["<u4", "<u4", _np.intp, _np.intp], "offsets": [0, 0, 0, 0], "itemsize": 8})
wait_events_dtype = _np.dtype({"names": ["pre_fences", "num_events"], "formats": [_np.intp, "<u4"],
                               "offsets": [0, 8], "itemsize": 16})
signal_events_dtype = _np.dtype({"names": ["dev_ptrs", "eof_fences", "num_events"], "formats": [_np.intp, _np.intp, "<u4"],
                                 "offsets": [0, 8, 16], "itemsize": 24})
task_dtype = _np.dtype({
    "names": ["module_handle", "output_tensor", "num_output_tensors", "num_input_tensors", "input_tensor",
              "wait_events", "signal_events"],
    "formats": [_np.intp, _np.intp, "<u4", "<u4", _np.intp, _np.intp, _np.intp],
    "offsets": [0, 8, 16, 20, 24, 32, 40], "itemsize": 48})


# --------------------------------------------------------------------------- struct wrappers
def _address_of(buffer):
    """Address of a 1-D byte buffer's first byte (read-only buffers included)."""
    return _np.frombuffer(buffer, _np.uint8).ctypes.data if len(buffer) else 0


def _pin(obj):
    """What a wrapper keeps to alias obj's memory: a memoryview export of it where it has the buffer
    protocol (which keeps it alive and stops a bytearray, mmap or NumPy array from being resized or
    closed underneath), else obj itself."""
    try:
        return memoryview(obj)
    except TypeError:
        return obj


def _unsigned(value):
    """cuDLA's integer arguments are all unsigned: a negative one is an OverflowError (as a Cython binding
    raises for it), never a value wrapped around or nanobind's list of signatures."""
    if value < 0:
        raise OverflowError(f"can't convert negative value {value} to an unsigned cuDLA argument")
    return value


def _index(value):
    """An integer argument: ints and IntEnums; anything else is a TypeError, as in NVIDIA's bindings."""
    return _unsigned(_operator.index(value))


def _as_address(value):
    """An int address, from an int, a wrapper object (13.5 convenience) or an object with __int__
    (e.g. a CUDA stream wrapper)."""
    if value is None:
        return 0
    if isinstance(value, _Struct):
        return value.ptr
    try:
        return _unsigned(_operator.index(value))
    except TypeError:
        if isinstance(value, (float, str, bytes)) or not hasattr(value, "__int__"):
            raise
        return _unsigned(int(value))


class _Struct(_ext.StructBase):
    """Zero-filled struct memory owned by the object unless created with from_buffer/from_data/from_ptr."""
    _dtype = None

    def __init__(self):
        super().__init__()
        self._allocate(self._dtype.itemsize)
        self._keep = {}

    # -- construction from existing memory
    @classmethod
    def _new(cls):
        obj = cls.__new__(cls)
        _ext.StructBase.__init__(obj)
        obj._keep = {}
        return obj

    @classmethod
    def from_buffer(cls, buffer):
        """Wraps a buffer of exactly sizeof(struct) bytes without copying."""
        view = memoryview(buffer)  # TypeError if no buffer protocol
        if view.itemsize != 1:
            raise ValueError("buffer items must be 1 byte")
        if view.nbytes != cls._dtype.itemsize:
            raise ValueError(f"buffer holds {view.nbytes} bytes; {cls.__name__} needs {cls._dtype.itemsize}")
        obj = cls._new()
        # Owner: the export itself, so the buffer stays alive and cannot be resized while obj lives.
        obj._borrow(_address_of(view.cast("B")), cls._dtype.itemsize, view, view.readonly)
        return obj

    @classmethod
    def from_data(cls, data):
        """Wraps a one-element NumPy array of this struct's dtype."""
        if not isinstance(data, _np.ndarray):
            raise TypeError("data must be a numpy.ndarray")
        if data.size != 1 or data.dtype != cls._dtype:
            raise ValueError(f"data must be a single element of dtype {cls._dtype}")
        obj = cls._new()
        obj._borrow(data.ctypes.data, cls._dtype.itemsize, _pin(data), not data.flags.writeable)
        return obj

    @classmethod
    def from_ptr(cls, ptr, readonly=False, owner=None):
        """Copies the struct at ptr (owner=None), or wraps it and keeps owner alive (and, when owner
        has the buffer protocol, unresizable)."""
        if ptr == 0:
            raise ValueError("ptr must not be null (0)")
        ptr = _as_address(ptr)
        obj = cls._new()
        if owner is None:
            obj._copy_from(int(ptr), cls._dtype.itemsize, bool(readonly))
        else:
            obj._borrow(int(ptr), cls._dtype.itemsize, _pin(owner), bool(readonly))
        return obj

    # -- protocol
    def __int__(self):
        return self.ptr

    def __eq__(self, other):
        if type(other) is not type(self):
            return False
        return bytes(memoryview(self)) == bytes(memoryview(other))

    __hash__ = None

    def __setattr__(self, name, value):
        # NVIDIA's structs are extension types without an instance dict: a misspelt field (t.modul_handle)
        # raises there instead of being stored beside the struct and silently ignored.
        if not name.startswith("_") and not hasattr(type(self), name):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        if key == 0 and isinstance(value, _np.ndarray):
            raw = value.view(_np.uint8).reshape(-1)
            if raw.size != self._dtype.itemsize:
                raise ValueError(f"array holds {raw.size} bytes; {type(self).__name__} needs {self._dtype.itemsize}")
            self._copy_from(raw.ctypes.data, raw.size, not value.flags.writeable)
        else:
            setattr(self, key, value)

    def _record(self):
        return _np.ndarray((), self._dtype, buffer=memoryview(self))

    def _writable(self):
        if self._readonly:
            raise ValueError(f"This {type(self).__name__} instance is read-only")

    def _set(self, field, value):
        self._writable()
        self._record()[field] = value


def _field(name, doc=""):
    def get(self):
        return int(self._record()[name])

    def set_(self, value):
        self._set(name, int(value))

    return property(get, set_, doc=doc)


def _kept_array(obj, key, address, count, what):
    """The array obj keeps under key when the struct's pointer is that array's (a view that keeps it
    alive after the field is reassigned), or None when the pointer is foreign memory."""
    array = obj._keep.get(key)
    if array is None or not address or array.ctypes.data != address:
        return None
    if count > len(array):
        raise ValueError(f"{type(obj).__name__} says {count} {what} but holds {len(array)}")
    return array[:count]


def _int64_array(obj, key, address, count, what):
    """A field's int64 array: a live view of the array obj keeps, or a copy of foreign memory."""
    if not address or not count:
        return _np.zeros(0, _np.int64)
    array = _kept_array(obj, key, address, count, what)
    if array is not None:
        return array
    return _np.frombuffer((_ctypes.c_int64 * count).from_address(address), _np.int64).copy()


class ExternalMemoryHandleDesc(_Struct):
    """cudlaExternalMemoryHandleDesc: ext_buf_object (NvSciBufObj address), size_."""
    _dtype = external_memory_handle_desc_dtype
    ext_buf_object = _field("ext_buf_object")
    size_ = _field("size_")


class ExternalSemaphoreHandleDesc(_Struct):
    """cudlaExternalSemaphoreHandleDesc: ext_sync_object (NvSciSyncObj address)."""
    _dtype = external_semaphore_handle_desc_dtype
    ext_sync_object = _field("ext_sync_object")


class ModuleTensorDescriptor(_Struct):
    """cudlaModuleTensorDescriptor: name, size_ (bytes), n/c/h/w, format fields, stride[8]."""
    _dtype = module_tensor_descriptor_dtype
    size_ = _field("size_")
    n = _field("n")
    c = _field("c")
    h = _field("h")
    w = _field("w")
    data_format = _field("data_format")
    data_type = _field("data_type")
    data_category = _field("data_category")
    pixel_format = _field("pixel_format")
    pixel_mapping = _field("pixel_mapping")

    @property
    def name(self):
        raw = bytes(memoryview(self)[:81])
        return raw.split(b"\0", 1)[0].decode(errors="replace")

    @name.setter
    def name(self, value):
        # bytes(int) would make that many zero bytes (a huge int: MemoryError): only text or bytes.
        if not isinstance(value, (str, bytes, bytearray, memoryview)):
            raise TypeError(f"name must be str or bytes, not {type(value).__name__}")
        data = value.encode() if isinstance(value, str) else bytes(value)
        if len(data) >= 81:
            raise ValueError("name must be shorter than 81 bytes")
        self._writable()
        self._record()["name"] = _np.frombuffer(data.ljust(81, b"\0"), _np.int8)

    @property
    def stride(self):
        """A live uint32 view of the 8 strides."""
        return self._record()["stride"]

    @stride.setter
    def stride(self, values):
        values = list(values)
        if len(values) != 8:
            raise ValueError("stride takes exactly 8 values")
        self._set("stride", values)


class Fence(_Struct):
    """CudlaFence: fence (NvSciSyncFence address), type (FenceType)."""
    _dtype = fence_dtype
    fence = _field("fence")
    type = _field("type")


class DevAttribute(_Struct):
    """cudlaDevAttribute union: unified_addressing_supported (uint8) / device_version (uint32)."""
    _dtype = dev_attribute_dtype
    unified_addressing_supported = _field("unified_addressing_supported")
    device_version = _field("device_version")


class ModuleAttribute(_Struct):
    """cudlaModuleAttribute union: counts, or descriptor array addresses (all at offset 0)."""
    _dtype = module_attribute_dtype
    num_input_tensors = _field("num_input_tensors")
    num_output_tensors = _field("num_output_tensors")
    input_tensor_desc = _field("input_tensor_desc")
    output_tensor_desc = _field("output_tensor_desc")


def _fence_list_property(ptr_field, count_field):
    def get(self):
        ptr, count = int(self._record()[ptr_field]), int(self._record()[count_field])
        if not ptr or not count:
            return []
        array = _kept_array(self, ptr_field, ptr, count, "fences")
        # Views of the array this object keeps (they keep it alive); copies of foreign memory.
        return [Fence.from_ptr(ptr + k * fence_dtype.itemsize, owner=array) for k in range(count)]

    def set_(self, fences):
        fences = [fences] if isinstance(fences, Fence) else list(fences)
        self._writable()
        array = _np.zeros(len(fences), fence_dtype)
        for k, f in enumerate(fences):
            array[k:k + 1].view(_np.uint8)[:] = _np.frombuffer(bytes(memoryview(f)), _np.uint8)
        self._keep[ptr_field] = array
        rec = self._record()
        rec[ptr_field] = array.ctypes.data if len(fences) else 0
        rec[count_field] = len(fences)

    return property(get, set_, doc="list of Fence (assigning a list copies it and sets the count)")


class WaitEvents(_Struct):
    """cudlaWaitEvents: pre_fences (list of Fence)."""
    _dtype = wait_events_dtype
    pre_fences = _fence_list_property("pre_fences", "num_events")


class SignalEvents(_Struct):
    """cudlaSignalEvents: dev_ptrs (imported semaphore pointers), eof_fences (list of Fence)."""
    _dtype = signal_events_dtype
    eof_fences = _fence_list_property("eof_fences", "num_events")

    @property
    def dev_ptrs(self):
        rec = self._record()
        return _int64_array(self, "dev_ptrs", int(rec["dev_ptrs"]), int(rec["num_events"]), "events")

    @dev_ptrs.setter
    def dev_ptrs(self, values):
        self._writable()
        array = _np.array([_as_address(v) for v in values], _np.int64)
        self._keep["dev_ptrs"] = array
        rec = self._record()
        rec["dev_ptrs"] = array.ctypes.data if len(array) else 0
        rec["num_events"] = len(array)


def _pointer_list_property(ptr_field, count_field):
    def get(self):
        rec = self._record()
        return _int64_array(self, ptr_field, int(rec[ptr_field]), int(rec[count_field]), "tensors")

    def set_(self, values):
        self._writable()
        array = _np.array([_as_address(v) for v in values], _np.int64)
        rec = self._record()
        rec[count_field] = len(array)
        if len(array):  # an empty list sets the count to 0 and leaves the pointer alone
            self._keep[ptr_field] = array
            rec[ptr_field] = array.ctypes.data

    return property(get, set_, doc="registered DLA pointers; assigning a sequence sets the count")


def _event_property(field):
    def get(self):
        return int(self._record()[field])

    def set_(self, value):
        self._writable()
        address = _as_address(value)
        self._keep[field] = _pin(value)  # the wrapper (exported: its memory outlives the task)
        self._record()[field] = address

    return property(get, set_, doc="address of the events struct (int, or a wrapper object which is retained)")


class Task(_Struct):
    """cudlaTask: module_handle, input_tensor/output_tensor (lists of registered pointers; the counts
    follow), wait_events/signal_events."""
    _dtype = task_dtype
    module_handle = _field("module_handle")
    input_tensor = _pointer_list_property("input_tensor", "num_input_tensors")
    output_tensor = _pointer_list_property("output_tensor", "num_output_tensors")
    wait_events = _event_property("wait_events")
    signal_events = _event_property("signal_events")


# --------------------------------------------------------------------------- functions
def get_version() -> int:
    """cudlaGetVersion: 1000000*major + 1000*minor + patch."""
    return _checked(_ext.get_version())


def device_get_count() -> int:
    """cudlaDeviceGetCount: the number of DLA cores."""
    return _checked(_ext.device_get_count())


def create_device(device: int, flags: int) -> int:
    """cudlaCreateDevice: a device handle (int). flags: Mode.CUDA_DLA or Mode.STANDALONE."""
    return _checked(_ext.create_device(_index(device), _index(flags)))


def destroy_device(dev_handle: int) -> None:
    """cudlaDestroyDevice."""
    check_status(_ext.destroy_device(_as_address(dev_handle)))


def mem_register(dev_handle: int, ptr: int, size: int, flags: int) -> int:
    """cudlaMemRegister: the DLA-side pointer (int) to use in tasks."""
    return _checked(_ext.mem_register(_as_address(dev_handle), _index(ptr), _index(size), _index(flags)))


def mem_unregister(dev_handle: int, dev_ptr: int) -> None:
    """cudlaMemUnregister: pass the pointer mem_register returned."""
    check_status(_ext.mem_unregister(_as_address(dev_handle), _index(dev_ptr)))


def module_load_from_memory(dev_handle: int, p_module, module_size: int, flags: int) -> int:
    """cudlaModuleLoadFromMemory. p_module: an int address, a buffer of module_size bytes (bytes,
    bytearray, NumPy uint8 array, ...), or None (fault diagnostics)."""
    if p_module is None or isinstance(p_module, int):
        return _checked(_ext.module_load_from_memory(_as_address(dev_handle), p_module or 0, _index(module_size), _index(flags)))
    try:
        view = memoryview(p_module)
    except TypeError:
        raise ValueError("buf must be either a Python int or a 1-D contiguous buffer of module_size bytes") from None
    if view.ndim != 1 or not view.contiguous or view.nbytes != module_size:
        raise ValueError("buf must be either a Python int or a 1-D contiguous buffer of module_size bytes")
    address = _address_of(view.cast("B"))
    return _checked(_ext.module_load_from_memory(_as_address(dev_handle), address, _index(module_size), _index(flags)))


_COUNT_FOR = {2: 0, 3: 1, 5: 4}


def module_get_attributes(h_module: int, attr_type: int):
    """cudlaModuleGetAttributes: an int for the counts (0, 1, 4), a list of read-only
    ModuleTensorDescriptor copies for the descriptor types (2, 3, 5)."""
    attr_type = _index(attr_type)
    handle = _as_address(h_module)
    attr = ModuleAttribute()
    if attr_type in (0, 1, 4):
        check_status(_ext.module_get_attributes(handle, attr_type, attr.ptr))
        return attr.num_input_tensors
    if attr_type not in _COUNT_FOR:
        raise ValueError(f"Unknown attribute type: {attr_type}")
    check_status(_ext.module_get_attributes(handle, _COUNT_FOR[attr_type], attr.ptr))
    count = attr.num_input_tensors
    if count == 0:
        return []
    array = _np.zeros(count, module_tensor_descriptor_dtype)
    attr.input_tensor_desc = array.ctypes.data
    check_status(_ext.module_get_attributes(handle, attr_type, attr.ptr))
    size = module_tensor_descriptor_dtype.itemsize
    return [ModuleTensorDescriptor.from_ptr(array.ctypes.data + k * size, readonly=True) for k in range(count)]


def module_unload(h_module: int, flags: int) -> None:
    """cudlaModuleUnload."""
    check_status(_ext.module_unload(_as_address(h_module), _index(flags)))


def _keepalive(obj, out, seen=None):
    """References to obj's memory and to everything it points to through fields it keeps (pointer
    arrays, fence arrays, event wrappers), with buffer exports on the structs: held during a call that
    releases the GIL, so another thread reassigning a field cannot free memory the call reads."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return out
    seen.add(id(obj))
    if isinstance(obj, _Struct):
        out.append(memoryview(obj))
        for value in obj._keep.values():
            _keepalive(value.obj if isinstance(value, memoryview) else value, out, seen)
    elif obj is not None:
        out.append(obj)
    return out


def _check_task(task):
    """The counts of a Task that points to arrays it keeps must not exceed those arrays."""
    rec = task._record()
    for field, count_field in (("input_tensor", "num_input_tensors"), ("output_tensor", "num_output_tensors")):
        _kept_array(task, field, int(rec[field]), int(rec[count_field]), count_field[4:].replace("_", " "))


def _tasks_argument(ptr_to_tasks, num_tasks):
    """(address, objects to keep alive) for submit_task, with num_tasks checked against the tasks the
    object holds: a Task holds 1, a task_dtype array or a sequence of Task its length. An int address
    is the caller's to get right, as in C."""
    if isinstance(ptr_to_tasks, Task):
        held, tasks, address = 1, [ptr_to_tasks], ptr_to_tasks.ptr
    elif isinstance(ptr_to_tasks, _Struct):
        raise TypeError(f"ptr_to_tasks must be a Task, a sequence of Task, a task_dtype array or an int address, "
                        f"not {type(ptr_to_tasks).__name__}")
    elif isinstance(ptr_to_tasks, _np.ndarray):
        if ptr_to_tasks.dtype != task_dtype or not ptr_to_tasks.flags.c_contiguous:
            raise ValueError(f"a task array must be C-contiguous with dtype task_dtype, not {ptr_to_tasks.dtype}")
        held, tasks, address = ptr_to_tasks.size, [ptr_to_tasks], ptr_to_tasks.ctypes.data if ptr_to_tasks.size else 0
    elif isinstance(ptr_to_tasks, (list, tuple)):
        if not all(isinstance(t, Task) for t in ptr_to_tasks):
            raise TypeError("a sequence passed as ptr_to_tasks must hold Task objects only")
        array = _np.zeros(len(ptr_to_tasks), task_dtype)
        for k, t in enumerate(ptr_to_tasks):
            array[k:k + 1].view(_np.uint8)[:] = _np.frombuffer(bytes(memoryview(t)), _np.uint8)
        held, tasks, address = len(ptr_to_tasks), [array, *ptr_to_tasks], array.ctypes.data if len(array) else 0
    else:
        return _as_address(ptr_to_tasks), []
    if num_tasks > held:
        raise ValueError(f"num_tasks is {num_tasks} but ptr_to_tasks holds {held} task(s)")
    keep = []
    for t in tasks:
        if isinstance(t, Task):
            _check_task(t)
        _keepalive(t, keep)
    return address, keep


def submit_task(dev_handle: int, ptr_to_tasks, num_tasks: int, stream, flags: int) -> None:
    """cudlaSubmitTask. ptr_to_tasks: a Task, a sequence of Task, a task_dtype ndarray, or the
    address of a cudlaTask array (int). num_tasks may not exceed the tasks the object holds (a Task:
    1), else ValueError. stream: a cudaStream_t as int (0: none)."""
    num_tasks = _index(num_tasks)
    address, keep = _tasks_argument(ptr_to_tasks, num_tasks)
    check_status(_ext.submit_task(_as_address(dev_handle), address, num_tasks, _as_address(stream), _index(flags)))
    del keep


def device_get_attribute(dev_handle: int, attrib: int) -> DevAttribute:
    """cudlaDeviceGetAttribute: a DevAttribute; read the member that matches attrib."""
    out = DevAttribute()
    check_status(_ext.device_get_attribute(_as_address(dev_handle), _index(attrib), out.ptr))
    return out


def get_last_error(dev_handle: int) -> int:
    """cudlaGetLastError: the raw status of the last task (an int; never raises)."""
    return _ext.get_last_error(_as_address(dev_handle))


def set_task_timeout_in_ms(dev_handle: int, timeout: int) -> None:
    """cudlaSetTaskTimeoutInMs: 1 ms .. 1000 s."""
    check_status(_ext.set_task_timeout_in_ms(_as_address(dev_handle), _index(timeout)))


def import_external_memory(dev_handle: int, desc, flags: int) -> int:
    """cudlaImportExternalMemory (standalone mode, NvSci)."""
    keep = _keepalive(desc, [])  # noqa: F841 (held until the GIL-free call returns)
    return _checked(_ext.import_external_memory(_as_address(dev_handle), _as_address(desc), _index(flags)))


def import_external_semaphore(dev_handle: int, desc, flags: int) -> int:
    """cudlaImportExternalSemaphore (standalone mode, NvSci)."""
    keep = _keepalive(desc, [])  # noqa: F841 (held until the GIL-free call returns)
    return _checked(_ext.import_external_semaphore(_as_address(dev_handle), _as_address(desc), _index(flags)))


def get_nv_sci_sync_attributes(attr_list: int, flags: int) -> None:
    """cudlaGetNvSciSyncAttributes (NvSci)."""
    check_status(_ext.get_nv_sci_sync_attributes(_index(attr_list), _index(flags)))


def library_path() -> str:
    """The libcudla.so.1 these functions call."""
    return _ext.library_path()
