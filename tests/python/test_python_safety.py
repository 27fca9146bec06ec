"""The Python layer is as safe as the C layer (issue 17, item 3): Module.run is thread-safe, handles are
released when Python objects are collected, softdla.cudla objects that alias Python memory keep it
alive and unresizable, submit_task checks num_tasks, and Module.run / softdla.build validate their
arguments with errors that say what was expected."""
import gc
import os
import sys
import threading
import weakref

import numpy as np
import pytest

softdla = pytest.importorskip("softdla")
from softdla import cudla  # noqa: E402

from sdla_testkit.engine import ROOT  # noqa: E402
from sdla_testkit.onnx_models import G  # noqa: E402

MODELS = os.path.join(ROOT, "examples", "models")
IMAGES = np.load(os.path.join(MODELS, "digits_test_images.npy")).astype(np.float32)


@pytest.fixture(scope="module")
def digits_fp16():
    return softdla.build(os.path.join(MODELS, "digits.onnx"), fp16=True, progress=False)


@pytest.fixture(scope="module")
def digits_int8():
    return softdla.build(os.path.join(MODELS, "digits.onnx"), int8=True, fp16=True,
                         calib_data=os.path.join(MODELS, "digits_calib"), progress=False)


@pytest.fixture(scope="module")
def add_rank2():
    """Two rank-2 inputs [1, 16] (NCHW view [1, 16, 1, 1]) added: order and shape mapping matter."""
    g = G()
    y = g.node("Add", [g.input("a", [1, 16]), g.input("b", [1, 16])])
    return softdla.build(g.model(y), fp16=True, progress=False)


@pytest.fixture
def fast_switching():
    """Thread switches every microsecond, so races show up in a few hundred runs."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


# ------------------------------------------------------------------ 1. Module.run from many threads
@pytest.mark.parametrize("threads", [4, 8])
def test_concurrent_run_on_one_module_never_returns_another_calls_output(digits_int8, threads, fast_switching):
    with softdla.Device(0) as dev:
        m = dev.load(digits_int8)
        n = 64
        ref = [m.run([IMAGES[i:i + 1]])["probabilities"] for i in range(n)]
        assert len({r.tobytes() for r in ref}) > n // 2  # distinct inputs give distinct outputs
        wrong, errors = [0], []

        def work(k):
            try:
                for j in range(600 // threads):
                    i = (k * 17 + j * 5) % n
                    if not np.array_equal(m.run({"pixels": IMAGES[i:i + 1]})["probabilities"], ref[i]):
                        wrong[0] += 1
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(e)

        ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errors and wrong[0] == 0, (errors, wrong[0])


def test_close_during_concurrent_runs_is_clean(digits_fp16, fast_switching):
    dev = softdla.Device(1)
    m = dev.load(digits_fp16)
    ref = m.run([IMAGES[:1]])["probabilities"]
    outcomes = []

    def work():
        for _ in range(200):
            try:
                outcomes.append(np.array_equal(m.run([IMAGES[:1]])["probabilities"], ref))
            except ValueError as e:
                assert "closed" in str(e)
                outcomes.append("closed")

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    dev.close()  # waits for the run in progress; later runs say the module is closed
    for t in ts:
        t.join()
    assert False not in outcomes and m.handle == 0 and dev.handle == 0
    with pytest.raises(ValueError, match="closed"):
        m.run([IMAGES[:1]])
    with pytest.raises(ValueError, match="closed"):
        dev.load(digits_fp16)


# ------------------------------------------------------------------ 2. handles released by the garbage collector
def test_dropped_devices_and_modules_are_released(digits_fp16):
    handles = []
    for i in range(100):  # 2 cores x 16 handles: without release the 33rd fails
        dev = softdla.Device(i % 2)
        m = dev.load(digits_fp16)
        if i % 3 == 0:
            m.run([IMAGES[:1]])
        handles.append((dev.handle, m.handle))
        del dev, m
        gc.collect()
    for h, mod in handles[-3:]:  # really released: the C API no longer knows them
        with pytest.raises(cudla.CudlaError):
            cudla.module_unload(mod, 0)
        with pytest.raises(cudla.CudlaError):
            cudla.destroy_device(h)


def test_module_dropped_before_device_frees_the_device_for_another_module(digits_fp16):
    with softdla.Device(0) as dev:
        for _ in range(3):  # one module per handle: each load needs the last one unloaded
            m = dev.load(digits_fp16)
            assert m.run([IMAGES[:1]])["probabilities"].shape == (1, 10, 1, 1)
            del m
            gc.collect()


def test_device_outlives_its_modules_and_cycles_are_collected(digits_fp16):
    dev = softdla.Device(0)
    m = dev.load(digits_fp16)
    h = dev.handle
    dev_ref = weakref.ref(dev)
    del dev
    gc.collect()
    assert dev_ref() is not None and m.device.handle == h  # the module keeps its device
    m.run([IMAGES[:1]])
    cycle = [m]
    cycle.append(cycle)  # only the cycle collector can free these
    del m, cycle
    gc.collect()
    assert dev_ref() is None
    with pytest.raises(cudla.CudlaError):
        cudla.destroy_device(h)
    for i in range(40):  # nothing leaked
        softdla.Device(i % 2).load(digits_fp16)
        gc.collect()


# ------------------------------------------------------------------ 3. softdla.cudla: aliasing and num_tasks
def test_from_buffer_keeps_the_bytearray_alive_and_unresizable():
    ba = bytearray(48)
    t = cudla.Task.from_buffer(ba)
    t.module_handle = 0x1234
    with pytest.raises(BufferError):
        ba.extend(b"x" * 100000)  # would move the memory the Task points into
    with pytest.raises(BufferError):
        ba.clear()
    assert int.from_bytes(ba[:8], "little") == 0x1234  # still aliased
    del t
    gc.collect()
    ba.extend(b"x")  # released with the Task


def test_from_ptr_and_from_data_pin_their_owner():
    ba = bytearray(16)
    f = cudla.Fence.from_ptr(np.frombuffer(ba, np.uint8).ctypes.data, owner=ba)
    with pytest.raises(BufferError):
        ba.extend(b"x" * 4096)
    del f
    ba.extend(b"x")
    arr = np.zeros(1, cudla.task_dtype)
    t = cudla.Task.from_data(arr)
    with pytest.raises(ValueError):
        arr.resize(1000)
    del t


def test_getter_views_keep_their_arrays_after_reassignment():
    t = cudla.Task()
    t.input_tensor = [1, 2, 3]
    array = weakref.ref(t._keep["input_tensor"])
    view = t.input_tensor
    t.input_tensor = [7, 8]
    gc.collect()
    assert array() is not None and list(view) == [1, 2, 3] and list(t.input_tensor) == [7, 8]

    s = cudla.SignalEvents()
    s.dev_ptrs = [5, 6]
    array = weakref.ref(s._keep["dev_ptrs"])
    view = s.dev_ptrs
    s.dev_ptrs = [9]
    gc.collect()
    assert array() is not None and list(view) == [5, 6]

    w = cudla.WaitEvents()
    f = cudla.Fence()
    f.fence = 0x10
    w.pre_fences = [f]
    array = weakref.ref(w._keep["pre_fences"])
    (got,) = w.pre_fences
    w.pre_fences = [f, f, f]
    gc.collect()
    assert array() is not None and got.fence == 0x10


def test_replacing_struct_memory_keeps_views_valid():
    d = cudla.ModuleTensorDescriptor()
    stride = d.stride
    a = np.zeros(1, cudla.module_tensor_descriptor_dtype)
    a[0]["stride"] = range(8)
    d[0] = a  # copies in place: the earlier view stays valid and live
    assert list(stride) == list(range(8)) and list(d.stride) == list(range(8))

    ba = bytearray(168)
    b = cudla.ModuleTensorDescriptor.from_buffer(ba)
    view = b.stride
    b[0] = a  # now owns a copy; the view still points into ba, which stays pinned while b lives
    assert list(b.stride) == list(range(8)) and b._retired == 1
    with pytest.raises(BufferError):
        ba.extend(b"x")
    b[0] = a  # owned memory of the same size: in place, nothing more retired
    assert b._retired == 1
    del view, b
    gc.collect()
    ba.extend(b"x")

    t, w = cudla.Task(), cudla.WaitEvents()
    t.wait_events = w
    w[0] = np.zeros(1, cudla.wait_events_dtype)
    assert t.wait_events == w.ptr  # the task still points at the events' live memory


@pytest.fixture
def bars_task():
    """A device, the bars module and a Task on registered buffers; yields (handle, task, in, out)."""
    loadable = open(os.path.join(MODELS, "bars.loadable"), "rb").read()
    h = cudla.create_device(0, cudla.Mode.CUDA_DLA)
    m = cudla.module_load_from_memory(h, loadable, len(loadable), 0)
    (din,) = cudla.module_get_attributes(m, cudla.ModuleAttributeType.INPUT_TENSOR_DESCRIPTORS)
    (dout,) = cudla.module_get_attributes(m, cudla.ModuleAttributeType.OUTPUT_TENSOR_DESCRIPTORS)
    def aligned(n):  # registered memory is 32-byte aligned
        raw = np.zeros(n + 64, np.uint8)
        return raw[(-raw.ctypes.data) % 64:][:n]

    a_in, a_out = aligned(din.size_), aligned(dout.size_)
    r_in = cudla.mem_register(h, a_in.ctypes.data, din.size_, 0)
    r_out = cudla.mem_register(h, a_out.ctypes.data, dout.size_, 0)
    task = cudla.Task()
    task.module_handle = m
    task.input_tensor = [r_in]
    task.output_tensor = [r_out]
    try:
        yield h, task, a_in, a_out
    finally:
        cudla.mem_unregister(h, r_in)
        cudla.mem_unregister(h, r_out)
        cudla.module_unload(m, 0)
        cudla.destroy_device(h)


def test_submit_task_checks_num_tasks_against_the_tasks_held(bars_task):
    h, task, _, _ = bars_task
    with pytest.raises(ValueError, match="num_tasks is 2 but ptr_to_tasks holds 1"):
        cudla.submit_task(h, task, 2, 0, 0)
    with pytest.raises(ValueError, match="holds 2"):
        cudla.submit_task(h, [task, task], 3, 0, 0)
    array = np.zeros(1, cudla.task_dtype)
    array[0:1].view(np.uint8)[:] = np.frombuffer(bytes(memoryview(task)), np.uint8)
    with pytest.raises(ValueError, match="holds 1"):
        cudla.submit_task(h, array, 2, 0, 0)
    with pytest.raises(TypeError, match="ptr_to_tasks must be a Task"):
        cudla.submit_task(h, cudla.WaitEvents(), 1, 0, 0)
    cudla.submit_task(h, task, 1, 0, 0)
    cudla.submit_task(h, [task, task], 2, 0, 0)
    cudla.submit_task(h, array, 1, 0, 0)
    assert cudla.get_last_error(h) == 0


def test_submit_task_checks_counts_against_the_pointer_arrays(bars_task):
    h, task, _, _ = bars_task
    np.frombuffer(memoryview(task), cudla.task_dtype)[0]["num_input_tensors"] = 5  # raw write past the array
    with pytest.raises(ValueError, match="5 input tensors but holds 1"):
        cudla.submit_task(h, task, 1, 0, 0)
    with pytest.raises(ValueError, match="holds 1"):
        task.input_tensor  # noqa: B018 (the getter would read past the array too)


# ------------------------------------------------------------------ 4. Module.run input validation
def test_run_rejects_wrong_names_counts_and_shapes(digits_int8):
    with softdla.Device(0) as dev:
        m = dev.load(digits_int8)
        x = IMAGES[:1]
        expects = r"the module's inputs: 'pixels' \(int8:dla_linear, shape \(1, 1, 8, 8\)\)"
        with pytest.raises(ValueError, match=r"unknown input name\(s\) \['pixel'\]; " + expects):
            m.run({"pixels": x, "pixel": x})
        with pytest.raises(ValueError, match=r"no value for input\(s\) \['pixels'\]; " + expects):
            m.run({})
        with pytest.raises(ValueError, match=r"2 array\(s\) given; the module has 1 input\(s\): 'pixels' \(int8"):
            m.run([x, x])
        with pytest.raises(ValueError, match=r"0 array\(s\) given"):
            m.run([])
        with pytest.raises(TypeError, match="dict"):
            m.run(x)  # a bare array would be iterated along its first axis
        for shape in [(1, 1, 4, 16), (1, 64), (64,), (1, 1, 8, 8, 1), (2, 1, 8, 8)]:
            with pytest.raises(ValueError, match=r"input 'pixels' \(int8:dla_linear, shape \(1, 1, 8, 8\)\) "
                                                 r"needs shape \(1, 1, 8, 8\), got " + str(shape).replace("(", r"\(")
                                                 .replace(")", r"\)")):
                m.run([np.zeros(shape, np.float32)])


def test_run_rejects_dtypes_without_a_real_meaning(digits_int8, digits_fp16):
    with softdla.Device(0) as d0, softdla.Device(1) as d1:
        for m, kind in ((d0.load(digits_int8), "int8"), (d1.load(digits_fp16), "float16")):
            for bad in (IMAGES[:1].astype(np.complex128), IMAGES[:1] > 0.5, np.full((1, 1, 8, 8), "a"),
                        np.full((1, 1, 8, 8), None, object)):
                with pytest.raises(TypeError, match=rf"input 'pixels' \({kind}:dla_linear.*takes real numbers"):
                    m.run([bad])


def test_int8_input_policy_rejects_nan_and_inf_and_saturates_finite_values(digits_int8):
    with softdla.Device(0) as dev:
        m = dev.load(digits_int8)
        for bad, what in ((np.nan, "nan"), (np.inf, "inf"), (-np.inf, "-inf")):
            x = IMAGES[:1].copy()
            x[0, 0, 3, 5] = bad
            with pytest.raises(ValueError, match=rf"input 'pixels'.*finite values only; 1 value\(s\) are NaN or "
                                                 rf"infinite \(first {what} at \(0, 0, 3, 5\)\)"):
                m.run([x])
        for huge, code in ((1e300, 127), (-1e300, -128), (np.float32(3e38), 127), (np.iinfo(np.int64).max, 127)):
            got = m.run([np.full((1, 1, 8, 8), huge)])
            want = m.run([np.full((1, 1, 8, 8), code, np.int8)])
            np.testing.assert_array_equal(got["probabilities"], want["probabilities"])


def test_float_inputs_accept_lossless_dtypes_and_reject_overflow(digits_fp16):
    with softdla.Device(0) as dev:
        m = dev.load(digits_fp16)
        x = IMAGES[:1].copy()  # integers 0..16: exact in every dtype below
        ref = m.run([x])["probabilities"]
        for dtype in (np.float16, np.float32, np.float64, np.int8, np.uint8, np.int32, np.int64):
            np.testing.assert_array_equal(m.run([x.astype(dtype)])["probabilities"], ref)
        np.testing.assert_array_equal(m.run([x.tolist()])["probabilities"], ref)  # nested lists too
        for big in (np.float32(7e4), 1e300):
            y = x.astype(np.asarray(big).dtype)
            y[0, 0, 1, 2] = big
            with pytest.raises(ValueError, match=r"input 'pixels' \(float16.*1 finite value\(s\) overflow float16 "
                                                 r"\(first .* at \(0, 0, 1, 2\); largest 65504\)"):
                m.run([y])
        y = x.copy()
        y[0, 0, 0, 0] = np.nan  # FP16/FP32 inputs: NaN/inf are values of the type and pass through
        assert np.isnan(m.run([y])["probabilities"]).any()


def test_rank2_inputs_map_to_the_nchw_view_and_keep_their_order(add_rank2):
    with softdla.Device(0) as dev:
        m = dev.load(add_rank2)
        assert [t.shape for t in m.inputs] == [(1, 16, 1, 1)] * 2
        a, b = np.arange(16, dtype=np.float32).reshape(1, 16), np.full((1, 16), 100, np.float32)
        (out,) = m.run({"b": b, "a": a}).values()
        np.testing.assert_array_equal(out.reshape(1, 16), a + b)
        np.testing.assert_array_equal(next(iter(m.run([a.reshape(1, 16, 1, 1), b]).values())), out)
        with pytest.raises(ValueError, match=r"input 'a' .*needs shape \(1, 16, 1, 1\), got \(16, 1\)"):
            m.run([a.reshape(16, 1), b])
        with pytest.raises(ValueError, match=r"input 'b' .*got \(1, 1, 16\)"):
            m.run([a, b.reshape(1, 1, 16)])  # [N,C,W] -> [1,1,1,16]


def test_build_rejects_unknown_precision_constraints():
    model = os.path.join(MODELS, "digits.onnx")
    with pytest.raises(softdla.BuildError, match="precision_constraints must be 'none', 'prefer' or 'obey', not 'bogus'"):
        softdla.build(model, fp16=True, precision_constraints="bogus", progress=False)
    for value in ("none", "prefer", "obey"):
        softdla.build(model, fp16=True, precision_constraints=value, progress=False)
