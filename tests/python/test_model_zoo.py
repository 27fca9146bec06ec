"""The model zoo (issue 12, item 7) in its reduced form: every network of sdla_testkit/zoo.py at a low
resolution, built with `softdla build` and the default flags in FP16 and INT8, against ONNX Runtime FP32
(the reference) and ONNX Runtime static INT8 on the same calibration and held-out samples
(tools/model_zoo.py does the work; docs/ACCURACY.md has the full-resolution table).

Per model:
- FP16: rel L2 against FP32 <= 1.5 x the FP16 storage floor (the FP32 network with every weight and
  every intermediate tensor rounded to FP16) + 1e-4.
- INT8 (`--int8 --fp16 --calib-data=DIR`): mean cosine against FP32 >= ORT INT8's - 0.005 (ORT's best of
  MinMax and Percentile; its Entropy method with quantize_static's default 128 bins has a single candidate
  threshold and equals MinMax), and >= 0.99 wherever ORT INT8 reaches 0.99 on the model.
A (model, precision) the builder cannot build yet is an xfail(strict, raises=BuildFailed) with the
builder's message, so the test flips when the builder learns it; an accuracy failure is never expected."""
import os
import sys

import pytest

# Whole networks: the op suites already cover every kernel under the sanitizers, which skip these (-m "not zoo").
pytestmark = pytest.mark.zoo

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import model_zoo as mz  # noqa: E402
from sdla_testkit import zoo  # noqa: E402

CALIB, EVAL = 16, 8
ORT_METHODS = ("MinMax", "Percentile")

# Builds the DLA cannot do, with the rule the builder must name: `yolov8n` keeps the decode's first step,
# a Concat along axis 2 (the per-level predictions viewed as N x 144 x HW); the DLA concatenates channels
# only. (`yolov8n_levels` is the same detector cut before its decode, and builds.)
EXPECTED_REJECTIONS = {
    "yolov8n": "node '/model.22/Concat_3' (Concat): the DLA concatenates along the channel axis only",
}
KNOWN_BUILD_FAILURES = {}  # (name, precision) -> message: builds that fail today and should not
# INT8 below ONNX Runtime's INT8 by more than the allowance at this resolution. (DenseNet-121's gap was
# its average pools at their input's scale, fixed by building them as convolutions; see docs/BUILDER.md.)
KNOWN_INT8_GAPS = {}  # name -> reason: none today. (MnasNet at 64 px was one while auto judged rules on
# two folds of 8 samples fitted on 8: 0.952 vs 0.958; four folds fitted on 12 choose MSE, 0.973.)
# More than about 30 s each at the reduced resolution on two cores (AlexNet runs at 224: its adaptive
# 6x6 pool only exports there; VGG's 29 M classifier weights).
SLOW = {"alexnet", "vgg11"}

_results = {}


def result(name, tmp_path_factory):
    if name not in _results:
        _results[name] = mz.evaluate(name, "ci", CALIB, EVAL, str(tmp_path_factory.mktemp(name)),
                                     ort_methods=ORT_METHODS, log=lambda s: None)
    return _results[name]


def params(precision):
    out = []
    for name in zoo.ZOO:
        if name in EXPECTED_REJECTIONS:
            continue
        marks = [pytest.mark.slow] if name in SLOW else []
        msg = KNOWN_BUILD_FAILURES.get((name, precision))
        if msg:
            marks.append(pytest.mark.xfail(strict=True, raises=mz.BuildFailed, reason=msg))
        elif precision == "int8" and name in KNOWN_INT8_GAPS:
            marks.append(pytest.mark.xfail(strict=True, raises=AssertionError, reason=KNOWN_INT8_GAPS[name]))
        out.append(pytest.param(name, marks=marks, id=name))
    return out


@pytest.mark.parametrize("name", params("fp16"))
def test_fp16_within_storage_floor(name, tmp_path_factory):
    r = result(name, tmp_path_factory)
    if "fp16_error" in r:
        raise mz.BuildFailed(r["fp16_error"])
    assert r["fp16_rel_l2"] <= 1.5 * r["fp16_floor"] + 1e-4, (
        f"{name}: FP16 rel L2 {r['fp16_rel_l2']:.3e} vs storage floor {r['fp16_floor']:.3e}")


@pytest.mark.parametrize("name", params("int8"))
def test_int8_cosine_against_onnxruntime_int8(name, tmp_path_factory):
    r = result(name, tmp_path_factory)
    if "int8_error" in r:
        raise mz.BuildFailed(r["int8_error"])
    assert "ort_int8_cosine" in r, f"{name}: ONNX Runtime INT8 failed: {r['ort_int8_by_method']}"
    ort_cos = r["ort_int8_cosine"]
    need = ort_cos - 0.005
    if ort_cos >= 0.99:
        need = max(need, 0.99)
    assert r["int8_cosine"] >= need, (
        f"{name}: softdla INT8 cosine {r['int8_cosine']:.4f} (min {r['int8_cosine_min']:.4f}) < {need:.4f}; "
        f"ONNX Runtime INT8 {ort_cos:.4f} ({r['ort_int8_method']})")


@pytest.mark.parametrize("name", sorted(EXPECTED_REJECTIONS))
def test_dla_impossible_models_are_rejected_by_rule(name, tmp_path_factory):
    r = result(name, tmp_path_factory)
    for key in ("fp16_error", "int8_error"):
        assert EXPECTED_REJECTIONS[name] in r.get(key, ""), (key, r.get(key))


def test_fp16_storage_floor_model_rounds_every_tensor():
    """The floor model: Cast pairs after the input and every node, initializers on the FP16 grid; its
    output differs from FP32 by about FP16's precision on a small conv net, and not at all in FP32 terms
    when nothing needs rounding."""
    import numpy as np
    from onnx import numpy_helper
    from sdla_testkit.onnx_models import G
    g = G(seed=3)
    x = g.input("images", [1, 3, 8, 8])
    y = g.node("Relu", [g.conv(x, 3, 4)])
    m = g.model([y])
    f = mz.fp16_storage_model(m)
    casts = [n for n in f.graph.node if n.op_type == "Cast"]
    assert len(casts) == 2 * (1 + len(m.graph.node))
    for init in f.graph.initializer:
        a = numpy_helper.to_array(init)
        assert np.array_equal(a, a.astype(np.float16).astype(np.float32))
    xs = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    d = mz.rel_l2(mz.run_ort(f, xs, optimize=False), mz.run_ort(m, xs))
    assert 1e-5 < d < 2e-3
    # integer-valued data and weights stay exact
    g2 = G(seed=0)
    x2 = g2.input("images", [1, 1, 4, 4])
    m2 = g2.model([g2.node("Mul", [x2, g2.const(np.float32(2.0))])])
    xi = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    assert mz.rel_l2(mz.run_ort(mz.fp16_storage_model(m2), xi, optimize=False), mz.run_ort(m2, xi)) == 0.0


def test_zoo_graphs_are_exporter_shaped():
    """The generated graphs have the exporter's patterns the suite is meant to exercise."""
    import onnx
    from onnx import numpy_helper
    models = {name: zoo.ZOO[name][0](32, 1, 0)
              for name in ("densenet121", "shufflenet_v2_x1_0", "mobilenet_v2", "efficientnet_b0")}
    ops = {name: {n.op_type for n in m.graph.node} for name, m in models.items()}
    assert "BatchNormalization" in ops["densenet121"]           # pre-activation BN stays standalone
    assert any(n.op_type == "Concat" and len(n.input) == 1 for n in models["densenet121"].graph.node)
    assert {"Reshape", "Transpose", "Split"} <= ops["shufflenet_v2_x1_0"]
    int64 = [numpy_helper.to_array(i) for i in models["shufflenet_v2_x1_0"].graph.initializer
             if i.data_type == onnx.TensorProto.INT64]
    assert any(a.shape == (5,) for a in int64)                   # the rank-5 shuffle reshape
    assert "Clip" in ops["mobilenet_v2"] and "BatchNormalization" not in ops["mobilenet_v2"]
    assert {"Sigmoid", "Mul", "GlobalAveragePool"} <= ops["efficientnet_b0"]
    for m in models.values():
        assert [i.name for i in m.graph.input] == ["images"] and [o.name for o in m.graph.output] == ["output"]
        onnx.checker.check_model(m, full_check=True)
