#!/usr/bin/env python3
"""Calibration of the Orin DLA latency model (python/softdla/orin_latency.py) against NVIDIA's published
figures (python/softdla/orin_published.py: NVIDIA's Deep-Learning-Accelerator-SW and cuDLA-samples READMEs).

    tools/orin_latency_calibration.py              # fit, then the table of every figure
    tools/orin_latency_calibration.py --markdown   # the table as docs/PROFILING.md has it
    tools/orin_latency_calibration.py --no-fit     # the table with the constants stored in orin_latency.FITTED

Each published network is rebuilt as an ONNX graph with random weights at the published input size and
batch (tests/python/sdla_testkit/orin_nets.py), its DLA layers are derived from the graph
(softdla.onnx_layers), and the model predicts the figure at the published conditions: the DLA clock of the
power mode (AGX Orin: from the mode's published TOPS; DRIVE Orin: 1331 MHz), dense or 2:4 sparse, the
layers the published build ran in FP16, and 1 or 2 DLAs (img/s of 2 DLAs = 2 x one DLA).

The fit: the four free parameters (conv_efficiency <= 1, dram_gbps <= 204.8, the module's LPDDR5 peak,
op_overhead_cycles, and the convolutions' overlap in [0, 1]; the other engines stream, overlap 1) minimise
the sum of squared log errors over orin_published.FIT_KEYS,
by a Nelder-Mead search from a fixed start (no randomness: the same numbers every run). Every other usable
figure is held out. The fitted values are printed as the FITTED dict to paste into orin_latency.py; the
module never fits at import.
"""
import argparse
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
from softdla import onnx_layers, orin_latency, orin_published  # noqa: E402
from sdla_testkit import orin_nets  # noqa: E402

FREE = ("conv_efficiency", "dram_gbps", "op_overhead_cycles", "overlap")
DRAM_PEAK_GBPS = 204.8  # Jetson AGX Orin's LPDDR5 (256 bit at 6400 MT/s), the module's quoted peak
GOAL_PCT = 20.0


def figure_layers(fig, cache):
    """The derived layer list of a figure's network at its batch and FP16 layers (cached)."""
    key = (fig.net, fig.batch, fig.fp16_layers)
    if key not in cache:
        model = orin_nets.build(fig.net, fig.batch)
        cache[key] = onnx_layers.layers_from_onnx(
            model, precision=fig.precision, layer_precisions={n: "fp16" for n in fig.fp16_layers})
    return cache[key]


def predict(fig, layers, params=None):
    r = orin_latency.estimate(layers, clock_mhz=fig.dla_clock_mhz, sparse=fig.sparse, dlas=fig.dlas,
                              params=params)
    return orin_published.predicted_value(fig, r["total_ms"]), r


def error_pct(predicted, published):
    return 100.0 * (predicted - published) / published


def nelder_mead(f, x0, step=0.3, iters=400, tol=1e-10):
    """Minimises f over R^n from x0 (deterministic Nelder-Mead with the usual coefficients)."""
    n = len(x0)
    pts = [list(x0)] + [[x0[j] + (step if j == i else 0.0) for j in range(n)] for i in range(n)]
    vals = [f(p) for p in pts]
    for _ in range(iters):
        order = sorted(range(n + 1), key=lambda i: vals[i])
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        if vals[-1] - vals[0] < tol:
            break
        centroid = [sum(p[j] for p in pts[:-1]) / n for j in range(n)]
        refl = [centroid[j] + (centroid[j] - pts[-1][j]) for j in range(n)]
        fr = f(refl)
        if fr < vals[0]:
            exp = [centroid[j] + 2 * (centroid[j] - pts[-1][j]) for j in range(n)]
            fe = f(exp)
            pts[-1], vals[-1] = (exp, fe) if fe < fr else (refl, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = refl, fr
        else:
            con = [centroid[j] + 0.5 * (pts[-1][j] - centroid[j]) for j in range(n)]
            fc = f(con)
            if fc < vals[-1]:
                pts[-1], vals[-1] = con, fc
            else:
                for i in range(1, n + 1):
                    pts[i] = [pts[0][j] + 0.5 * (pts[i][j] - pts[0][j]) for j in range(n)]
                    vals[i] = f(pts[i])
    best = min(range(n + 1), key=lambda i: vals[i])
    return pts[best], vals[best]


def _params_of(x):
    """Search coordinates -> parameters: efficiency and bandwidth are clamped to their physical limits (the
    loss adds a penalty past them), the overhead is log-scaled, the overlap logistic."""
    return {"conv_efficiency": min(1.0, math.exp(x[0])), "dram_gbps": min(DRAM_PEAK_GBPS, math.exp(x[1])),
            "op_overhead_cycles": math.exp(x[2]), "overlap": 1.0 / (1.0 + math.exp(-x[3]))}


def fit(figs, cache):
    """The FREE parameters that best predict `figs` (sum of squared log errors)."""
    def loss(x):
        prm = _params_of(x)
        s = sum(math.log(predict(fg, figure_layers(fg, cache), prm)[0] / fg.value) ** 2 for fg in figs)
        return s + max(0.0, x[0]) ** 2 + max(0.0, x[1] - math.log(DRAM_PEAK_GBPS)) ** 2
    start = [math.log(0.8), math.log(60.0), math.log(8000.0), 0.0]
    x, _ = nelder_mead(loss, start, iters=1000)
    return _params_of(x)


def rows_for(params, cache):
    rows = []
    for fig in orin_published.usable():
        value, r = predict(fig, figure_layers(fig, cache), params)
        kinds = {}
        for lay in r["layers"]:
            kinds[lay["bound"]] = kinds.get(lay["bound"], 0.0) + lay["ms"]
        rows.append({"key": fig.key, "model": fig.model, "input": f"{fig.input_hw[1]}x{fig.input_hw[0]}",
                     "batch": fig.batch, "sparse": fig.sparse, "dlas": fig.dlas, "power_mode": fig.power_mode,
                     "clock_mhz": round(fig.dla_clock_mhz, 1), "unit": fig.unit, "published": fig.value,
                     "predicted": value, "error_pct": error_pct(value, fig.value),
                     "role": "fitted" if fig.key in orin_published.FIT_KEYS else "held-out",
                     "source": fig.source, "note": fig.note,
                     "ms_by_bound": {k: round(v, 4) for k, v in sorted(kinds.items())}})
    return rows


def summary(rows):
    held = [r for r in rows if r["role"] == "held-out"]
    within = [r for r in held if abs(r["error_pct"]) <= GOAL_PCT]
    worst = max(held, key=lambda r: abs(r["error_pct"]))
    mean_abs = sum(abs(r["error_pct"]) for r in held) / len(held)
    return {"held_out": len(held), "within_goal": len(within), "goal_pct": GOAL_PCT,
            "mean_abs_error_pct": mean_abs, "worst": {"key": worst["key"], "error_pct": worst["error_pct"]}}


def markdown(rows, params):
    out = ["| figure | conditions | published | predicted | error | role |", "|---|---|---:|---:|---:|---|"]
    for r in rows:
        cond = (f"{r['input']}, bs {r['batch']}, {r['dlas']} DLA{'s' if r['dlas'] > 1 else ''}, {r['power_mode']} "
                f"({r['clock_mhz']:.0f} MHz){', sparse' if r['sparse'] else ''}")
        if "fp16" in r["key"]:
            cond += ", FP16 head"
        fmt = "{:.0f}" if r["unit"] == "img/s" else "{:.2f}"
        out.append(f"| {r['model']} | {cond} | {fmt.format(r['published'])} {r['unit']} | "
                   f"{fmt.format(r['predicted'])} {r['unit']} | {r['error_pct']:+.1f} % | {r['role']} |")
    s = summary(rows)
    out.append("")
    out.append(f"Held out: {s['within_goal']} of {s['held_out']} figures within {s['goal_pct']:.0f} %, mean |error| "
               f"{s['mean_abs_error_pct']:.1f} %, worst {s['worst']['key']} ({s['worst']['error_pct']:+.1f} %). "
               "Parameters: " + ", ".join(f"{k} = {params[k]:.4g}" for k in FREE) + ".")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-fit", action="store_true", help="use orin_latency.FITTED as stored instead of fitting")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--json", metavar="FILE", help="also write the rows, summary and parameters as JSON")
    a = ap.parse_args(argv)
    cache = {}
    if a.no_fit:
        params = {k: orin_latency.FITTED[k] for k in FREE}
    else:
        params = fit([orin_published.BY_KEY[k] for k in orin_published.FIT_KEYS], cache)
    rows = rows_for(params, cache)
    if a.markdown:
        print(markdown(rows, params))
    else:
        print(f"{'figure':<36} {'published':>10} {'predicted':>10} {'error':>8}  role")
        for r in rows:
            print(f"{r['key']:<36} {r['published']:>10.2f} {r['predicted']:>10.2f} "
                  f"{r['error_pct']:>+7.1f}%  {r['role']}")
        s = summary(rows)
        print(f"held out: {s['within_goal']}/{s['held_out']} within {GOAL_PCT:.0f} %, mean |error| "
              f"{s['mean_abs_error_pct']:.1f} %, worst {s['worst']['key']} {s['worst']['error_pct']:+.1f} %")
    if not a.markdown:
        print("\nFITTED = {\n" + "".join(f'    "{k}": {params[k]:.4g},\n' for k in FREE) + "}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"parameters": params, "rows": rows, "summary": summary(rows)}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
