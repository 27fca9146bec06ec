"""The per-layer description of a loadable (issue 16, docs/PROFILING.md "Layer information"):
softdla.inspect()["layer_info"], `softdla inspect --json` and `softdla check --json`. Every expected value
is computed here from the ONNX graph (attributes, shapes by the ONNX formulas, MACs by the documented
rule), never read back from softdla."""
import json
import os
import re
import subprocess

import numpy as np
import onnx
import pytest
from onnx import helper

import softdla
from sdla_testkit.engine import ROOT
from sdla_testkit.onnx_models import SOFTDLA, G

MODELS = os.path.join(ROOT, "examples", "models")
KEYS = ["index", "name", "op", "precision", "inputs", "outputs", "params", "fused", "weight_bytes", "macs",
        "input_bytes", "output_bytes"]
ELEMENT_SIZE = {"fp32": 4, "fp16": 2, "int8": 1, "int32": 4}


# ------------------------------------------------------------------ helpers
def attrs(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def initializer(model, name):
    return next(onnx.numpy_helper.to_array(t) for t in model.graph.initializer if t.name == name)


def conv_expect(model, node, in_shape):
    """kernel/stride/pad/dilation/groups, the output shape and the MACs of an ONNX Conv, from its attributes."""
    a = attrs(node)
    w = initializer(model, node.input[1])
    k_out, c_per_group, kh, kw = w.shape
    s = a.get("strides", [1, 1])
    d = a.get("dilations", [1, 1])
    p = a.get("pads", [0, 0, 0, 0])  # ONNX: [top, left, bottom, right]
    n, c, h, wd = in_shape
    ho = (h + p[0] + p[2] - d[0] * (kh - 1) - 1) // s[0] + 1
    wo = (wd + p[1] + p[3] - d[1] * (kw - 1) - 1) // s[1] + 1
    return {
        "params": {"kernel": [kh, kw], "stride": list(s), "pad": [p[0], p[1], p[2], p[3]], "dilation": list(d),
                   "groups": a.get("group", 1), "out_channels": k_out},
        "out_shape": [n, k_out, ho, wo],
        "macs": n * k_out * ho * wo * (c // a.get("group", 1)) * kh * kw,
        "weights": w.size,
        "bias": k_out if len(node.input) > 2 else 0,
    }


def pool_expect(node, in_shape):
    a = attrs(node)
    k, s, p = a["kernel_shape"], a.get("strides", [1, 1]), a.get("pads", [0, 0, 0, 0])
    n, c, h, w = in_shape
    ho = (h + p[0] + p[2] - k[0]) // s[0] + 1
    wo = (w + p[1] + p[3] - k[1]) // s[1] + 1
    return {"type": "max" if node.op_type == "MaxPool" else "avg", "kernel": list(k), "stride": list(s),
            "pad": [p[0], p[1], p[2], p[3]]}, [n, c, ho, wo]


def by_name(info):
    return {layer["name"]: layer for layer in info["layer_info"]}


def check_common(info):
    """What holds for every record: the keys, indices in order, bytes from the shapes, names as in "layers"."""
    li = info["layer_info"]
    assert [tuple(x) for x in info["layers"]] == [(l["name"], l["op"], l["precision"]) for l in li]
    for i, layer in enumerate(li):
        assert list(layer) == KEYS
        assert layer["index"] == i
        for t in layer["inputs"] + layer["outputs"]:
            assert list(t) == ["name", "shape", "dtype", "scale"] and len(t["shape"]) == 4
            if t["dtype"] != "int8":
                assert t["scale"] == 1
        assert layer["output_bytes"] == sum(int(np.prod(t["shape"])) * ELEMENT_SIZE[t["dtype"]] for t in layer["outputs"])
        assert layer["input_bytes"] <= sum(int(np.prod(t["shape"])) * ELEMENT_SIZE[t["dtype"]] for t in layer["inputs"])
        assert layer["precision"] == layer["outputs"][0]["dtype"]


def run_cli(*args):
    return subprocess.run([SOFTDLA, *args], capture_output=True, text=True, encoding="utf-8")


def json_normalized(obj):
    """The value as JSON gives it back (tuples become lists)."""
    return json.loads(json.dumps(obj))


# ------------------------------------------------------------------ convolutions
def test_conv_geometry_macs_and_weights():
    g = G()
    x = g.input("x", [2, 6, 13, 11])
    outs = [
        g.conv(x, 6, 8, k=3, stride=2),                                                    # stride, pad 1
        g.conv(x, 6, 6, k=3, groups=6),                                                    # depthwise
        g.node("Conv", [x, g.weight(4, 6, 3, 3), g.weight(4)], kernel_shape=[3, 3], dilations=[2, 2], pads=[2, 2, 2, 2]),
        g.node("Conv", [x, g.weight(4, 3, 1, 1), g.weight(4)], kernel_shape=[1, 1], group=2),  # grouped
        g.node("Conv", [x, g.weight(5, 6, 3, 5), g.weight(5)], kernel_shape=[3, 5], strides=[2, 1], pads=[0, 2, 1, 2]),
    ]
    model = g.model(outs)
    info = softdla.inspect(softdla.build(model, fp16=True, progress=False))
    check_common(info)
    layers = by_name(info)
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    assert len(convs) == 5
    for node in convs:
        e = conv_expect(model, node, [2, 6, 13, 11])
        layer = layers[node.name]
        assert layer["op"] == "conv" and layer["precision"] == "fp16"
        assert layer["params"] == e["params"], node.name
        assert [t["shape"] for t in layer["inputs"]] == [[2, 6, 13, 11]]
        assert [t["shape"] for t in layer["outputs"]] == [e["out_shape"]]
        assert layer["macs"] == e["macs"], node.name
        assert layer["fused"] == ["bias"]
        # FP16 weights (2 bytes each) and the bias as stored (4 bytes per channel).
        assert layer["weight_bytes"] == 2 * e["weights"] + 4 * e["bias"]
        assert layer["input_bytes"] == 2 * 2 * 6 * 13 * 11
        assert layer["output_bytes"] == 2 * int(np.prod(e["out_shape"]))
    depthwise = layers[convs[1].name]
    assert depthwise["params"]["groups"] == 6 and depthwise["macs"] == 2 * 6 * 13 * 11 * 9


def test_conv_relu_fused_in_fp16_and_int8(tmp_path):
    g = G()
    x = g.input("x", [1, 3, 12, 12])
    y = g.node("Relu", [g.bn(g.conv(x, 3, 16, k=3), 16)])          # Conv + BN + ReLU: one layer
    z = g.node("Relu", [g.conv(y, 16, 8, k=1, pad=0)])
    model = g.model(g.node("MaxPool", [z], kernel_shape=[2, 2], strides=[2, 2]))
    conv_nodes = [n for n in model.graph.node if n.op_type == "Conv"]

    fp16 = softdla.inspect(softdla.build(model, fp16=True, progress=False))
    check_common(fp16)
    assert [l["op"] for l in fp16["layer_info"]] == ["conv", "conv", "pool"]  # BN and both ReLUs fused
    for node in conv_nodes:
        assert by_name(fp16)[node.name]["fused"] == ["bias", "relu"]

    np.save(tmp_path / "a.npy", np.random.default_rng(1).standard_normal((8, 1, 3, 12, 12)).astype(np.float32)[:, 0])
    int8 = softdla.inspect(softdla.build(model, int8=True, calib_data=tmp_path, progress=False))
    check_common(int8)
    layers = by_name(int8)
    for node in conv_nodes:
        layer = layers[node.name]
        assert layer["precision"] == "int8"
        assert layer["fused"] == ["bias", "relu", "requantize"]
        e = conv_expect(model, node, layer["inputs"][0]["shape"])
        assert layer["macs"] == e["macs"]
        # INT8 weights (1 byte), and per output channel: bias and requantize multiplier (4 bytes each),
        # shift (1 byte).
        assert layer["weight_bytes"] == e["weights"] + e["out_shape"][1] * (4 + 4 + 1)
        for t in layer["inputs"] + layer["outputs"]:
            assert t["dtype"] == "int8" and 0 < t["scale"] < 1
    # The INT8 scales are the loadable's: the first conv reads the graph input at its I/O scale.
    assert layers[conv_nodes[0].name]["inputs"][0]["scale"] == int8["inputs"][0]["scale"]
    assert layers[conv_nodes[0].name]["outputs"][0]["name"] == layers[conv_nodes[1].name]["inputs"][0]["name"]


def test_gemm_and_matmul_are_convolutions_with_their_macs():
    g = G()
    x = g.input("x", [2, 4, 6, 6])
    f = g.node("Flatten", [g.conv(x, 4, 8)])
    y = g.node("Gemm", [f, g.weight(10, 8 * 36), g.weight(10)], transB=1)
    z = g.input("z", [3, 20])
    w = g.node("MatMul", [z, g.weight(20, 7)])
    model = g.model([y, w])
    info = softdla.inspect(softdla.build(model, fp16=True, progress=False))
    check_common(info)
    layers = by_name(info)
    gemm = layers[next(n.name for n in model.graph.node if n.op_type == "Gemm")]
    assert gemm["op"] == "conv" and gemm["fused"] == ["bias"]
    assert gemm["params"]["kernel"] == [6, 6] and gemm["params"]["out_channels"] == 10  # covers its input
    assert gemm["macs"] == 2 * 10 * (8 * 36)                                           # N * M * K
    assert gemm["outputs"][0]["shape"] == [2, 10, 1, 1]
    matmul = layers[next(n.name for n in model.graph.node if n.op_type == "MatMul")]
    assert matmul["op"] == "conv" and matmul["fused"] == []
    assert matmul["macs"] == 3 * 20 * 7 and matmul["weight_bytes"] == 2 * 20 * 7
    assert matmul["inputs"][0]["shape"] == [3, 20, 1, 1]


# ------------------------------------------------------------------ pooling, element-wise
def test_pooling_params_and_one_mac_per_output_element():
    g = G()
    x = g.input("x", [1, 5, 15, 17])
    a = g.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    b = g.node("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])
    c = g.node("AveragePool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 0, 1, 0], count_include_pad=1)
    model = g.model([a, b, c])
    info = softdla.inspect(softdla.build(model, fp16=True, progress=False))
    check_common(info)
    for node in model.graph.node:
        layer = by_name(info)[node.name]
        params, out_shape = pool_expect(node, [1, 5, 15, 17])
        assert layer["op"] == "pool"
        assert {k: layer["params"][k] for k in params} == params
        assert layer["params"]["exclude_padding"] is False
        assert layer["outputs"][0]["shape"] == out_shape
        assert layer["macs"] == int(np.prod(out_shape))
        assert layer["weight_bytes"] == 0 and layer["fused"] == []


def test_int8_average_pool_is_a_depthwise_convolution(tmp_path):
    g = G()
    x = g.input("x", [2, 6, 8, 10])
    model = g.model(g.node("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2]))
    np.save(tmp_path / "a.npy", np.random.default_rng(3).standard_normal((4, 2, 6, 8, 10)).astype(np.float32).reshape(8, 6, 8, 10))
    info = softdla.inspect(softdla.build(model, int8=True, calib_data=tmp_path, progress=False))
    check_common(info)
    layer = by_name(info)[model.graph.node[0].name]
    assert layer["op"] == "conv" and layer["precision"] == "int8"
    assert layer["params"] == {"kernel": [2, 2], "stride": [2, 2], "pad": [0, 0, 0, 0], "dilation": [1, 1], "groups": 6,
                               "out_channels": 6}
    assert layer["macs"] == 2 * 6 * 4 * 5 * 2 * 2
    assert layer["fused"] == ["requantize"]


def test_residual_add_and_data_movement(tmp_path):
    g = G()
    x = g.input("x", [1, 8, 10, 10])
    y = g.bn(g.conv(g.node("Relu", [g.bn(g.conv(x, 8, 8), 8)]), 8, 8), 8)
    s = g.node("Relu", [g.node("Add", [y, x])])
    model = g.model(g.node("Concat", [s, x], axis=1))
    add = next(n for n in model.graph.node if n.op_type == "Add")
    concat = next(n for n in model.graph.node if n.op_type == "Concat")
    for kw, stages in ((dict(fp16=True), ["relu"]), (dict(int8=True, calib_data=tmp_path), ["relu", "requantize"])):
        np.save(tmp_path / "a.npy", np.random.default_rng(2).standard_normal((4, 1, 8, 10, 10)).astype(np.float32)[:, 0])
        info = softdla.inspect(softdla.build(model, progress=False, **kw))
        check_common(info)
        layers = by_name(info)
        # Where the add lands: an sdp op of its own, or fused into the convolution before it.
        if add.name in layers:
            layer = layers[add.name]
            assert layer["op"] == "sdp" and layer["params"] == {"operation": "add"} and layer["fused"] == stages
            assert layer["macs"] == 8 * 10 * 10
            assert sorted(t["shape"] for t in layer["inputs"]) == [[1, 8, 10, 10]] * 2
            assert "x" in [t["name"] for t in layer["inputs"]]
        else:
            (layer,) = [l for l in info["layer_info"] if "add" in l["fused"]]
            assert layer["op"] == "conv" and layer["fused"][-len(stages) - 1:] == ["add"] + stages
        cat = layers[concat.name]
        assert cat["op"] == "concat" and cat["macs"] == 0 and cat["params"] == {"axis": 1}
        assert cat["outputs"][0]["shape"] == [1, 16, 10, 10]
        assert cat["input_bytes"] == cat["output_bytes"] == 16 * 100 * ELEMENT_SIZE[cat["precision"]]


def test_bundled_int8_loadable():
    info = softdla.inspect(os.path.join(MODELS, "bars.loadable"))
    check_common(info)
    li = info["layer_info"]
    assert [l["op"] for l in li] == ["conv", "pool", "pool", "conv", "convert", "softmax"]
    convert = li[4]
    assert convert["params"] == {"from": "int8", "to": "fp16"} and convert["macs"] == 0
    assert convert["inputs"][0]["dtype"] == "int8" and convert["precision"] == "fp16"
    assert li[0]["fused"][-1] == "requantize" and "relu" in li[0]["fused"]


# ------------------------------------------------------------------ the JSON forms
def test_inspect_json_is_the_python_dict(tmp_path):
    for path in (os.path.join(MODELS, "bars.loadable"), None):
        if path is None:
            path = str(tmp_path / "digits.loadable")
            softdla.build(os.path.join(MODELS, "digits.onnx"), fp16=True, save=path, progress=False)
        r = run_cli("inspect", "--json", path)
        assert r.returncode == 0, r.stderr
        parsed = json.loads(r.stdout)
        info = softdla.inspect(path)
        assert list(parsed) == list(info)
        assert parsed["layer_info"] == info["layer_info"]  # exactly: lists, and floats read back equal
        assert parsed == json_normalized(info)
        # Without --json the text stays as it was.
        text = run_cli("inspect", path).stdout
        assert text.startswith(f"loadable {path}\n") and "{" not in text.splitlines()[0]


def test_check_json_counts_match_the_table(tmp_path):
    g = G()
    x = g.input("x", [1, 4, 8, 8])
    y = g.node("Relu", [g.conv(x, 4, 4)])
    y = g.node("Erf", [y])  # not a DLA layer
    bad = tmp_path / "bad.onnx"
    onnx.save(g.model(g.node("Relu", [y])), str(bad))
    for model, target in ((os.path.join(MODELS, "digits.onnx"), "orin"), (os.path.join(MODELS, "digits.onnx"), "xavier"),
                          (str(bad), "orin")):
        table = run_cli("check", model, "--target", target)
        r = run_cli("check", "--json", model, "--target", target)
        assert r.returncode == table.returncode, r.stderr
        d = json.loads(r.stdout)
        assert list(d) == ["model", "target", "nodes", "supported", "unsupported"]
        assert d["model"] == model and d["target"] == target
        m = re.search(r"^(\d+) of (\d+) nodes run on the DLA", table.stdout, re.M)
        assert (d["supported"], d["supported"] + d["unsupported"]) == (int(m[1]), int(m[2]))
        assert len(d["nodes"]) == int(m[2]) and sum(n["dla"] for n in d["nodes"]) == d["supported"]
        rows = softdla.check(model, target=target)
        assert d["nodes"] == [{"node": r["node"], "op": r["op"], "dla": r["supported"], "reason": r["reason"]}
                              for r in rows]
        for n in d["nodes"]:
            assert list(n) == ["node", "op", "dla", "reason"] and isinstance(n["dla"], bool)
            # each JSON row is a row of the table, with its verdict
            assert re.search(rf"^{re.escape(n['node'])}\s+{n['op']}\s+{'yes' if n['dla'] else 'NO'}\b", table.stdout, re.M)
    assert d["unsupported"] == 1 and not next(n for n in d["nodes"] if n["op"] == "Erf")["dla"]


NASTY = ['quote " and \\ backslash', "new\nline\ttab\rcr", "ctrl \x01\x1f\x7f", "unicode é ✓ 𝄞 中文", '\\"\\\\n', "/slash </script>"]


def test_json_escaping_of_names(tmp_path):
    g = G()
    x = g.input("x", [1, 2, 6, 6])
    y = x
    for _ in NASTY:
        y = g.conv(y, 2, 2)
    model = g.model(y)
    for node, name in zip(model.graph.node, NASTY):
        node.name = name
    src = tmp_path / "nasty.onnx"
    onnx.save(model, str(src))
    out = tmp_path / "nasty.loadable"
    softdla.build(str(src), fp16=True, save=out, progress=False)
    info = softdla.inspect(out)
    assert [l["name"] for l in info["layer_info"]] == NASTY
    r = subprocess.run([SOFTDLA, "inspect", "--json", str(out)], capture_output=True)
    assert r.returncode == 0
    text = r.stdout.decode("utf-8")                      # valid UTF-8
    parsed = json.loads(text)                            # strict: no raw control characters in strings
    assert [l["name"] for l in parsed["layer_info"]] == NASTY
    assert parsed["layer_info"] == info["layer_info"]
    assert "\\u0001" in text and "\\u001f" in text and "\\n" in text and "𝄞" in text  # escaped, and passed through
    # check --json names the nodes the same way
    d = json.loads(subprocess.run([SOFTDLA, "check", "--json", str(src)], capture_output=True).stdout.decode("utf-8"))
    assert [n["node"] for n in d["nodes"]] == NASTY


@pytest.mark.parametrize("args", [["inspect", "--json"], ["check", "--json"]])
def test_json_errors_keep_the_exit_status(tmp_path, args):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"not a model")
    r = run_cli(*args, str(junk))
    assert r.returncode == 1 and r.stdout == "" and "error" in r.stderr
