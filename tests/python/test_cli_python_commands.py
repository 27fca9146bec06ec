"""The subcommands written in Python, through the softdla command: `softdla estimate` (the Orin latency
estimate) and `softdla report` (the HTML report) run their modules and keep their exit statuses."""
import json
import os
import subprocess

from sdla_testkit.engine import ROOT

BUILD = os.environ.get("SOFTDLA_BUILD_DIR", os.path.join(ROOT, "build"))
SOFTDLA = os.path.join(BUILD, "softdla")
BARS = os.path.join(ROOT, "examples", "models", "bars.loadable")
DIGITS = os.path.join(ROOT, "examples", "models", "digits.onnx")


def run(*args):
    return subprocess.run([SOFTDLA, *args], capture_output=True, text=True, timeout=300)


def layer_count(loadable):
    r = run("inspect", "--json", loadable)
    assert r.returncode == 0, r.stderr
    return len(json.loads(r.stdout)["layer_info"])


def test_estimate_prints_every_layer_as_json():
    r = run("estimate", BARS, "--json")
    assert r.returncode == 0, r.stderr
    est = json.loads(r.stdout)
    assert len(est["layers"]) == layer_count(BARS)
    assert est["total_ms"] > 0
    assert abs(sum(layer["ms"] for layer in est["layers"]) - est["total_ms"]) < 1e-6 * max(1.0, est["total_ms"])


def test_estimate_of_a_missing_file_fails_with_its_name(tmp_path):
    r = run("estimate", str(tmp_path / "nope.loadable"))
    assert r.returncode != 0 and "nope.loadable" in r.stderr


def test_report_writes_one_page(tmp_path):
    out = tmp_path / "digits.html"
    r = run("report", DIGITS, "--no-measure", "-o", str(out))
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    assert '<meta name="softdla-report"' in page and "</html>" in page


def test_report_help_names_the_command():
    r = run("report", "--help")
    assert r.returncode == 0 and "usage: softdla report" in r.stdout
