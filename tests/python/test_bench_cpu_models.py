"""Smoke test of bench/cpu_models.py (issue 15, item 5): the whole-model CPU benchmark runs end to end at a tiny
size and reports every column and the layer breakdown. Nothing here asserts on speed."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.mark.slow
def test_cpu_models_runs(tmp_path):
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "cpu_models.py"), "--models", "resnet18,digits",
                        "--batch", "1", "--threads", "1", "--resolution", "32", "--repeat", "1", "--block", "2", "--calib", "2",
                        "--layers", "--json", str(out), "--workdir", str(tmp_path / "work")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "softdla ISA path:" in p.stdout
    assert "| ResNet-18 (32 px) | 1 | 1 |" in p.stdout and "| digits (8 px) | 1 | 1 |" in p.stdout
    assert "top 15 of" in p.stdout
    data = json.loads(out.read_text())
    assert [r["model"] for r in data["results"]] == ["resnet18", "digits"]
    for r in data["results"]:
        assert not r["errors"], r["errors"]
        for key in ("softdla_int8_ms", "softdla_fp16_ms", "ort_fp32_ms", "ort_qdq_ms", "ort_qoperator_ms",
                    "ort_best_ms", "ratio_int8", "ratio_fp16"):
            assert r[key] > 0, key
        assert r["layers_int8"]["top"] and r["layers_int8"]["task_ms"] > 0
        assert r["block"] == 2 and all(len(t) == 2 for t in r["times_ms"].values())  # one round of two runs each
