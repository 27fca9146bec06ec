"""softdla.cudla in standalone mode end to end: NvSciBuf buffers and NvSciSync objects made through
softdla's libnvscibuf.so.1 / libnvscisync.so.1 (ctypes), imported with import_external_memory /
import_external_semaphore, a task submitted with a pre-fence and an EOF fence, and its output compared
with the same loadable run in hybrid mode (docs/RUNTIME.md, "Standalone mode")."""
import ctypes
import pathlib

import numpy as np
import pytest

from softdla import cudla

LOADABLE = pathlib.Path(__file__).resolve().parents[2] / "examples/models/bars.loadable"


class KV(ctypes.Structure):  # NvSciBufAttrKeyValuePair / NvSciSyncAttrKeyValuePair
    _fields_ = [("key", ctypes.c_int), ("value", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class Fence(ctypes.Structure):  # NvSciSyncFence
    _fields_ = [("payload", ctypes.c_uint64 * 6)]


@pytest.fixture(scope="module")
def nvsci():
    libdir = pathlib.Path(cudla.library_path()).parent
    try:
        buf = ctypes.CDLL(str(libdir / "libnvscibuf.so.1"))
        sync = ctypes.CDLL(str(libdir / "libnvscisync.so.1"))
    except OSError as e:
        pytest.skip(f"softdla's NvSci libraries are not beside {cudla.library_path()}: {e}")
    return buf, sync


def _raw_buffer(buf, module, size):
    lst = ctypes.c_void_p()
    assert buf.NvSciBufAttrListCreate(module, ctypes.byref(lst)) == 0
    types, perm, nbytes, need_cpu = ctypes.c_int(1), ctypes.c_int(3), ctypes.c_uint64(size), ctypes.c_bool(True)
    kv = (KV * 4)(KV(1, ctypes.addressof(types), 4),        # NvSciBufGeneralAttrKey_Types: RawBuffer
                  KV(3, ctypes.addressof(perm), 4),         # RequiredPerm: ReadWrite
                  KV(0x10000, ctypes.addressof(nbytes), 8),  # NvSciBufRawBufferAttrKey_Size
                  KV(2, ctypes.addressof(need_cpu), 1))     # NeedCpuAccess
    assert buf.NvSciBufAttrListSetAttrs(lst, kv, 4) == 0
    rec, conf = ctypes.c_void_p(), ctypes.c_void_p()
    assert buf.NvSciBufAttrListReconcile(ctypes.byref(lst), 1, ctypes.byref(rec), ctypes.byref(conf)) == 0
    obj = ctypes.c_void_p()
    assert buf.NvSciBufObjAlloc(rec, ctypes.byref(obj)) == 0
    ptr = ctypes.c_void_p()
    assert buf.NvSciBufObjGetCpuPtr(obj, ctypes.byref(ptr)) == 0
    buf.NvSciBufAttrListFree(lst)
    buf.NvSciBufAttrListFree(rec)
    return obj, np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(ptr.value))


def _aligned(size):
    raw = np.zeros(size + 64, np.uint8)
    start = -raw.ctypes.data % 64
    return raw[start:start + size]


def _sync_object(sync, module, cudla_flags, cpu_perm):
    lists = (ctypes.c_void_p * 2)()
    assert sync.NvSciSyncAttrListCreate(module, ctypes.byref(lists, 0)) == 0
    assert sync.NvSciSyncAttrListCreate(module, ctypes.byref(lists, ctypes.sizeof(ctypes.c_void_p))) == 0
    cudla.get_nv_sci_sync_attributes(lists[0], cudla_flags)
    need_cpu, perm = ctypes.c_bool(True), ctypes.c_int(cpu_perm)
    kv = (KV * 2)(KV(1, ctypes.addressof(need_cpu), 1), KV(2, ctypes.addressof(perm), 4))
    assert sync.NvSciSyncAttrListSetAttrs(ctypes.c_void_p(lists[1]), kv, 2) == 0
    rec, conf = ctypes.c_void_p(), ctypes.c_void_p()
    assert sync.NvSciSyncAttrListReconcile(lists, 2, ctypes.byref(rec), ctypes.byref(conf)) == 0
    obj = ctypes.c_void_p()
    assert sync.NvSciSyncObjAlloc(rec, ctypes.byref(obj)) == 0
    for lst in (lists[0], lists[1], rec.value):
        sync.NvSciSyncAttrListFree(ctypes.c_void_p(lst))
    return obj


def _outputs_hybrid(data, inputs):
    dev = cudla.create_device(0, cudla.Mode.CUDA_DLA)
    mod = cudla.module_load_from_memory(dev, data, len(data), 0)
    i_desc, o_desc = (cudla.module_get_attributes(mod, t)[0] for t in (2, 3))
    inp, out = _aligned(i_desc.size_), _aligned(o_desc.size_)
    inp[:] = inputs
    i_ptr = cudla.mem_register(dev, inp.ctypes.data, inp.nbytes, 0)
    o_ptr = cudla.mem_register(dev, out.ctypes.data, out.nbytes, 0)
    task = cudla.Task()
    task.module_handle, task.input_tensor, task.output_tensor = mod, [i_ptr], [o_ptr]
    cudla.submit_task(dev, task, 1, 0, 0)
    cudla.module_unload(mod, 0)
    cudla.destroy_device(dev)
    return out.copy()


def test_standalone_task_with_fences_matches_hybrid(nvsci):
    buf, sync = nvsci
    sync.NvSciSyncFenceWait.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    data = np.frombuffer(LOADABLE.read_bytes(), np.uint8)
    dev = cudla.create_device(0, cudla.Mode.STANDALONE)
    mod = cudla.module_load_from_memory(dev, data, len(data), 0)
    i_desc, o_desc = (cudla.module_get_attributes(mod, t)[0] for t in (2, 3))
    bmod, smod, ctx = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    assert buf.NvSciBufModuleOpen(ctypes.byref(bmod)) == 0
    assert sync.NvSciSyncModuleOpen(ctypes.byref(smod)) == 0
    assert sync.NvSciSyncCpuWaitContextAlloc(smod, ctypes.byref(ctx)) == 0
    in_obj, in_cpu = _raw_buffer(buf, bmod, i_desc.size_)
    out_obj, out_cpu = _raw_buffer(buf, bmod, o_desc.size_)
    inputs = np.random.default_rng(0).integers(0, 256, i_desc.size_, dtype=np.uint8)
    in_cpu[:] = inputs
    ptrs = []
    for obj, size in ((in_obj, i_desc.size_), (out_obj, o_desc.size_)):
        d = cudla.ExternalMemoryHandleDesc()
        d.ext_buf_object, d.size_ = obj.value, size
        ptrs.append(cudla.import_external_memory(dev, d, 0))
    pre_obj = _sync_object(sync, smod, cudla.NvSciSyncAttributes.NVSCISYNC_ATTR_WAIT, 2)   # CPU signals
    eof_obj = _sync_object(sync, smod, cudla.NvSciSyncAttributes.NVSCISYNC_ATTR_SIGNAL, 1)  # CPU waits
    sems = []
    for obj in (pre_obj, eof_obj):
        d = cudla.ExternalSemaphoreHandleDesc()
        d.ext_sync_object = obj.value
        sems.append(cudla.import_external_semaphore(dev, d, 0))
    pre, eof = Fence(), Fence()
    assert sync.NvSciSyncObjGenerateFence(pre_obj, ctypes.byref(pre)) == 0
    f_pre, f_eof = cudla.Fence(), cudla.Fence()
    f_pre.fence, f_pre.type = ctypes.addressof(pre), int(cudla.FenceType.NVSCISYNC_FENCE)
    f_eof.fence, f_eof.type = ctypes.addressof(eof), int(cudla.FenceType.NVSCISYNC_FENCE)
    wait, signal = cudla.WaitEvents(), cudla.SignalEvents()
    wait.pre_fences = [f_pre]
    signal.dev_ptrs = [sems[1]]
    signal.eof_fences = [f_eof]
    task = cudla.Task()
    task.module_handle, task.input_tensor, task.output_tensor = mod, [ptrs[0]], [ptrs[1]]
    task.wait_events, task.signal_events = wait, signal
    cudla.submit_task(dev, task, 1, 0, 0)  # returns at once; the task waits for the pre-fence
    assert sync.NvSciSyncFenceWait(ctypes.byref(eof), ctx, 0) == 0x200  # NvSciError_Timeout
    assert sync.NvSciSyncObjSignal(pre_obj) == 0
    assert sync.NvSciSyncFenceWait(ctypes.byref(eof), ctx, 10_000_000) == 0
    assert cudla.get_last_error(dev) == 0
    got = out_cpu.copy()
    for p in ptrs + sems:
        cudla.mem_unregister(dev, p)
    cudla.module_unload(mod, 0)
    cudla.destroy_device(dev)
    for obj in (in_obj, out_obj):
        buf.NvSciBufObjFree(obj)
    for obj in (pre_obj, eof_obj):
        sync.NvSciSyncObjFree(obj)
    sync.NvSciSyncCpuWaitContextFree(ctx)
    sync.NvSciSyncModuleClose(smod)
    buf.NvSciBufModuleClose(bmod)
    np.testing.assert_array_equal(got, _outputs_hybrid(data, inputs))
