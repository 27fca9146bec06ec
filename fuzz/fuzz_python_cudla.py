#!/usr/bin/env python3
"""Fuzz target (atheris) for softdla.cudla, the NVIDIA-compatible Python surface: struct wrappers, their
fields and pointer lists, buffers they alias, module loading from bytes, registration and submission.

Each input drives a short random sequence of API calls with hostile values: out-of-range ints for every
field, buffers of the wrong size, arrays resized under a wrapper, bogus handles and DLA pointers,
num_tasks beyond what the argument holds, fuzzed loadable bytes. The contract: every call either works
or raises a clear Python exception (the ALLOWED types below) — never a crash, a hang or another
exception type. Raw host addresses (ints the caller promises point at memory) are C's contract, not
Python's, so the sequences only pass addresses of memory they own.

  .venv/bin/python fuzz/fuzz_python_cudla.py -max_total_time=60 [corpus dir]   (scripts/fuzz.sh runs it)
"""
import os
import sys

import atheris
import numpy as np

with atheris.instrument_imports():
    from softdla import cudla

ALLOWED = (ValueError, TypeError, OverflowError, BufferError, IndexError, cudla.CudlaError)
STRUCTS = [cudla.ExternalMemoryHandleDesc, cudla.ExternalSemaphoreHandleDesc, cudla.ModuleTensorDescriptor,
           cudla.Fence, cudla.DevAttribute, cudla.ModuleAttribute, cudla.WaitEvents, cudla.SignalEvents, cudla.Task]
# Fields that hold host addresses: an int written there is a pointer the caller vouches for (C's contract),
# so sequences write 0 or a wrapper object they own; structs with such fields are only overwritten by
# a copy of another struct of the same type.
RAW_ADDRESS_FIELDS = {"ext_buf_object", "ext_sync_object", "fence", "input_tensor_desc", "output_tensor_desc",
                      "wait_events", "signal_events"}
NO_POINTERS = (cudla.ModuleTensorDescriptor, cudla.DevAttribute)
SEED_LOADABLE = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "models",
                                  "bars.loadable"), "rb").read()


class Session:
    """One device, the objects a sequence made, and the memory it registered (released at the end)."""

    def __init__(self):
        self.dev = cudla.create_device(0, cudla.Mode.CUDA_DLA)
        self.objects, self.buffers, self.arrays, self.registered, self.modules = [], [], [], [], []

    def close(self):
        for m in self.modules:
            try:
                cudla.module_unload(m, 0)
            except ALLOWED:
                pass
        for p in self.registered:
            try:
                cudla.mem_unregister(self.dev, p)
            except ALLOWED:
                pass
        cudla.destroy_device(self.dev)


def hostile_int(fdp):
    choice = fdp.ConsumeIntInRange(0, 5)
    if choice == 0:
        return fdp.ConsumeIntInRange(-2, 2)
    if choice == 1:
        return fdp.ConsumeInt(8)
    if choice == 2:
        return (1 << fdp.ConsumeIntInRange(0, 70)) - fdp.ConsumeIntInRange(0, 1)
    if choice == 3:
        return -(1 << fdp.ConsumeIntInRange(0, 70))
    return fdp.ConsumeIntInRange(0, 1 << 20)


def step(fdp, s):
    action = fdp.ConsumeIntInRange(0, 11)
    if action == 0:  # a struct, owned, from a buffer of some size, or from a NumPy record
        cls = fdp.PickValueInList(STRUCTS)
        how = fdp.ConsumeIntInRange(0, 2)
        if how == 0:
            s.objects.append(cls())
        elif how == 1:
            buf = bytearray(fdp.ConsumeIntInRange(0, 2 * cls._dtype.itemsize))
            s.buffers.append(buf)
            s.objects.append(cls.from_buffer(buf))
        else:
            s.objects.append(cls.from_data(np.zeros(1, cls._dtype)))
    elif action == 1 and s.objects:  # any field, any value
        obj = fdp.PickValueInList(s.objects)
        names = [n for n in dir(type(obj)) if getattr(getattr(type(obj), n, None), "fset", None)]
        if names:
            name = fdp.PickValueInList(names)
            if name in ("wait_events", "signal_events"):
                kind = cudla.WaitEvents if name == "wait_events" else cudla.SignalEvents
                owned = [o for o in s.objects if isinstance(o, kind)]
                setattr(obj, name, fdp.PickValueInList(owned) if owned and fdp.ConsumeBool() else 0)
            elif name in RAW_ADDRESS_FIELDS:
                setattr(obj, name, 0)
            elif name in ("pre_fences", "eof_fences"):
                setattr(obj, name, [cudla.Fence() for _ in range(fdp.ConsumeIntInRange(0, 3))])
            elif name == "dev_ptrs":
                setattr(obj, name, [fdp.PickValueInList(s.registered) for _ in range(fdp.ConsumeIntInRange(0, 3))]
                        if s.registered else [])
            else:
                setattr(obj, name, hostile_int(fdp))
    elif action == 2 and s.objects:  # read every property back
        obj = fdp.PickValueInList(s.objects)
        for n in dir(type(obj)):
            if isinstance(getattr(type(obj), n, None), property):
                v = getattr(obj, n)
                if hasattr(v, "__len__"):
                    list(v)
    elif action == 3 and s.buffers:  # resize a buffer a wrapper may alias
        buf = fdp.PickValueInList(s.buffers)
        if fdp.ConsumeBool():
            buf.extend(b"\0" * fdp.ConsumeIntInRange(1, 64))
        else:
            del buf[: fdp.ConsumeIntInRange(1, 8)]
    elif action == 4 and s.objects:  # drop a wrapper: what it kept alive may go
        s.objects.pop(fdp.ConsumeIntInRange(0, len(s.objects) - 1))
    elif action == 5:  # register memory this sequence owns
        arr = np.zeros(fdp.ConsumeIntInRange(1, 4096), np.uint8)
        s.arrays.append(arr)  # kept until the session ends: registered memory must outlive its registration
        size = fdp.ConsumeIntInRange(0, arr.size)
        s.registered.append(cudla.mem_register(s.dev, arr.ctypes.data, size, 0))
    elif action == 6:  # load fuzzed (or valid) loadable bytes
        data = SEED_LOADABLE if fdp.ConsumeBool() else fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 4096))
        s.modules.append(cudla.module_load_from_memory(s.dev, data, len(data), 0))
    elif action == 7 and s.modules:  # module attributes, any type number
        cudla.module_get_attributes(fdp.PickValueInList(s.modules), hostile_int(fdp))
    elif action == 8:  # a task over registered and bogus pointers, bogus or real module
        task = cudla.Task()
        pool = s.registered + [hostile_int(fdp) for _ in range(2)]
        task.module_handle = fdp.PickValueInList(s.modules) if s.modules and fdp.ConsumeBool() else hostile_int(fdp)
        task.input_tensor = [fdp.PickValueInList(pool) for _ in range(fdp.ConsumeIntInRange(0, 3))]
        task.output_tensor = [fdp.PickValueInList(pool) for _ in range(fdp.ConsumeIntInRange(0, 3))]
        s.objects.append(task)
    elif action == 9:  # submit a Task, a list of Tasks or a task array with any num_tasks and flags
        tasks = [o for o in s.objects if isinstance(o, cudla.Task)]
        if tasks:
            arg = fdp.PickValueInList(tasks) if fdp.ConsumeBool() else tasks
            cudla.submit_task(s.dev, arg, fdp.ConsumeIntInRange(0, 4), 0, fdp.ConsumeIntInRange(0, 7))
    elif action == 10 and s.objects:  # replace a struct's memory: any bytes (no pointers inside) or a copy
        obj = fdp.PickValueInList(s.objects)
        if isinstance(obj, NO_POINTERS):
            obj[0] = np.frombuffer(fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 2 * obj._dtype.itemsize)), np.uint8).copy()
        else:
            same = [o for o in s.objects if type(o) is type(obj)]
            obj[0] = np.frombuffer(bytes(memoryview(fdp.PickValueInList(same))), np.uint8).copy()
    elif action == 11 and s.registered:
        cudla.mem_unregister(s.dev, s.registered.pop(fdp.ConsumeIntInRange(0, len(s.registered) - 1)))


def test_one_input(data):
    fdp = atheris.FuzzedDataProvider(data)
    s = Session()
    try:
        for _ in range(fdp.ConsumeIntInRange(1, 24)):
            try:
                step(fdp, s)
            except ALLOWED:
                pass
    finally:
        s.close()


if __name__ == "__main__":
    os.environ.setdefault("SOFTDLA_LOG", "none")
    os.environ.setdefault("SOFTDLA_BACKEND", "cpu")
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
