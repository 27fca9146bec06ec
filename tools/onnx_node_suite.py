#!/usr/bin/env python3
"""ONNX's node conformance cases through the softdla builder and engine (issue 12, item 6).

The onnx wheel carries the case definitions (`onnx.backend.test.case.node`), not the generated
data/node folder, so the cases are generated here: each one is a single-node model with its inputs and
the outputs ONNX expects. Every case of an op the builder lowers, and of the CNN ops it must reject, is
built twice (FP16, and the FP32 reference loadable), run through the engine and classified:

  pass                 FP16 result within rel L2 1e-3 of ONNX's expected outputs
  pass-fp16-rounding   FP16 off, but the FP32 reference build matches and ONNX's reference evaluator run on
                       the inputs rounded to FP16 agrees with the FP16 result: the difference is the
                       storage precision, not a wrong lowering
  rejected             BuildError naming the node (its op) and a rule, or the graph input/output it is about
  rejected-unnamed     BuildError naming neither the node nor a graph input/output (issue 12: every error names
                       the ONNX node)
  opset                rejected only because of the model's opset; the case is retried with its opset
                       moved into the builder's range when the op's definition is the same there
  MISMATCH             built, ran, and gave a wrong result (or accepted I/O the DLA cannot have)
  crash                anything else: another exception, a dead process

Usage:
  .venv/bin/python tools/onnx_node_suite.py [-q] [--op Conv,Add] [-k substr] [--all]
      [--doc docs/ACCURACY.md] [--markdown FILE] [--json FILE]
The exit status is 1 when a case is not what issue 12 asks for (see `acceptable`).
"""
import argparse
import dataclasses
import importlib
import json
import multiprocessing
import os
import pkgutil
import re
import sys
import time
import warnings

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
os.environ.setdefault("SOFTDLA_LOG", "none")  # rejections are read from the exception, not the log

import onnx  # noqa: E402
from onnx import TensorProto, numpy_helper  # noqa: E402

# Ops in the builder's lowering table (docs/BUILDER.md, lower.cpp / fold.cpp).
LOWERED_OPS = (
    "Conv", "ConvTranspose", "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "MaxPool",
    "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Reshape", "Flatten", "Squeeze", "Unsqueeze",
    "Transpose", "Identity", "Dropout", "ReduceMean", "ReduceMax", "ReduceSum", "Resize", "Upsample", "Split",
    "Slice", "Concat", "Softmax", "LRN", "Abs", "BatchNormalization", "Relu", "LeakyRelu", "PRelu", "Clip",
    "Sigmoid", "Tanh", "Neg", "QuantizeLinear", "DequantizeLinear",
)
# Ops met in CNN exports that the DLA has no layer for (or that the builder only folds when constant):
# their cases check that the builder refuses them with a message instead of building something else.
REJECTED_OPS = (
    "HardSigmoid", "HardSwish", "Elu", "Selu", "Celu", "Gelu", "Mish", "Softplus", "Softsign", "ThresholdedRelu",
    "Exp", "Log", "Sqrt", "Pow", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Erf", "Sin", "Cos",
    "Pad", "InstanceNormalization", "LayerNormalization", "GroupNormalization", "LpNormalization", "Mean",
    "LogSoftmax", "Hardmax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare",
    "ReduceLogSum", "ReduceLogSumExp", "ArgMax", "DepthToSpace", "SpaceToDepth", "LpPool", "MaxUnpool", "Tile",
    "Expand", "Where", "Equal", "Greater", "Less", "Not", "Cast", "Gather", "Shape", "Range",
    "ConstantOfShape", "TopK", "Einsum",
)

FP16_TOL = 1e-3  # rel L2 of an FP16 build (the bound)
FP32_TOL = 1e-5  # rel L2 of the FP32 reference build: float rounding and summation order only
FLOAT_TYPES = (TensorProto.FLOAT, TensorProto.FLOAT16)
CONST_SUFFIX = "+const"  # the variant of a case with its operands as initializers
CLASSES = ("pass", "pass-fp16-rounding", "rejected", "opset", "rejected-unnamed", "MISMATCH", "crash")
OK_CLASSES = ("pass", "pass-fp16-rounding", "rejected")


@dataclasses.dataclass
class Case:
    name: str
    op: str
    model: onnx.ModelProto
    inputs: list  # arrays in graph input order
    outputs: list  # ONNX's expected arrays in graph output order


@dataclasses.dataclass
class Result:
    name: str
    op: str
    result: str
    detail: str = ""
    opset: int = 0
    retarget: dict | None = None  # the same case at an opset the builder accepts, when that is sound

    def row(self):
        return dataclasses.asdict(self)


# ------------------------------------------------------------------------------------------ cases
def _ops_in_module_source(path):
    with open(path) as f:
        return set(re.findall(r'make_node\(\s*"(\w+)"', f.read()))


def _import_case_modules(wanted):
    """Imports the case modules (each one generates its cases on import). Only those that make a node of
    a wanted op: generating all 2,000 cases takes three times longer."""
    import onnx.backend.test.case.node as node_cases
    for module in pkgutil.iter_modules(node_cases.__path__):
        path = os.path.join(module.module_finder.path, module.name + ".py")
        if module.ispkg or not os.path.exists(path):
            continue
        if wanted is None or _ops_in_module_source(path) & wanted:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")  # some generators overflow or divide by zero on purpose
                importlib.import_module(f"{node_cases.__name__}.{module.name}")
    return node_cases._NodeTestCases


def generate_cases(ops=None):
    """The node cases of `ops` (all ops when None), in ONNX's order: each single-node case, its
    `_expanded` forms (the op's function body, a graph of simpler ops: fusions and folding get tested
    too), and for each of them the variant with constant operands."""
    wanted = None if ops is None else set(ops)
    op_of = {}  # case name -> op of its node, for the expanded forms that follow it
    cases = []
    for tc in _import_case_modules(wanted):
        base = tc.name.split("_expanded")[0]
        if tc.kind != "node" or (base == tc.name and len(tc.model.graph.node) != 1):
            continue
        if base == tc.name:
            op_of[base] = tc.model.graph.node[0].op_type
        op = op_of.get(base)
        if op is None or (wanted is not None and op not in wanted):
            continue
        (inputs, outputs), = tc.data_sets  # expect() makes one data set per case
        case = Case(tc.name, op, tc.model, list(inputs), list(outputs))
        cases.append(case)
        if len(inputs) > 1 and all(vi.type.HasField("tensor_type") for vi in tc.model.graph.input[1:]):
            cases.append(with_constant_operands(case))
    return cases


def with_constant_operands(case):
    """The case as exporters write it: every input but the first (weights, bias, axes, shapes, scales,
    bounds, second operands) an initializer. The builder needs most of them constant, so without this
    variant most Conv, Gemm, Resize, Clip, Reshape ... cases would only test a rejection."""
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    graph = model.graph
    consts = list(graph.input[1:])
    del graph.input[1:]
    for vi, value in zip(consts, case.inputs[1:]):
        graph.initializer.append(as_tensor(value, vi.name))
    return Case(case.name + CONST_SUFFIX, case.op, model, case.inputs[:1], case.outputs)


def as_tensor(value, name):
    """An initializer from a case input (an array, or a TensorProto for types NumPy lacks)."""
    if isinstance(value, TensorProto):
        t = TensorProto()
        t.CopyFrom(value)
        t.name = name
        return t
    return numpy_helper.from_array(np.asarray(value), name)


def as_array(value):
    """A case value as a NumPy array (TensorProtos hold types NumPy lacks; those that even ml_dtypes
    cannot hold stay protos and fail where they are used, as a crash of the case)."""
    if isinstance(value, TensorProto):
        try:
            return numpy_helper.to_array(value)
        except Exception:  # noqa: BLE001
            return value
    return value


def model_opset(model):
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


# ------------------------------------------------------------------------------------------ running
_stage_hook = None  # set in the worker process: tells the parent what a crash would have interrupted


def stage(text):
    if _stage_hook:
        _stage_hook(text)


def build(model, **flags):
    """(loadable, None) or (None, the BuildError's message)."""
    import softdla
    stage(f"build {flags} at opset {model_opset(model)}")
    try:
        return softdla.build(model, progress=False, **flags), None
    except softdla.BuildError as e:
        return None, str(e)


def run(loadable, model, inputs):
    """Runs the loadable on the case's inputs (matched to the input descriptors by name, else by position);
    returns (descriptor name, NCHW dims, float array) per output, in the loadable's order."""
    from sdla_testkit.engine import Engine
    stage("engine run")
    eng = Engine(loadable)
    by_name = {vi.name: as_array(a) for vi, a in zip(model.graph.input, inputs)}
    infos = eng.io_info(False)
    names = [i.name.decode() for i in infos]
    ordered = [by_name[n] for n in names] if all(n in by_name for n in names) else list(by_name.values())
    outs = eng.run_float(*ordered)
    return [(i.name.decode(), (i.n, i.c, i.h, i.w), y) for i, y in zip(eng.io_info(True), outs)]


def match_outputs(model, expected, produced):
    """Pairs each graph output with the loadable's output: by name, else by position (noted)."""
    graph_names = [vi.name for vi in model.graph.output]
    got = {name: (dims, y) for name, dims, y in produced}
    if all(n in got for n in graph_names):
        return [(n, e, *got[n]) for n, e in zip(graph_names, expected)], ""
    if len(produced) != len(expected):
        return None, f"{len(produced)} outputs for {len(expected)} graph outputs"
    note = "output names " + ", ".join(f"{n!r}->{p[0]!r}" for n, p in zip(graph_names, produced) if n != p[0])
    return [(n, e, p[1], p[2]) for n, e, p in zip(graph_names, expected, produced)], note


def non_unit(shape):
    return [int(d) for d in shape if d != 1]


def compare(expected, got):
    """(rel L2, max abs error, problem) of got against expected. NaN and infinity positions must agree;
    the norms are taken over the finite elements."""
    e = np.asarray(expected, np.float64)
    g = np.asarray(got, np.float64)
    if g.size != e.size:
        return np.inf, np.inf, f"{g.size} elements for {e.size}"
    g = g.reshape(e.shape)
    if not np.array_equal(np.isnan(e), np.isnan(g)):
        return np.inf, np.inf, "NaN positions differ"
    inf = np.isinf(e) | np.isinf(g)
    if not np.array_equal(e[inf], g[inf]):
        return np.inf, np.inf, "infinities differ"
    fin = ~(np.isnan(e) | inf)
    diff = np.abs(e[fin] - g[fin])
    max_abs = float(diff.max()) if diff.size else 0.0
    norm = np.linalg.norm(e[fin])
    rel = float(np.linalg.norm(diff) / norm) if norm > 0 else (0.0 if max_abs == 0 else np.inf)
    return rel, max_abs, ""


def evaluate(model, loadable, inputs, expected):
    """Worst rel L2 over the outputs, the largest max abs error, and any shape or naming problem, of one
    loadable run on the case's inputs."""
    worst = dict(rel=0.0, max_abs=0.0, problem="", note="", outputs=[])
    pairs, note = match_outputs(model, expected, run(loadable, model, inputs))
    if pairs is None:
        return dict(worst, rel=np.inf, problem=note)
    worst["note"] = note
    float16_outputs = {vi.name for vi in model.graph.output if vi.type.tensor_type.elem_type == TensorProto.FLOAT16}
    for name, e, dims, y in pairs:
        e = np.asarray(as_array(e))
        if name in float16_outputs:
            # The model's float16 output is its value in float16 (IEEE: beyond 65504 is infinity): the FP32
            # reference build computes in float32 throughout (a Cast to float16 is nothing there), and an
            # FP16 build's values are float16 already.
            with np.errstate(over="ignore"):
                y = np.asarray(y, np.float32).astype(np.float16).astype(np.float32)
        rel, max_abs, problem = compare(e, y)
        if y.size != e.size or non_unit(dims) != non_unit(e.shape):
            rel, problem = np.inf, f"shape: output {name!r} is {list(dims)} (NCHW), expected {list(e.shape)}"
        worst["outputs"].append(y.reshape(e.shape) if y.size == e.size else y)
        if rel > worst["rel"] or problem:
            worst.update(rel=rel, problem=problem or worst["problem"])
        worst["max_abs"] = max(worst["max_abs"], max_abs)
    return worst


def fp16_rounded(array):
    a = np.asarray(array)
    return a.astype(np.float16).astype(a.dtype) if a.dtype.kind == "f" else a


def reference_outputs(model, inputs, round_to_fp16=False):
    """ONNX's reference evaluator on the case's inputs; with round_to_fp16, on the inputs and initializers
    rounded to FP16 (what the DLA reads)."""
    from onnx.reference import ReferenceEvaluator
    prepare = fp16_rounded if round_to_fp16 else np.asarray
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for k, t in enumerate(m.graph.initializer):
        m.graph.initializer[k].CopyFrom(numpy_helper.from_array(prepare(numpy_helper.to_array(t)), t.name))
    feeds = {vi.name: prepare(a) for vi, a in zip(m.graph.input, inputs)}
    stage("ONNX reference evaluator")
    return ReferenceEvaluator(m).run(None, feeds)


def distance(outputs, references):
    """Largest rel L2 between paired outputs and references."""
    return max(compare(ref, y)[0] for ref, y in zip(references, outputs))


def distance_to_reference(model, inputs, outputs, round_to_fp16=False):
    """Largest rel L2 between the engine's outputs and ONNX's reference evaluator (inf if it fails)."""
    try:
        return distance(outputs, reference_outputs(model, inputs, round_to_fp16))
    except Exception:  # noqa: BLE001 - no reference for this case: nothing is explained
        return np.inf


def fp32_verdict(model, case, fp32, ref_error):
    """(whether the FP32 reference build is right, text). Some cases give their expected values to a few
    digits only (hand-computed examples): there the FP32 build may instead match ONNX's reference evaluator
    on the same inputs, provided the evaluator agrees with the expected values to those digits."""
    if fp32 is None:
        return None, f"FP32 reference build failed: {ref_error}"
    text = f"FP32 ref rel L2 {fmt(fp32['rel'])}"
    if fp32["problem"]:
        return False, text
    if fp32["rel"] <= FP32_TOL:
        return True, text
    exact = distance_to_reference(model, case.inputs, fp32["outputs"])
    printed = distance_to_reference(model, case.inputs, case.outputs)
    text += f" (vs ONNX's reference evaluator {fmt(exact)}, which is {fmt(printed)} from the expected values)"
    return exact <= FP32_TOL and printed <= FP16_TOL, text


def io_problem(model):
    """Why the DLA cannot take this graph's I/O, or ''. The builder must reject such a graph."""
    for kind, values in (("input", model.graph.input), ("output", model.graph.output)):
        for vi in values:
            t = vi.type.tensor_type
            if not vi.type.HasField("tensor_type"):
                return f"graph {kind} {vi.name!r} is not a tensor"
            if t.elem_type not in FLOAT_TYPES:
                return f"graph {kind} {vi.name!r} has type {TensorProto.DataType.Name(t.elem_type).lower()}"
    return ""


def names_the_culprit(model, message):
    """A rejection must say what it is about: the node (its op or name), or, for a problem of a graph
    input or output itself (its type or shape), that tensor."""
    if any(node.op_type in message or (node.name and node.name in message) for node in model.graph.node):
        return True
    return any(f"'{vi.name}'" in message for vi in [*model.graph.input, *model.graph.output])


def fmt(x):
    return "inf" if x == np.inf else f"{x:.3g}"


def rejection(res, model, error):
    if re.search(r"opset \d+ is not supported", error):
        res.result = "opset"
    elif names_the_culprit(model, error):
        res.result = "rejected"
    else:
        res.result = "rejected-unnamed"
    res.detail = error
    return res


def classify(case, model=None):
    """Builds and runs one case and returns its Result."""
    model = model or case.model
    res = Result(case.name, case.op, "crash", opset=model_opset(model))
    loadable, error = build(model, fp16=True)
    if error is not None:
        return rejection(res, model, error)
    problem = io_problem(model)
    fp16 = evaluate(model, loadable, case.inputs, case.outputs)
    ref_loadable, ref_error = build(model, fp32_reference=True)
    fp32 = evaluate(model, ref_loadable, case.inputs, case.outputs) if ref_loadable else None
    fp32_ok, fp32_text = fp32_verdict(model, case, fp32, ref_error)
    values = f"FP16 rel L2 {fmt(fp16['rel'])}, max abs err {fmt(fp16['max_abs'])}; {fp32_text}"
    note = f" ({fp16['note']})" if fp16["note"] else ""
    res.result, res.detail = "MISMATCH", values + note
    if problem:
        res.detail = f"built although {problem} (the DLA has no such I/O); {values}"
    elif fp16["problem"]:
        res.detail = f"{fp16['problem']}; {values}"
    elif fp16["rel"] <= FP16_TOL and fp32_ok is not False:
        res.result = "pass"
    elif fp32_ok:
        explained = distance_to_reference(model, case.inputs, fp16["outputs"], round_to_fp16=True)
        res.detail = f"{values}; FP16 vs reference on FP16-rounded inputs rel L2 {fmt(explained)}{note}"
        if explained <= FP16_TOL:
            res.result = "pass-fp16-rounding"
    return res


# ------------------------------------------------------------------------------------------ opsets
def _signature(schema):
    return ({n: (a.type, a.default_value.SerializeToString()) for n, a in schema.attributes.items()},
            [(p.name, p.option) for p in schema.inputs], [(p.name, p.option) for p in schema.outputs])


def same_meaning(node, opset, target):
    """(whether the node means the same at `target` as at `opset`, why): the same definition, or another
    one that differs only in types or in attributes the node does not set."""
    op, old = node.op_type, onnx.defs.get_schema(node.op_type, opset)
    try:
        new = onnx.defs.get_schema(op, target)
    except onnx.defs.SchemaError:
        return False, f"{op} does not exist at opset {target}"
    if new.deprecated:
        return False, f"{op} is deprecated at opset {target}"
    if old.since_version == new.since_version:
        return True, f"{op}-{old.since_version} is the definition at both opsets"
    (old_attrs, old_in, old_out), (new_attrs, new_in, new_out) = _signature(old), _signature(new)
    changed = {a for a in old_attrs if a in new_attrs and old_attrs[a] != new_attrs[a]}
    added = set(old_attrs) - set(new_attrs)
    if changed or added & {a.name for a in node.attribute} or old_in != new_in or old_out != new_out:
        return False, f"{op}-{old.since_version} and {op}-{new.since_version} differ in inputs or attributes"
    extra = f" and attributes {', '.join(sorted(added))}" if added else ""
    return True, (f"{op}-{old.since_version} differs from {op}-{new.since_version} only in types{extra} "
                  "this node does not use")


def retargeted(model, target):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = target
    onnx.checker.check_model(m, full_check=True)  # the node's types and attributes are valid there
    return m


def accepted_opsets(message):
    """The importer's opset range, as its rejection states it ("opsets 11-21")."""
    found = re.search(r"opsets (\d+)-(\d+)", message)
    return (int(found[1]), int(found[2])) if found else (11, 21)


def graph_same_meaning(model, opset, target):
    """(whether every node means the same at `target`, why) — see same_meaning."""
    reasons = []
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx"):
            return False, f"an op of domain {node.domain}"
        same, reason = same_meaning(node, opset, target)
        if not same:
            return False, reason
        reasons.append(reason)
    return True, "; ".join(dict.fromkeys(reasons))


def try_retarget(case, res):
    """For an `opset` result: the case again with its opset moved to the nearest one the builder takes,
    when the ops' definitions there mean the same."""
    opset = model_opset(case.model)
    low, high = accepted_opsets(res.detail)
    target = high if opset > high else low
    same, reason = graph_same_meaning(case.model, opset, target)
    if not same:
        res.retarget = dict(opset=target, result="not tried", detail=reason)
        return
    try:
        model = retargeted(case.model, target)
    except Exception as e:  # noqa: BLE001 - the checker says a node is not valid at the target opset
        res.retarget = dict(opset=target, result="not tried", detail=f"invalid at opset {target}: {e}")
        return
    again = classify(case, model)
    res.retarget = dict(opset=target, result=again.result, detail=f"{reason}. {again.detail}")


def run_case(case):
    try:
        res = classify(case)
        if res.result == "opset":
            try_retarget(case, res)
        return res
    except Exception as e:  # noqa: BLE001 - any failure of the build or run is the finding
        return Result(case.name, case.op, "crash", f"{type(e).__name__}: {e}", model_opset(case.model))


# ------------------------------------------------------------------------------------------ isolation
def _worker(cases, conn):
    global _stage_hook
    _stage_hook = lambda text: conn.send(("stage", text))  # noqa: E731
    for case in cases:
        conn.send(("result", run_case(case).row()))
    conn.close()


def run_suite(cases, timeout=120):
    """{case name: Result}. The cases run in a child process so that a crash (or a hang) of the native
    builder or engine is recorded as a `crash` of the case it happened in; the remaining cases go on in a
    fresh child."""
    # A fresh interpreter, not a fork: the calling process may already run engine threads (pytest does), and a
    # fork copies their locks in whatever state they are in, which can hang the child.
    ctx = multiprocessing.get_context("forkserver")
    results, pending = {}, list(cases)
    while pending:
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_worker, args=(pending, child))
        proc.start()
        child.close()
        last_stage, failure = "", None
        while pending:
            if not parent.poll(timeout):
                proc.kill()
                failure = f"no answer for {timeout} s"
                break
            try:
                kind, payload = parent.recv()
            except EOFError:
                break
            if kind == "stage":
                last_stage = payload
            else:
                results[payload["name"]] = Result(**payload)
                pending.pop(0)
        proc.join()
        if pending:  # the child died or hung inside pending[0]
            case = pending.pop(0)
            failure = failure or f"process died (exit code {proc.exitcode})"
            results[case.name] = Result(case.name, case.op, "crash", f"{failure} during: {last_stage}",
                                        model_opset(case.model))
    return results


# ------------------------------------------------------------------------------------------ verdict
def acceptable(r):
    """(whether a result is what issue 12 asks for, why not). Issue 12 asks for opsets 11 to the newest:
    rejecting an older opset is fine, a newer one only where the op means something else there."""
    if r.result == "opset":
        retry = r.retarget or {}
        if retry.get("result") == "not tried" or retry.get("opset", 0) > r.opset:
            return True, ""
        return False, (f"the op's definition is the same at opset {retry.get('opset')}, so the builder should "
                       f"take opset {r.opset}; at opset {retry.get('opset')}: {retarget_text(r)}")
    if r.result in OK_CLASSES:
        return True, ""
    return False, {"MISMATCH": "built without an error, but wrong (or with I/O the DLA cannot have)",
                   "crash": "the builder or engine failed",
                   "rejected-unnamed": "the error names neither the node nor a graph input or output"}[r.result]


# ------------------------------------------------------------------------------------------ reports
def counts(results):
    total = {c: 0 for c in CLASSES}
    per_op = {}
    for r in results:
        total[r.result] += 1
        per_op.setdefault(r.op, {c: 0 for c in CLASSES})[r.result] += 1
    return total, per_op


def retarget_text(r):
    if not r.retarget:
        return ""
    return f"at opset {r.retarget['opset']}: {r.retarget['result']} — {r.retarget['detail']}"


def full_detail(r):
    return r.detail + (f"; {retarget_text(r)}" if r.retarget else "")


def text_table(results):
    lines = [f"{'op':<20} {'case':<58} {'result':<19} detail"]
    for r in results:
        detail = r.detail if r.result != "opset" else retarget_text(r)
        lines.append(f"{r.op:<20} {r.name:<58} {r.result:<19} {detail}")
    return "\n".join(lines)


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return out + ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]


def count_tables(results):
    total, per_op = counts(results)
    out = _table([*CLASSES, "total"], [[*(total[c] for c in CLASSES), len(results)]])
    out += ["", "Per op:", ""]
    return out + _table(["op", *CLASSES], [[op, *(per_op[op][c] or "" for c in CLASSES)] for op in sorted(per_op)])


def markdown(results, command):
    """Counts and every case's row (op, case, result, detail)."""
    out = [f"Produced by `{command}` with onnx {onnx.__version__} ({len(results)} cases).", ""]
    out += count_tables(results) + ["", "Every case:", ""]
    out += _table(["op", "case", "result", "detail"], [[r.op, r.name, r.result, full_detail(r)] for r in results])
    return "\n".join(out) + "\n"


def grouped_rejections(results):
    """Rejections with the same op and message in one row: the rule and the cases it covers."""
    groups = {}
    for r in results:
        if r.result == "rejected":
            groups.setdefault((r.op, r.detail), []).append(r.name)
    return [[op, message, len(names), first_names(names)] for (op, message), names in sorted(groups.items())]


def first_names(names, shown=6):
    more = f", … ({len(names) - shown} more)" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def doc_section(results, command):
    """The `## ONNX node conformance` section of docs/ACCURACY.md."""
    failing = [r for r in results if not acceptable(r)[0]]
    out = [DOC_HEADING, "", DOC_INTRO.format(version=onnx.__version__, command=command, n=len(results)), ""]
    out += count_tables(results)
    out += ["", f"### Cases that fail ({len(failing)})", ""]
    out += _table(["op", "case", "result", "detail"], [[r.op, r.name, r.result, full_detail(r)] for r in failing]) \
        if failing else ["None."]
    for title, cls in (("Passing after FP16 rounding", "pass-fp16-rounding"), ("Opset rejections", "opset")):
        rows = [[r.op, r.name, full_detail(r)] for r in results if r.result == cls and acceptable(r)[0]]
        if rows:
            out += ["", f"### {title} ({len(rows)})", ""] + _table(["op", "case", "detail"], rows)
    out += ["", "### Rejections, by op and message", ""]
    out += _table(["op", "message", "cases", "which"], grouped_rejections(results))
    return "\n".join(out) + "\n"


DOC_HEADING = "## ONNX node conformance"
DOC_INTRO = """ONNX's node test cases (onnx {version}, generated from `onnx.backend.test.case.node`) for every op the
builder lowers and for the CNN ops it must reject: the single-node cases and their `_expanded` forms (the
op's function body as a graph of simpler ops). Each case is built in FP16 and as the FP32 reference
loadable, run through the engine on the case's inputs and compared with ONNX's expected outputs. Each case
with more than one input also runs as `<case>+const`, every input but the first an initializer (weights,
axes, shapes, scales, bounds), as exporters write them.

Classes: `pass` (FP16 rel L2 <= 1e-3, FP32 reference <= 1e-5); `pass-fp16-rounding` (FP16 off, FP32
reference right, and ONNX's reference evaluator on the inputs rounded to FP16 within 1e-3 of the FP16
result); `rejected` (a BuildError naming the node, or the graph input or output it is about); `opset`
(rejected for the opset alone; retried at the nearest accepted opset where the ops' definitions are the
same); `rejected-unnamed`; `MISMATCH` (a wrong value or shape, or integer/bool/double graph I/O accepted);
`crash` (any other failure, a dead or hung process). `tests/python/test_onnx_node_suite.py` runs the same
cases and fails on every case listed under "Cases that fail".

Produced by `{command}` ({n} cases, about 15 s)."""


def update_doc(path, section):
    """Replaces the section under DOC_HEADING in `path` (up to the next `## ` heading), or appends it;
    the file's other sections are left as they are."""
    text = open(path).read() if os.path.exists(path) else "# Accuracy\n"
    start = text.find(DOC_HEADING + "\n")
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        nxt = text.find("\n## ", start + len(DOC_HEADING))
        text = text[:start] + section + (text[nxt:] if nxt >= 0 else "")
    with open(path, "w") as f:
        f.write(text)


def select(cases, op_filter=None, name_filter=None):
    if op_filter:
        cases = [c for c in cases if c.op in op_filter]
    if name_filter:
        cases = [c for c in cases if name_filter in c.name]
    return cases


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--markdown", help="write the counts and every case's row (op, case, result, detail) to this file")
    ap.add_argument("--doc", help="write or replace the '## ONNX node conformance' section of this file "
                    "(docs/ACCURACY.md)")
    ap.add_argument("--json", help="write every case's result to this file")
    ap.add_argument("--op", help="comma-separated ops to run")
    ap.add_argument("-k", dest="name", help="only cases whose name contains this")
    ap.add_argument("--all", action="store_true", help="every op's cases, not only the builder's and the CNN "
                    "ops it must reject")
    ap.add_argument("-q", "--quiet", action="store_true", help="print the summary only")
    args = ap.parse_args(argv)
    t0 = time.time()
    cases = generate_cases(None if args.all else LOWERED_OPS + REJECTED_OPS)
    cases = select(cases, args.op and set(args.op.split(",")), args.name)
    order = [c.name for c in cases]
    results = run_suite(cases)
    results = [results[n] for n in order]
    if not args.quiet:
        print(text_table(results))
    total, _ = counts(results)
    print(" ".join(f"{c}={total[c]}" for c in CLASSES), f"total={len(results)} ({time.time() - t0:.0f} s)")
    command = " ".join([".venv/bin/python tools/onnx_node_suite.py", *(argv if argv is not None else sys.argv[1:])])
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(results, command))
    if args.doc:
        update_doc(args.doc, doc_section(results, command))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([r.row() for r in results], f, indent=1)
    return 0 if all(acceptable(r)[0] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
