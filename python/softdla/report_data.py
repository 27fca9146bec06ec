"""What the HTML report (softdla.report) shows, gathered and checked: the ONNX nodes with their DLA status
and the engine layer each became, and the per-layer profile and comparison read from their JSON files.
Input that does not fit (a profile or comparison of another model, malformed JSON) raises ReportError
with a message that says which file and what is wrong."""
import json
import math
import os

COMPARE_SCHEMA = "softdla-compare/1"


class ReportError(ValueError):
    """The report cannot be written from these inputs."""


def base_name(layer_name):
    """The ONNX node a layer was built from: the builder names extra layers "conv1 (requantize)",
    "pool (step 2)"."""
    return layer_name.split(" (")[0]


# ------------------------------------------------------------------ ONNX nodes -> engine layers
def onnx_nodes(model, check_rows):
    """One dict per node of the graph, in graph order: name (the builder's, as softdla.check gives it,
    also for unnamed nodes), op, inputs, outputs, supported, reason."""
    graph_nodes = list(model.graph.node)
    aligned = len(check_rows) == len(graph_nodes) and all(
        r["op"] == n.op_type for r, n in zip(check_rows, graph_nodes))
    by_name = {r["node"]: r for r in check_rows}
    nodes = []
    for i, n in enumerate(graph_nodes):
        row = check_rows[i] if aligned else by_name.get(n.name, {"node": n.name, "supported": False,
                                                                 "reason": "not in softdla check's table"})
        nodes.append({"name": row["node"] or n.name or f"{n.op_type} #{i}", "op": n.op_type,
                      "inputs": [v for v in n.input if v], "outputs": [v for v in n.output if v],
                      "supported": bool(row["supported"]), "reason": row["reason"]})
    return nodes


def map_layers(nodes, layer_info):
    """Sets each node's "layers" (engine layer indices) and "status": "dla" (a layer named after it),
    "fused" (its output is another node's layer's output, or it sits between a layer's ancestor and
    descendant nodes of that same layer, as a BatchNormalization between a Conv and its fused Relu),
    "nolayer" or "unsupported". Without a loadable (layer_info None), supported nodes are "dla" unless
    the builder folds them."""
    if layer_info is None:
        for n in nodes:
            folded = n["op"] == "Constant" or n["reason"].startswith("folded")
            n["layers"] = []
            n["status"] = "unsupported" if not n["supported"] else "nolayer" if folded else "dla"
        return
    by_base, by_output = {}, {}
    for i, layer in enumerate(layer_info):
        by_base.setdefault(base_name(layer["name"]), []).append(i)
        for t in layer["outputs"]:
            by_output[t["name"]] = i
    for n in nodes:
        n["layers"] = list(by_base.get(n["name"], []))
        n["status"] = "dla" if n["layers"] else None
        if not n["layers"]:
            n["layers"] = sorted({by_output[v] for v in n["outputs"] if v in by_output})
            n["status"] = "fused" if n["layers"] else None
    producer = {v: k for k, n in enumerate(nodes) for v in n["outputs"]}
    readers = {}
    for k, n in enumerate(nodes):
        for v in n["inputs"]:
            readers.setdefault(v, []).append(k)

    def nearest(start, step):
        """Layers of the first mapped nodes reached from node `start` through unmapped ones."""
        found, seen, todo = set(), {start}, list(step(start))
        while todo:
            k = todo.pop()
            if k in seen:
                continue
            seen.add(k)
            if nodes[k]["status"] in ("dla", "fused"):
                found.update(nodes[k]["layers"])
            else:
                todo += step(k)
        return found
    up = lambda k: [producer[v] for v in nodes[k]["inputs"] if v in producer]  # noqa: E731
    down = lambda k: [j for v in nodes[k]["outputs"] for j in readers.get(v, [])]  # noqa: E731
    fused_between = {}
    for k, n in enumerate(nodes):
        if n["status"] is None and n["supported"]:
            fused_between[k] = sorted(nearest(k, up) & nearest(k, down))
    for k, n in enumerate(nodes):
        if n["status"] is None:
            n["layers"] = fused_between.get(k, [])
            n["status"] = "unsupported" if not n["supported"] else "fused" if n["layers"] else "nolayer"


# ------------------------------------------------------------------ JSON inputs
def load_json(source, what):
    """A JSON file's value (or `source` itself when it is not a path)."""
    if not isinstance(source, (str, os.PathLike)):
        return source
    path = os.fspath(source)
    if not os.path.isfile(path):
        raise ReportError(f"{what} '{path}' does not exist")
    try:
        with open(path, "rb") as f:
            return json.loads(f.read().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ReportError(f"{what} '{path}' is not valid JSON ({e})") from None


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def profile_times(profile, layer_names, source="the profile"):
    """{layer name: {"ms", "average_ms", "total_ms", "percentage"}} and the run count from a trtexec-style
    profile ([{"count": n}, {"name", "timeMs", "averageMs", "medianMs", "percentage"}, ...]); "ms" is the
    median where there is one. Every name must be a layer of the loadable."""
    if not isinstance(profile, list) or not all(isinstance(r, dict) for r in profile):
        raise ReportError(f"{source} is not a per-layer profile: expected a JSON list of objects "
                          "(softdla run --exportProfile)")
    count = next((r["count"] for r in profile if "count" in r and "name" not in r), None)
    times = {}
    for r in profile:
        if "name" not in r:
            continue
        name = r["name"]
        ms = r.get("medianMs", r.get("averageMs"))
        if not isinstance(name, str) or not _number(ms):
            raise ReportError(f"{source}: the entry {json.dumps(r)[:120]} has no layer name and time "
                              "(medianMs or averageMs)")
        if name not in layer_names:
            raise ReportError(f"{source} times layer '{name}', which the loadable does not have: "
                              "is it the profile of another loadable?")
        times[name] = {"ms": float(ms), "average_ms": r.get("averageMs"), "total_ms": r.get("timeMs"),
                       "percentage": r.get("percentage")}
    if not times:
        raise ReportError(f"{source} holds no layer times")
    return times, count


def compare_rows(compare, layer_names, source="the comparison"):
    """The rows of a softdla compare result (its JSON, dict or CompareResult) after checking them: each
    row's layer must be one of the loadable's (when a loadable is given). null metrics mean infinite
    error (the JSON writes non-finite numbers as null)."""
    if hasattr(compare, "to_dict"):
        compare = compare.to_dict()
    if not isinstance(compare, dict) or compare.get("schema") != COMPARE_SCHEMA:
        raise ReportError(f"{source} is not a softdla compare result (softdla compare --json; schema "
                          f"'{COMPARE_SCHEMA}')")
    rows = compare.get("layers")
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "tensor" in r for r in rows):
        raise ReportError(f"{source} has no list of per-layer rows ('layers')")
    out = []
    for r in rows:
        layer = r.get("layer")
        if layer_names is not None and layer is not None and layer not in layer_names:
            raise ReportError(f"{source} has a row for layer '{layer}', which the loadable does not have: "
                              "is it the comparison of another model or loadable?")
        metric = lambda k, bad: r.get(k) if _number(r.get(k)) else bad  # noqa: E731
        out.append({"tensor": str(r["tensor"]), "layer": layer, "cosine": metric("cosine", 0.0),
                    "channel_cosine": r.get("channel_cosine") if _number(r.get("channel_cosine")) else None,
                    "rel_l2": metric("rel_l2", math.inf), "max_abs": metric("max_abs", math.inf),
                    "jump": bool(r.get("jump")), "is_output": bool(r.get("is_output"))})
    outputs = [o for o in compare.get("outputs") or [] if isinstance(o, dict)]
    output_cosine = min((o["cosine"] if _number(o.get("cosine")) else 0.0 for o in outputs), default=None)
    return out, output_cosine


def row_of_layer(rows, layer):
    """The comparison row of an engine layer: the one for its output tensor, else its last row."""
    mine = [r for r in rows if r["layer"] == layer["name"]]
    outs = {t["name"] for t in layer["outputs"]}
    return next((r for r in mine if r["tensor"] in outs), mine[-1] if mine else None)
