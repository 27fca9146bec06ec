"""softdla report (python -m softdla.report): the self-contained HTML page. The page is parsed with
html.parser and, where chromium is installed, loaded in a real headless browser; the expected nodes,
layers, bar counts and bar lengths come from the ONNX graph, softdla.inspect and the hand-written profile
and comparison, not from the report's own code."""
import html.parser
import importlib.util
import json
import math
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper

import softdla
from softdla.report import ReportError, write_report
from sdla_testkit.engine import ROOT
from sdla_testkit.onnx_models import G

EVIL = "<script>alert(1)</script>"
HAS_ORIN_MODEL = importlib.util.find_spec("softdla.orin_latency") is not None


# ------------------------------------------------------------------ a tiny DOM from html.parser
class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent, self.children = tag, dict(attrs), parent, []  # children: Nodes, strings

    def iter(self):
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.iter()

    def find_all(self, tag=None, **attrs):
        """Elements of `tag` whose attributes equal attrs (class_ matches one of the classes)."""
        out = []
        for n in self.iter():
            if tag and n.tag != tag:
                continue
            cls = attrs.get("class_")
            if cls and cls not in (n.attrs.get("class") or "").split():
                continue
            if all(n.attrs.get(k) == v for k, v in attrs.items() if k != "class_"):
                out.append(n)
        return out

    def all_text(self):
        return "".join(c.all_text() if isinstance(c, Node) else c for c in self.children)


class Dom(html.parser.HTMLParser):
    VOID = {"meta", "br", "link", "img", "input", "hr"}

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.root = self.cur = Node("#root", {}, None)
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        n = Node(tag, attrs, self.cur)
        self.cur.children.append(n)
        if tag not in self.VOID:
            self.cur = n

    def handle_startendtag(self, tag, attrs):
        self.cur.children.append(Node(tag, attrs, self.cur))

    def handle_endtag(self, tag):
        n = self.cur
        while n is not None and n.tag != tag:
            n = n.parent
        if n is not None and n.parent is not None:  # close it (and anything left open inside it)
            self.cur = n.parent

    def handle_data(self, data):
        self.cur.children.append(data)


def title_of(node):
    t = [c for c in node.children if isinstance(c, Node) and c.tag == "title"]
    return t[0].all_text() if t else ""


# ------------------------------------------------------------------ the model and its inputs
def model_with_topk():
    """Conv+BN+Relu, a conv named like a script, a max pool, then a TopK the DLA cannot run."""
    g = G(seed=1)
    x = g.input("x", [1, 3, 16, 16])
    a = g.node("Relu", [g.bn(g.conv(x, 3, 8), 8)])
    w = g.weight(8, 8, 3, 3)
    g.nodes.append(helper.make_node("Conv", [a, w], ["evil_out"], name=EVIL, kernel_shape=[3, 3], pads=[1] * 4))
    p = g.node("MaxPool", ["evil_out"], kernel_shape=[2, 2], strides=[2, 2])
    dla_part = onnx.ModelProto()
    dla_part.CopyFrom(g.model([p]))
    g.outputs.clear()
    g.nodes.append(helper.make_node("TopK", [p, g.const(np.array([2], np.int64))], ["values", "indices"], axis=1,
                                    name="topk"))
    return g.model(["values"]), dla_part


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    """The model, the loadable of its DLA part, a profile and a comparison written by hand, the report."""
    d = tmp_path_factory.mktemp("report")
    model, dla_part = model_with_topk()
    onnx.save(model, d / "model.onnx")
    loadable = softdla.build(dla_part, fp16=True)
    (d / "model.loadable").write_bytes(loadable)
    info = softdla.inspect(loadable)
    layers = info["layer_info"]
    ms = [0.5 * (k + 1) for k in range(len(layers))]
    profile = [{"count": 3}] + [{"name": l["name"], "timeMs": 3 * t, "averageMs": t, "medianMs": t,
                                 "percentage": 100 * t / sum(ms)} for l, t in zip(layers, ms)]
    (d / "profile.json").write_text(json.dumps(profile))
    rel = [0.001 * (k + 1) for k in range(len(layers))]
    rel[-1] = None  # non-finite error, as the compare JSON writes it
    rows = [{"index": k, "tensor": l["outputs"][0]["name"], "layer": l["name"], "kind": l["op"], "onnx_op": None,
             "precision": l["precision"], "shape": l["outputs"][0]["shape"], "is_output": k == len(layers) - 1,
             "cosine": 1 - r if r else None, "channel_cosine": None, "rel_l2": r, "max_abs": 0.1, "ref_max_abs": 1.0,
             "jump": k == 1} for k, (l, r) in enumerate(zip(layers, rel))]
    cmp = {"schema": "softdla-compare/1", "model": "model.onnx", "loadable": None, "layers": rows,
           "outputs": [{"tensor": rows[-1]["tensor"], "cosine": 0.5}], "first_jump": None, "not_compared": [],
           "warnings": [], "search": None}
    (d / "compare.json").write_text(json.dumps(cmp))
    out = write_report(d / "model.onnx", loadable=d / "model.loadable", profile=d / "profile.json",
                       compare=d / "compare.json", out=d / "report.html")
    text = open(out, encoding="utf-8").read()
    return {"dir": d, "model": model, "info": info, "ms": ms, "rel": rel, "text": text, "dom": Dom(text).root,
            "check": softdla.check(model)}


def plot(dom, name):
    svgs = dom.find_all("svg", **{"data-plot": name})
    assert len(svgs) == 1, f"plot {name} missing"
    return svgs[0]


def bar_widths(svg):
    return [float(r.attrs["width"]) for r in svg.find_all("rect", class_="bar")]


# ------------------------------------------------------------------ the page
def test_every_node_appears_coloured_by_dla_support(case):
    dom, model, check = case["dom"], case["model"], case["check"]
    nodes = dom.find_all("g", class_="node")
    assert len(nodes) == len(model.graph.node) == len(check)
    fills = {}
    for g, row in zip(sorted(nodes, key=lambda n: int(n.attrs["data-node"])), check):
        title = title_of(g)
        assert title.startswith(f"{row['op']} {row['node']}\n")
        assert (g.attrs["data-status"] == "unsupported") == (not row["supported"])
        fills.setdefault(row["supported"], set()).add(g.find_all("rect")[0].attrs["fill"])
        if not row["supported"]:
            assert row["node"] == "topk" and row["reason"] and row["reason"] in title
    assert not fills[True] & fills[False]  # the unsupported node's colour is no supported node's colour
    listed = dom.find_all("li", class_="unsupported")
    assert [li.all_text() for li in listed] == [f"{r['node']} ({r['op']}): {r['reason']}" for r in check
                                                if not r["supported"]]
    by_op = {title_of(g).split(" ")[0]: g for g in nodes}
    assert by_op["Relu"].attrs["data-status"] == "fused" and by_op["BatchNormalization"].attrs["data-status"] == "fused"
    assert "engine layer: " + EVIL in title_of(next(g for g in nodes if g.attrs["data-status"] == "dla"
                                                    and EVIL in title_of(g)))


def test_every_engine_layer_is_a_table_row(case):
    dom, layers = case["dom"], case["info"]["layer_info"]
    rows = dom.find_all("tr", class_="layer")
    assert [r.attrs["data-name"] for r in rows] == [l["name"] for l in layers]
    for r, l, t in zip(rows, layers, case["ms"]):
        cells = [c.all_text() for c in r.find_all("td")]
        assert cells[1] == l["name"] and cells[2] == l["op"] and cells[3] == l["precision"]
        assert cells[7] == f"{l['macs']:,}"
        assert float(cells[9]) == pytest.approx(t, rel=1e-2)
    meta = dom.find_all("meta", name="softdla-report")[0].attrs["content"]
    assert meta == f"layers={len(layers)};nodes={len(case['model'].graph.node)};plots={4 if HAS_ORIN_MODEL else 3}"


def test_plots_have_one_bar_per_layer_with_lengths_in_proportion(case):
    dom, layers, ms, rel = case["dom"], case["info"]["layer_info"], case["ms"], case["rel"]
    w = bar_widths(plot(dom, "measured"))
    assert len(w) == len(layers)
    assert [x / w[-1] for x in w] == pytest.approx([t / ms[-1] for t in ms], abs=0.01)
    err = plot(dom, "error")
    w = bar_widths(err)
    assert len(w) == len(layers) and len(err.find_all("rect", class_="inf")) == 1
    assert len(err.find_all("rect", class_="jump")) == 1
    assert [x / w[-2] for x in w[:-1]] == pytest.approx([r / rel[-2] for r in rel[:-1]], abs=0.01)
    mem = plot(dom, "memory")
    assert len(mem.find_all("rect", class_="tensor")) == len(case["info"]["memory_plan"]) >= 2
    if HAS_ORIN_MODEL:
        assert len(bar_widths(plot(dom, "orin"))) == len(layers)
    else:
        assert dom.find_all("p", **{"data-plot-missing": "orin"})
    for svg in dom.find_all("svg", class_="plot"):  # axes with values and a label
        assert svg.find_all("line", class_="axis") and len(svg.find_all("text", class_="tickv")) >= 2
        assert svg.find_all("text", class_="axlabel")


def test_page_is_self_contained_and_names_are_escaped(case):
    text, dom = case["text"], case["dom"]
    for n in dom.iter():
        for key in ("src", "href", "xlink:href", "action", "data"):
            v = n.attrs.get(key) or ""
            assert not re.match(r"\s*([a-z]+:|//)", v, re.I), (n.tag, key, v)
        assert n.tag not in ("link", "iframe", "img", "object", "embed")
    assert "http:" not in text and "https:" not in text and "@import" not in text and "url(" not in text.replace(
        "url(#arrow)", "")
    assert EVIL not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    scripts = dom.find_all("script")
    assert len(scripts) == 2 and all("alert" not in s.all_text() for s in scripts)
    assert EVIL in [r.attrs["data-name"] for r in dom.find_all("tr", class_="layer")]  # the parser decodes it back


def test_loadable_of_another_model_is_flagged(case):
    assert "built from another ONNX file" in case["text"]


# ------------------------------------------------------------------ other inputs
def test_graph_only_without_a_loadable(case, tmp_path):
    out = write_report(case["dir"] / "model.onnx", out=tmp_path / "r.html")
    dom = Dom(open(out, encoding="utf-8").read()).root
    assert len(dom.find_all("g", class_="node")) == len(case["model"].graph.node)
    assert not dom.find_all("svg", class_="plot") and not dom.find_all("tr", class_="layer")
    assert dom.find_all("body")[0].attrs["data-plots"] == "0"


def test_measures_with_softdla_run_or_says_not_measured(case, tmp_path, monkeypatch):
    d = case["dir"]
    out = write_report(d / "model.onnx", loadable=d / "model.loadable", out=tmp_path / "r.html", repeat=2)
    dom = Dom(open(out, encoding="utf-8").read()).root
    assert len(bar_widths(plot(dom, "measured"))) == len(case["info"]["layer_info"])
    monkeypatch.setenv("SOFTDLA_BUILD_DIR", str(tmp_path))  # no softdla command there
    out = write_report(d / "model.onnx", loadable=d / "model.loadable", out=tmp_path / "r2.html")
    dom = Dom(open(out, encoding="utf-8").read()).root
    missing = dom.find_all("p", **{"data-plot-missing": "measured"})
    assert missing and missing[0].all_text().startswith("not measured")


def test_run_compare_fills_the_error_view_or_says_why_not(case, tmp_path):
    d = case["dir"]
    _, dla_part = model_with_topk()
    onnx.save(dla_part, tmp_path / "part.onnx")
    out = write_report(tmp_path / "part.onnx", loadable=d / "model.loadable", run_compare=True, measure_run=False,
                       out=tmp_path / "r.html")
    err = plot(Dom(open(out, encoding="utf-8").read()).root, "error")
    layers = case["info"]["layer_info"]
    assert len(bar_widths(err)) == len(layers)  # every layer's output is an ONNX value of this graph
    rows = err.find_all("g", class_="row")
    assert [g.attrs.get("data-layer") for g in rows] == [str(l["index"]) for l in layers]
    assert all(f"(layer {l['name']})" in title_of(g) for g, l in zip(rows, layers))
    # The whole model has the TopK, which compare cannot build: the view says so, the page is still written.
    out = write_report(d / "model.onnx", loadable=d / "model.loadable", run_compare=True, measure_run=False,
                       out=tmp_path / "r2.html")
    missing = Dom(open(out, encoding="utf-8").read()).root.find_all("p", **{"data-plot-missing": "error"})
    assert missing and missing[0].all_text().startswith("not compared: ") and "TopK" in missing[0].all_text()


@pytest.mark.parametrize("what,content,message", [
    ("profile", "[{\"count\": 1}, {\"name\": \"conv99\", \"medianMs\": 1.0}]", "is it the profile of another"),
    ("profile", "{not json", "is not valid JSON"),
    ("profile", "{\"name\": \"x\"}", "expected a JSON list"),
    ("compare", "{\"schema\": \"other\"}", "is not a softdla compare result"),
    ("compare", "{\"schema\": \"softdla-compare/1\", \"layers\": [{\"tensor\": \"t\", \"layer\": \"nope\"}]}",
     "is it the comparison of another"),
])
def test_bad_inputs_give_clear_errors(case, tmp_path, what, content, message):
    p = tmp_path / "in.json"
    p.write_text(content)
    d = case["dir"]
    with pytest.raises(ReportError, match=re.escape(message)):
        write_report(d / "model.onnx", loadable=d / "model.loadable", out=tmp_path / "r.html", **{what: p})


def test_missing_files_and_profile_without_loadable(case, tmp_path):
    d = case["dir"]
    with pytest.raises(ReportError, match="does not exist"):
        write_report(tmp_path / "none.onnx", out=tmp_path / "r.html")
    with pytest.raises(ReportError, match="does not exist"):
        write_report(d / "model.onnx", loadable=tmp_path / "none.loadable", out=tmp_path / "r.html")
    with pytest.raises(ReportError, match="needs the loadable"):
        write_report(d / "model.onnx", profile=d / "profile.json", out=tmp_path / "r.html")


def test_command_line(case, tmp_path):
    d = case["dir"]
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    run = lambda *a: subprocess.run([sys.executable, "-m", "softdla.report", *map(str, a)],  # noqa: E731
                                    capture_output=True, text=True, env=env)
    r = run(d / "model.onnx", "--loadable", d / "model.loadable", "--profile", d / "profile.json",
            "--compare", d / "compare.json", "-o", tmp_path / "cli.html")
    assert r.returncode == 0, r.stderr
    assert Dom((tmp_path / "cli.html").read_text(encoding="utf-8")).root.find_all("tr", class_="layer")
    r = run(d / "model.onnx", "--loadable", d / "model.loadable", "--profile", tmp_path / "missing.json")
    assert r.returncode == 1 and "softdla report: error: profile" in r.stderr and "does not exist" in r.stderr


# ------------------------------------------------------------------ a real browser
def test_page_loads_in_headless_chromium_without_errors(case, tmp_path):
    exe = shutil.which("chromium")
    if exe is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed: CI must install it (scripts/setup.sh)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    page = case["dir"] / "report.html"
    # The browser gets none of the sanitizer runtimes scripts/sanitize.sh preloads into Python: the page,
    # not chromium, is under test (preloaded, chromium hangs).
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")}
    r = subprocess.run([exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
                        "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    console = [l for l in r.stderr.splitlines() if ":CONSOLE" in l]
    assert not console, console  # the page logs nothing: no uncaught error, no warning
    dom = Dom(r.stdout).root
    html_el, body = dom.find_all("html")[0], dom.find_all("body")[0]
    assert "data-errors" not in html_el.attrs
    assert body.attrs.get("data-ready") == "1"  # the page's script ran to its end
    layers = case["info"]["layer_info"]
    assert [r.attrs["data-name"] for r in dom.find_all("tr", class_="layer")] == [l["name"] for l in layers]
    assert len(dom.find_all("g", class_="node")) == len(case["model"].graph.node)
    assert len(bar_widths(plot(dom, "measured"))) == len(bar_widths(plot(dom, "error"))) == len(layers)
    assert len(plot(dom, "memory").find_all("rect", class_="tensor")) == len(case["info"]["memory_plan"])
    assert int(body.attrs["data-plots"]) == len(dom.find_all("svg", class_="plot")) == (4 if HAS_ORIN_MODEL else 3)
    assert math.isfinite(float(body.attrs["data-layers"]))
