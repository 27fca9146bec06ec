"""The charts of the HTML report (softdla.report) as inline SVG text, drawn here in Python so that the page
shows them with scripting off and needs nothing from the network. Every name that reaches the SVG goes
through esc(): node and layer names come from the user's model and may hold markup."""
import html
import math

# Bar charts: one row per layer, the layer's name left of its bar (names are long; rows scroll down).
BAR_H, BAR_GAP, AXIS_H, PLOT_W, LABEL_MAX = 14, 4, 34, 460, 40
PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f", "#e15759"]


def esc(text):
    """Text or attribute value, safe inside HTML and inline SVG (quotes included)."""
    return html.escape(str(text), quote=True)


def nice_ticks(vmax, count=5, integer=False):
    """Tick values 0, s, 2s, ... up to the first at or above vmax, with s = 1, 2, 2.5 or 5 x 10^k chosen
    so that there are about `count` intervals (integer: s a whole number, for op indices)."""
    if not vmax > 0 or not math.isfinite(vmax):
        return [0.0, 1.0]
    raw = vmax / count
    mag = 10 ** math.floor(math.log10(raw))
    steps = (1, 2, 5, 10) if integer else (1, 2, 2.5, 5, 10)
    step = next(m * mag for m in steps if m * mag >= raw)
    if integer:
        step = max(1, round(step))
    n = math.ceil(vmax / step - 1e-9)
    return [k * step for k in range(n + 1)]


def fmt_num(v):
    """A tick or value label: 3 significant digits, no exponent for the ranges a report shows."""
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e6 or a < 1e-3:
        return f"{v:.2e}"
    return f"{v:.3g}" if a < 1000 else f"{v:.0f}"


def fmt_bytes(b):
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= size:
            return f"{b / size:.3g} {unit}"
    return f"{int(b)} B"


def shorten(name, limit=LABEL_MAX):
    """A long name with its middle cut out: exporters' names ("/layer3/layer3.1/conv2/Conv") differ at
    both ends. The full name is in the element's tooltip."""
    name = str(name)
    if len(name) <= limit:
        return name
    tail = (limit - 1) // 2
    return name[:limit - 1 - tail] + "\u2026" + name[-tail:]


def _label(name):
    return shorten(name)


def _x_axis(out, ticks, x0, scale, y, top, label, fmt):
    """Tick marks, values and the axis label along a horizontal line at y (values above it when top)."""
    out.append(f'<line class="axis" x1="{x0}" y1="{y}" x2="{x0 + ticks[-1] * scale:.1f}" y2="{y}"/>')
    dy = -6 if top else 14
    for t in ticks:
        x = x0 + t * scale
        out.append(f'<line class="tick" x1="{x:.1f}" y1="{y - 3}" x2="{x:.1f}" y2="{y + 3}"/>'
                   f'<text class="tickv" x="{x:.1f}" y="{y + dy}" text-anchor="middle">{esc(fmt(t))}</text>')
    if not top:
        out.append(f'<text class="axlabel" x="{x0 + ticks[-1] * scale / 2:.1f}" y="{y + 30}" '
                   f'text-anchor="middle">{esc(label)}</text>')


def bar_chart(plot_id, rows, x_label, fmt=fmt_num):
    """A horizontal bar chart. rows: dicts {label, value (float, math.inf or None), title, layer (index or
    None), cls (extra CSS class or "")}. A None value draws no bar (the label says n/a); math.inf draws a
    bar across the whole axis marked as infinite. Returns the SVG text; data-bars counts the bars drawn."""
    finite = [r["value"] for r in rows if r["value"] is not None and math.isfinite(r["value"])]
    ticks = nice_ticks(max(finite, default=0.0))
    label_w = 12 + 6.4 * max((len(_label(r["label"])) for r in rows), default=4)
    x0 = round(label_w + 8)
    scale = PLOT_W / ticks[-1]
    height = AXIS_H + len(rows) * (BAR_H + BAR_GAP) + AXIS_H + 14
    width = x0 + PLOT_W + 90
    out, bars = [], 0
    for t in ticks[1:]:  # grid lines first, under the bars
        x = x0 + t * scale
        out.append(f'<line class="grid" x1="{x:.1f}" y1="{AXIS_H}" x2="{x:.1f}" y2="{height - AXIS_H - 14}"/>')
    for i, r in enumerate(rows):
        y = AXIS_H + i * (BAR_H + BAR_GAP) + BAR_GAP / 2
        v = r["value"]
        layer = "" if r.get("layer") is None else f' data-layer="{r["layer"]}"'
        out.append(f'<g class="row"{layer}><title>{esc(r["title"])}</title>'
                   f'<text class="blabel" x="{x0 - 6}" y="{y + BAR_H - 3}" text-anchor="end">{esc(_label(r["label"]))}</text>')
        if v is None:
            out.append(f'<text class="bval" x="{x0 + 4}" y="{y + BAR_H - 3}">n/a</text></g>')
            continue
        inf = not math.isfinite(v)
        w = PLOT_W if inf else max(v * scale, 0.5 if v > 0 else 0)
        cls = " ".join(c for c in ("bar", r.get("cls", ""), "inf" if inf else "") if c)
        out.append(f'<rect class="{cls}" x="{x0}" y="{y:.1f}" width="{w:.1f}" height="{BAR_H}"/>'
                   f'<text class="bval" x="{x0 + w + 4:.1f}" y="{y + BAR_H - 3}">{esc("inf" if inf else fmt(v))}</text></g>')
        bars += 1
    _x_axis(out, ticks, x0, scale, AXIS_H - 4, True, x_label, fmt)
    _x_axis(out, ticks, x0, scale, height - AXIS_H - 10, False, x_label, fmt)
    return (f'<svg class="plot" data-plot="{esc(plot_id)}" data-bars="{bars}" width="{width:.0f}" height="{height}" '
            f'viewBox="0 0 {width:.0f} {height}" role="img">{"".join(out)}</svg>')


def memory_chart(plan, arena_bytes, op_names):
    """The arena over the run: one rectangle per intermediate tensor, from the op that writes it to the last
    op that reads it (x, op index) and over its bytes (y, offset from the arena's start, 0 at the bottom).
    Rectangles that overlap vertically never overlap horizontally: that is the memory plan's promise."""
    n_ops = max(len(op_names), 1)
    left, top, plot_w, plot_h, bottom = 78, 16, 720, 320, 46
    top_bytes = max(arena_bytes, max((t["offset"] + t["bytes"] for t in plan), default=0))
    unit, size = next(((u, s) for u, s in (("MiB", 1 << 20), ("KiB", 1 << 10)) if top_bytes >= 2 * s), ("B", 1))
    y_ticks = [t * size for t in nice_ticks(top_bytes / size)]  # round numbers in the unit the axis shows
    x_ticks = nice_ticks(n_ops, count=min(10, n_ops), integer=True)
    xs, ys = plot_w / x_ticks[-1], plot_h / y_ticks[-1]
    out = []
    for k, t in enumerate(plan):
        x, w = left + t["first_op"] * xs, (t["last_op"] - t["first_op"] + 1) * xs
        y, h = top + plot_h - (t["offset"] + t["bytes"]) * ys, t["bytes"] * ys
        first = op_names[t["first_op"]] if 0 <= t["first_op"] < len(op_names) else "?"
        last = op_names[t["last_op"]] if 0 <= t["last_op"] < len(op_names) else "?"
        tip = (f"{t['tensor']}: {fmt_bytes(t['bytes'])} at offset {t['offset']}, "
               f"written by op {t['first_op']} ({first}), last read by op {t['last_op']} ({last})")
        out.append(f'<rect class="tensor" data-layer="{t["first_op"]}" x="{x:.1f}" y="{y:.1f}" width="{max(w, 1):.1f}" '
                   f'height="{max(h, 1):.1f}" fill="{PALETTE[k % len(PALETTE)]}"><title>{esc(tip)}</title></rect>')
    if arena_bytes:
        ay = top + plot_h - arena_bytes * ys
        out.append(f'<line class="arena" x1="{left}" y1="{ay:.1f}" x2="{left + plot_w}" y2="{ay:.1f}"/>'
                   f'<text class="tickv" x="{left + plot_w - 4}" y="{ay - 4:.1f}" text-anchor="end">'
                   f'arena {esc(fmt_bytes(arena_bytes))}</text>')
    base = top + plot_h
    out.append(f'<line class="axis" x1="{left}" y1="{base}" x2="{left + plot_w}" y2="{base}"/>'
               f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{base}"/>')
    for t in x_ticks:
        x = left + t * xs
        out.append(f'<line class="tick" x1="{x:.1f}" y1="{base}" x2="{x:.1f}" y2="{base + 4}"/>'
                   f'<text class="tickv" x="{x:.1f}" y="{base + 16}" text-anchor="middle">{int(t)}</text>')
    for t in y_ticks:
        y = base - t * ys
        out.append(f'<line class="tick" x1="{left - 4}" y1="{y:.1f}" x2="{left}" y2="{y:.1f}"/>'
                   f'<text class="tickv" x="{left - 7}" y="{y + 4:.1f}" text-anchor="end">{esc(fmt_num(t / size))}</text>')
    out.append(f'<text class="axlabel" x="{left + plot_w / 2}" y="{base + 36}" text-anchor="middle">'
               'op index (execution order)</text>'
               f'<text class="axlabel" transform="translate(16 {top + plot_h / 2}) rotate(-90)" '
               f'text-anchor="middle">arena offset ({unit})</text>')
    width, height = left + plot_w + 20, top + plot_h + bottom
    return (f'<svg class="plot" data-plot="memory" data-rects="{len(plan)}" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img">{"".join(out)}</svg>')
