"""The HTML page of the report (softdla.report): one self-contained file, CSS and a small script inline,
every chart inline SVG drawn in Python (report_svg, report_graph), so it shows everything with scripting
off and asks the network for nothing. The script only adds hover highlighting and table sorting; it
records any error it meets in <html data-errors> and sets <body data-ready="1"> when it has run, which
is what the browser test reads."""
import math

from .report_graph import STATUS, graph_svg, legend_html
from .report_svg import bar_chart, esc, fmt_bytes, fmt_num, memory_chart

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1f2933;background:#fafbfc}
header{background:#263238;color:#eceff1;padding:14px 24px}
header h1{font-size:20px;margin:0 0 4px}
nav a{color:#b0bec5;margin-right:16px}
main{padding:8px 24px 40px}
section{background:#fff;border:1px solid #dde3e8;border-radius:6px;margin:16px 0;padding:8px 16px 16px}
h2{font-size:17px;margin:8px 0}
h3{font-size:15px;margin:16px 0 4px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}
.card{background:#fff;border:1px solid #dde3e8;border-radius:6px;padding:6px 12px;min-width:120px}
.card b{display:block;font-size:18px}
.warn{background:#fff8e1;border:1px solid #ffca28;border-radius:4px;padding:6px 10px;margin:6px 0}
.na{color:#78909c;font-style:italic}
.scroll{overflow:auto;max-height:80vh;border:1px solid #eceff1}
.legend .key{margin-right:14px;white-space:nowrap}
svg text{font:11px system-ui,sans-serif;fill:#263238}
svg .op{font-weight:600}
svg .axlabel{font-size:12px;font-weight:600}
svg .axis,svg .tick{stroke:#455a64}
svg .grid{stroke:#eceff1}
svg .edge{fill:none;stroke:#90a4ae;stroke-width:1.2}
svg .bar{fill:#4e79a7}
svg .bar.jump,svg .bar.inf{fill:#d62728}
svg .bar.orin{fill:#f28e2b}
svg .bar.err{fill:#59a14f}
svg .arena{stroke:#d62728;stroke-dasharray:4 3}
svg .tensor{stroke:#fff;stroke-width:.5;opacity:.85}
.hl rect,rect.hl{stroke:#000 !important;stroke-width:2.5px !important;opacity:1}
tr.hl td{background:#fff59d}
table{border-collapse:collapse;font-size:12px}
th,td{border-bottom:1px solid #eceff1;padding:3px 8px;text-align:left;vertical-align:top;white-space:nowrap}
th{position:sticky;top:0;background:#eceff1;cursor:pointer}
td.num{text-align:right;font-variant-numeric:tabular-nums}
code{font-size:12px}
"""

# window.onerror first, so an error anywhere later on the page is recorded.
JS_ERRORS = """window.__errors=[];window.onerror=function(m,s,l){window.__errors.push(m+' ('+l+')');
document.documentElement.setAttribute('data-errors',window.__errors.join(' | '));};"""

JS_INIT = """(function(){
function mark(el,on){(el.getAttribute('data-layer')||'').split(' ').forEach(function(k){if(!k)return;
document.querySelectorAll('[data-layer~="'+k+'"]').forEach(function(x){x.classList.toggle('hl',on);});});}
document.querySelectorAll('[data-layer]').forEach(function(el){
el.addEventListener('mouseenter',function(){mark(el,true);});
el.addEventListener('mouseleave',function(){mark(el,false);});});
document.querySelectorAll('table.sortable th').forEach(function(th,col){th.addEventListener('click',function(){
var body=th.closest('table').tBodies[0],rows=Array.prototype.slice.call(body.rows),up=th.dataset.dir!=='up';
th.dataset.dir=up?'up':'down';
function key(r){var c=r.cells[col],v=c.getAttribute('data-v');return v===null?c.textContent:v;}
rows.sort(function(a,b){var x=key(a),y=key(b),nx=parseFloat(x),ny=parseFloat(y);
var d=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);return up?d:-d;});
rows.forEach(function(r){body.appendChild(r);});});});
document.body.setAttribute('data-ready','1');})();"""


def _cell(text, value=None, num=False):
    v = "" if value is None else f' data-v="{esc(value)}"'
    cls = ' class="num"' if num else ""
    return f"<td{cls}{v}>{text}</td>"


def _tensors(ts):
    """Shapes, types and INT8 scales of a layer's tensors, one per line; the tensor's name on hover."""
    parts = []
    for t in ts:
        scale = f" \u00d7{t['scale']:.4g}" if t["dtype"] == "int8" else ""
        parts.append(f'<span class="tensor" title="{esc(t["name"])}">{"x".join(str(d) for d in t["shape"])} '
                     f'{esc(t["dtype"])}{esc(scale)}</span>')
    return "<br>".join(parts)


def layer_table(layers):
    """The per-layer table; each row carries data-layer (its index) for the hover highlight."""
    head = ["#", "layer", "op", "precision", "inputs (shape type \u00d7scale)", "outputs", "fused", "MACs",
            "weights", "measured ms", "Orin ms", "bound", "cosine", "rel L2"]
    rows = []
    for li in layers:
        i, m, o, c = li["index"], li.get("measured"), li.get("orin"), li.get("compare")
        nan = "-"
        cells = [_cell(str(i), i, True), _cell(esc(li["name"])), _cell(esc(li["op"])), _cell(esc(li["precision"])),
                 _cell(_tensors(li["inputs"])), _cell(_tensors(li["outputs"])), _cell(esc(", ".join(li["fused"]))),
                 _cell(f"{li['macs']:,}", li["macs"], True), _cell(esc(fmt_bytes(li["weight_bytes"])), li["weight_bytes"], True),
                 _cell(fmt_num(m["ms"]) if m else nan, m["ms"] if m else -1, True),
                 _cell(fmt_num(o["ms"]) if o else nan, o["ms"] if o else -1, True),
                 _cell(esc(o["bound"]) if o else nan),
                 _cell(f"{c['cosine']:.6f}" if c else nan, c["cosine"] if c else 2, True),
                 _cell(("inf" if math.isinf(c["rel_l2"]) else f"{c['rel_l2']:.3e}") if c else nan,
                       (1e300 if math.isinf(c["rel_l2"]) else c["rel_l2"]) if c else -1, True)]
        rows.append(f'<tr class="layer" data-layer="{i}" data-name="{esc(li["name"])}">{"".join(cells)}</tr>')
    return (f'<div class="scroll"><table class="sortable" id="layer-table"><thead><tr>'
            f'{"".join(f"<th>{esc(h)}</th>" for h in head)}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>')


def _plot_section(title, plot_id, svg, note, missing):
    """A chart, or the sentence saying why there is none."""
    body = svg if svg else f'<p class="na" data-plot-missing="{esc(plot_id)}">{esc(missing)}</p>'
    return f'<h3 id="plot-{esc(plot_id)}">{esc(title)}</h3><p>{esc(note)}</p>{body}'


def _plots(d):
    """The four charts (or why each is missing); returns (html, number of charts drawn)."""
    layers, out = d["layers"], []
    names = [li["name"] for li in layers]

    def tip(li, extra):
        return f"#{li['index']} {li['name']} ({li['op']}, {li['precision']}): {extra}"
    svg = None
    if layers and d["measured_note"] is None:
        rows = [{"label": li["name"], "layer": li["index"], "cls": "",
                 "value": li["measured"]["ms"] if li.get("measured") else None,
                 "title": tip(li, f"median {fmt_num(li['measured']['ms'])} ms" if li.get("measured") else "not timed")}
                for li in layers]
        svg = bar_chart("measured", rows, "milliseconds (median per run)")
    out.append(_plot_section("Measured time per layer", "measured", svg, d["measured_source"],
                             d["measured_note"] or "no loadable given"))
    svg = None
    if layers and d["orin_note"] is None:
        rows = [{"label": li["name"], "layer": li["index"], "cls": "orin", "value": li["orin"]["ms"],
                 "title": tip(li, f"{fmt_num(li['orin']['ms'])} ms, {li['orin']['bound']}-bound")} for li in layers]
        svg = bar_chart("orin", rows, "milliseconds (estimated, one Orin DLA core)")
    out.append(_plot_section("Predicted Orin DLA time per layer", "orin", svg, d["orin_source"],
                             d["orin_note"] or "no loadable given"))
    svg = None
    if d["compare_rows"]:
        rows = [{"label": r["layer"] or r["tensor"], "value": r["rel_l2"],
                 "layer": names.index(r["layer"]) if r["layer"] in names else None,
                 "cls": "jump" if r["jump"] else "err",
                 "title": (f"tensor {r['tensor']} (layer {r['layer']}): cosine {r['cosine']:.6f}, rel L2 "
                           f"{r['rel_l2']:.3e}, max abs {r['max_abs']:.3e}" + (" - error jumps here" if r["jump"] else ""))}
                for r in d["compare_rows"]]
        svg = bar_chart("error", rows, "relative L2 error |dla - fp32| / |fp32|", fmt=lambda v: f"{v:.3g}")
    out.append(_plot_section("Error per layer against ONNX Runtime FP32", "error", svg, d["compare_source"],
                             d["compare_note"] or "no comparison given (--compare FILE or --run-compare)"))
    svg = None
    if d["memory_plan"] is not None:
        svg = memory_chart(d["memory_plan"], d["arena_bytes"], names)
    out.append(_plot_section("Memory plan", "memory", svg,
                             "Each rectangle is an intermediate tensor: from the op that writes it to the last op "
                             "that reads it (x), over its bytes in the arena (y). I/O tensors and weights live "
                             "outside the arena.", d["memory_note"] or "no loadable given"))
    drawn = sum(1 for s in out if 'class="plot"' in s)
    return "".join(out), drawn


def _cards(d):
    items = [("ONNX nodes", len(d["nodes"])), ("run on the DLA", d["supported"]), ("not on the DLA", d["unsupported"])]
    if d["layers"]:
        items.append(("engine layers", len(d["layers"])))
    if d["measured_total_ms"] is not None:
        items.append(("measured, sum of layers", f"{fmt_num(d['measured_total_ms'])} ms"))
    if d["orin_total_ms"] is not None:
        items.append(("predicted Orin DLA", f"{fmt_num(d['orin_total_ms'])} ms"))
    if d["output_cosine"] is not None:
        items.append(("output cosine", f"{d['output_cosine']:.6f}"))
    if d["arena_bytes"] is not None:
        items.append(("arena", fmt_bytes(d["arena_bytes"])))
    return '<div class="cards">' + "".join(f'<div class="card"><b>{esc(v)}</b>{esc(k)}</div>' for k, v in items) + "</div>"


def page(d):
    """The whole HTML text of the report for the data gathered by softdla.report.collect()."""
    counts = {k: sum(1 for n in d["nodes"] if n["status"] == k) for k in STATUS}
    graph = graph_svg(d["nodes"], d["graph_inputs"], d["graph_outputs"])
    plots, n_plots = _plots(d)
    table = layer_table(d["layers"]) if d["layers"] else '<p class="na">no loadable given (--loadable FILE)</p>'
    bad = [(i, n) for i, n in enumerate(d["nodes"]) if not n["supported"]]
    unsupported = ("<p>Nodes that do not run on the DLA, and why:</p><ul>" + "".join(
        f'<li class="unsupported" data-node="{i}"><b>{esc(n["name"])}</b> ({esc(n["op"])}): {esc(n["reason"])}</li>'
        for i, n in bad) + "</ul>") if bad else ""
    warnings = "".join(f'<p class="warn">{esc(w)}</p>' for w in d["warnings"])
    meta = f"layers={len(d['layers'])};nodes={len(d['nodes'])};plots={n_plots}"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="softdla-report" content="{meta}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>softdla report: {esc(d['model_name'])}</title>
<script>{JS_ERRORS}</script>
<style>{CSS}</style></head>
<body data-layers="{len(d['layers'])}" data-nodes="{len(d['nodes'])}" data-plots="{n_plots}">
<header><h1>softdla report: {esc(d['model_name'])}</h1>
<div>{esc(d['subtitle'])}</div>
<nav><a href="#graph">graph</a><a href="#layers">layers</a><a href="#plot-measured">time</a>
<a href="#plot-orin">Orin estimate</a><a href="#plot-error">error</a><a href="#plot-memory">memory</a></nav></header>
<main>{_cards(d)}{warnings}
<section id="graph"><h2>The graph: which nodes run on the DLA</h2>
<p>ONNX nodes top to bottom in the order data flows; hover a node for its op, why it does or does not run on
the DLA, and the engine layer it became. Hovering a node, a table row or a bar highlights the same layer
everywhere.</p>
{legend_html(counts)}{unsupported}<div class="scroll">{graph}</div></section>
<section id="layers"><h2>Engine layers</h2>
<p>The loadable's ops in execution order (click a heading to sort).</p>{table}</section>
<section id="plots"><h2>Plots</h2>{plots}</section>
</main>
<footer><p style="padding:0 24px;color:#78909c">{esc(d['footer'])}</p></footer>
<script>{JS_INIT}</script>
</body></html>
"""
