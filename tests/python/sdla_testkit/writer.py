"""An independent loadable writer for tests: builds the FlatBuffer with the Python object API, with
descriptors from formats.py and a simple memory plan (every intermediate in its own slot)."""
import flatbuffers
import numpy as np

from . import fbgen, formats

DTYPE_CODE = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(np.int8): 2, np.dtype(np.int32): 3}
OP_KINDS = ["Conv", "Deconv", "Sdp", "Pool", "Lrn", "Resize", "Concat", "Slice", "Shuffle", "Softmax",
            "Unary", "ReduceMax", "Convert"]
SDP_KINDS = {"bias": 0, "scale": 1, "prelu": 2, "relu": 3, "clip": 4, "add": 5, "sub": 6, "mul": 7,
             "max": 8, "min": 9, "sigmoid": 10, "tanh": 11, "div": 12}


def _obj(module, cls, **fields):
    o = getattr(fbgen.mod(module), cls)()
    for k, v in fields.items():
        if not hasattr(o, k):
            raise AttributeError(f"{cls} has no field {k}")
        setattr(o, k, v)
    return o


def sdp_step(kind, fvalues=None, ivalues=None, shift=0, lo=0.0, hi=0.0, lo_i=0, hi_i=0, tensor=-1,
             tensor_multiplier=1, tensor_shift=0):
    return _obj("SdpStep", "SdpStepT", kind=SDP_KINDS[kind],
                fvalues=None if fvalues is None else [float(v) for v in np.ravel(fvalues)],
                ivalues=None if ivalues is None else [int(v) for v in np.ravel(ivalues)],
                shift=shift, lo=lo, hi=hi, loI=lo_i, hiI=hi_i, tensor=tensor,
                tensorMultiplier=tensor_multiplier, tensorShift=tensor_shift)


def sdp(steps=(), multiplier=None, shift=None, lut=0, lut_input_scale=1.0):
    rq = None
    if multiplier is not None:
        rq = _obj("Requant", "RequantT", multiplier=[int(v) for v in np.ravel(multiplier)],
                  shift=[int(v) for v in np.ravel(shift)])
    return _obj("Sdp", "SdpT", steps=list(steps), requant=rq, lut=lut, lutInputScale=lut_input_scale)


class Graph:
    def __init__(self, target="orin"):
        self.target = target
        self.tensors, self.constants, self.ops = [], [], []
        self.inputs, self.outputs = [], []  # (tensor index, format)
        self.plan = None  # optional explicit (offsets, arena_size)

    # ---- tensors and constants ----
    def tensor(self, name, shape, dtype, scale=1.0):
        self.tensors.append(dict(name=name, shape=list(map(int, shape)), dtype=np.dtype(dtype), scale=float(scale),
                                 constant=-1))
        return len(self.tensors) - 1

    def constant(self, array, dtype):
        a = np.ascontiguousarray(np.asarray(array).astype(dtype))
        self.constants.append(dict(dtype=a.dtype, dims=list(a.shape) or [1], data=a.tobytes()))
        return len(self.constants) - 1

    def const_tensor(self, name, array, dtype, scale=1.0):
        t = self.tensor(name, np.shape(array), dtype, scale)
        self.tensors[t]["constant"] = self.constant(array, dtype)
        return t

    def input(self, name, shape, dtype, scale=1.0, fmt=formats.LINEAR):
        t = self.tensor(name, shape, dtype, scale)
        self.inputs.append((t, fmt))
        return t

    def output(self, t, fmt=formats.LINEAR):
        self.outputs.append((t, fmt))
        return t

    def op(self, kind, inputs, output, params=None, name=None):
        self.ops.append(dict(kind=kind, inputs=list(inputs), outputs=[output], params=params,
                             name=name or f"{kind.lower()}_{len(self.ops)}"))
        return output

    # ---- op param helpers ----
    @staticmethod
    def conv_params(weights, stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1), groups=1, post=None):
        return _obj("Conv", "ConvT", weights=weights, strideH=stride[0], strideW=stride[1], padTop=pads[0],
                    padLeft=pads[1], padBottom=pads[2], padRight=pads[3], dilationH=dilation[0],
                    dilationW=dilation[1], groups=groups, post=post)

    @staticmethod
    def params(table, /, **fields):
        return _obj(table, table + "T", **fields)

    # ---- serialization ----
    def _binding(self, t, fmt):
        T = self.tensors[t]
        d = formats.descriptor(T["name"], T["shape"], T["dtype"], fmt, self.target)
        b = _obj("IoBinding", "IoBindingT", tensor=t, format=fmt)
        b.name = d["name"]
        b.size, b.n, b.c, b.h, b.w = d["size"], d["n"], d["c"], d["h"], d["w"]
        b.dataFormat, b.dataType, b.dataCategory = d["data_format"], d["data_type"], d["data_category"]
        b.pixelFormat, b.pixelMapping, b.stride = d["pixel_format"], d["pixel_mapping"], d["stride"]
        return b

    def _memory_plan(self):
        io = {t for t, _ in self.inputs + self.outputs}
        offsets, at = [], 0
        for t in self.tensors:
            idx = len(offsets)
            if idx in io or t["constant"] >= 0:
                offsets.append(0)
                continue
            offsets.append(at)
            nbytes = int(np.prod(t["shape"])) * t["dtype"].itemsize
            at += -(-nbytes // 64) * 64
        return offsets, at

    def to_object(self):
        L = _obj("Loadable", "LoadableT")
        L.version = _obj("Version", "VersionT", major=1, minor=0, patch=0)
        L.target = 1 if self.target == "xavier" else 0
        L.tensors = [_obj("Tensor", "TensorT", name=t["name"], shape=t["shape"], dtype=DTYPE_CODE[t["dtype"]],
                          scale=t["scale"], constant=t["constant"]) for t in self.tensors]
        L.constants = [_obj("Constant", "ConstantT", dtype=DTYPE_CODE[c["dtype"]], dims=c["dims"],
                            data=list(c["data"])) for c in self.constants]
        L.inputs = [self._binding(t, f) for t, f in self.inputs]
        L.outputs = [self._binding(t, f) for t, f in self.outputs]
        ops = []
        OpParams = fbgen.mod("OpParams").OpParams
        for o in self.ops:
            params = o["params"] if o["params"] is not None else self.params(o["kind"])
            ops.append(_obj("Op", "OpT", name=o["name"], inputs=o["inputs"], outputs=o["outputs"],
                            paramsType=getattr(OpParams, o["kind"]), params=params))
        L.ops = ops
        offsets, arena = self.plan if self.plan else self._memory_plan()
        L.memoryPlan = _obj("MemoryPlan", "MemoryPlanT", offsets=offsets, arenaSize=arena)
        L.buildInfo = _obj("BuildInfo", "BuildInfoT", builderVersion="softdla tests", precisions="", flags="")
        return L

    def serialize(self):
        b = flatbuffers.Builder(1024)
        b.Finish(self.to_object().Pack(b), b"SDLA")
        return bytes(b.Output())
