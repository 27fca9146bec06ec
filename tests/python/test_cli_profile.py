"""`softdla run` through libcudla.so.1 and its trtexec-style exports (--exportProfile, --exportTimes,
--exportLayerInfo), `softdla profile`'s Chrome-trace timeline, --backend and --useDLACore
(docs/PROFILING.md). The bundled model's layers are known from its generator
(examples/models/make_bars_model.cpp), so names and counts are checked against that list, not against
what the command reports elsewhere."""
import json
import os
import re
import subprocess

import numpy as np
import pytest

from sdla_testkit.engine import ROOT

BUILD = os.environ.get("SOFTDLA_BUILD_DIR", os.path.join(ROOT, "build"))
SOFTDLA = os.path.join(BUILD, "softdla")
MODEL = os.path.join(ROOT, "examples", "models", "bars.loadable")
IMAGES = os.path.join(ROOT, "examples", "models", "bars_images.npy")
# The six ops make_bars_model.cpp writes, in execution order.
BARS_LAYERS = ["conv1 + relu", "maxpool", "global average pool", "fc", "to fp16", "softmax"]
PROFILE_KEYS = {"name", "timeMs", "averageMs", "medianMs", "percentage"}
TIMES_KEYS = {"startMs", "endMs", "latencyMs", "batch"}
LAYER_INFO_KEYS = {"index", "name", "op", "precision", "inputs", "outputs", "params", "fused", "weight_bytes", "macs",
                   "input_bytes", "output_bytes"}


def run(*args, env=None):
    return subprocess.run([SOFTDLA, *map(str, args)], capture_output=True, text=True, env=env)


def ok(*args, env=None):
    r = run(*args, env=env)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    return r


def gpu_present():
    """Whether the CUDA driver sees a GPU (then `auto` runs on the CUDA backend)."""
    import ctypes
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        count = ctypes.c_int(0)
        return cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0
    except OSError:
        return False


def load(path):
    with open(path) as f:
        return json.load(f)


def check_profile(profile, runs):
    assert isinstance(profile, list) and profile[0] == {"count": runs}
    layers = profile[1:]
    assert [e["name"] for e in layers] == BARS_LAYERS
    for e in layers:
        assert set(e) == PROFILE_KEYS, e
        assert isinstance(e["name"], str)
        for k in PROFILE_KEYS - {"name"}:
            assert isinstance(e[k], (int, float)) and e[k] >= 0, (k, e)
        # total = average x runs (6 decimals each); a median lies within the total
        assert e["timeMs"] == pytest.approx(e["averageMs"] * runs, abs=2e-6 * runs + 1e-9)
        assert e["medianMs"] <= e["timeMs"] + 1e-6
    total = sum(e["timeMs"] for e in layers)
    assert total > 0
    assert sum(e["percentage"] for e in layers) == pytest.approx(100, abs=0.01)
    for e in layers:
        assert e["percentage"] == pytest.approx(100 * e["timeMs"] / total, abs=1e-3)
    return total


def check_times(times, batches):
    assert isinstance(times, list) and [t["batch"] for t in times] == batches
    for t in times:
        assert set(t) == TIMES_KEYS, t
        assert t["startMs"] >= 0 and t["endMs"] >= t["startMs"]
        assert t["latencyMs"] == pytest.approx(t["endMs"] - t["startMs"], abs=2e-6)
    assert times[0]["startMs"] == 0  # times count from the first submission
    for a, b in zip(times, times[1:]):
        assert b["startMs"] >= a["endMs"]  # one task after another


def test_run_exports(tmp_path):
    p, t, li = tmp_path / "profile.json", tmp_path / "times.json", tmp_path / "layers.json"
    r = ok("run", MODEL, "-i", f"images={IMAGES}", "-r", 4, f"--exportProfile={p}", f"--exportTimes={t}",
           "--exportLayerInfo", li, "-o", tmp_path / "out")
    for n in range(4):
        assert f"[{n}] argmax {n}" in r.stdout
    profile, times, info = load(p), load(t), load(li)
    layer_total = check_profile(profile, 4)
    check_times(times, [0, 0, 0, 0])
    # Layers run inside their tasks, one after another: their times add up to less than the tasks'.
    assert layer_total <= sum(x["latencyMs"] for x in times) + 1e-6
    # The printed median is the median (upper, for an even count) of the exported latencies: printed to
    # three decimals, exported to six, so the two roundings of one value differ by at most half the
    # printed step (0.1915 may print as 0.191 where its export reads 0.191500, formatted 0.192).
    median = sorted(x["latencyMs"] for x in times)[len(times) // 2]
    printed = re.search(r"median (\d+\.\d{3}) ms per batch", r.stdout)
    assert printed, r.stdout
    assert abs(float(printed.group(1)) - median) <= 0.0005 + 1e-6, (printed.group(1), median)
    assert info["loadable"] == str(MODEL)
    assert [x["name"] for x in info["layers"]] == BARS_LAYERS
    assert [x["index"] for x in info["layers"]] == list(range(len(BARS_LAYERS)))
    for x in info["layers"]:
        assert LAYER_INFO_KEYS <= set(x), x
    # conv1: 4 images x 4 channels x 16 x 16 outputs, each a 3 x 3 x 1 window
    assert info["layers"][0]["macs"] == 4 * 4 * 16 * 16 * 9


def test_exports_do_not_change_outputs(tmp_path):
    ok("run", MODEL, "-i", f"images={IMAGES}", "-o", tmp_path / "plain")
    ok("run", MODEL, "-i", f"images={IMAGES}", "-o", tmp_path / "profiled", "--exportProfile", tmp_path / "p.json")
    plain = (tmp_path / "plain" / "probabilities.npy").read_bytes()
    assert plain == (tmp_path / "profiled" / "probabilities.npy").read_bytes()


def test_exports_over_several_batches(tmp_path):
    images = np.load(IMAGES)
    np.save(tmp_path / "x3.npy", np.concatenate([images, images[::-1], images]))
    ok("run", MODEL, "-i", f"images={tmp_path / 'x3.npy'}", "-r", 2, "--exportProfile", tmp_path / "p.json",
       "--exportTimes", tmp_path / "t.json")
    # the first batch twice, then batches 1 and 2 once each
    check_profile(load(tmp_path / "p.json"), 4)
    check_times(load(tmp_path / "t.json"), [0, 0, 1, 2])


def test_export_to_an_unwritable_path_is_an_error(tmp_path):
    r = run("run", MODEL, "--exportTimes", tmp_path / "no" / "such" / "dir" / "t.json")
    assert r.returncode == 1
    assert "--exportTimes: cannot write" in r.stderr and "t.json" in r.stderr


def check_trace(trace, tasks, stream_row):
    assert set(trace) >= {"traceEvents"}
    events = trace["traceEvents"]
    for e in events:
        assert {"name", "ph", "pid", "tid"} <= set(e), e
        assert e["ph"] in ("M", "X"), e
    rows = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"process_name"} <= {e["name"] for e in events if e["ph"] == "M"}
    complete = [e for e in events if e["ph"] == "X"]
    for e in complete:
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float)), e
        assert e["ts"] >= 0 and e["dur"] >= 0, e
        assert e["tid"] in rows, e  # every event is on a named row
    by_cat = {}
    for e in complete:
        by_cat.setdefault(e["cat"], []).append(e)
    assert len(by_cat["task"]) == tasks
    assert len(by_cat["layer"]) == tasks * len(BARS_LAYERS)
    assert ("stream" in by_cat) == stream_row
    # The layers of each task, in order, inside the task (on the CPU) or inside its span on the stream (on a
    # GPU, whose layer times are stamped on the stream): rounding to the ns allows 0.002 us.
    spans = {e["args"]["task"]: e for e in by_cat["stream" if stream_row else "task"]}
    assert sorted(spans) == list(range(tasks))
    for task in range(tasks):
        layers = sorted((e for e in by_cat["layer"] if e["args"]["task"] == task), key=lambda e: e["args"]["layer"])
        assert [e["name"] for e in layers] == BARS_LAYERS
        start, end = spans[task]["ts"], spans[task]["ts"] + spans[task]["dur"]
        slack = 1.0 if stream_row else 0.002  # GPU: stamps and events are different clocks
        for e in layers:
            assert start - slack <= e["ts"] and e["ts"] + e["dur"] <= end + slack, (e, spans[task])
        if not stream_row:  # the CPU runs the layers one after another
            for a, b in zip(layers, layers[1:]):
                assert b["ts"] >= a["ts"] + a["dur"] - 0.002, (a, b)
    return rows


def test_profile_writes_a_trace(tmp_path):
    r = ok("profile", MODEL, "-i", f"images={IMAGES}", "--repeat", 3, "--backend", "cpu", "-o", tmp_path / "trace.json")
    assert "cpu backend" in r.stdout and "3 task(s)" in r.stdout and str(tmp_path / "trace.json") in r.stdout
    rows = check_trace(load(tmp_path / "trace.json"), 3, stream_row=False)
    assert sorted(rows) == [1, 2]
    # tasks follow one another on the task row
    tasks = sorted((e for e in load(tmp_path / "trace.json")["traceEvents"] if e.get("cat") == "task"),
                   key=lambda e: e["ts"])
    for a, b in zip(tasks, tasks[1:]):
        assert b["ts"] >= a["ts"] + a["dur"] - 0.002


def test_profile_needs_an_output(tmp_path):
    r = run("profile", MODEL)
    assert r.returncode != 0 and "--output" in r.stderr


def test_use_dla_core(tmp_path):
    ok("run", MODEL, "--useDLACore", 1, "--backend", "cpu")
    r = run("run", MODEL, "--useDLACore", 2)
    assert r.returncode == 1 and "--useDLACore 2" in r.stderr and "2 DLA core(s)" in r.stderr
    ok("run", MODEL, "--useDLACore", 2, env=dict(os.environ, SOFTDLA_NUM_DEVICES="3"))


def test_backend_values(tmp_path):
    r = run("run", MODEL, "--backend", "gpu")
    assert r.returncode != 0 and "--backend" in r.stderr
    r = run("run", MODEL, env=dict(os.environ, SOFTDLA_BACKEND="gpu"))
    assert r.returncode == 1 and "SOFTDLA_BACKEND='gpu'" in r.stderr
    # --backend overrides the environment
    ok("run", MODEL, "--backend", "cpu", env=dict(os.environ, SOFTDLA_BACKEND="gpu"))


def test_cpu_backend_matches_the_default(tmp_path):
    ok("run", MODEL, "-i", f"images={IMAGES}", "-o", tmp_path / "auto")
    ok("run", MODEL, "-i", f"images={IMAGES}", "-o", tmp_path / "cpu", "--backend", "cpu")
    a, c = np.load(tmp_path / "auto" / "probabilities.npy"), np.load(tmp_path / "cpu" / "probabilities.npy")
    np.testing.assert_allclose(a, c, atol=2e-3)  # fp16 softmax: the CUDA backend within fp16 rounding


@pytest.mark.skipif(gpu_present(), reason="a GPU is present: the CUDA backend runs")
@pytest.mark.parametrize("command", ["run", "profile"])
def test_cuda_backend_without_a_gpu_is_a_clear_error(tmp_path, command):
    r = run(command, MODEL, "--backend", "cuda", "-o", tmp_path / "x")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "--backend cuda needs a GPU" in r.stderr and "--backend cpu" in r.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.skipif(not gpu_present(), reason="needs a GPU")
def test_cuda_backend_profile_has_a_stream_row(tmp_path):
    r = ok("profile", MODEL, "-i", f"images={IMAGES}", "-r", 3, "--backend", "cuda", "-o", tmp_path / "trace.json")
    assert "cuda backend" in r.stdout
    rows = check_trace(load(tmp_path / "trace.json"), 3, stream_row=True)
    assert sorted(rows) == [1, 2, 3]
    ok("run", MODEL, "-i", f"images={IMAGES}", "--backend", "cuda", "-r", 3, "--exportProfile", tmp_path / "p.json",
       "--exportTimes", tmp_path / "t.json")
    check_times(load(tmp_path / "t.json"), [0, 0, 0])
    profile = load(tmp_path / "p.json")
    assert profile[0] == {"count": 3} and [e["name"] for e in profile[1:]] == BARS_LAYERS


def test_trtexec_inference_flags(tmp_path):
    """trtexec's run flags for a DLA engine: --loadEngine, --loadInputs (raw bytes in the input's I/O format,
    or dense values in its stored type), --iterations, --exportOutput (name, dimensions, values), and the
    timing flags accepted without effect. The outputs must be the ones the Python package computes from
    the .npy (its own packing, independent of the CLI's)."""
    import softdla
    from softdla import formats
    x = np.load(IMAGES)[:4].astype(np.float32)  # one batch of the loadable's four images
    with softdla.Device() as dev:
        m = dev.load(MODEL)
        t_in, t_out = m.inputs[0], m.outputs[0]
        want = m.run([x])[t_out.name].ravel()
    codes = formats.quantize(x, t_in.scale) if t_in.dtype == np.int8 else x.astype(t_in.dtype)
    (tmp_path / "in.bin").write_bytes(formats.pack(codes, t_in.format))
    codes.tofile(tmp_path / "dense.bin")
    for spec in ("in.bin", "dense.bin"):
        out = tmp_path / f"{spec}.json"
        ok("run", f"--loadEngine={MODEL}", f"--loadInputs={t_in.name}:{tmp_path / spec}", f"--exportOutput={out}",
           "--iterations=2", "--warmUp=5", "--duration=1", "--useSpinWait", "--noDataTransfers")
        (entry,) = json.loads(out.read_text())
        assert entry["name"] == t_out.name and entry["dimensions"] == "x".join(map(str, t_out.shape))
        np.testing.assert_allclose(np.array(entry["values"], np.float32), want, rtol=0, atol=0)
    (tmp_path / "short.bin").write_bytes(b"abc")
    r = run("run", MODEL, f"--loadInputs={t_in.name}:{tmp_path / 'short.bin'}")
    assert r.returncode == 1 and "holds 3 bytes; a raw input holds the tensor in its I/O format" in r.stderr, r.stderr
    r = run("run", MODEL, f"--loadInputs=nope:{tmp_path / 'in.bin'}")
    assert r.returncode == 1 and "not an input of this loadable" in r.stderr, r.stderr
