"""softdla compare / softdla.compare: the exposed-intermediates build, per-layer errors against ONNX Runtime
FP32, the first jump, the FP16 precision search, the JSON schema and the command line's errors. The only
references are ONNX Runtime's."""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest

softdla = pytest.importorskip("softdla")
from softdla import compare as cmp  # noqa: E402
from softdla._builder_ext import build as ext_build  # noqa: E402

from sdla_testkit.engine import ROOT  # noqa: E402
from sdla_testkit.onnx_models import SOFTDLA, G, cosine, ort_run  # noqa: E402

ROW_KEYS = {"index", "tensor", "layer", "kind", "onnx_op", "precision", "shape", "is_output", "cosine",
            "channel_cosine", "rel_l2", "max_abs", "ref_max_abs", "jump"}
TOP_KEYS = {"schema", "model", "loadable", "precisions", "samples", "inputs", "build_options", "jump_rule", "layers",
            "outputs", "first_jump", "not_compared", "warnings", "search"}


def mixed_net(seed=0):
    """Conv+BN+ReLU, a residual Add, max pool, global average pool (two DLA pools), Flatten + Gemm, Softmax."""
    g = G(seed=seed)
    x = g.input("x", [1, 3, 16, 16])
    a = g.node("Relu", [g.bn(g.conv(x, 3, 8), 8)])
    b = g.node("Relu", [g.node("Add", [g.conv(a, 8, 8), a])])
    p = g.node("MaxPool", [b], kernel_shape=[2, 2], strides=[2, 2])
    f = g.node("Flatten", [g.node("GlobalAveragePool", [g.conv(p, 8, 16)])])
    return g.model([g.node("Softmax", [g.node("Gemm", [f, g.weight(10, 16), g.weight(10)], transB=1)], axis=1)])


def outlier_net():
    """Conv_1's output channel 0 is ~300x the others, so one INT8 scale for the tensor leaves the other
    channels a few levels at most; Conv_3 ignores channel 0 and reads only what quantization lost."""
    g = G(seed=1)
    x = g.input("x", [1, 3, 16, 16])
    w1 = (g.rng.standard_normal((8, 3, 3, 3)) / np.sqrt(27)).astype(np.float32)
    w1[0] *= 300
    a = g.node("Relu", [g.node("Conv", [x, g.const(w1), g.const(np.zeros(8, np.float32))], kernel_shape=[3, 3],
                               pads=[1] * 4)])
    w3 = (g.rng.standard_normal((8, 8, 3, 3)) / np.sqrt(72)).astype(np.float32)
    w3[:, 0] = 0
    b = g.node("Relu", [g.node("Conv", [a, g.const(w3), g.const(np.zeros(8, np.float32))], kernel_shape=[3, 3],
                               pads=[1] * 4)])
    return g.model([g.conv(b, 8, 8)])


@pytest.fixture
def calib(tmp_path):
    d = tmp_path / "calib"
    d.mkdir()
    np.save(d / "samples.npy", np.random.default_rng(5).standard_normal((16, 3, 16, 16)).astype(np.float32))
    return d


def save(tmp_path, model, name="model.onnx"):
    p = tmp_path / name
    onnx.save(model, p)
    return p


def cli(*args, env=None, python=sys.executable):
    e = dict(os.environ, SOFTDLA_PYTHON=python, **(env or {}))
    return subprocess.run([SOFTDLA, "compare", *map(str, args)], capture_output=True, text=True, env=e)


def run(loadable, x):
    with softdla.Device() as dev:
        m = dev.load(loadable)
        return m.run([x]), [t.name for t in m.outputs], m.outputs


# ------------------------------------------------------------------ the builder's exposed variant
@pytest.mark.parametrize("int8", [False, True], ids=["fp16", "int8"])
def test_exposed_variant_binds_every_layer_output_and_keeps_the_numerics(tmp_path, calib, int8):
    data = mixed_net().SerializeToString()
    cache = str(tmp_path / "c.cache")
    opts = {"fp16": "1", "int8": "1" if int8 else "0", "calib_data": str(calib) if int8 else "",
            "write_calib_cache": cache if int8 else "", "output_formats": "fp16:chw16"}
    plain, layers, _, _ = ext_build(data, opts, {}, {}, None)
    opts = {**opts, "write_calib_cache": "", "calib_data": "", "calib_cache": cache if int8 else "",
            "expose_intermediates": "1"}
    exposed, exposed_layers, _, _ = ext_build(data, opts, {}, {}, None)
    assert exposed_layers == layers  # same fusion, same precision per layer
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    y, names, _ = run(plain, x)
    ye, enames, infos = run(exposed, x)
    assert enames[:len(names)] == names  # the real outputs first, in their requested format
    assert infos[0].format_name == "chw16"
    for n in names:
        np.testing.assert_array_equal(ye[n], y[n])
    real_layer_outputs = {l[3] for l in layers} - set(enames[:len(names)])
    assert set(enames[len(names):]) == real_layer_outputs  # every other layer output, once
    precision = {l[3]: l[2] for l in layers}
    for t in infos[len(names):]:  # in the producer's precision, dla_linear: nothing converted on the way out
        assert t.format_name == "dla_linear"
        assert t.dtype == (np.int8 if precision[t.name] == "int8" else np.float16)
    if int8:
        assert any(p == "int8" for p in precision.values())


def test_build_flag_expose_intermediates(tmp_path):
    src = save(tmp_path, mixed_net())
    out = tmp_path / "m.loadable"
    r = subprocess.run([SOFTDLA, "build", f"--onnx={src}", "--fp16", "--exposeIntermediates", f"--saveEngine={out}"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    info = softdla.inspect(str(out))
    assert len(info["outputs"]) == len(info["layers"])  # one binding per layer: the last is the real output
    assert info["outputs"][0]["name"] != info["outputs"][1]["name"]


# ------------------------------------------------------------------ per-layer comparison
def test_fp16_layers_match_onnxruntime_and_cover_every_layer(tmp_path):
    r = softdla.compare(mixed_net(), build_options={"fp16": True}, samples=2)
    assert r.info["precisions"] == "fp16" and r.info["samples"] == 2
    _, layers, _, _ = ext_build(mixed_net().SerializeToString(), {"fp16": "1"}, {}, {}, None)
    outputs = {l[3] for l in layers}
    compared = {row["tensor"] for row in r.layers}
    # Every DLA op output is compared, or named as a tensor the builder made itself (a pooling step).
    assert outputs - compared == set(r.not_compared) - compared
    assert all(name.endswith("_pool0") for name in r.not_compared)
    for row in r.layers:
        assert row["precision"] == "fp16"
        assert row["rel_l2"] < 3e-3 and row["cosine"] > 0.99999, row
    assert r.first_jump is None and not any(row["jump"] for row in r.layers)
    assert [row["index"] for row in r.layers] == list(range(len(r.layers)))
    # Execution order: the layers' order in the build.
    order = [next(i for i, l in enumerate(layers) if l[0] == row["layer"]) for row in r.layers]
    assert order == sorted(order)
    assert r.layers[-1]["is_output"] and r.outputs[0]["tensor"] == mixed_net().graph.output[0].name
    assert r.output_cosine > 0.99999


def test_int8_network_without_a_bad_layer_has_no_jump(calib):
    r = softdla.compare(mixed_net(), calib_data=calib)
    assert r.info["precisions"] == "int8+fp16"
    assert any(row["precision"] == "int8" for row in r.layers)
    assert r.first_jump is None, str(r)


@pytest.mark.parametrize("calibrator", ["entropy", "minmax"])
def test_badly_quantized_layer_is_the_first_jump(calib, calibrator):
    r = softdla.compare(outlier_net(), build_options={"int8": True, "fp16": True, "calib_data": calib,
                                                      "calibrator": calibrator})
    assert r.first_jump is not None, str(r)
    assert r.first_jump["layer"] == "Conv_1", str(r)
    assert r.first_jump["index"] == 0
    assert "<-- first jump" in str(r).splitlines()[2]


def test_precision_search_finds_the_bad_layer_and_the_rebuild_meets_the_target(tmp_path, calib):
    cache = tmp_path / "model.cache"
    model = outlier_net()
    r = softdla.compare(model, build_options={"int8": True, "fp16": True, "calib_data": calib, "calib_cache": cache},
                        target_cosine=0.99)
    s = r.search
    assert s["baseline_cosine"] < 0.99 and s["met"] and s["output_cosine"] >= 0.99, str(r)
    assert "Conv_1" in s["layers"]
    assert s["flag"] == "--precisionConstraints=prefer --layerPrecisions=" + ",".join(f"{n}:fp16" for n in s["layers"])
    assert s["flag"] in str(r)
    assert cache.exists()  # written by the first build, read by every later one
    # The flag, given to a plain build with the same calibration cache, reaches the target on the same inputs.
    layer_precisions = dict(item.split(":") for item in s["flag"].split("--layerPrecisions=", 1)[1].split(","))
    lb = softdla.build(model, int8=True, fp16=True, calib_cache=cache, layer_precisions=layer_precisions, progress=False)
    x = np.load(calib / "samples.npy")[:4]
    with softdla.Device() as dev:
        m = dev.load(lb)
        got = [m.run([x[k:k + 1]])[m.outputs[0].name] for k in range(4)]
    ref = [ort_run(model, x[k:k + 1])[0] for k in range(4)]
    assert cosine(np.concatenate([g.ravel() for g in got]), np.concatenate([a.ravel() for a in ref])) >= 0.99
    assert r.search_loadable == lb


def test_given_loadable_inputs_and_warnings(tmp_path, calib):
    model = mixed_net()
    lb = softdla.build(model, fp16=True, output_formats="fp16:chw16", progress=False)
    x = np.random.default_rng(3).standard_normal((3, 3, 16, 16)).astype(np.float32)
    r = softdla.compare(model, lb, inputs={"x": x})  # FP16 options and the loadable's I/O formats
    assert r.info["samples"] == 3 and r.info["inputs"] == "the given arrays" and not r.warnings
    assert r.info["build_options"]["output_formats"] == "fp16:chw16"
    np.savez(tmp_path / "in.npz", x=x[:2])
    np.save(tmp_path / "in.npy", x[:1])
    assert softdla.compare(model, lb, inputs=tmp_path / "in.npz").info["samples"] == 2
    assert softdla.compare(model, lb, inputs=str(tmp_path / "in.npy")).info["samples"] == 1
    other = softdla.build(mixed_net(seed=9), fp16=True, progress=False)  # same graph, other weights
    assert "differ" in softdla.compare(model, other, samples=1).warnings[0]
    with pytest.raises(cmp.CompareError, match="not model inputs"):
        softdla.compare(model, lb, inputs={"y": x})
    with pytest.raises(cmp.CompareError, match=r"takes arrays of shape \(1, 3, 16, 16\) or batches"):
        softdla.compare(model, lb, inputs={"x": x[:, :2]})
    # Calibration data with an FP16 loadable and no precision flags: the data are its inputs, the rows FP16
    # (they were an INT8 rebuild's, labelled int8, with a warning that the loadable differs).
    plain = softdla.build(model, fp16=True, progress=False)
    r = softdla.compare(model, plain, calib_data=calib, samples=2)
    assert r.info["precisions"] == "fp16" and not r.warnings
    assert {row["precision"] for row in r.layers} == {"fp16"}
    assert r.info["inputs"].startswith("the first 2 batch")
    int8 = softdla.build(model, int8=True, fp16=True, calib_data=calib, progress=False)
    with pytest.raises(cmp.CompareError, match="calibration data or cache"):
        softdla.compare(model, int8)
    with pytest.raises(TypeError, match="unknown key"):
        softdla.compare(model, build_options={"fp61": True})
    with pytest.raises(cmp.CompareError, match="moves INT8 layers to FP16"):
        softdla.compare(model, build_options={"fp16": True}, target_cosine=0.9)


def test_compare_is_callable_module_and_lazy_export():
    import softdla.compare as module
    assert softdla.compare is module and callable(module) and module.main and softdla.CompareResult


# ------------------------------------------------------------------ command line
def test_cli_json_schema(tmp_path, calib):
    src = save(tmp_path, outlier_net())
    out = tmp_path / "r.json"
    r = cli(src, "--calib-data", calib, "--samples", 2, "--json", out, "--target-cosine", 0.99)
    assert r.returncode == 0, r.stderr
    assert "--layerPrecisions=" in r.stdout and "<-- first jump" in r.stdout
    d = json.loads(out.read_text())
    assert set(d) == TOP_KEYS and d["schema"] == "softdla-compare/1"
    assert d["precisions"] == "int8+fp16" and d["samples"] == 2
    assert set(d["jump_rule"]) == {"cosine_drop", "rel_l2_ratio", "rel_l2_floor"}
    for row in d["layers"]:
        assert set(row) == ROW_KEYS
        assert isinstance(row["cosine"], float) and isinstance(row["shape"], list) and isinstance(row["jump"], bool)
    assert d["first_jump"] == {k: d["layers"][d["first_jump"]["index"]][k] for k in ("index", "tensor", "layer")}
    assert set(d["outputs"][0]) == {"tensor", "cosine", "channel_cosine", "rel_l2", "max_abs", "ref_max_abs"}
    s = d["search"]
    assert set(s) >= {"target_cosine", "met", "layers", "flag", "layer_precisions", "baseline_cosine",
                      "output_cosine", "builds", "steps"}
    assert s["met"] and s["flag"] in r.stdout
    r = cli(src, "--fp16", "--samples", 1, "--json", "-")  # JSON alone on stdout
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["search"] is None


def test_cli_target_not_reached_exits_3(tmp_path, calib):
    src = save(tmp_path, outlier_net())
    r = cli(src, "--calib-data", calib, "--samples", 1, "--target-cosine", 1.0, "--max-builds", 2)
    assert r.returncode == 3, r.stderr
    assert "not reached" in r.stdout
    assert "\r" not in r.stderr  # no progress bars into a captured log


@pytest.mark.parametrize("args,code,message", [
    (["missing.onnx"], 2, "ONNX model 'missing.onnx' does not exist"),
    (["{model}", "--target-cosine", "1.5"], 2, "--target-cosine must be in (0, 1]"),
    (["{model}", "--samples", "0"], 2, "--samples must be at least 1"),
    (["{model}", "--seed", "-1"], 2, "--seed must be in 0 to 4294967295, got -1"),  # was a NumPy traceback
    (["{model}", "--max-builds", "0"], 2, "--max-builds must be at least 1, got 0"),
    (["{model}", "--bogus"], 2, "unrecognized arguments: --bogus"),
    (["{model}", "--inputs", "{model}"], 2, "is not an existing .npz or .npy file"),
    (["{model}", "--layerPrecisions", "Conv_1"], 2, "--layerPrecisions takes name:value"),
    (["{model}", "--shapes", "x:1xAx3"], 2, "--shapes takes name:1x3x224x224"),
    (["{model}", "--calib-data", "nowhere"], 2, "--calib-data 'nowhere' is not a directory"),
    (["{model}", "--fp16", "--target-cosine", "0.9"], 1, "the precision search moves INT8 layers to FP16"),
    (["{model}", "--fp16", "--precisionConstraints", "prefer", "--layerPrecisions", "nope:fp16"], 1,
     "which is not a layer of this model"),
    (["{garbage}"], 1, "is not a valid ONNX model"),
])
def test_cli_errors(tmp_path, args, code, message):
    model = save(tmp_path, mixed_net())
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a model")
    r = cli(*[a.format(model=model, garbage=garbage) for a in args])
    assert r.returncode == code, (r.stdout, r.stderr)
    assert message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_cli_json_path_is_checked_first_and_batch_counts_must_agree(tmp_path):
    """--json into a missing directory ended in a Python traceback after the whole comparison; inputs holding
    different numbers of batches were cut to the smallest without a word (softdla run refuses them)."""
    model = save(tmp_path, mixed_net())
    r = cli(model, "--fp16", "--json", tmp_path / "nowhere" / "r.json")
    assert r.returncode == 1 and "its directory does not exist" in r.stderr and "Traceback" not in r.stderr, r.stderr
    np.save(tmp_path / "x.npy", np.random.default_rng(0).standard_normal((3, 3, 16, 16)).astype(np.float32))
    r = cli(model, "--fp16", "--inputs", tmp_path / "x.npy", "--json", tmp_path / "r.json")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "r.json").read_text())["samples"] == 3


def test_cli_says_what_to_install(tmp_path):
    model = save(tmp_path, mixed_net())
    stub = tmp_path / "stub" / "onnxruntime"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise ImportError('No module named onnxruntime', name='onnxruntime')\n")
    r = cli(model, env={"PYTHONPATH": str(stub.parent)})
    assert r.returncode == 1 and "pip install onnxruntime" in r.stderr, r.stderr
    r = cli(model, python=str(tmp_path / "no-python"))
    assert r.returncode == 1 and "set SOFTDLA_PYTHON" in r.stderr, r.stderr


def test_python_dash_m_and_help(tmp_path):
    model = save(tmp_path, mixed_net())
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run([sys.executable, "-m", "softdla.compare", str(model), "--fp16", "--samples", "1"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "softdla compare:" in r.stdout and "cosine" in r.stdout
    r = cli("--help")
    assert r.returncode == 0 and "--target-cosine" in r.stdout and "Exit status" in r.stdout


def test_inputs_with_different_batch_counts():
    """As softdla run: one batch of an input is reused for every batch of the others; other mismatches are
    an error (the batches were cut to the smallest count without a word)."""
    from softdla.compare import CompareError, _split_samples
    specs = [("a", (1, 2, 3, 3), np.float32), ("b", (1, 4, 3, 3), np.float32)]
    a = np.arange(3 * 18, dtype=np.float32).reshape(3, 2, 3, 3)
    with pytest.raises(CompareError, match="different numbers of batches"):
        _split_samples({"a": a, "b": np.zeros((2, 4, 3, 3))}, specs)
    feeds = _split_samples({"a": a, "b": np.ones((1, 4, 3, 3))}, specs)
    assert len(feeds) == 3 and all(np.array_equal(f["b"], np.ones((1, 4, 3, 3))) for f in feeds)
    assert np.array_equal(feeds[2]["a"], a[2:3])
