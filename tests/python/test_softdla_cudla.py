"""softdla.cudla against NVIDIA's own test suites for cuda.bindings.cudla (cuda-python's tests): every
case of the merged suite (A), the expectations of the review suite (B), and a full inference."""
import gc
import os
import pickle
import subprocess
import sys
import sys as _sys

import numpy as np
import pytest

cudla = pytest.importorskip("softdla.cudla")

from sdla_testkit import formats as F  # noqa: E402
from sdla_testkit.engine import ROOT, Engine  # noqa: E402


# ------------------------------------------------------------------ A. TestEnums
def test_status_values():
    expected = {"Success": 0, "ErrorInvalidParam": 1, "ErrorOutOfResources": 2, "ErrorCreationFailed": 3,
                "ErrorInvalidAddress": 4, "ErrorOs": 5, "ErrorCuda": 6, "ErrorUmd": 7, "ErrorInvalidDevice": 8,
                "ErrorInvalidAttribute": 9, "ErrorIncompatibleDlaSWVersion": 10, "ErrorMemoryRegistered": 11,
                "ErrorInvalidModule": 12, "ErrorUnsupportedOperation": 13, "ErrorNvSci": 14,
                "ErrorDlaErrInvalidInput": 0x40000001, "ErrorDlaErrInvalidPreAction": 0x40000002,
                "ErrorDlaErrNoMem": 0x40000003, "ErrorDlaErrProcessorBusy": 0x40000004,
                "ErrorDlaErrTaskStatusMismatch": 0x40000005, "ErrorDlaErrEngineTimeout": 0x40000006,
                "ErrorDlaErrDataMismatch": 0x40000007, "ErrorUnknown": 0x7FFFFFFF}
    for name, value in expected.items():
        assert getattr(cudla.Status, name) == value
    assert cudla.Status.ErrorDriverNotFound == 15


def test_status_member_count():
    assert len(cudla.Status) == 24


def test_mode_values():
    assert cudla.Mode.CUDA_DLA == 0 and cudla.Mode.STANDALONE == 1


def test_module_attribute_type_values():
    t = cudla.ModuleAttributeType
    assert [t.NUM_INPUT_TENSORS, t.NUM_OUTPUT_TENSORS, t.INPUT_TENSOR_DESCRIPTORS, t.OUTPUT_TENSOR_DESCRIPTORS,
            t.NUM_OUTPUT_TASK_STATISTICS, t.OUTPUT_TASK_STATISTICS_DESCRIPTORS] == [0, 1, 2, 3, 4, 5]


def test_fence_type_values():
    assert cudla.FenceType.NVSCISYNC_FENCE == 1 and cudla.FenceType.NVSCISYNC_FENCE_SOF == 2
    assert cudla.FenceType.FENCE is cudla.FenceType.NVSCISYNC_FENCE  # 13.5 alias


def test_module_load_flags():
    assert cudla.ModuleLoadFlags.MODULE_DEFAULT == 0 and cudla.ModuleLoadFlags.MODULE_ENABLE_FAULT_DIAGNOSTICS == 1
    assert cudla.ModuleLoadFlags.DEFAULT == 0 and cudla.ModuleLoadFlags.ENABLE_FAULT_DIAGNOSTICS == 1


def test_submission_flags():
    f = cudla.SubmissionFlags
    assert (f.SUBMIT_NOOP, f.SUBMIT_SKIP_LOCK_ACQUIRE, f.SUBMIT_DIAGNOSTICS_TASK) == (1, 2, 4)
    assert (f.NOOP, f.SKIP_LOCK_ACQUIRE, f.DIAGNOSTICS_TASK) == (1, 2, 4)


def test_access_permission_flags():
    f = cudla.AccessPermissionFlags
    assert (f.READ_WRITE_PERM, f.READ_ONLY_PERM, f.TASK_STATISTICS) == (0, 1, 2)


def test_dev_attribute_type():
    assert cudla.DevAttributeType.UNIFIED_ADDRESSING == 0 and cudla.DevAttributeType.DEVICE_VERSION == 1


# ------------------------------------------------------------------ A. TestPodTypes
def test_external_memory_handle_desc():
    d = cudla.ExternalMemoryHandleDesc()
    d.size_ = 4096
    d.ext_buf_object = 0xABCD
    assert d.size_ == 4096 and d.ext_buf_object == 0xABCD


def test_external_semaphore_handle_desc():
    d = cudla.ExternalSemaphoreHandleDesc()
    d.ext_sync_object = 0x1234
    assert d.ext_sync_object == 0x1234


def test_module_tensor_descriptor_fields():
    d = cudla.ModuleTensorDescriptor()
    for f in ("size_", "n", "c", "h", "w", "data_format", "data_type", "data_category", "pixel_format", "pixel_mapping"):
        assert getattr(d, f) == 0


def test_module_tensor_descriptor_name():
    assert isinstance(cudla.ModuleTensorDescriptor().name, (str, bytes))


def test_module_tensor_descriptor_stride():
    assert len(cudla.ModuleTensorDescriptor().stride) == 8


def test_fence():
    f = cudla.Fence()
    f.fence = 0xBEEF
    f.type = int(cudla.FenceType.NVSCISYNC_FENCE)
    assert f.fence == 0xBEEF and f.type == 1


def test_dev_attribute():
    a = cudla.DevAttribute()
    assert a.unified_addressing_supported == 0 and a.device_version == 0
    a.unified_addressing_supported = 1
    assert a.unified_addressing_supported == 1
    a.device_version = 0x20
    assert a.device_version == 0x20


def test_module_attribute():
    a = cudla.ModuleAttribute()
    assert a.num_input_tensors == 0 and a.num_output_tensors == 0
    a.num_input_tensors = 3
    assert a.num_input_tensors == 3
    a.num_output_tensors = 1
    assert a.num_output_tensors == 1


def test_wait_events():
    assert cudla.WaitEvents().pre_fences == []


def test_signal_events():
    assert cudla.SignalEvents().eof_fences == []


def test_task_construction():
    t = cudla.Task()
    t.module_handle = 0xDEAD
    assert t.module_handle == 0xDEAD


def test_task_input_tensor_auto_size():
    t = cudla.Task()
    t.input_tensor = [0x1000, 0x2000, 0x3000]
    assert len(t.input_tensor) == 3


def test_task_output_tensor_auto_size():
    t = cudla.Task()
    t.output_tensor = [0x4000]
    assert len(t.output_tensor) == 1


def test_task_combined():
    t = cudla.Task()
    t.module_handle = 0xCAFE
    t.input_tensor = [0x1, 0x2]
    t.output_tensor = [0x3]
    t.wait_events = 0
    t.signal_events = 0
    assert t.module_handle == 0xCAFE and len(t.input_tensor) == 2 and len(t.output_tensor) == 1
    rec = np.frombuffer(memoryview(t), cudla.task_dtype)[0]
    assert rec["num_input_tensors"] == 2 and rec["num_output_tensors"] == 1


def test_pod_ptr_is_nonzero():
    assert int(cudla.Task()) != 0 and int(cudla.ModuleTensorDescriptor()) != 0


# ------------------------------------------------------------------ A. TestErrorType, TestApiSurface
def test_cudla_error_is_exception():
    assert issubclass(cudla.CudlaError, Exception)


def test_cudla_error_stores_status():
    assert cudla.CudlaError(1).status == 1


def test_cudla_error_str():
    assert "ErrorInvalidParam" in str(cudla.CudlaError(1))
    assert str(cudla.CudlaError(1)) == "ErrorInvalidParam (1)"


@pytest.mark.parametrize("name", ["get_version", "device_get_count", "create_device", "destroy_device", "mem_register",
                                  "mem_unregister", "module_load_from_memory", "module_get_attributes",
                                  "module_unload", "submit_task", "device_get_attribute", "get_last_error",
                                  "set_task_timeout_in_ms"])
def test_function_exists(name):
    assert callable(getattr(cudla, name))


# ------------------------------------------------------------------ B. review-suite expectations
def test_documented_functions_exist():
    for name in ("import_external_memory", "import_external_semaphore", "get_nv_sci_sync_attributes"):
        assert callable(getattr(cudla, name))


def test_documented_status_success_member_exists():
    assert cudla.Status.SUCCESS == 0


@pytest.mark.parametrize("cls,field,values", [(cudla.WaitEvents, "pre_fences", (0x1010, 0x2020)),
                                              (cudla.SignalEvents, "eof_fences", (0x3030, 0x4040))])
def test_fence_arrays_round_trip(cls, field, values):
    events = cls()
    fences = []
    for v in values:
        f = cudla.Fence()
        f.fence = v
        f.type = int(cudla.FenceType.NVSCISYNC_FENCE)
        fences.append(f)
    setattr(events, field, fences)
    got = getattr(events, field)
    assert len(got) == 2 and [f.fence for f in got] == list(values) and all(f.type == 1 for f in got)


@pytest.mark.parametrize("field,cls", [("wait_events", cudla.WaitEvents), ("signal_events", cudla.SignalEvents)])
def test_task_retains_assigned_event_wrappers(field, cls):
    task, events = cudla.Task(), cls()
    before = _sys.getrefcount(events)
    setattr(task, field, events)
    assert _sys.getrefcount(events) > before
    assert getattr(task, field) == events.ptr


FAKE_LIB = r"""
#include <stdint.h>
#include <stddef.h>
typedef int cudlaStatus;
cudlaStatus cudlaGetVersion(uint64_t* v) { *v = 13002075; return 0; }
cudlaStatus cudlaDeviceGetCount(uint64_t* n) { *n = 1; return 0; }
cudlaStatus cudlaCreateDevice(uint64_t d, void** h, uint32_t f) { (void)d; (void)f; *h = (void*)0x1234; return 0; }
cudlaStatus cudlaDestroyDevice(void* h) { (void)h; return 0; }
"""


def test_create_device_accepts_standalone_mode_when_backend_supports_it(tmp_path):
    """Any libcudla.so.1 can sit under softdla.cudla (SOFTDLA_CUDLA_LIBRARY); standalone is passed through."""
    src = tmp_path / "fake.c"
    src.write_text(FAKE_LIB)
    lib = tmp_path / "libcudla.so.1"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    code = ("from softdla import cudla; h = cudla.create_device(0, cudla.Mode.STANDALONE); "
            "print(hex(h), cudla.get_version(), cudla.library_path())")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "SOFTDLA_CUDLA_LIBRARY": str(lib),
                            "PYTHONPATH": os.path.join(ROOT, "python")})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[:3] == ["0x1234", "13002075", str(lib)]
    # A function the fake library lacks raises at its first call, like NVIDIA's FunctionNotFoundError.
    r = subprocess.run([sys.executable, "-c", "from softdla import cudla; cudla.set_task_timeout_in_ms(1, 5)"],
                       capture_output=True, text=True,
                       env={**os.environ, "SOFTDLA_CUDLA_LIBRARY": str(lib), "PYTHONPATH": os.path.join(ROOT, "python")})
    assert r.returncode != 0 and "function cudlaSetTaskTimeoutInMs is not found" in r.stderr


# ------------------------------------------------------------------ class protocol and errors
@pytest.mark.parametrize("cls", [cudla.Task, cudla.ModuleTensorDescriptor, cudla.ExternalMemoryHandleDesc,
                                 cudla.WaitEvents, cudla.SignalEvents])
def test_structs_refuse_fields_they_do_not_have(cls):
    """As NVIDIA's extension types do: a misspelt field (t.modul_handle = h) was stored beside the struct and
    ignored, and the task failed later with InvalidModule."""
    obj = cls()
    with pytest.raises(AttributeError, match="has no attribute 'modul_handle'"):
        obj.modul_handle = 123
    assert not hasattr(obj, "modul_handle")


def test_struct_protocol():
    t = cudla.Task()
    assert t.ptr == int(t) and repr(t).startswith("<softdla.cudla.Task object at 0x")
    mv = memoryview(t)
    assert mv.format == "b" and mv.itemsize == 1 and mv.nbytes == 48 and not mv.readonly
    u = cudla.Task.from_buffer(bytearray(48))
    assert u == cudla.Task() and u != t or t == cudla.Task()
    with pytest.raises(ValueError):
        cudla.Task.from_buffer(bytearray(47))
    with pytest.raises(TypeError):
        cudla.Task.from_buffer(12)
    arr = np.zeros(1, cudla.task_dtype)
    v = cudla.Task.from_data(arr)
    v.module_handle = 7
    assert arr[0]["module_handle"] == 7  # no copy
    with pytest.raises(TypeError):
        cudla.Task.from_data([0])
    with pytest.raises(ValueError):
        cudla.Task.from_data(np.zeros(2, cudla.task_dtype))
    with pytest.raises(ValueError, match="ptr must not be null"):
        cudla.Task.from_ptr(0)
    copy = cudla.Task.from_ptr(v.ptr)
    assert copy.module_handle == 7 and copy.ptr != v.ptr
    ro = cudla.Task.from_ptr(v.ptr, readonly=True)
    with pytest.raises(ValueError, match="This Task instance is read-only"):
        ro.module_handle = 1
    ro_arr = np.zeros(1, cudla.task_dtype)
    ro_arr.flags.writeable = False
    t[0] = ro_arr
    assert t.module_handle == 0
    with pytest.raises(ValueError, match="read-only"):
        t.module_handle = 3
    assert hash is not None and cudla.Task.__hash__ is None


def test_descriptor_name_and_stride():
    d = cudla.ModuleTensorDescriptor()
    d.name = "images"
    assert d.name == "images"
    with pytest.raises(ValueError):
        d.name = "x" * 81
    d.stride = range(8)
    view = d.stride
    view[3] = 99
    assert d.stride[3] == 99  # a live view
    with pytest.raises(ValueError):
        d.stride = [1, 2]


def test_errors_pickle_and_unknown_codes():
    e = pickle.loads(pickle.dumps(cudla.CudlaError(4)))
    assert isinstance(e, cudla.CudlaError) and e.status == 4 and "ErrorInvalidAddress" in str(e)
    assert cudla.CudlaError(123).status == 123  # no ValueError for codes outside Status
    with pytest.raises(cudla.CudlaError):
        cudla.check_status(13)
    cudla.check_status(0)


def test_bad_arguments_raise_documented_errors():
    h = cudla.create_device(0, cudla.Mode.CUDA_DLA)
    try:
        with pytest.raises(ValueError, match="buf must be"):
            cudla.module_load_from_memory(h, b"abc", 5, 0)
        with pytest.raises(ValueError, match="Unknown attribute type"):
            cudla.module_get_attributes(1, 9)
        with pytest.raises(cudla.CudlaError) as e:
            cudla.module_load_from_memory(h, b"not a loadable", 14, 0)
        assert e.value.status == cudla.Status.ErrorInvalidModule
        with pytest.raises(cudla.CudlaError) as e:
            cudla.mem_register(h, 0, 64, 0)
        assert e.value.status == cudla.Status.ErrorInvalidAddress
        with pytest.raises(TypeError):
            cudla.set_task_timeout_in_ms(h, "ten")
        assert cudla.get_last_error(h) == 0 and type(cudla.get_last_error(h)) is int
    finally:
        cudla.destroy_device(h)
    with pytest.raises(cudla.CudlaError) as e:
        cudla.destroy_device(h)
    assert e.value.status == cudla.Status.ErrorInvalidDevice


# ------------------------------------------------------------------ a full inference
def test_full_inference_matches_engine():
    loadable = open(os.path.join(ROOT, "examples", "models", "bars.loadable"), "rb").read()
    images = np.load(os.path.join(ROOT, "examples", "models", "bars_images.npy"))
    packed = F.pack(np.round(images * 127).astype(np.int8), F.DLA_HWC4)
    h = cudla.create_device(1, cudla.Mode.CUDA_DLA)
    try:
        assert cudla.device_get_attribute(h, cudla.DevAttributeType.DEVICE_VERSION).device_version == 2
        m = cudla.module_load_from_memory(h, np.frombuffer(loadable, np.uint8), len(loadable), 0)
        (din,) = cudla.module_get_attributes(m, cudla.ModuleAttributeType.INPUT_TENSOR_DESCRIPTORS)
        (dout,) = cudla.module_get_attributes(m, cudla.ModuleAttributeType.OUTPUT_TENSOR_DESCRIPTORS)
        assert din.name == "images" and din.size_ == len(packed) and list(din.stride[:4]) == [1, 64, 1024, 1024]
        with pytest.raises(ValueError, match="read-only"):
            din.n = 3
        buf_in = np.zeros(din.size_ + 64, np.uint8)
        buf_out = np.zeros(dout.size_ + 64, np.uint8)
        a_in = buf_in[(-buf_in.ctypes.data) % 32:][:din.size_]
        a_out = buf_out[(-buf_out.ctypes.data) % 32:][:dout.size_]
        a_in[:] = np.frombuffer(packed, np.uint8)
        r_in = cudla.mem_register(h, a_in.ctypes.data, din.size_, 0)
        r_out = cudla.mem_register(h, a_out.ctypes.data, dout.size_, 0)
        task = cudla.Task()
        task.module_handle = m
        task.input_tensor = [r_in]
        task.output_tensor = [r_out]
        cudla.submit_task(h, task, 1, 0, 0)  # a Task object is accepted (13.5)
        assert cudla.get_last_error(h) == 0
        assert a_out.tobytes() == Engine(loadable).run_raw([packed], 1)[0]
        cudla.mem_unregister(h, r_in)
        cudla.mem_unregister(h, r_out)
        cudla.module_unload(m, 0)
    finally:
        cudla.destroy_device(h)
    gc.collect()
