"""An estimate of how long a network takes on one Orin DLA core (issue 16, item 5), per layer and per run.

    python -m softdla.orin_latency model.loadable            # per-layer table + total
    python -m softdla.orin_latency model.onnx --json         # an ONNX model, layers derived from its graph

    from softdla import orin_latency
    r = orin_latency.estimate_loadable("model.loadable")      # or estimate_onnx(...), estimate(layer_info)
    r["total_ms"], r["fps"], r["layers"][0]["bound"]

Input: the layer list of softdla.inspect(loadable)["layer_info"] (docs/PROFILING.md, "Layer information"),
or the same list derived from an ONNX graph (softdla.onnx_layers). docs/PROFILING.md ("Orin latency
estimate") documents the model, the source of every constant and the calibration against NVIDIA's
published figures (tools/orin_latency_calibration.py).

Per op (a fused DLA op: a conv with its SDP chain, a standalone SDP op, a pool, ...), for a batch of N:

    conv, deconv:  t_op = N x ( max(t_c, t_m) + (1 - overlap) x min(t_c, t_m) + t_o )
    any other op:  t_op = N x ( max(t_c, t_m) + t_o )
    t_c        = MACs / (macs_per_cycle[p] x utilization x conv_efficiency x clock)     conv, deconv
               = elements / (sdp_elems_per_cycle x clock)                               every other op
    t_m        = DRAM bytes / (dram_gbps / dlas)
    t_o        = op_overhead_cycles / clock

  - The batch runs image by image: every term scales with N, as NVIDIA's YOLOv5s latencies do (3.82,
    7.68, 15.17, 30.92, 62.54 ms for batch 1-16 [S9]).
  - Overlap: SDP, PDP and the other non-conv engines stream (read, compute and write in one pass), so
    their time is the larger of compute and memory. A conv fills the conv buffer from DRAM and computes on
    what it holds; `overlap` (fitted) is the share of the shorter of the two it hides behind the longer.
  - utilization: the MAC array takes atomic_c input channels x atomic_k kernels per cycle; a conv with a
    channel or kernel count that is not a whole number of atoms leaves the rest idle. Inputs of <= 4
    channels (the image) use the DLA's channel extension (the kernel's width folded into the channels).
    Grouped and depthwise convs take the better of one group at a time and groups packed block-diagonally
    into an atom (a depthwise conv uses one MAC per kernel of a 64 x 32 tile: 1/64 of the array).
  - DRAM bytes: what an op reads and writes, in the DLA's layout (channels padded to a 32-byte atom, the
    image to 4 channels), except tensors kept in the 1 MiB SRAM, plus its weights once per image. An
    intermediate tensor stays in the SRAM when the tensors still live there leave room for it (greedy, in
    execution order); network inputs and outputs are in DRAM. A conv whose weights and input do not fit
    the conv buffer (cbuf_bytes) together re-reads one of them per tile of the other, whichever costs less.
  - Pooling on the fly: a pool (window <= 8, the PDP's limit) that is the only reader of a conv's output
    takes that output straight from the conv's SDP (NVDLA's CONV -> SDP -> PDP chain): the conv's
    full-size output never reaches memory, the fused op writes the pooled tensor, and the pool adds no op
    overhead (its row reports 0 ms; its PDP time counts in the conv's compute if it is the longer).
  - dlas: how many DLA cores run at once; they share dram_gbps.
  - concat and slice cost nothing: the DLA writes and reads them in place.
  - sparse=True (2:4 structured sparsity): INT8 convs with more than 64 input channels per group run the
    MAC array at twice the rate, on atoms of 2 x atomic_c dense channels (each kernel keeps 2 of every 4
    along C); their weights are stored compressed, half the values plus one mask bit per dense weight
    (5/8 of the dense bytes), in DRAM and in the conv buffer. Activation traffic, the non-MAC engines and
    the per-op overhead do not change.
"""
import argparse
import json
import math
import os
import sys

from .onnx_layers import ELEM_BYTES
from .orin_published import ORIN_INT8_MACS_PER_CYCLE, agx_orin_dla_clock_mhz

# The free parameters, fitted by tools/orin_latency_calibration.py on the published figures
# orin_published.FIT_KEYS (it prints this dict); the module never fits.
FITTED = {
    "conv_efficiency": 0.9837,
    "dram_gbps": 204.8,            # at the fit's bound, the LPDDR5 peak: see PROFILING.md
    "op_overhead_cycles": 12390.0,
    "overlap": 0.2086,             # convolutions only; the other engines stream (overlap 1)
}

# The documented constants (docs/PROFILING.md gives the source or derivation of each; source tags are those
# of softdla.orin_published).
CONSTANTS = {
    # Jetson AGX Orin 64GB at MAXN, from its 105 sparse TOPS (orin_published.agx_orin_dla_clock_mhz).
    "clock_mhz": agx_orin_dla_clock_mhz("MAXN"),
    # INT8: from the 105 TOPS. FP16: Orin's FP16 convolution is "~2x slower than Xavier" [S8 FAQ][S7], whose
    # DLA is NVDLA nv_full (1,024 FP16 MACs per cycle) at a similar clock: 512.
    "macs_per_cycle": {"int8": ORIN_INT8_MACS_PER_CYCLE, "fp16": 512},
    # The array's shape: NVDLA's 64-byte data atom (64 INT8 or 32 FP16 channels) times nv_full's kernel
    # group (32 INT8, 16 FP16 kernels); Orin's four times more INT8 MACs than nv_full work on more output
    # pixels at once, not on more channels.
    "atomic_c": {"int8": 64, "fp16": 32},
    "atomic_k": {"int8": 32, "fp16": 16},
    "image_channels": 4,               # dla_hwc4: the image input is padded to 4 channels
    "atom_bytes": 32,                  # feature-map channels are padded to 32-byte atoms (kCHW32 / kCHW16)
    "sdp_elems_per_cycle": 64,         # SDP/PDP/CDP: nv_full's 16 elements per cycle x 4, as the MAC array
    "sram_bytes": 1 << 20,             # kDLA_MANAGED_SRAM: 1 MiB per Orin DLA core [S5][S8 FAQ]
    "cbuf_bytes": 512 << 10,           # the conv buffer: nv_full's 512 KiB (Orin's size is not published)
    "sparse_speedup": 2.0,             # 2:4 structured sparsity doubles the INT8 MAC rate (105 sparse TOPS)
    "sparse_min_channels": 65,         # ... for convs with C > 64 [S8]
    # 2:4 weights stored compressed: 2 of every 4 INT8 values (4/8 of the bytes) plus 1 mask bit per dense
    # weight (1/8; NVDLA's weight mask bits, or equally a 2-bit index per kept value).
    "sparse_weight_fraction": 0.625,
    "pdp_max_window": 8,               # PDP pooling window limit (TensorRT: window H, W in [1, 8])
}

_FREE_OPS = {"concat", "slice"}


def parameters(**overrides):
    """The model's parameters: CONSTANTS and FITTED, with `overrides` applied (unknown names are an error)."""
    p = {**CONSTANTS, **FITTED}
    for k, v in overrides.items():
        if k not in p:
            raise ValueError(f"unknown parameter {k!r} (known: {', '.join(sorted(p))})")
        p[k] = v
    return p


def _fill(x, atom):
    """The used fraction of whole atoms holding x channels."""
    return x / (math.ceil(x / atom) * atom)


def conv_utilization(c, k, groups, kw, atomic_c, atomic_k, image_channels=4):
    """Fraction of the MAC array a convolution keeps busy (see the module docstring)."""
    cg, kg = max(1, c // groups), max(1, k // groups)
    if groups == 1 and c <= image_channels:
        # channel extension: the image's (padded) channels x the kernel's width fill the channel atom
        util_c = c * kw / (math.ceil(image_channels * kw / atomic_c) * atomic_c)
        return util_c * _fill(k, atomic_k)
    per_group = _fill(cg, atomic_c) * _fill(kg, atomic_k)
    if groups == 1 or cg >= atomic_c:
        return per_group
    packed = min(atomic_c // cg, max(1, atomic_k // kg), groups)
    return max(per_group, packed * cg * kg / (atomic_c * atomic_k))


def _rate_key(precision):
    return "int8" if precision == "int8" else "fp16"


def _tensor_bytes(t, p, dtype_override, image):
    n, c, h, w = (list(t["shape"]) + [1, 1, 1, 1])[:4]
    dt = t.get("dtype", "int8")
    if dtype_override and dt in ("int8", "fp16"):
        dt = dtype_override
    e = ELEM_BYTES.get(dt)
    if e is None:
        raise ValueError(f"tensor {t.get('name')!r}: unknown dtype {dt!r}")
    if image and c <= p["image_channels"]:
        cp = p["image_channels"]
    else:
        per_atom = max(1, p["atom_bytes"] // e)
        cp = math.ceil(c / per_atom) * per_atom
    return n * cp * h * w * e


def _sram_resident(layers, p, precision, on_chip=frozenset()):
    """Names of the intermediate tensors a greedy first-fit keeps in the SRAM: each op's output, when the
    tensors still live there leave room for one image of it. Concat/slice members share one buffer; tensors
    in `on_chip` (a conv's output that flows straight into a pool) take no SRAM."""
    parent = {}

    def find(t):
        while parent.get(t, t) != t:
            t = parent[t]
        return t
    for l in layers:
        if l["op"] in _FREE_OPS:
            for t in l["inputs"] + l["outputs"][1:]:
                parent[find(t["name"])] = find(l["outputs"][0]["name"])
    size, first, last, produced = {}, {}, {}, set()
    for i, l in enumerate(layers):
        n = max(1, int(l["outputs"][0]["shape"][0]))
        for t in l["outputs"]:
            g = find(t["name"])
            produced.add(t["name"])
            b = 0 if t["name"] in on_chip else _tensor_bytes(t, p, precision, image=False) // n
            size[g] = max(size.get(g, 0), b)
            first.setdefault(g, i)
        for t in l["inputs"]:
            last[find(t["name"])] = i
    graph_inputs = {find(t["name"]) for l in layers for t in l["inputs"] if t["name"] not in produced}
    live, used, resident = [], 0, set()
    for i in range(len(layers)):
        for g in [g for g in live if last.get(g, -1) < i]:
            live.remove(g)
            used -= size[g]
        for g in sorted({g for g, f in first.items() if f == i}):
            if g in graph_inputs or g not in last or g in resident:
                continue  # network inputs and outputs are the DRAM buffers the application gave
            if used + size[g] <= p["sram_bytes"]:
                resident.add(g)
                live.append(g)
                used += size[g]
    return {t["name"] for l in layers for t in l["inputs"] + l["outputs"] if find(t["name"]) in resident}


def _pools_on_the_fly(layers, p):
    """{pool index: conv index} for each pool that takes a conv's output straight from its SDP: the pool
    is that output's only reader (a tensor that a later op reads is taken as an intermediate), the conv has
    no other output, both run in one precision and the window fits the PDP."""
    readers = {}
    for i, l in enumerate(layers):
        for t in l["inputs"]:
            readers.setdefault(t["name"], set()).add(i)
    producer = {t["name"]: i for i, l in enumerate(layers) for t in l["outputs"]}
    fused = {}
    for i, l in enumerate(layers):
        if l["op"] != "pool" or len(l["inputs"]) != 1:
            continue
        name = l["inputs"][0]["name"]
        j = producer.get(name)
        if j is None or j >= i or readers.get(name) != {i}:
            continue
        conv = layers[j]
        window = l.get("params", {}).get("kernel", [1, 1])
        if (conv["op"] != "conv" or len(conv["outputs"]) != 1 or conv["precision"] != l["precision"]
                or max(int(k) for k in window) > p["pdp_max_window"]):
            continue
        fused[i] = j
    return fused


def _check_layer(i, layer):
    for key in ("op", "precision", "inputs", "outputs"):
        if key not in layer:
            raise ValueError(f"layer {i} ({layer.get('name', '?')}): missing key {key!r} (docs/PROFILING.md schema)")
    if not layer["outputs"]:
        raise ValueError(f"layer {i} ({layer.get('name', '?')}): no outputs")


def estimate(layers, *, clock_mhz=None, precision=None, sparse=False, dlas=1, params=None):
    """Latency of one run (the whole batch) on one Orin DLA core.

    layers: the layer_info list; clock_mhz: the DLA clock (default: AGX Orin MAXN, 1602 MHz); precision:
    "int8" / "fp16" to estimate every op in that precision instead of the layer's own; sparse: 2:4 structured
    sparse INT8 convs; dlas: DLA cores running at the same time (sharing the DRAM bandwidth); params:
    overrides of parameters(). Returns {"layers": [{"name", "op", "precision",
    "ms", "bound", "macs", "bytes", "compute_ms", "memory_ms", "overhead_ms", "utilization", "fused_into"}],
    "total_ms", "fps", "batch", "parameters"}; "bytes" are DRAM bytes, "fps" images per second of one DLA,
    "fused_into" the index of the conv a pool runs on the fly with (else None)."""
    if precision not in (None, "int8", "fp16"):
        raise ValueError(f"precision must be int8, fp16 or None, not {precision!r}")
    p = parameters(**(params or {}))
    if clock_mhz is not None:
        p["clock_mhz"] = float(clock_mhz)
    if not p["clock_mhz"] > 0:
        raise ValueError(f"clock_mhz must be positive, got {p['clock_mhz']}")
    layers = list(layers)
    if not layers:
        raise ValueError("no layers to estimate")
    for i, layer in enumerate(layers):
        _check_layer(i, layer)
    f = p["clock_mhz"] * 1e6
    if dlas not in (1, 2):
        raise ValueError(f"dlas must be 1 or 2 (Orin has two DLA cores), got {dlas!r}")
    bw = p["dram_gbps"] * 1e9 / dlas  # the DLAs running at once share the DRAM bandwidth
    produced = {t["name"] for l in layers for t in l["outputs"]}
    pool_of = _pools_on_the_fly(layers, p)                 # pool index -> conv index
    conv_to_pool = {j: i for i, j in pool_of.items()}
    on_chip = {layers[j]["outputs"][0]["name"] for j in conv_to_pool}
    in_sram = _sram_resident(layers, p, precision, on_chip) | on_chip
    rows = []
    total_s = 0.0
    batch = 1
    for li, layer in enumerate(layers):
        op = layer["op"]
        prec = precision or layer["precision"]
        rk = _rate_key(prec)
        n = max(1, int(layer["outputs"][0]["shape"][0]))
        batch = max(batch, n)
        ins, outs = layer["inputs"], layer["outputs"]
        in_b = [0 if t["name"] in in_sram else _tensor_bytes(t, p, precision, image=t["name"] not in produced)
                for t in ins]
        out_b = sum(0 if t["name"] in in_sram else _tensor_bytes(t, p, precision, image=False) for t in outs)
        if li in conv_to_pool:  # the fused op writes the pooled tensor
            outs_written = layers[conv_to_pool[li]]["outputs"]
            out_b = sum(0 if t["name"] in in_sram else _tensor_bytes(t, p, precision, image=False)
                        for t in outs_written)
        macs = int(layer.get("macs", 0))
        util = 1.0
        overlap = p["overlap"] if op in ("conv", "deconv") else 1.0
        if op in _FREE_OPS or li in pool_of:
            t_c = t_m = t_o = 0.0
            dram = 0
        else:
            w_b = int(layer.get("weight_bytes", 0))
            if op in ("conv", "deconv"):
                prm = layer.get("params", {})
                c = int(ins[0]["shape"][1]) if ins else 1
                k = int(prm.get("out_channels", outs[0]["shape"][1]))
                groups = int(prm.get("groups", 1))
                kw = int(prm.get("kernel", [1, 1])[1])
                is_sparse = sparse and rk == "int8" and c // groups >= p["sparse_min_channels"]
                # 2:4 sparsity: each kernel keeps 2 of every 4 channels, so one pass takes 2 x atomic_c of them
                atom_c = p["atomic_c"][rk] * (2 if is_sparse else 1)
                util = conv_utilization(c, k, groups, kw, atom_c, p["atomic_k"][rk], p["image_channels"])
                rate = p["macs_per_cycle"][rk] * util * p["conv_efficiency"]
                if is_sparse:
                    rate *= p["sparse_speedup"]
                t_c = macs / (rate * f)
                if li in conv_to_pool:  # the PDP pools the conv's output as the SDP hands it over
                    pool = layers[conv_to_pool[li]]
                    pool_elems = max(math.prod(t["shape"]) for t in pool["inputs"] + pool["outputs"])
                    t_c = max(t_c, pool_elems / (p["sdp_elems_per_cycle"] * f))
                if precision and layer["precision"] in ELEM_BYTES:  # weights stored in the new precision
                    w_b = w_b * ELEM_BYTES[rk] // ELEM_BYTES[_rate_key(layer["precision"])]
                if is_sparse:  # compressed 2:4 weights, in DRAM and in the conv buffer
                    w_b = int(w_b * p["sparse_weight_fraction"])
                # The conv's working set, weights + one image's input, in the conv buffer, else one of them is
                # read again per tile of the other (an input in the SRAM is re-read for free).
                x_all = _tensor_bytes(ins[0], p, precision, image=ins[0]["name"] not in produced) // n if ins else 0
                x_dram = in_b[0] // n if ins else 0
                extra = 0
                if w_b + x_all > p["cbuf_bytes"]:
                    half = p["cbuf_bytes"] / 2
                    extra = min((math.ceil(w_b / half) - 1) * x_dram, (math.ceil(x_all / half) - 1) * w_b)
                dram = sum(in_b) + out_b + n * (w_b + extra)
            else:
                elems = max([math.prod(t["shape"]) for t in ins + outs] or [0])
                t_c = elems / (p["sdp_elems_per_cycle"] * f)
                dram = sum(in_b) + out_b + n * w_b
            t_m = dram / bw
            t_o = n * p["op_overhead_cycles"] / f
        t = max(t_c, t_m) + (1.0 - overlap) * min(t_c, t_m) + t_o
        total_s += t
        parts = {"compute": t_c, "memory": t_m, "overhead": t_o}
        bound = max(parts, key=parts.get) if t > 0 else "overhead"
        rows.append({"name": layer.get("name", f"layer {len(rows)}"), "op": op, "precision": prec,
                     "ms": t * 1e3, "bound": bound, "macs": macs, "bytes": int(dram),
                     "compute_ms": t_c * 1e3, "memory_ms": t_m * 1e3, "overhead_ms": t_o * 1e3,
                     "utilization": util, "fused_into": pool_of.get(li)})
    return {"layers": rows, "total_ms": total_s * 1e3, "fps": batch / total_s if total_s > 0 else None,  # None: nothing takes time (JSON has no infinity)
            "batch": batch, "sparse": bool(sparse), "parameters": p}


def layer_info_of_loadable(path_or_bytes):
    """softdla.inspect(loadable)["layer_info"]."""
    from .builder import inspect
    info = inspect(path_or_bytes)
    if "layer_info" not in info:
        raise RuntimeError("this softdla build's inspect() has no 'layer_info' yet (docs/PROFILING.md); "
                           "estimate the ONNX model instead")
    return info["layer_info"]


def estimate_loadable(path_or_bytes, **kwargs):
    """estimate() of a loadable (path or bytes)."""
    return estimate(layer_info_of_loadable(path_or_bytes), **kwargs)


def estimate_onnx(model, *, precision="int8", layer_precisions=None, shapes=None, **kwargs):
    """estimate() of an ONNX model (path, bytes or ModelProto), its layers derived from the graph
    (softdla.onnx_layers.layers_from_onnx) with every op in `precision` unless `layer_precisions` says
    otherwise."""
    from .onnx_layers import layers_from_onnx
    layers = layers_from_onnx(model, precision=precision, layer_precisions=layer_precisions, shapes=shapes)
    return estimate(layers, **kwargs)


def _is_loadable(data):
    return len(data) >= 8 and data[4:8] == b"SDLA"  # the loadable's FlatBuffers file identifier


def format_table(result):
    lines = [f"{'#':>3}  {'op':<8} {'prec':<5} {'ms':>9} {'bound':<8} {'GMAC':>8} {'MB':>8} {'util':>5}  name"]
    for i, r in enumerate(result["layers"]):
        bound = r["bound"] if r.get("fused_into") is None else f"-> {r['fused_into']}"  # pooled on the fly
        lines.append(f"{i:>3}  {r['op']:<8} {r['precision']:<5} {r['ms']:>9.4f} {bound:<8} "
                     f"{r['macs'] / 1e9:>8.3f} {r['bytes'] / 1e6:>8.3f} {r['utilization']:>5.2f}  {r['name']}")
    p = result["parameters"]
    lines.append(f"total {result['total_ms']:.3f} ms for batch {result['batch']} on one Orin DLA at "
                 f"{p['clock_mhz']:.0f} MHz{' (sparse)' if result['sparse'] else ''}: "
                 f"{'no DLA time' if result['fps'] is None else format(result['fps'], '.1f') + ' images/s'}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="softdla estimate",
                                 description="Estimate the latency of a loadable or ONNX model on one Orin DLA core.")
    ap.add_argument("model", help="a softdla loadable or an ONNX model")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.add_argument("--clock-mhz", type=float, default=None,
                    help=f"DLA clock (default {CONSTANTS['clock_mhz']:.0f}: Jetson AGX Orin at MAXN; DRIVE Orin 1331)")
    ap.add_argument("--precision", choices=("int8", "fp16"), default=None,
                    help="estimate every op in this precision (default: a loadable's own; int8 for ONNX)")
    ap.add_argument("--sparse", action="store_true", help="2:4 structured-sparse INT8 convolutions")
    ap.add_argument("--shapes", default=None, help="ONNX input shapes, e.g. images:1x3x224x224,mask:1x1x8x8")
    a = ap.parse_args(argv)
    try:
        with open(a.model, "rb") as fh:
            data = fh.read()
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    kw = {"clock_mhz": a.clock_mhz, "sparse": a.sparse}
    try:
        if _is_loadable(data):
            r = estimate(layer_info_of_loadable(data), precision=a.precision, **kw)
        else:
            shapes = None
            if a.shapes:
                shapes = {}
                for item in a.shapes.split(","):
                    name, _, dims = item.rpartition(":")
                    shapes[name] = [int(d) for d in dims.split("x")]
            r = estimate_onnx(data, precision=a.precision or "int8", shapes=shapes, **kw)
    except Exception as e:  # noqa: BLE001 - any parse or model error ends the command with its message
        print(f"error: {os.path.basename(a.model)}: {e}", file=sys.stderr)
        return 1
    if a.json:
        print(json.dumps(r, indent=1))
    else:
        print(format_table(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
