"""softdla.compare: an ONNX model in ONNX Runtime FP32 against its DLA loadable, layer by layer
(what Polygraphy's `run --onnxrt --trt --mark all` does for TensorRT), and a greedy search for the fewest
layers to keep in FP16 to reach a target cosine. `softdla compare` on the command line runs `main`.

    r = softdla.compare("model.onnx", calib_data="calib/")   # INT8+FP16; see compare() for the options
    print(r)                      # one row per DLA tensor in execution order, the first jump marked
    r.to_json()                   # the schema is in docs/BUILDER.md (## softdla compare)

The loadable runs through softdla.Device (the cuDLA runtime); the intermediates come from a second build
of the same model with the same options and calibration cache and BuildOptions::expose_intermediates
(every layer output bound as an extra output), so fusion, precisions and scales are those of the loadable.
"""
import argparse
import json
import math
import os
import sys
import tempfile
import types

import numpy as np

__all__ = ["compare", "CompareResult", "CompareError", "main", "JUMP_COSINE_DROP", "JUMP_REL_L2_RATIO", "JUMP_REL_L2_FLOOR"]

# A layer is a "jump" when its tensor is clearly worse than every tensor before it (execution order):
# its cosine, or the median of its per-channel cosines, is more than JUMP_COSINE_DROP below the lowest
# so far, or its relative L2 error is above JUMP_REL_L2_FLOOR and more than JUMP_REL_L2_RATIO times the
# largest so far. "So far" keeps the error that accumulates layer after layer from counting, so the mark
# lands where error enters; the floor keeps FP16 rounding (rel L2 ~1e-3) and ordinary INT8 noise (~1e-2)
# out; the channel median catches a tensor whose every ordinary channel is lost while one outlier
# channel, which dominates the whole-tensor cosine, survives.
JUMP_COSINE_DROP = 0.01
JUMP_REL_L2_RATIO = 4.0
JUMP_REL_L2_FLOOR = 0.05
_MIN_CHANNEL_VALUES = 16  # fewer values per channel (e.g. a [N, K] vector) give no channel statistic

SCHEMA = "softdla-compare/1"
_BUILD_KEYS = {"fp16", "int8", "calib_data", "calib_cache", "calibrator", "input_formats", "output_formats",
               "layer_precisions", "precision_constraints", "target", "shapes"}
_MISSING_ORT = ("ONNX Runtime and onnx are needed for the FP32 reference: pip install onnxruntime onnx "
                "(into {python})")


class CompareError(ValueError):
    """A comparison that cannot run: bad inputs, a loadable that does not fit the model, ..."""


def _require_reference():
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError as e:
        raise ImportError(_MISSING_ORT.format(python=sys.executable) + f" [{e}]") from None


# ------------------------------------------------------------------ metrics and the jump rule
def _cosine(a, b):
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0
    return float(np.clip(a @ b / (na * nb), -1.0, 1.0))


def _channel_cosine(got, ref):
    """Median over channels (axis 1 of the ONNX shape) of the per-channel cosine; channels whose
    reference is all zero are skipped. None when there are too few values per channel."""
    if ref.ndim < 3 or ref.shape[2] < 2:
        return None
    g = np.moveaxis(got, 2, 0).reshape(ref.shape[2], -1)  # ref/got: [samples, N, C, ...]
    r = np.moveaxis(ref, 2, 0).reshape(ref.shape[2], -1)
    if r.shape[1] < _MIN_CHANNEL_VALUES:
        return None
    cos = [_cosine(gc, rc) for gc, rc in zip(g, r) if np.any(rc)]
    return float(np.median(cos)) if cos else None


def _metrics(got, ref):
    """cosine, rel L2, max abs error (and the reference's max abs, the median channel cosine) of the DLA's
    values against the reference, both lists of one array per sample in the reference's shape."""
    ref = np.stack([np.asarray(r, np.float64) for r in ref])
    got = np.stack([np.asarray(g, np.float64).reshape(r.shape) for g, r in zip(got, ref)])
    a, b = got.ravel(), ref.ravel()
    d = a - b
    nb, nd = np.linalg.norm(b), np.linalg.norm(d)
    m = {"cosine": _cosine(a, b), "channel_cosine": _channel_cosine(got, ref),
         "rel_l2": float(nd / nb) if nb > 0 else (0.0 if nd == 0 else math.inf),
         "max_abs": float(np.max(np.abs(d))) if d.size else 0.0,
         "ref_max_abs": float(np.max(np.abs(b))) if b.size else 0.0}
    if not np.all(np.isfinite(a)):  # a NaN/Inf on the DLA side is the worst possible result
        m.update(cosine=0.0, channel_cosine=0.0 if m["channel_cosine"] is not None else None, rel_l2=math.inf)
    return m


def _mark_jumps(rows):
    """Sets row["jump"] by the rule above; returns the first jumping row or None."""
    worst_cos, worst_ch, worst_rel, first = 1.0, 1.0, 0.0, None
    for r in rows:
        cos, ch, rel = r["cosine"], r["channel_cosine"], r["rel_l2"]
        r["jump"] = bool(worst_cos - cos > JUMP_COSINE_DROP or (ch is not None and worst_ch - ch > JUMP_COSINE_DROP) or
                         (rel > JUMP_REL_L2_FLOOR and rel > JUMP_REL_L2_RATIO * worst_rel))
        if r["jump"] and first is None:
            first = r
        worst_cos, worst_rel = min(worst_cos, cos), max(worst_rel, rel)
        worst_ch = min(worst_ch, ch) if ch is not None else worst_ch
    return first


# ------------------------------------------------------------------ inputs
def _input_specs(model, shapes):
    """(name, shape, numpy dtype) of each graph input that is not an initializer."""
    from onnx import helper
    inits = {i.name for i in model.graph.initializer}
    specs = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        t = vi.type.tensor_type
        if vi.name in (shapes or {}):
            dims = [int(d) for d in shapes[vi.name]]
        else:
            dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
            if any(d is None or d <= 0 for d in dims):
                raise CompareError(f"input '{vi.name}' has a dynamic shape: fix it with shapes={{'{vi.name}': [...]}} "
                                   f"(--shapes={vi.name}:1x3x224x224)")
        specs.append((vi.name, tuple(dims), np.dtype(helper.tensor_dtype_to_np_dtype(t.elem_type))))
    return specs


def _smooth(rng, shape):
    """Smooth random images: coarse Gaussian noise upsampled bilinearly plus a little fine noise,
    standardized per sample; activations then look like those of natural images, not of white noise."""
    n, c, h, w = shape
    coarse = rng.standard_normal((n, c, max(2, h // 4), max(2, w // 4)))
    ys, xs = np.linspace(0, coarse.shape[2] - 1, h), np.linspace(0, coarse.shape[3] - 1, w)
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    y1, x1 = np.minimum(y0 + 1, coarse.shape[2] - 1), np.minimum(x0 + 1, coarse.shape[3] - 1)
    fy, fx = (ys - y0)[:, None], (xs - x0)[None, :]
    rows0, rows1 = coarse[:, :, y0, :], coarse[:, :, y1, :]
    up = ((rows0[..., x0] * (1 - fx) + rows0[..., x1] * fx) * (1 - fy) +
          (rows1[..., x0] * (1 - fx) + rows1[..., x1] * fx) * fy)
    x = up + 0.1 * rng.standard_normal(shape)
    axes = (1, 2, 3)
    return (x - x.mean(axis=axes, keepdims=True)) / np.maximum(x.std(axis=axes, keepdims=True), 1e-12)


def _random_inputs(specs, samples, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(samples):
        feeds = {}
        for name, shape, dtype in specs:
            x = _smooth(rng, shape) if len(shape) == 4 and shape[2] > 1 and shape[3] > 1 else rng.standard_normal(shape)
            feeds[name] = x.astype(dtype)
        out.append(feeds)
    return out


def _read_arrays(path, specs):
    """{input name: array} from a .npy (single-input models) or .npz (arrays named after the inputs)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise CompareError(f"inputs file '{path}' does not exist")
    if path.endswith(".npz"):
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    if path.endswith(".npy"):
        if len(specs) != 1:
            raise CompareError(f"'{path}': a .npy file feeds single-input models only; this model has inputs "
                               f"{[s[0] for s in specs]}: use an .npz with one array per input name")
        return {specs[0][0]: np.load(path)}
    raise CompareError(f"inputs file '{path}' is not .npy or .npz")


def _split_samples(arrays, specs, limit=None):
    """Cuts {name: array} into one feed dict per batch: arrays of the input's shape, or with the leading
    axis stacking several batches ((k * N, C, H, W) for an (N, C, H, W) input)."""
    names = [s[0] for s in specs]
    unknown = sorted(set(arrays) - set(names))
    if unknown:
        raise CompareError(f"inputs name {unknown}, which are not model inputs (inputs: {names})")
    missing = [n for n in names if n not in arrays]
    if missing:
        raise CompareError(f"no value for input(s) {missing}")
    stacked = {}
    for name, shape, _ in specs:
        a = np.asarray(arrays[name])
        if a.ndim == len(shape) - 1 and shape[0] == 1:
            a = a[None]  # one sample without its batch axis
        if a.ndim != len(shape) or a.shape[1:] != shape[1:] or a.shape[0] == 0 or a.shape[0] % shape[0]:
            raise CompareError(f"input '{name}' takes arrays of shape {shape} or batches of them stacked on the "
                               f"first axis; got {a.shape}")
        stacked[name] = a
    counts = {name: stacked[name].shape[0] // shape[0] for name, shape, _ in specs}
    n = max(counts.values())
    if any(c not in (1, n) for c in counts.values()):  # as softdla run: a batch of one input without another's
        raise CompareError(f"the inputs hold different numbers of batches ({counts}): give every input one batch "
                           "(reused for each) or the same number of batches")
    n = n if limit is None else min(n, limit)
    return [{name: stacked[name][(k if counts[name] > 1 else 0) * shape[0]:][:shape[0]].astype(dtype)
             for name, shape, dtype in specs} for k in range(n)]


def _calib_inputs(calib_data, specs, samples):
    """The first batches of a calibration directory (same layout as `softdla build --calib-data`)."""
    files = sorted(f for f in os.listdir(calib_data) if f.endswith((".npy", ".npz")))
    shape_of = {name: shape for name, shape, _ in specs}
    merged = {}
    for f in files:  # any layout whose size is a whole number of samples, as the builder reads them
        for name, a in _read_arrays(os.path.join(calib_data, f), specs).items():
            a, per = np.asarray(a), int(np.prod(shape_of.get(name, (1,))[1:]))
            if name in shape_of and a.size % per == 0:
                merged.setdefault(name, []).append(a.reshape((-1,) + shape_of[name][1:]))
    if len(merged) != len(specs):
        return []
    return _split_samples({k: np.concatenate(v) for k, v in merged.items()}, specs, samples)


def _make_inputs(inputs, specs, samples, seed, calib_data):
    """(list of feed dicts, description) for `inputs` as compare() takes it."""
    if inputs is None:
        if calib_data:
            feeds = _calib_inputs(os.fspath(calib_data), specs, samples)
            if feeds:
                return feeds, f"the first {len(feeds)} batch(es) of the calibration data"
        return _random_inputs(specs, samples, seed), f"{samples} random smooth batch(es) (seed {seed})"
    if isinstance(inputs, (str, os.PathLike)):
        return _split_samples(_read_arrays(inputs, specs), specs), f"'{os.fspath(inputs)}'"
    if isinstance(inputs, dict):
        return _split_samples(inputs, specs), "the given arrays"
    if isinstance(inputs, (list, tuple)) and all(isinstance(f, dict) for f in inputs):
        feeds = [f2 for f in inputs for f2 in _split_samples(f, specs)]
        return feeds, "the given arrays"
    raise CompareError("inputs must be a dict {name: array}, a list of such dicts, or a .npy/.npz path")


# ------------------------------------------------------------------ builds
def _normalize_options(build_options, calib_data):
    opts = dict(build_options or {})
    unknown = sorted(set(opts) - _BUILD_KEYS)
    if unknown:
        raise TypeError(f"build_options: unknown key(s) {unknown}; known: {sorted(_BUILD_KEYS)}")
    if calib_data is not None:
        opts["calib_data"] = calib_data
    has_scales = bool(opts.get("calib_data") or opts.get("calib_cache"))
    if "int8" not in opts and "fp16" not in opts:  # the defaults: INT8 where calibration allows it, else FP16
        opts["int8"], opts["fp16"] = has_scales, True
    opts.setdefault("int8", False)
    opts.setdefault("fp16", False)
    if opts.get("precision_constraints") is None:  # as softdla.build: given layer precisions apply
        opts["precision_constraints"] = "prefer" if opts.get("layer_precisions") else "none"
    for key in ("calib_data", "calib_cache"):
        if opts.get(key):
            opts[key] = os.fspath(opts[key])
    if opts.get("calib_data") and not os.path.isdir(opts["calib_data"]):
        raise CompareError(f"calibration data '{opts['calib_data']}' is not a directory of .npy/.npz files")
    return opts


class _Builder:
    """Builds the model with fixed options; every build after the first reads the calibration cache the
    first one wrote, so all of them use identical INT8 scales."""

    def __init__(self, onnx_bytes, opts, workdir, progress):
        self.onnx, self.opts, self.progress = onnx_bytes, opts, progress
        self.cache = None
        self.builds, self.notes = 0, []
        cc = opts.get("calib_cache")
        if opts.get("int8") and (cc and os.path.exists(cc) or opts.get("calib_data")):
            self.cache = cc or os.path.join(workdir, "calibration.cache")

    def build(self, layer_precisions=None, expose=False):
        from ._builder_ext import build as ext_build
        o = self.opts
        ext = {"fp16": "1" if o["fp16"] else "0", "int8": "1" if o["int8"] else "0", "fp32_reference": "0",
               "target": o.get("target", "orin"), "input_formats": o.get("input_formats", ""),
               "output_formats": o.get("output_formats", ""), "calibrator": o.get("calibrator", "auto"),
               "precision_constraints": o.get("precision_constraints", "none"),
               "expose_intermediates": "1" if expose else "0"}
        if layer_precisions and ext["precision_constraints"] == "none":
            # The search's precisions must apply: as in trtexec, none would ignore every per-layer precision.
            ext["precision_constraints"] = "prefer"
        if self.cache and os.path.exists(self.cache):
            ext["calib_cache"] = self.cache
        elif self.cache:
            ext["calib_data"], ext["write_calib_cache"] = o["calib_data"], self.cache
        lp = dict(o.get("layer_precisions") or {})
        lp.update(layer_precisions or {})
        shapes = {k: [int(d) for d in v] for k, v in (o.get("shapes") or {}).items()}
        # The bar redraws a line with '\r': on a terminal only, never into a log.
        progress = _progress_bar if self.progress and self.builds == 0 and sys.stderr.isatty() else None
        loadable, layers, _scales, notes = ext_build(self.onnx, ext, lp, shapes, progress)
        if self.builds == 0:
            self.notes = list(notes)  # what the build did that the options may not suggest
        self.builds += 1
        return loadable, [dict(name=n, kind=k, precision=p, output=out) for n, k, p, out in layers]


def _progress_bar(stage, done, total):
    filled = 30 * done // max(total, 1)
    sys.stderr.write(f"\r{stage:<28} [{'#' * filled}{' ' * (30 - filled)}] {done}/{total}")
    if done == total:
        sys.stderr.write("\n")


def _run_loadable(loadable, feeds):
    """[{output name: float32 array}] per feed, through the cuDLA runtime; and the output names in order."""
    from .runtime import Device
    with Device() as dev:
        m = dev.load(loadable)
        names = [t.name for t in m.outputs]
        return [m.run(f) for f in feeds], names


def _run_reference(model, feeds, names):
    """ONNX Runtime FP32 with each of `names` (node outputs) added as a graph output."""
    import onnx
    import onnxruntime as ort
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    produced = {v for n in m.graph.node for v in n.output if v}
    m.graph.output.extend(onnx.ValueInfoProto(name=v) for v in dict.fromkeys(names) if v in produced and v not in have)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    outs = [o.name for o in sess.get_outputs()]
    return [dict(zip(outs, sess.run(None, f))) for f in feeds]


# ------------------------------------------------------------------ layers <-> ONNX values
def _base(layer_name):
    """The --layerPrecisions name of a layer (the builder's rule: the name before ' (step 2)' etc.)."""
    return layer_name.split(" (")[0]


class _Graph:
    """Maps ONNX values to the DLA layers that compute them, and layers to the layers feeding them."""

    def __init__(self, model, layers):
        self.layers = layers
        self.producer = {v: n for n in model.graph.node for v in n.output if v}
        self.node_named = {n.name: n for n in model.graph.node if n.name}
        self.consts = {i.name for i in model.graph.initializer}
        self.by_output = {l["output"]: i for i, l in enumerate(layers)}
        self.by_base, self._feeders = {}, {}
        for i, l in enumerate(layers):
            self.by_base.setdefault(_base(l["name"]), []).append(i)

    def layer_of(self, value):
        """The index of the layer whose output holds `value`: the layer itself, or the nearest layer up the
        graph when `value` is a fused or free node's output (a Relu fused into its Conv, a Flatten)."""
        if value in self.by_output:
            return self.by_output[value]
        todo, seen = [value], set()
        while todo:
            v = todo.pop(0)
            node = self.producer.get(v)
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            if node.name in self.by_base:
                return self.by_base[node.name][-1]
            todo += [i for i in node.input if i and i not in self.consts]
        return None

    def consumers(self, index):
        """Indices of the layers that read the layer's output."""
        return [j for j in range(len(self.layers)) if j != index and index in self.feeders(j)]

    def feeders(self, index):
        """Indices of the layers whose outputs the layer reads (graph inputs give none)."""
        if index not in self._feeders:
            self._feeders[index] = self._find_feeders(index)
        return self._feeders[index]

    def _find_feeders(self, index):
        group = self.by_base.get(_base(self.layers[index]["name"]), [index])
        if index != group[0]:
            return [group[group.index(index) - 1]]
        node = self.node_named.get(_base(self.layers[index]["name"]))
        if node is None:
            return []
        out = []
        for v in node.input:
            if v and v not in self.consts:
                j = self.layer_of(v)
                if j is not None and j != index and j not in out:
                    out.append(j)
        return out


# ------------------------------------------------------------------ one comparison
def _compare_once(model, graph_outputs, feeds, refs, loadable, layers, ran=None):
    """Rows (execution order), output rows and DLA-only tensor names for one exposed-intermediates loadable
    (`ran`: its results if it has run already)."""
    dla, names = ran or _run_loadable(loadable, feeds)
    graph = _Graph(model, layers)
    rows, outputs, not_compared = [], [], []
    for k, name in enumerate(names):
        onnx_name = graph_outputs[k] if k < len(graph_outputs) else name
        if onnx_name not in refs[0] or dla[0][name].size != np.asarray(refs[0][onnx_name]).size:
            not_compared.append(name)
            continue
        m = _metrics([d[name] for d in dla], [r[onnx_name] for r in refs])
        li = graph.layer_of(onnx_name)
        layer = layers[li] if li is not None else {"name": None, "kind": None, "precision": None}
        node = graph.producer.get(onnx_name)
        rows.append({"tensor": onnx_name, "layer": layer["name"], "kind": layer["kind"],
                     "onnx_op": node.op_type if node else None, "precision": layer["precision"],
                     "shape": [int(d) for d in np.shape(refs[0][onnx_name])], "is_output": k < len(graph_outputs),
                     **m, "_layer_index": li if li is not None else len(layers)})
        if k < len(graph_outputs):
            outputs.append({"tensor": onnx_name, **m})
    rows.sort(key=lambda r: r["_layer_index"])  # stable: execution order of the layers
    rows = [{"index": i, **r} for i, r in enumerate(rows)]
    return rows, outputs, not_compared, graph


def _output_cosine(outputs):
    return min((o["cosine"] for o in outputs), default=1.0)


# ------------------------------------------------------------------ precision search
def _moves(rows, graph, layers, chosen):
    """Sets of layers to try in FP16 next, most promising first. Layers are ranked jumps first (in
    execution order), then by the error they add (their rel L2 minus the worst of the tensors they read).
    Each ranked INT8 layer gives up to three moves: itself; itself with the INT8 layers it reads from;
    itself with the INT8 layers that read it. A tensor is quantized wherever an INT8 layer writes or reads
    it, with the same scale, so a badly quantized tensor only stops hurting when both its ends run FP16."""
    rel_of = {r["_layer_index"]: r["rel_l2"] for r in rows}
    ranked = []
    for r in rows:
        i = r["_layer_index"]
        if i < len(layers):
            before = max((rel_of.get(j, 0.0) for j in graph.feeders(i)), default=0.0)
            added = r["rel_l2"] - before if math.isfinite(r["rel_l2"]) else math.inf
            ranked.append((0 if r["jump"] else 1, r["index"] if r["jump"] else -added, i))
    ranked.sort()
    int8 = lambda js: {_base(layers[j]["name"]) for j in js if layers[j]["precision"] == "int8"}  # noqa: E731
    moves, seen = [], set()
    for _, _, i in ranked:
        if layers[i]["precision"] != "int8":
            continue
        for extra in ([], graph.feeders(i), graph.consumers(i)):
            move = frozenset({_base(layers[i]["name"])} | int8(extra)) - set(chosen)
            if move and move not in seen:
                seen.add(move)
                moves.append(sorted(move))
    return moves


def _search(builder, model, graph_outputs, feeds, refs, target, start, per_round, max_builds, log):
    """Greedy forward selection of moves (_moves) while the output cosine is below the target, then backward
    elimination of layers that are no longer needed; see docs/BUILDER.md."""
    def evaluate(names):
        lb, ls = builder.build({n: "fp16" for n in names}, expose=True)
        rows, outs, _, g = _compare_once(model, graph_outputs, feeds, refs, lb, ls)
        _mark_jumps(rows)
        return _output_cosine(outs), rows, g, ls

    rows, outputs, graph, layers = start
    chosen, steps, builds = [], [], 0
    cos = baseline = _output_cosine(outputs)
    useless = set()  # moves that did not help since the last change
    while cos < target and builds < max_builds:
        moves = [m for m in _moves(rows, graph, layers, chosen) if tuple(m) not in useless]
        if not moves:
            break
        best = None
        for move in moves[:per_round]:
            if builds >= max_builds:
                break
            c, r, g, ls = evaluate(chosen + move)
            builds += 1
            log(f"  try {'+'.join(move)} in FP16: output cosine {c:.6f}")
            if c <= cos + 1e-7:
                useless.add(tuple(move))
            elif best is None or c > best[0]:
                best = (c, move, r, g, ls)
        if best is None:
            continue  # nothing in this round helped: the next round tries the next moves
        cos, move, rows, graph, layers = best
        chosen += move
        useless.clear()  # with more layers in FP16 an old move may help now
        steps.append({"action": "add", "layers": move, "output_cosine": cos})
        log(f"  keep {'+'.join(move)} in FP16: output cosine {cos:.6f}")
    met = cos >= target
    if met:  # a layer added early may be redundant once later ones run in FP16
        for name in list(chosen):
            if builds >= max_builds:
                break
            rest = [n for n in chosen if n != name]
            c, *_ = evaluate(rest)
            builds += 1
            if c >= target:
                chosen, cos = rest, c
                steps.append({"action": "drop", "layers": [name], "output_cosine": c})
                log(f"  drop {name}: output cosine {c:.6f} still meets the target")
    return {"target_cosine": target, "met": met, "layers": chosen, "baseline_cosine": baseline,
            "output_cosine": cos, "builds": builds, "steps": steps}


def _flag(layer_precisions, constraints="none"):
    """The flags that build what the search found: per-layer precisions take effect only under prefer or
    obey (trtexec's rule), so none becomes prefer."""
    if not layer_precisions:
        return ""
    return (f"--precisionConstraints={'prefer' if constraints == 'none' else constraints} --layerPrecisions="
            + ",".join(f"{k}:{v}" for k, v in layer_precisions.items()))


# ------------------------------------------------------------------ the result
class CompareResult:
    """The comparison: `.layers` (one dict per DLA tensor with an ONNX reference, execution order),
    `.outputs`, `.first_jump` (a row of .layers or None), `.search` (precision search or None),
    `.not_compared`, `.warnings`; `.to_json()`; str() is a table."""

    def __init__(self, info, layers, outputs, first_jump, not_compared, warnings, search=None):
        self.info, self.layers, self.outputs, self.first_jump = info, layers, outputs, first_jump
        self.not_compared, self.warnings, self.search = not_compared, warnings, search
        self.loadable = None         # the compared loadable (bytes)
        self.search_loadable = None  # the loadable rebuilt with the search's --layerPrecisions

    @property
    def output_cosine(self):
        return _output_cosine(self.outputs)

    def to_dict(self):
        def clean(v):
            if isinstance(v, float) and not math.isfinite(v):
                return None
            if isinstance(v, dict):
                return {k: clean(x) for k, x in v.items() if not k.startswith("_")}
            if isinstance(v, list):
                return [clean(x) for x in v]
            return v
        fj = self.first_jump
        return clean({"schema": SCHEMA, **self.info,
                      "jump_rule": {"cosine_drop": JUMP_COSINE_DROP, "rel_l2_ratio": JUMP_REL_L2_RATIO,
                                    "rel_l2_floor": JUMP_REL_L2_FLOOR},
                      "layers": self.layers, "outputs": self.outputs,
                      "first_jump": {"index": fj["index"], "tensor": fj["tensor"], "layer": fj["layer"]} if fj else None,
                      "not_compared": self.not_compared, "warnings": self.warnings, "search": self.search})

    def to_json(self, indent=2):
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def __str__(self):
        i = self.info
        lines = [f"softdla compare: {i['model']} ({i['precisions']}) vs ONNX Runtime FP32 on {i['inputs']}"]
        head = ("#", "tensor", "layer", "kind", "prec", "cosine", "chan_cos", "rel_l2", "max_abs")
        body = [(str(r["index"]), r["tensor"], r["layer"] or "-", r["kind"] or "-", r["precision"] or "-",
                 f"{r['cosine']:.6f}", "-" if r["channel_cosine"] is None else f"{r['channel_cosine']:.6f}",
                 f"{r['rel_l2']:.3e}", f"{r['max_abs']:.3e}") for r in self.layers]
        widths = [max(len(x) for x in col) for col in zip(head, *body)]
        fmt = lambda cells: "  ".join(c.rjust(w) if k in (0, 5, 6, 7, 8) else c.ljust(w)  # noqa: E731
                                      for k, (c, w) in enumerate(zip(cells, widths)))
        lines.append(fmt(head))
        for r, cells in zip(self.layers, body):
            mark = ("  <-- first jump" if r is self.first_jump else "  <-- jump" if r["jump"] else "")
            lines.append((fmt(cells) + mark + ("  (output)" if r["is_output"] else "")).rstrip())
        if self.first_jump is None:
            lines.append("no jump: no layer's error is clearly above those before it")
        for o in self.outputs:
            lines.append(f"output {o['tensor']}: cosine {o['cosine']:.6f}, rel L2 {o['rel_l2']:.3e}, "
                         f"max abs {o['max_abs']:.3e}")
        if self.not_compared:
            lines.append(f"not compared (tensors the builder made, no ONNX value): {', '.join(self.not_compared)}")
        lines += [f"warning: {w}" for w in self.warnings]
        s = self.search
        if s:
            if s["met"] and not s["layers"]:
                lines.append(f"precision search: the outputs already reach cosine {s['target_cosine']} "
                             f"({s['baseline_cosine']:.6f}); no layer needs FP16")
            elif s["met"]:
                lines.append(f"precision search: {len(s['layers'])} layer(s) in FP16 reach output cosine "
                             f"{s['output_cosine']:.6f} >= {s['target_cosine']} (was {s['baseline_cosine']:.6f}, "
                             f"{s['builds']} builds); build with:")
                lines.append(f"  {s['flag']}")
            else:
                lines.append(f"precision search: target cosine {s['target_cosine']} not reached "
                             f"(best {s['output_cosine']:.10g} with {len(s['layers'])} layer(s) in FP16, "
                             f"{s['builds']} builds)" + (f"; closest: {s['flag']}" if s["flag"] else ""))
        return "\n".join(lines)


# ------------------------------------------------------------------ the entry points
def _load_model(onnx_model):
    import onnx
    if isinstance(onnx_model, onnx.ModelProto):
        return onnx_model, onnx_model.SerializeToString(), "<ModelProto>"
    if isinstance(onnx_model, (str, os.PathLike)):
        path = os.fspath(onnx_model)
        if not os.path.isfile(path):
            raise CompareError(f"ONNX model '{path}' does not exist")
        with open(path, "rb") as f:
            data = f.read()
        name = path
    else:
        data, name = bytes(onnx_model), "<bytes>"
    try:
        return onnx.load_model_from_string(data), data, name
    except Exception as e:  # noqa: BLE001 - protobuf raises several types
        raise CompareError(f"'{name}' is not a valid ONNX model ({e})") from None


def _loadable_formats(loadable, n_outputs):
    """The I/O formats a given loadable was built with, as --inputIOFormats/--outputIOFormats specs."""
    from .builder import inspect
    info = inspect(loadable)
    spec = lambda ts: ",".join(f"{t['dtype']}:{t['format']}" for t in ts)  # noqa: E731
    return info, spec(info["inputs"]), spec(info["outputs"][:n_outputs])


def compare(onnx_model, loadable=None, *, inputs=None, build_options=None, calib_data=None, samples=4, seed=0,
            target_cosine=None, search_per_round=6, search_max_builds=64, progress=False, log=None):
    """Compares the DLA loadable of `onnx_model` (path, bytes or onnx.ModelProto) with ONNX Runtime FP32,
    tensor by tensor, and returns a CompareResult.

    loadable: bytes or path; None builds one with `build_options` (softdla.build's keyword arguments:
      fp16, int8, calib_data, calib_cache, calibrator, input_formats, output_formats, layer_precisions,
      precision_constraints, target, shapes). Without fp16/int8 there: INT8+FP16 when calibration data
      or a cache is given (calib_data= here or in build_options), else FP16; FP16 too when a given
      loadable has no INT8 layer (calibration data are then only its inputs). A given loadable must have
      been built from this model with these options (and its calibration data or cache): the per-layer
      values come from a rebuild with every intermediate exposed, and a warning says when its outputs
      differ from the loadable's.
    inputs: {name: array} (the leading axis may stack several batches), a list of such dicts, or a
      .npy/.npz path; default: the first `samples` batches of the calibration data if given, else
      `samples` random smooth batches from `seed`.
    target_cosine: also search for the fewest layers to run in FP16 (layer_precisions) for the lowest
      output cosine to reach it; the result's .search holds the layers and the --layerPrecisions flag.
    """
    _require_reference()
    say = log or (lambda s: sys.stderr.write(s + "\n") if progress else None)
    model, onnx_bytes, model_name = _load_model(onnx_model)
    precisions_given = any(k in (build_options or {}) for k in ("int8", "fp16"))
    opts = _normalize_options(build_options, calib_data)
    if samples < 1:
        raise CompareError(f"samples must be at least 1, got {samples}")
    if target_cosine is not None:
        if not 0 < target_cosine <= 1:
            raise CompareError(f"target cosine must be in (0, 1], got {target_cosine}")
        if not (opts["int8"] and opts["fp16"]):
            raise CompareError("the precision search moves INT8 layers to FP16: build with int8 and fp16 "
                               "(--int8 --fp16 and calibration data)")
    specs = _input_specs(model, opts.get("shapes"))
    feeds, inputs_text = _make_inputs(inputs, specs, samples, seed, opts.get("calib_data"))
    graph_outputs = [o.name for o in model.graph.output]
    warnings = []
    given = None
    loadable_path = os.fspath(loadable) if isinstance(loadable, (str, os.PathLike)) else None
    if loadable is not None:
        if loadable_path is not None:
            if not os.path.isfile(loadable):
                raise CompareError(f"loadable '{os.fspath(loadable)}' does not exist")
            with open(loadable, "rb") as f:
                loadable = f.read()
        given = bytes(loadable)
        info, in_spec, out_spec = _loadable_formats(given, len(graph_outputs))
        if len(info["outputs"]) != len(graph_outputs):
            raise CompareError(f"the loadable has {len(info['outputs'])} outputs and the model {len(graph_outputs)}: "
                               "is it built from this model?")
        # Build the variant with the loadable's I/O formats, which change the first and last layers' numerics.
        opts.setdefault("input_formats", in_spec)
        opts.setdefault("output_formats", out_spec)
        if not precisions_given and "int8" not in info["precisions"]:
            # Without --int8/--fp16 the precisions follow the loadable's: calibration data given with an
            # FP16 loadable are its inputs, and an INT8 variant would describe another build.
            opts["int8"], opts["fp16"] = False, True
        if "int8" in info["precisions"] and not opts["int8"]:
            raise CompareError("the loadable runs INT8 layers: pass the options and the calibration data or cache it "
                               "was built with (--int8 --fp16 --calib-data DIR or --calib FILE)")
    with tempfile.TemporaryDirectory(prefix="softdla-compare-") as work:
        builder = _Builder(onnx_bytes, opts, work, progress)
        if given is None:
            say("building the loadable")
            given, _ = builder.build()
        say("building the variant with every intermediate exposed")
        exposed, layers = builder.build(expose=True)
        say(f"running ONNX Runtime FP32 and the loadable on {len(feeds)} batch(es)")
        wanted = graph_outputs + [l["output"] for l in layers]
        refs = _run_reference(model, feeds, wanted)
        variant, vnames = _run_loadable(exposed, feeds)
        rows, _, not_compared, graph = _compare_once(model, graph_outputs, feeds, refs, exposed, layers,
                                                     (variant, vnames))
        # The output rows come from the loadable itself; the exposed variant must agree with it.
        real, names = _run_loadable(given, feeds)
        if any(not np.array_equal(r[a], v[b]) for r, v in zip(real, variant) for a, b in zip(names, vnames)):
            warnings.append("the loadable's outputs differ from a build of this model with these options: the per-layer "
                            "rows describe that build; pass the options and calibration the loadable was built with")
        warnings.extend(builder.notes)
        if opts["int8"] and not any(l["precision"] == "int8" for l in layers):
            warnings.append("no layer runs in INT8: the build found no scales (give calibration data or a cache)")
        outputs = []
        for k, name in enumerate(names):
            m = _metrics([r[name] for r in real], [ref[graph_outputs[k]] for ref in refs])
            outputs.append({"tensor": graph_outputs[k], **m})
            for r in rows:
                if r["is_output"] and r["tensor"] == graph_outputs[k]:
                    r.update(m)
        first = _mark_jumps(rows)
        precisions = "+".join(p for p in ("int8", "fp16") if opts[p])
        info = {"model": model_name, "loadable": loadable_path,
                "precisions": precisions, "samples": len(feeds), "inputs": inputs_text,
                "build_options": {k: (v if not isinstance(v, os.PathLike) else os.fspath(v)) for k, v in opts.items()}}
        result = CompareResult(info, rows, outputs, first, not_compared, warnings)
        result.loadable = given
        if target_cosine is not None:
            say(f"precision search for output cosine >= {target_cosine}")
            s = _search(builder, model, graph_outputs, feeds, refs, target_cosine, (rows, outputs, graph, layers),
                        search_per_round, search_max_builds, say)
            merged = dict(opts.get("layer_precisions") or {})
            merged.update({n: "fp16" for n in s["layers"]})
            s["layer_precisions"] = merged
            s["flag"] = _flag(merged, opts.get("precision_constraints", "none")) if s["layers"] else ""
            if s["layers"]:
                result.search_loadable, _ = builder.build({n: "fp16" for n in s["layers"]})
            result.search = s
    return result


# ------------------------------------------------------------------ command line
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_TARGET_MISSED = 0, 1, 2, 3


def _parser():
    p = argparse.ArgumentParser(
        prog="softdla compare", allow_abbrev=False,
        description="Run an ONNX model in ONNX Runtime FP32 and its DLA loadable on the same inputs, and report "
                    "cosine, relative L2 and max abs error for every tensor the DLA computes, marking the first "
                    "layer where the error jumps. Exit status: 0 done, 1 failed, 2 bad arguments, "
                    "3 --target-cosine not reached.")
    p.add_argument("model", help="ONNX model")
    p.add_argument("--loadable", help="the loadable to compare (default: build one with the flags below)")
    b = p.add_argument_group("build flags (as softdla build; used for the loadable and its exposed variant)")
    b.add_argument("--fp16", action="store_true", help="allow FP16 layers")
    b.add_argument("--int8", action="store_true", help="allow INT8 layers (default with --calib-data/--calib)")
    b.add_argument("--calib-data", help="directory of .npy/.npz calibration inputs")
    b.add_argument("--calib", help="TensorRT calibration cache: read if it exists, else written after calibrating")
    b.add_argument("--calibrator", choices=["auto", "entropy", "minmax", "percentile", "mse"], default="auto")
    b.add_argument("--inputIOFormats", default="", help="type:format[,...]")
    b.add_argument("--outputIOFormats", default="", help="type:format[,...]")
    b.add_argument("--layerPrecisions", default="", help="layer:fp16|int8[,...]")
    b.add_argument("--precisionConstraints", choices=["none", "prefer", "obey"], default=None,
                   help="default: prefer where --layerPrecisions are given (so that the comparison and the precision "
                        "search see them), else none")
    b.add_argument("--target", choices=["orin", "xavier"], default="orin")
    b.add_argument("--shapes", default="", help="name:1x3x224x224[,...]")
    c = p.add_argument_group("comparison")
    c.add_argument("--inputs", help="inputs: .npz (one array per input name) or .npy (single-input models); the "
                                    "leading axis may stack batches (default: calibration data, else random)")
    c.add_argument("--samples", type=int, default=4, help="batches to run without --inputs (default 4)")
    c.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    c.add_argument("--json", metavar="FILE|-", help="write the result as JSON to FILE, or to stdout with -")
    c.add_argument("--target-cosine", type=float, help="search the fewest layers to keep in FP16 for the outputs "
                                                       "to reach this cosine; prints the --layerPrecisions flag")
    c.add_argument("--max-builds", type=int, default=64, help="builds the precision search may use (default 64)")
    return p


def _pairs(spec, flag, parser):
    out = {}
    for item in filter(None, spec.split(",")):
        name, sep, value = item.rpartition(":")
        if not sep or not name:
            parser.error(f"{flag} takes name:value[,...], got '{item}'")
        out[name.strip("'\"")] = value
    return out


def _args_to_options(a, parser):
    if not os.path.isfile(a.model):
        parser.error(f"ONNX model '{a.model}' does not exist")
    if a.loadable and not os.path.isfile(a.loadable):
        parser.error(f"loadable '{a.loadable}' does not exist")
    if a.calib_data and not os.path.isdir(a.calib_data):
        parser.error(f"--calib-data '{a.calib_data}' is not a directory")
    if a.inputs and not (os.path.isfile(a.inputs) and a.inputs.endswith((".npz", ".npy"))):
        parser.error(f"--inputs '{a.inputs}' is not an existing .npz or .npy file")
    if a.samples < 1:
        parser.error("--samples must be at least 1")
    if not 0 <= a.seed < 2 ** 32:
        parser.error(f"--seed must be in 0 to {2 ** 32 - 1}, got {a.seed}")
    if a.max_builds < 1:
        parser.error(f"--max-builds must be at least 1, got {a.max_builds}")
    if a.target_cosine is not None and not 0 < a.target_cosine <= 1:
        parser.error(f"--target-cosine must be in (0, 1], got {a.target_cosine}")
    opts = {"calibrator": a.calibrator, "precision_constraints": a.precisionConstraints, "target": a.target}
    if a.int8 or a.fp16:
        opts["int8"], opts["fp16"] = a.int8, a.fp16
    for key, value in (("calib_data", a.calib_data), ("calib_cache", a.calib), ("input_formats", a.inputIOFormats),
                       ("output_formats", a.outputIOFormats)):
        if value:
            opts[key] = value
    if a.layerPrecisions:
        opts["layer_precisions"] = _pairs(a.layerPrecisions, "--layerPrecisions", parser)
    if a.shapes:
        shapes = _pairs(a.shapes, "--shapes", parser)
        try:
            opts["shapes"] = {k: [int(d) for d in v.split("x")] for k, v in shapes.items()}
        except ValueError:
            parser.error(f"--shapes takes name:1x3x224x224[,...], got '{a.shapes}'")
    return opts


def main(argv=None):
    parser = _parser()
    a = parser.parse_args(argv)
    opts = _args_to_options(a, parser)
    try:
        _require_reference()
    except ImportError as e:
        sys.stderr.write(f"softdla compare: {e}\n")
        return EXIT_FAILED
    from .builder import BuildError
    if a.json and a.json != "-":  # a path that cannot be written fails now, not after the whole comparison
        parent = os.path.dirname(os.path.abspath(a.json))
        if not os.path.isdir(parent) or os.path.isdir(a.json):
            sys.stderr.write(f"softdla compare: error: --json '{a.json}': "
                             f"{'is a directory' if os.path.isdir(a.json) else 'its directory does not exist'}\n")
            return EXIT_FAILED
    try:
        r = compare(a.model, a.loadable, inputs=a.inputs, build_options=opts, samples=a.samples, seed=a.seed,
                    target_cosine=a.target_cosine, search_max_builds=a.max_builds, progress=True)
    except (CompareError, BuildError, OSError) as e:
        sys.stderr.write(f"softdla compare: error: {e}\n")
        return EXIT_FAILED
    except KeyboardInterrupt:
        sys.stderr.write("softdla compare: interrupted\n")
        return 130
    if a.json == "-":
        sys.stdout.write(r.to_json() + "\n")
    else:
        print(r)
        if a.json:
            try:
                with open(a.json, "w") as f:
                    f.write(r.to_json() + "\n")
            except OSError as e:
                sys.stderr.write(f"softdla compare: error: cannot write --json '{a.json}' ({e.strerror})\n")
                return EXIT_FAILED
    return EXIT_TARGET_MISSED if r.search is not None and not r.search["met"] else EXIT_OK


class _CallableModule(types.ModuleType):
    """`softdla.compare` is this module (importing it as a submodule makes it the package attribute
    anyway); calling it calls compare()."""

    def __call__(self, *args, **kwargs):
        return compare(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    sys.exit(main())
