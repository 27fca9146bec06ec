"""Per-layer descriptions of an ONNX model in the schema of softdla.inspect(loadable)["layer_info"]
(docs/PROFILING.md, "Layer information"), derived from the graph alone, so the Orin latency model
(softdla.orin_latency) can estimate networks that are slow or impossible to build (large calibration
networks, models with ops softdla rejects).

The ONNX graph is grouped into DLA ops the way the DLA fuses them: a Conv (or a Gemm / MatMul with a
constant weight, the fully connected layer lowered to a 1x1 conv) takes the single-consumer chain after it
into its SDP (BatchNormalization, constant Add/Sub/Mul/Div, Relu/Clip/LeakyRelu/PRelu/Sigmoid/Tanh, one
element-wise operation with another tensor such as a residual Add); a standalone element-wise op or
activation is an "sdp" op and takes its chain the same way. Shape ops (Reshape, Flatten, Squeeze,
Unsqueeze, Identity, Cast, Dropout) alias their input; subgraphs of constants are folded. Precision: every
op computes in `precision` unless `layer_precisions` names one of its ONNX nodes (SoftMax and LRN always in
FP16, the DLA's only form of them); where an op reads a tensor of another precision a "convert" op (the
reformat TensorRT inserts) is added in front of it.

This is a model of the DLA's grouping, not softdla's builder: the builder's own layer_info can differ
(e.g. it may keep a Concat as a copy). Unsupported ops (NMS, TopK, Gather, ...) are an error that names them.
"""
import math
import os

ELEM_BYTES = {"int8": 1, "fp16": 2, "fp32": 4, "int32": 4}

_ALIAS = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Cast", "Dropout"}
_ACT = {"Relu": "relu", "Clip": "clip", "LeakyRelu": "leaky_relu", "PRelu": "prelu", "Sigmoid": "sigmoid",
        "Tanh": "tanh", "HardSigmoid": "hard_sigmoid"}
_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Max": "max", "Min": "min", "Pow": "pow",
           "Sum": "add"}
_UNARY = {"Abs", "Neg", "Exp", "Log", "Sqrt", "Sin", "Cos", "Atanh", "Erf", "Floor", "Ceil", "Reciprocal"}
_POOL = {"MaxPool": "max", "AveragePool": "avg", "GlobalAveragePool": "avg", "GlobalMaxPool": "max"}


def _load(model):
    import onnx
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (bytes, bytearray)):
        return onnx.load_from_string(bytes(model))
    if isinstance(model, (str, os.PathLike)):
        return onnx.load(os.fspath(model))
    raise TypeError(f"expected an onnx.ModelProto, ONNX bytes or a path, got {type(model).__name__}")


def _attrs(node):
    from onnx import helper
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _nchw(shape):
    """Any rank as the DLA's N, C, H, W: [N, C] -> [N, C, 1, 1]; [N, A, B] -> [N, A, B, 1]; rank 5+ folds the
    middle dims into C."""
    s = [int(d) for d in shape]
    if len(s) == 0:
        return [1, 1, 1, 1]
    if len(s) == 1:
        return [1, s[0], 1, 1]
    if len(s) == 2:
        return s + [1, 1]
    if len(s) == 3:
        return s + [1]
    if len(s) == 4:
        return s
    return [s[0], math.prod(s[1:-2]), s[-2], s[-1]]


def layers_from_onnx(model, *, precision="int8", layer_precisions=None, shapes=None):
    """The layer_info list of an ONNX model (path, bytes or ModelProto).

    precision: "int8" or "fp16", the precision every op computes in; layer_precisions: {ONNX node name:
    precision} overrides (an op runs in the precision of any of its nodes named here); shapes: {input name:
    shape} for inputs with symbolic dims. Raises ValueError for dynamic shapes and for ops the DLA has no
    form of."""
    import onnx
    if precision not in ("int8", "fp16"):
        raise ValueError(f"precision must be int8 or fp16, not {precision!r}")
    layer_precisions = dict(layer_precisions or {})
    for p in layer_precisions.values():
        if p not in ("int8", "fp16"):
            raise ValueError(f"layer precision must be int8 or fp16, not {p!r}")
    m = onnx.ModelProto()
    m.CopyFrom(_load(model))
    g = m.graph
    inits = {i.name: list(i.dims) for i in g.initializer}
    for name, shape in (shapes or {}).items():
        vi = [v for v in g.input if v.name == name]
        if not vi:
            raise ValueError(f"shapes: the model has no input {name!r}")
        dims = vi[0].type.tensor_type.shape.dim
        if len(dims) != len(shape):
            raise ValueError(f"shapes: {name} has rank {len(dims)}, got {list(shape)}")
        for d, v in zip(dims, shape):
            d.ClearField("dim_param")
            d.dim_value = int(v)
    inferred = onnx.shape_inference.infer_shapes(m)
    shape_of = {}
    for v in list(inferred.graph.input) + list(inferred.graph.value_info) + list(inferred.graph.output):
        t = v.type.tensor_type
        if t.HasField("shape"):
            shape_of[v.name] = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
    shape_of.update(inits)

    # Constants: initializers, Constant nodes and everything computed from constants only (shape math).
    const = set(inits)
    graph_inputs = [v.name for v in g.input if v.name not in const]
    alias = {}

    def root(t):
        while t in alias:
            t = alias[t]
        return t

    nodes = []
    for n in g.node:
        ins = [i for i in n.input if i]
        if n.op_type == "Constant" or all(i in const for i in ins):
            const.update(o for o in n.output if o)
            continue
        if n.op_type in _ALIAS:
            alias[n.output[0]] = n.input[0]
            continue
        nodes.append(n)

    unsupported = sorted({n.op_type for n in nodes if not _known(n.op_type)})
    if unsupported:
        raise ValueError("no DLA form for ONNX op(s) " + ", ".join(unsupported) +
                         " (the DLA runs convolution, pooling, element-wise, activation, resize, concat, slice, "
                         "transpose, softmax and LRN layers)")

    def shape(t):
        s = shape_of.get(t)
        if s is None or any(d is None or d <= 0 for d in s):
            raise ValueError(f"tensor {t!r} has no static shape ({s}); give the input shapes (shapes=...)")
        return s

    def tensor_inputs(n):
        return [root(i) for i in n.input if i and i not in const and root(i) not in const]

    consumers = {}
    for n in nodes:
        for i in tensor_inputs(n):
            consumers.setdefault(i, []).append(n)
    outputs = {root(o.name) for o in g.output}
    done = set()
    dtype = {t: precision for t in graph_inputs}
    layers = []
    converted = {}

    def tensor_entry(t, dt):
        return {"name": t, "shape": _nchw(shape(t)), "dtype": dt, "scale": 1.0}

    def absorb(n, out, fused, extra):
        """Extends an op over the single-consumer chain its SDP can take; returns the final output."""
        names = [n.name]
        while out not in outputs and len(consumers.get(out, [])) == 1:
            c = consumers[out][0]
            cins = [i for i in c.input if i]
            others = [root(i) for i in cins if root(i) != out]
            tensor_others = [t for t in others if t not in const]
            if c.op_type == "BatchNormalization":
                fused.append("batchnorm")
            elif c.op_type in _ACT:
                fused.append(_ACT[c.op_type])
            elif c.op_type in ("Add", "Sub", "Mul", "Div") and len(cins) == 2 and not tensor_others:
                fused.append({"Add": "bias", "Sub": "bias", "Mul": "scale", "Div": "scale"}[c.op_type])
            elif (c.op_type in ("Add", "Sub", "Mul", "Max", "Min") and len(cins) == 2 and len(tensor_others) == 1
                  and not extra and _nchw(shape(tensor_others[0])) == _nchw(shape(c.output[0]))):
                fused.append(_BINARY[c.op_type])
                extra.append(tensor_others[0])
            else:
                break
            done.add(id(c))
            names.append(c.name)
            out = root(c.output[0])
        return out, names

    def read(t, p):
        """The tensor an op of precision p reads: t itself, or t reformatted by a convert op."""
        if dtype.get(t, p) == p:
            return t
        key = (t, p)
        if key not in converted:
            name = f"{t}:{p}"
            s = _nchw(shape(t))
            shape_of[name] = s
            dtype[name] = p
            converted[key] = name
            n_el = math.prod(s)
            layers.append({
                "index": len(layers), "name": f"reformat {t} -> {p}", "op": "convert", "precision": p,
                "inputs": [tensor_entry(t, dtype[t])], "outputs": [tensor_entry(name, p)], "params": {},
                "fused": [], "weight_bytes": 0, "macs": 0, "input_bytes": n_el * ELEM_BYTES[dtype[t]],
                "output_bytes": n_el * ELEM_BYTES[p]})
        return converted[key]

    for n in nodes:
        if id(n) in done:
            continue
        done.add(id(n))
        ins = tensor_inputs(n)
        a = _attrs(n)
        fused, extra, params = [], [], {}
        macs = weight_bytes = 0
        kind = _kind(n.op_type)
        out = root(n.output[0])
        names = [n.name]
        if kind in ("conv", "deconv"):
            x = ins[0]
            xs = _nchw(shape(x))
            if n.op_type in ("Conv", "ConvTranspose"):
                ws = list(inits.get(n.input[1]) or shape(n.input[1]))
                if len(ws) == 3:  # a 1-D convolution: the 2-D one over [N, C, 1, T], as the builder runs it
                    ws.insert(2, 1)
                groups = int(a.get("group", 1))
                kh, kw = int(ws[2]), int(ws[3])
                k_out = int(ws[0]) if n.op_type == "Conv" else int(ws[1]) * groups
                pads = _as_2d(a.get("pads", [0, 0, 0, 0]), 0, pads=True)
                params = {"kernel": [kh, kw], "stride": _as_2d(a.get("strides", [1, 1]), 1),
                          "pad": [pads[0], pads[1], pads[2], pads[3]], "dilation": _as_2d(a.get("dilations", [1, 1]), 1),
                          "groups": groups, "out_channels": k_out}
                w_elems = math.prod(ws)
                if len(n.input) > 2 and n.input[2]:
                    fused.append("bias")
            else:  # Gemm / MatMul with a constant weight: a 1x1 convolution
                if n.input[1] not in const or root(n.input[1]) in ins:
                    raise ValueError(f"{n.op_type} {n.name!r}: the DLA runs it only with a constant weight "
                                     "(a fully connected layer)")
                ws = inits.get(n.input[1]) or shape(n.input[1])
                trans_b = n.op_type == "Gemm" and int(a.get("transB", 0))
                k_out = int(ws[0] if trans_b else ws[-1])
                params = {"kernel": [1, 1], "stride": [1, 1], "pad": [0, 0, 0, 0], "dilation": [1, 1], "groups": 1,
                          "out_channels": k_out}
                w_elems = math.prod(ws)
                if n.op_type == "Gemm" and len(n.input) > 2 and n.input[2]:
                    fused.append("bias")
                groups, kh, kw = 1, 1, 1
            out, names = absorb(n, out, fused, extra)
            p = _precision_of(names, layer_precisions, precision)
            os_ = _nchw(shape(out))
            if kind == "conv":
                if n.op_type in ("Conv", "ConvTranspose"):
                    macs = os_[0] * os_[1] * os_[2] * os_[3] * (xs[1] // groups) * kh * kw
                else:
                    macs = math.prod(shape(out)) * int(ws[0] if not trans_b else ws[1])
            else:
                macs = xs[0] * xs[1] * xs[2] * xs[3] * (k_out // groups) * kh * kw
            # weights in the op's precision, plus a 4-byte per-channel bias/scale (FP19 in 4-byte containers)
            weight_bytes = w_elems * ELEM_BYTES[p] + 4 * k_out
        elif kind == "sdp":
            op = _BINARY.get(n.op_type) or _ACT.get(n.op_type) or {"BatchNormalization": "batchnorm"}[n.op_type]
            params = {"operation": op}
            weight_bytes = sum(4 * math.prod(inits[i]) for i in n.input if i in inits)
            out, names = absorb(n, out, fused, extra)
            p = _precision_of(names, layer_precisions, precision)
            macs = math.prod(_nchw(shape(out)))
        elif kind == "pool":
            xs = _nchw(shape(ins[0]))
            if n.op_type.startswith("Global") or n.op_type == "ReduceMean":
                params = {"type": "max" if n.op_type == "GlobalMaxPool" else "avg", "kernel": [xs[2], xs[3]],
                          "stride": [1, 1], "pad": [0, 0, 0, 0]}
            else:
                pads = _as_2d(a.get("pads", [0, 0, 0, 0]), 0, pads=True)
                params = {"type": _POOL[n.op_type], "kernel": _as_2d(a["kernel_shape"], 1),
                          "stride": _as_2d(a.get("strides", [1, 1]), 1), "pad": [pads[0], pads[1], pads[2], pads[3]]}
            p = _precision_of(names, layer_precisions, precision)
            macs = math.prod(_nchw(shape(out)))
        else:
            if kind == "resize":
                mode = a.get("mode", b"nearest")
                params = {"mode": mode.decode() if isinstance(mode, bytes) else str(mode)}
            elif kind == "softmax":
                params = {"axis": int(a.get("axis", -1))}
            elif kind in ("concat", "slice"):
                params = {"axis": int(a.get("axis", 0))}
            p = _precision_of(names, layer_precisions, precision)
            if kind in ("softmax", "lrn"):
                p = "fp16"  # the DLA runs SoftMax and LRN in FP16 only (INT8 is promoted)
            macs = 0 if kind in ("concat", "slice", "shuffle") else math.prod(_nchw(shape(out)))
        reads = [read(t, p) for t in ins + extra]
        outs = [root(o) for o in (n.output if kind == "slice" else [out]) if o]
        for o in outs:
            dtype[o] = p
        entry_in = [tensor_entry(t, dtype.get(t, p)) for t in reads]
        entry_out = [tensor_entry(o, p) for o in outs]
        layers.append({
            "index": len(layers), "name": " + ".join(names), "op": kind, "precision": p,
            "inputs": entry_in, "outputs": entry_out, "params": params, "fused": fused,
            "weight_bytes": int(weight_bytes), "macs": int(macs),
            "input_bytes": sum(math.prod(e["shape"]) * ELEM_BYTES[e["dtype"]] for e in entry_in),
            "output_bytes": sum(math.prod(e["shape"]) * ELEM_BYTES[e["dtype"]] for e in entry_out)})
    return layers


_KIND = {"Conv": "conv", "Gemm": "conv", "MatMul": "conv", "ConvTranspose": "deconv",
         "BatchNormalization": "sdp", "ReduceMean": "pool", "ReduceMax": "reduce_max", "Resize": "resize",
         "Upsample": "resize", "Concat": "concat", "Split": "slice", "Slice": "slice", "Transpose": "shuffle",
         "Softmax": "softmax", "LRN": "lrn"}


def _kind(op_type):
    if op_type in _KIND:
        return _KIND[op_type]
    if op_type in _BINARY or op_type in _ACT:
        return "sdp"
    if op_type in _POOL:
        return "pool"
    if op_type in _UNARY:
        return "unary"
    return None


def _known(op_type):
    return _kind(op_type) is not None


def _as_2d(values, h, pads=False):
    """A 1-D node's spatial attribute in its 2-D form over [N, C, 1, T]: H gets `h` (pads: begin and end)."""
    values = [int(v) for v in values]
    if pads and len(values) == 2:
        return [0, values[0], 0, values[1]]
    return [h] + values if len(values) == 1 else values


def _pattern_matches(pattern, name):
    """trtexec's layer patterns: one '*' stands for any text ("*" alone: every layer)."""
    if "*" not in pattern:
        return pattern == name
    prefix, suffix = pattern.split("*", 1)
    return len(name) >= len(prefix) + len(suffix) and name.startswith(prefix) and name.endswith(suffix)


def _precision_of(names, layer_precisions, default):
    """The precision --layerPrecisions gives a layer of these ONNX nodes, as the builder reads it: an
    exact name first, else the longest pattern that matches."""
    for name in names:
        if name in layer_precisions:
            return layer_precisions[name]
    matches = [(len(p), p) for p in layer_precisions for name in names if _pattern_matches(p, name)]
    return layer_precisions[max(matches)[1]] if matches else default
