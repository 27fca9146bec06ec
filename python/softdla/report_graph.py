"""The ONNX graph view of the HTML report (softdla.report): a layered top-to-bottom layout and its SVG.

Layout: every node's rank is the length of the longest path to it from a graph input (so each edge points
down), nodes of one rank sit side by side, and two sweeps down the ranks order each rank by the mean x of
the nodes feeding it (the barycenter heuristic), which keeps most edges short and uncrossed for the chains
and branches of a CNN. Graph inputs and outputs are drawn as pills above and below their nodes."""
from .report_svg import esc, shorten

NODE_W, NODE_H, IO_H, GAP_X, GAP_Y, MARGIN = 184, 40, 24, 22, 34, 16
NAME_MAX = 26

# Node colours by DLA status (fill, stroke, legend text). Inline attributes, so they show without CSS.
STATUS = {
    "dla": ("#cdebd3", "#2e7d32", "runs on the DLA (a layer of its own)"),
    "fused": ("#e6f4e2", "#7cb342", "runs on the DLA, fused into another node's layer"),
    "nolayer": ("#eceff1", "#78909c", "supported, no DLA layer (folded, or not in the loadable)"),
    "unsupported": ("#f9d4d0", "#c62828", "does not run on the DLA"),
}


def _short(text):
    return shorten(text, NAME_MAX)


def layout(nodes, graph_inputs, graph_outputs):
    """Boxes and edges. nodes: dicts with "inputs"/"outputs" (value names) in graph order. Returns (boxes,
    edges, width, height); a box is {kind: "in"|"node"|"out", ref: value name or node index, x, y, w, h}
    (x, y its top-left corner); an edge is (from box, to box, value name)."""
    boxes = [{"kind": "in", "ref": v} for v in graph_inputs]
    boxes += [{"kind": "node", "ref": i} for i in range(len(nodes))]
    producer = {v: k for k, v in enumerate(graph_inputs)}
    for i, n in enumerate(nodes):
        for v in n["outputs"]:
            if v:
                producer[v] = len(graph_inputs) + i
    first_out = len(boxes)
    boxes += [{"kind": "out", "ref": v} for v in graph_outputs]
    edges, seen = [], set()

    def link(src, dst, value):
        if src is not None and src != dst and (src, dst) not in seen:
            seen.add((src, dst))
            edges.append((src, dst, value))
    for i, n in enumerate(nodes):
        for v in n["inputs"]:
            link(producer.get(v), len(graph_inputs) + i, v)
    for k, v in enumerate(graph_outputs):
        link(producer.get(v), first_out + k, v)
    preds = [[] for _ in boxes]
    succs = [[] for _ in boxes]
    for s, d, _ in edges:
        preds[d].append(s)
        succs[s].append(d)
    # Longest path from the sources, in topological order (Kahn); boxes left on a cycle (which the
    # builder rejects, but the report must still draw) go after everything else.
    rank = [0] * len(boxes)
    waiting = [len(p) for p in preds]
    todo = [b for b, w in enumerate(waiting) if w == 0]
    done = []
    while todo:
        b = todo.pop(0)
        done.append(b)
        for s in succs[b]:
            rank[s] = max(rank[s], rank[b] + 1)
            waiting[s] -= 1
            if waiting[s] == 0:
                todo.append(s)
    for b in range(len(boxes)):
        if waiting[b] > 0:
            rank[b] = max(rank) + 1
    ranks = {}
    for b in sorted(range(len(boxes)), key=lambda b: (rank[b], b)):
        ranks.setdefault(rank[b], []).append(b)
    widest = max(len(r) for r in ranks.values()) if ranks else 1
    width = MARGIN * 2 + widest * NODE_W + (widest - 1) * GAP_X
    x_of = {}

    def place(row):
        total = len(row) * NODE_W + (len(row) - 1) * GAP_X
        for j, b in enumerate(row):
            x_of[b] = (width - total) / 2 + j * (NODE_W + GAP_X)
    for r in sorted(ranks):
        place(ranks[r])
    for _ in range(2):  # barycenter sweeps down the ranks
        for r in sorted(ranks)[1:]:
            row = ranks[r]
            key = {b: (sum(x_of[p] for p in preds[b]) / len(preds[b]) if preds[b] else x_of[b]) for b in row}
            row.sort(key=lambda b: key[b])
            place(row)
    y = MARGIN
    for r in sorted(ranks):
        h = max(IO_H if boxes[b]["kind"] != "node" else NODE_H for b in ranks[r])
        for b in ranks[r]:
            bh = NODE_H if boxes[b]["kind"] == "node" else IO_H
            boxes[b].update(x=x_of[b], y=y + (h - bh) / 2, w=NODE_W, h=bh)
        y += h + GAP_Y
    return boxes, edges, width, y - GAP_Y + MARGIN


def graph_svg(nodes, graph_inputs, graph_outputs):
    """The graph as SVG text. nodes: dicts {name, op, inputs, outputs, status (a STATUS key), title (the
    tooltip), layer (engine layer index or None)}. Each node is a <g class="node"> with data-node (its
    index in the graph) and data-status; the <svg> carries data-nodes and data-edges."""
    boxes, edges, width, height = layout(nodes, graph_inputs, graph_outputs)
    out = ['<defs><marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" '
           'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#90a4ae"/></marker></defs>']
    for s, d, value in edges:
        a, b = boxes[s], boxes[d]
        x1, y1 = a["x"] + a["w"] / 2, a["y"] + a["h"]
        x2, y2 = b["x"] + b["w"] / 2, b["y"]
        dy = max((y2 - y1) / 2, 12)
        out.append(f'<path class="edge" d="M{x1:.1f},{y1:.1f} C{x1:.1f},{y1 + dy:.1f} {x2:.1f},{y2 - dy:.1f} '
                   f'{x2:.1f},{y2 - 1:.1f}" marker-end="url(#arrow)"><title>{esc(value)}</title></path>')
    for b in boxes:
        x, y, w, h = b["x"], b["y"], b["w"], b["h"]
        if b["kind"] != "node":
            what = "graph input" if b["kind"] == "in" else "graph output"
            out.append(f'<g class="io"><title>{esc(what)} {esc(b["ref"])}</title>'
                       f'<rect x="{x:.1f}" y="{y:.1f}" width="{w}" height="{h}" rx="{h / 2}" fill="#fff" stroke="#90a4ae"/>'
                       f'<text x="{x + w / 2:.1f}" y="{y + h / 2 + 4:.1f}" text-anchor="middle">{esc(_short(b["ref"]))}</text></g>')
            continue
        i = b["ref"]
        n = nodes[i]
        fill, stroke, _ = STATUS[n["status"]]
        layer = "" if n.get("layer") is None else f' data-layer="{n["layer"]}"'
        out.append(f'<g class="node st-{n["status"]}" data-node="{i}" data-status="{n["status"]}"{layer}>'
                   f'<title>{esc(n["title"])}</title>'
                   f'<rect x="{x:.1f}" y="{y:.1f}" width="{w}" height="{h}" rx="5" fill="{fill}" stroke="{stroke}"/>'
                   f'<text class="op" x="{x + w / 2:.1f}" y="{y + 16:.1f}" text-anchor="middle">{esc(n["op"])}</text>'
                   f'<text class="nm" x="{x + w / 2:.1f}" y="{y + 31:.1f}" text-anchor="middle">{esc(_short(n["name"]))}</text></g>')
    return (f'<svg class="graph" data-nodes="{len(nodes)}" data-edges="{len(edges)}" width="{width:.0f}" '
            f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" role="img">{"".join(out)}</svg>')


def legend_html(counts):
    """The colour key with how many nodes have each status."""
    items = []
    for key, (fill, stroke, text) in STATUS.items():
        items.append(f'<span class="key"><svg width="14" height="14"><rect x="1" y="1" width="12" height="12" rx="3" '
                     f'fill="{fill}" stroke="{stroke}"/></svg> {esc(text)}: {counts.get(key, 0)}</span>')
    return '<p class="legend">' + " ".join(items) + "</p>"
